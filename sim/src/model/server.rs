//! A queueing server: `workers` jobs in service at once, a bounded FIFO or LIFO waiting room,
//! service times from a distribution that may grow with the number of jobs in the server.
//!
//! The server does not know about clients: it serves jobs, and a job keeps going after the client
//! attempt it serves has timed out (the work is then *wasted*; see the metrics docs), unless
//! `cancel_abandoned` is set, in which case abandoned jobs are dropped when they reach the head of
//! the queue (never interrupted in service). With `per_in_flight` set, a job's service time is
//! its drawn time plus `per_in_flight` × the jobs in the server when it starts, itself included
//! (Brooker's `simple_collapse_sim`: 1 s + 0.01 s × concurrency). Faults reach it as conditions: lost capacity (no new
//! job starts while busy workers exceed what is left), inflated service times, injected errors.

use std::collections::VecDeque;

use crate::engine::{Handle, Stream};
use crate::model::dist::Sampler;
use crate::scenario::Discipline;

/// A job waiting or in service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Job {
    /// The client attempt it serves.
    pub attempt: Handle,
}

/// A job that started service: when it ends and how much work it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Started {
    /// The job.
    pub job: Job,
    /// Service time in nanoseconds.
    pub work_ns: u64,
}

/// What happened to an arriving job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// A worker was free: it started at once.
    Started(Started),
    /// It waits in the queue.
    Queued,
    /// The queue was full: rejected at once.
    Rejected,
}

/// A queueing server's state.
#[derive(Clone, Debug)]
pub struct Server {
    workers: u32,
    busy: u32,
    queue: VecDeque<Job>,
    capacity: Option<u32>,
    lifo: bool,
    service: Sampler,
    per_in_flight_ns: u64,
    /// Healthy error rate.
    pub error_rate: f64,
    cancel_abandoned: bool,
    /// Service-time and error draws.
    pub rng: Stream,
    /// Jobs dropped from the queue because their attempt was abandoned.
    pub dropped: u64,
    /// Most jobs ever waiting.
    pub peak_queue: usize,
}

