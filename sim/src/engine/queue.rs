//! The event queue: a heap plus first-in first-out lanes for fixed delays.
//!
//! Most pending events in a retry storm are attempt timeouts, and timeouts of one fixed length
//! expire in the order they were armed. Keeping each fixed delay in its own FIFO [`Lane`] makes
//! arming and expiring them O(1) and keeps the heap small (a heap's cost grows with the number of
//! pending events: FIELD-NOTES measured a heap of 10⁶–10⁷ timers 10–40× slower than one of 10³).
//!
//! Order is exactly that of a single heap keyed by `(time, sequence)`: a lane only accepts events
//! whose time is not earlier than its last one, and sequence numbers only grow, so each lane is
//! sorted by key and [`EventQueue::pop`] takes the smallest key among the heap top and the lane
//! fronts.

use std::collections::VecDeque;

use super::event::{Event, EventKind};
use super::heap::QuadHeap;

/// A FIFO lane for one fixed delay, created with [`EventQueue::lane`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Lane(u16);

/// Pending events in `(time, sequence)` order.
#[derive(Debug, Default)]
pub struct EventQueue {
    heap: QuadHeap,
    lanes: Vec<VecDeque<Event>>,
    seq: u64,
    len: usize,
    peak: usize,
}

impl EventQueue {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a FIFO lane. Events pushed into it must come with non-decreasing times (true of
    /// `now + d` for one fixed `d`, since `now` never goes back).
    pub fn lane(&mut self) -> Lane {
        self.lanes.push(VecDeque::new());
        Lane((self.lanes.len() - 1) as u16)
    }

    /// Schedules `kind` at `time` on the heap.
    #[inline]
    pub fn push(&mut self, time: u64, kind: EventKind) {
        let seq = self.next_seq();
        self.heap.push(Event { time, seq, kind });
        self.note_len();
    }

    /// Schedules `kind` at `time` in `lane`. If `time` is earlier than the lane's last event
    /// (which a caller keeping the FIFO contract never does), it goes to the heap instead, so the
    /// order stays exact whatever the caller does.
    #[inline]
    pub fn push_lane(&mut self, lane: Lane, time: u64, kind: EventKind) {
        let seq = self.next_seq();
        let event = Event { time, seq, kind };
        match self.lanes.get_mut(lane.0 as usize) {
            Some(q) if q.back().is_none_or(|last| last.time <= time) => q.push_back(event),
            _ => self.heap.push(event),
        }
        self.note_len();
    }

    #[inline]
    fn next_seq(&mut self) -> u64 {
        let s = self.seq;
        self.seq += 1;
        s
    }

    #[inline]
    fn note_len(&mut self) {
        self.len += 1;
        if self.len > self.peak {
            self.peak = self.len;
        }
    }

    #[cfg(test)]
    /// The time of the next event, if any.
    pub fn peek_time(&self) -> Option<u64> {
        let mut best = self.heap.peek_key();
        for q in &self.lanes {
            if let Some(e) = q.front()
                && best.is_none_or(|b| e.key() < b)
            {
                best = Some(e.key());
            }
        }
        best.map(|k| k.0)
    }

    /// Removes and returns the next event.
    #[inline]
    pub fn pop(&mut self) -> Option<Event> {
        let mut best: Option<(u64, u64)> = self.heap.peek_key();
        let mut from_lane = usize::MAX;
        for (i, q) in self.lanes.iter().enumerate() {
            if let Some(e) = q.front()
                && best.is_none_or(|b| e.key() < b)
            {
                best = Some(e.key());
                from_lane = i;
            }
        }
        let e = if from_lane == usize::MAX {
            self.heap.pop()
        } else {
            self.lanes[from_lane].pop_front()
        };
        if e.is_some() {
            self.len -= 1;
        }
        e
    }

    #[cfg(test)]
    /// Pending events.
    pub fn len(&self) -> usize {
        self.len
    }

    #[cfg(test)]
    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most events ever pending at once.
    pub fn peak_len(&self) -> usize {
        self.peak
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::rng::Stream;

    fn tag(n: u32) -> EventKind {
        EventKind::ClientStart { client: n }
    }

    #[test]
    fn ties_run_in_scheduling_order() {
        let mut q = EventQueue::new();
        let lane = q.lane();
        q.push(10, tag(0));
        q.push_lane(lane, 10, tag(1));
        q.push(5, tag(2));
        q.push(10, tag(3));
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).map(|e| e.kind).collect();
        assert_eq!(order, vec![tag(2), tag(0), tag(1), tag(3)]);
    }

    #[test]
    fn lanes_and_heap_give_the_same_order_as_one_heap() {
        // Random pushes interleaved with pops; the reference is std's binary heap of keys (a
        // sorted list, sorted again at each pop, took half a minute in a debug build).
        let mut rng = Stream::new(7, crate::engine::StreamId::Test);
        let mut q = EventQueue::new();
        let lanes = [q.lane(), q.lane()];
        let delays = [1_000u64, 3_000];
        let mut reference = std::collections::BinaryHeap::new();
        let mut now = 0u64;
        let mut seq = 0u64;
        let mut popped = Vec::new();
        let mut expected = Vec::new();
        for _ in 0..20_000 {
            match rng.below(4) {
                0 | 1 => {
                    let l = rng.below(2) as usize;
                    q.push_lane(lanes[l], now + delays[l], tag(0));
                    reference.push(std::cmp::Reverse((now + delays[l], seq)));
                }
                2 => {
                    let t = now + rng.below(5_000);
                    q.push(t, tag(0));
                    reference.push(std::cmp::Reverse((t, seq)));
                }
                _ => {
                    if let Some(e) = q.pop() {
                        now = e.time;
                        popped.push(e.key());
                        expected.extend(reference.pop().map(|std::cmp::Reverse(k)| k));
                    }
                    continue;
                }
            }
            seq += 1;
        }
        while let Some(e) = q.pop() {
            popped.push(e.key());
        }
        expected.extend(std::iter::from_fn(|| reference.pop()).map(|std::cmp::Reverse(k)| k));
        assert_eq!(popped, expected);
        assert!(q.is_empty());
    }

    #[test]
    fn out_of_order_lane_push_falls_back_to_the_heap() {
        let mut q = EventQueue::new();
        let lane = q.lane();
        q.push_lane(lane, 100, tag(0));
        q.push_lane(lane, 50, tag(1));
        assert_eq!(q.pop().map(|e| e.time), Some(50));
        assert_eq!(q.pop().map(|e| e.time), Some(100));
        assert_eq!(q.peek_time(), None);
    }
}
