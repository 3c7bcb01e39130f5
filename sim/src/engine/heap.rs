//! A min-heap of events with four children per node.
//!
//! Half the levels of a binary heap: a pop moves an event up once per level and compares four
//! children there, which costs fewer instructions than twice the levels of two children each
//! (`sim bench` pops millions of timers from a heap of thousands). Keys are unique (`(time,
//! sequence)`), so the order of pops is the one order of the keys, whatever the heap's shape.

use super::event::Event;

/// Children per node.
const ARITY: usize = 4;

/// Events, smallest key first.
#[derive(Debug, Default)]
pub struct QuadHeap {
    /// The heap in an array: the children of `i` are `ARITY * i + 1 ..= ARITY * i + ARITY`.
    v: Vec<Event>,
}

impl QuadHeap {
    /// The smallest key, if any.
    #[inline]
    pub fn peek_key(&self) -> Option<(u64, u64)> {
        self.v.first().map(Event::key)
    }

    /// Adds `e`.
    #[inline]
    pub fn push(&mut self, e: Event) {
        let key = e.key();
        let mut i = self.v.len();
        self.v.push(e);
        while i > 0 {
            let parent = (i - 1) / ARITY;
            let Some(&p) = self.v.get(parent) else {
                break;
            };
            if p.key() <= key {
                break;
            }
            self.v[i] = p;
            i = parent;
        }
        self.v[i] = e;
    }

    /// Removes the event with the smallest key.
    #[inline]
    pub fn pop(&mut self) -> Option<Event> {
        let last = self.v.pop()?;
        let Some(&top) = self.v.first() else {
            return Some(last);
        };
        // The last event sifts down from the root into the hole the top leaves.
        let key = last.key();
        let n = self.v.len();
        let mut i = 0;
        loop {
            let first = ARITY * i + 1;
            let least = match self.v.get(first..first + ARITY) {
                // All four children: a tournament of three comparisons.
                Some([a, b, c, d]) => {
                    let ab = if b.key() < a.key() { first + 1 } else { first };
                    let cd = if d.key() < c.key() {
                        first + 3
                    } else {
                        first + 2
                    };
                    if self.v[cd].key() < self.v[ab].key() {
                        cd
                    } else {
                        ab
                    }
                }
                _ => match self.v.get(first..n) {
                    Some(children) if !children.is_empty() => {
                        let mut least = first;
                        for (j, c) in children.iter().enumerate().skip(1) {
                            if c.key() < self.v[least].key() {
                                least = first + j;
                            }
                        }
                        least
                    }
                    _ => break,
                },
            };
            let child = self.v[least];
            if child.key() >= key {
                break;
            }
            self.v[i] = child;
            i = least;
        }
        self.v[i] = last;
        Some(top)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EventKind;
    use crate::engine::rng::Stream;

    #[test]
    fn pops_in_key_order_whatever_the_pushes() {
        let mut rng = Stream::new(11, crate::engine::StreamId::Test);
        let mut heap = QuadHeap::default();
        let mut reference = std::collections::BinaryHeap::new();
        let (mut popped, mut expected) = (Vec::new(), Vec::new());
        let mut pushed = 0;
        for seq in 0..50_000u64 {
            if rng.below(3) == 0 {
                popped.extend(heap.pop().map(|e| e.key()));
                expected.extend(reference.pop().map(|std::cmp::Reverse(k)| k));
            } else {
                let time = rng.below(1_000);
                heap.push(Event {
                    time,
                    seq,
                    kind: EventKind::ClientStart { client: 0 },
                });
                reference.push(std::cmp::Reverse((time, seq)));
                pushed += 1;
            }
        }
        popped.extend(std::iter::from_fn(|| heap.pop()).map(|e| e.key()));
        expected.extend(std::iter::from_fn(|| reference.pop()).map(|std::cmp::Reverse(k)| k));
        assert_eq!(popped.len(), pushed);
        assert_eq!(popped, expected);
    }
}