impl Server {
    /// A server with nothing in it.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        workers: u32,
        capacity: Option<u32>,
        discipline: Discipline,
        service: Sampler,
        per_in_flight_ns: u64,
        error_rate: f64,
        cancel_abandoned: bool,
        rng: Stream,
    ) -> Self {
        Server {
            workers,
            busy: 0,
            queue: VecDeque::new(),
            capacity,
            lifo: discipline == Discipline::Lifo,
            service,
            per_in_flight_ns,
            error_rate,
            cancel_abandoned,
            rng,
            dropped: 0,
            peak_queue: 0,
        }
    }

    /// Downstream `i`'s server as a run starts it (its service times drawn from the run's
    /// `seed`), if `model` is a `Server`.
    pub fn from_model(model: &crate::scenario::DownstreamModel, i: u16, seed: u64) -> Option<Self> {
        match model {
            crate::scenario::DownstreamModel::Server {
                workers,
                queue,
                service,
                per_in_flight,
                error_rate,
                cancel_abandoned,
            } => Some(Server::new(
                *workers,
                queue.capacity,
                queue.discipline,
                Sampler::new(service),
                per_in_flight.as_nanos(),
                *error_rate,
                *cancel_abandoned,
                Stream::new(seed, crate::engine::StreamId::Service(i)),
            )),
            _ => None,
        }
    }

    /// Workers usable when `lost` (a share) of them are gone.
    #[inline]
    fn usable(&self, lost: f64) -> u32 {
        if lost <= 0.0 {
            self.workers
        } else {
            let gone = (f64::from(self.workers) * lost).ceil() as u32;
            self.workers.saturating_sub(gone)
        }
    }

    /// Jobs waiting.
    pub fn queue_len(&self) -> usize {
        self.queue.len()
    }

    /// Jobs in service.
    pub fn busy(&self) -> u32 {
        self.busy
    }

    fn start(&mut self, job: Job, latency_factor: f64) -> Started {
        // Jobs in the server once this one starts: itself, the others in service, those waiting.
        let in_server = u64::from(self.busy) + self.queue.len() as u64 + 1;
        self.busy += 1;
        let base = self.service.sample(self.rng.rng());
        let base = if latency_factor == 1.0 {
            base
        } else {
            (base as f64 * latency_factor).min((1u64 << 62) as f64) as u64
        };
        let work_ns = base.saturating_add(self.per_in_flight_ns.saturating_mul(in_server));
        Started { job, work_ns }
    }

    /// A job arrives. `lost` is the capacity share lost to faults, `latency_factor` the service
    /// time multiplier in force.
    pub fn arrive(&mut self, job: Job, lost: f64, latency_factor: f64) -> Admission {
        if self.busy < self.usable(lost) && self.queue.is_empty() {
            return Admission::Started(self.start(job, latency_factor));
        }
        if self
            .capacity
            .is_some_and(|c| self.queue.len() >= c as usize)
        {
            return Admission::Rejected;
        }
        self.queue.push_back(job);
        self.peak_queue = self.peak_queue.max(self.queue.len());
        Admission::Queued
    }

    /// Skips queued jobs whose client attempt is gone (deadline propagation asks for it).
    pub fn cancel_abandoned(&mut self) {
        self.cancel_abandoned = true;
    }

    /// A job in service ended: frees its worker.
    pub fn finish(&mut self) {
        self.busy = self.busy.saturating_sub(1);
    }

    /// Starts the next waiting job if a worker is free, skipping abandoned jobs when configured.
    /// Call repeatedly until it returns `None`.
    pub fn next(
        &mut self,
        lost: f64,
        latency_factor: f64,
        is_live: impl Fn(Handle) -> bool,
    ) -> Option<Started> {
        while self.busy < self.usable(lost) {
            let job = if self.lifo {
                self.queue.pop_back()
            } else {
                self.queue.pop_front()
            }?;
            if self.cancel_abandoned && !is_live(job.attempt) {
                self.dropped += 1;
                continue;
            }
            return Some(self.start(job, latency_factor));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::StreamId;

    fn h(i: u32) -> Handle {
        Handle {
            index: i,
            generation: 0,
        }
    }

    fn server(workers: u32, cap: Option<u32>, d: Discipline) -> Server {
        Server::new(
            workers,
            cap,
            d,
            Sampler::Constant(1_000),
            100,
            0.0,
            true,
            Stream::new(1, StreamId::Test),
        )
    }

    #[test]
    fn queues_rejects_and_serves_in_order() {
        let mut s = server(1, Some(2), Discipline::Fifo);
        let job = |i| Job { attempt: h(i) };
        assert_eq!(
            s.arrive(job(0), 0.0, 1.0),
            Admission::Started(Started {
                job: job(0),
                work_ns: 1_000 + 100
            })
        );
        assert_eq!(s.arrive(job(1), 0.0, 1.0), Admission::Queued);
        assert_eq!(s.arrive(job(2), 0.0, 1.0), Admission::Queued);
        assert_eq!(s.arrive(job(3), 0.0, 1.0), Admission::Rejected);
        s.finish();
        // job 1 is abandoned and dropped; job 2 starts alone in the server.
        let started = s.next(0.0, 2.0, |a| a != h(1)).unwrap();
        assert_eq!(started.job, job(2));
        assert_eq!(started.work_ns, 2_000 + 100);
        assert_eq!(s.dropped, 1);
        assert!(s.next(0.0, 1.0, |_| true).is_none());
    }

    #[test]
    fn lifo_serves_newest_and_capacity_loss_blocks_starts() {
        let mut s = server(2, None, Discipline::Lifo);
        let job = |i| Job { attempt: h(i) };
        // Half the capacity lost: one usable worker.
        assert!(matches!(s.arrive(job(0), 0.5, 1.0), Admission::Started(_)));
        assert_eq!(s.arrive(job(1), 0.5, 1.0), Admission::Queued);
        assert_eq!(s.arrive(job(2), 0.5, 1.0), Admission::Queued);
        assert!(
            s.next(0.5, 1.0, |_| true).is_none(),
            "no free usable worker"
        );
        let started = s.next(0.0, 1.0, |_| true).unwrap();
        assert_eq!(started.job, job(2), "newest first");
        // Load-dependent latency: one busy, one queued and itself.
        assert_eq!(started.work_ns, 1_000 + 3 * 100);
    }
}
