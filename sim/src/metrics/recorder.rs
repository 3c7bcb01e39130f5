//! [`Recorder`]: the counters, gauges and histograms one run fills.

use hdrhistogram::Histogram;
use serde::Serialize;

/// One metrics bucket of one run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Bucket {
    /// Logical requests started.
    pub first_tries: u64,
    /// Attempts after the first of their request.
    pub retries: u64,
    /// Attempts sent.
    pub attempts: u64,
    /// Calls reaching a downstream.
    pub server_arrivals: u64,
    /// Jobs finished by servers.
    pub completions: u64,
    /// Calls refused by downstreams.
    pub rejections: u64,
    /// Calls refused by client layers.
    pub local_rejections: u64,
    /// Attempts timed out.
    pub timeouts: u64,
    /// Logical requests that succeeded.
    pub successes: u64,
    /// Logical requests that failed.
    pub failures: u64,
    /// Jobs waiting in all servers at the bucket's end.
    pub queue_len: u64,
    /// Busy workers in all servers at the bucket's end.
    pub busy: u64,
    /// Logical requests in flight at the bucket's end.
    pub in_flight: u64,
    /// Breakers open at the bucket's end.
    pub breakers_open: u64,
    /// Service time finished in this bucket, in microseconds.
    pub work_us: u64,
    /// Of which wasted.
    pub wasted_us: u64,
    /// Attempts that ended in this bucket (answered or timed out).
    pub attempts_ended: u64,
    /// Their latency from send to answer or timeout, summed, in microseconds.
    pub attempt_latency_us: u64,
}

/// Per-downstream counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DsCounters {
    /// Calls arriving.
    pub arrivals: u64,
    /// Successful answers.
    pub ok: u64,
    /// Error answers (including full queue and fail-fast outage).
    pub errors: u64,
    /// Refused without serving.
    pub rejections: u64,
    /// Swallowed by a hanging outage (sent, never arrived).
    pub hung: u64,
    /// Calls and answers held by a partition until it healed.
    pub held: u64,
    /// Jobs finished.
    pub completions: u64,
    /// Service time, microseconds.
    pub work_us: u64,
    /// Wasted service time, microseconds.
    pub wasted_us: u64,
    /// Times outlier detection ejected it (a replica whose balancer detects outliers).
    pub ejections: Option<u64>,
}

/// What a policy's breakers in shadow mode would have done in one run.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ShadowCounters {
    /// Calls they admitted that they would have rejected.
    pub would_reject: u64,
    /// Their would-be state changes.
    pub transitions: u64,
    /// Of which openings.
    pub opens: u64,
    /// When one first would have opened, ns.
    pub first_open_ns: Option<u64>,
    /// When one first would have rejected a call, ns.
    pub first_reject_ns: Option<u64>,
}

/// Everything one run records.
#[derive(Debug)]
pub struct Recorder {
    bucket_ns: u64,
    /// The bucket last looked up and its time range (time mostly moves forward, so this saves a
    /// division per event).
    cur: (usize, u64, u64),
    /// Per bucket.
    pub buckets: Vec<Bucket>,
    /// Latency of finished logical requests, microseconds.
    pub latency: Histogram<u64>,
    /// Latency of successful logical requests, microseconds.
    pub success_latency: Histogram<u64>,
    /// Per downstream.
    pub ds: Vec<DsCounters>,
    /// LLM counters, for runs with an LLM provider.
    pub llm: Option<super::llm::LlmCounters>,
    /// Hedging, ledger and limiter counters, for stacks with those layers.
    pub extra: Option<super::extra::ExtraCounters>,
    /// `[start, end)` of the fault span, if any.
    fault: Option<(u64, u64)>,
    /// First tries, server arrivals and attempts sent during the fault span.
    pub during: (u64, u64, u64),
    /// Same, after the fault span.
    pub after: (u64, u64, u64),
    /// Replies that arrived after their attempt ended.
    pub late_replies: u64,
    /// Breaker state changes.
    pub breaker_transitions: u64,
    /// Breakers open now.
    pub breakers_open: u64,
    /// What breakers in shadow mode would have done, for a policy with one.
    pub shadow: Option<ShadowCounters>,
    /// A fleet breaker's dealings with its store, for a policy with one (`Fleet` scope).
    pub fleet: Option<crate::client::fleet::FleetCounters>,
    /// A fleet retry budget's decisions and store, for a policy with one (`budget_scope: Fleet`).
    pub fleet_budget: Option<crate::client::fleet_budget::FleetBudgetCounters>,
    /// Most logical requests in flight at once.
    pub peak_in_flight: u64,
    /// Retry layers that gave up, by the core's reason.
    pub give_ups: super::GiveUps,
    /// Per-hop counters, for a scenario with services (then only arrivals at depth 1 count in
    /// the buckets' `server_arrivals`).
    pub hops: Option<super::hops::HopCounters>,
}

fn histogram() -> Histogram<u64> {
    // 1 µs to 30 days, 3 significant digits; values are clamped into range.
    Histogram::new_with_bounds(1, 30 * 86_400 * 1_000_000, 3).unwrap_or_else(|_| {
        Histogram::new(3).unwrap_or_else(|_| unreachable!("3 significant digits is valid"))
    })
}

impl Recorder {
    /// A recorder for `buckets` buckets of `bucket_ns`, `ds` downstreams and the fault span.
    pub fn new(buckets: usize, bucket_ns: u64, ds: usize, fault: Option<(u64, u64)>) -> Self {
        Recorder {
            bucket_ns: bucket_ns.max(1),
            cur: (0, 0, bucket_ns.max(1)),
            buckets: vec![Bucket::default(); buckets.max(1)],
            latency: histogram(),
            success_latency: histogram(),
            ds: vec![DsCounters::default(); ds],
            fault,
            during: (0, 0, 0),
            after: (0, 0, 0),
            late_replies: 0,
            breaker_transitions: 0,
            breakers_open: 0,
            shadow: None,
            fleet: None,
            fleet_budget: None,
            peak_in_flight: 0,
            give_ups: super::GiveUps::default(),
            llm: None,
            extra: None,
            hops: None,
        }
    }

    /// A breaker in shadow mode admitted a call at `t` that it would have rejected.
    pub fn shadow_reject(&mut self, t: u64) {
        let s = self.shadow.get_or_insert_with(ShadowCounters::default);
        s.would_reject += 1;
        s.first_reject_ns.get_or_insert(t);
    }

    /// A breaker in shadow mode changed state at `t` (an opening if `opens`).
    pub fn shadow_transition(&mut self, t: u64, opens: bool) {
        let s = self.shadow.get_or_insert_with(ShadowCounters::default);
        s.transitions += 1;
        if opens {
            s.opens += 1;
            s.first_open_ns.get_or_insert(t);
        }
    }

    /// The bucket holding instant `t`.
    #[inline]
    pub fn at(&mut self, t: u64) -> &mut Bucket {
        let (i, from, until) = self.cur;
        if t >= from && t < until {
            return &mut self.buckets[i];
        }
        let k = t / self.bucket_ns;
        let i = (k as usize).min(self.buckets.len() - 1);
        let from = k.saturating_mul(self.bucket_ns);
        self.cur = (i, from, from.saturating_add(self.bucket_ns));
        if i as u64 != k {
            // Past the last bucket: clamp, but do not cache a range that maps elsewhere.
            self.cur = (i, 0, 0);
        }
        &mut self.buckets[i]
    }

    #[inline]
    fn phase(&self, t: u64) -> u8 {
        match self.fault {
            Some((a, b)) if t >= a && t < b => 1,
            Some((_, b)) if t >= b => 2,
            _ => 0,
        }
    }

    /// A logical request started.
    #[inline]
    pub fn first_try(&mut self, t: u64) {
        self.at(t).first_tries += 1;
        match self.phase(t) {
            1 => self.during.0 += 1,
            2 => self.after.0 += 1,
            _ => {}
        }
    }

    /// A client sent an attempt (`first`: the first of its request).
    #[inline]
    pub fn sent(&mut self, t: u64, first: bool) {
        let b = self.at(t);
        b.attempts += 1;
        if !first {
            b.retries += 1;
        }
        match self.phase(t) {
            1 => self.during.2 += 1,
            2 => self.after.2 += 1,
            _ => {}
        }
    }

    /// An attempt ended (answered or timed out) `latency_ns` after it was sent.
    #[inline]
    pub fn attempt_ended(&mut self, t: u64, latency_ns: u64) {
        let b = self.at(t);
        b.attempts_ended += 1;
        b.attempt_latency_us += latency_ns / 1_000;
    }

    /// A call reached downstream `ds`.
    #[inline]
    pub fn server_arrival(&mut self, t: u64, ds: u16) {
        if let Some(d) = self.ds.get_mut(ds as usize) {
            d.arrivals += 1;
        }
        if let Some(h) = &mut self.hops {
            let i = ((t / self.bucket_ns) as usize).min(self.buckets.len() - 1);
            if let Some(a) = h.arrivals.get_mut(ds as usize).and_then(|v| v.get_mut(i)) {
                *a += 1;
            }
            if !h.is_edge(ds) {
                return;
            }
        }
        self.at(t).server_arrivals += 1;
        match self.phase(t) {
            1 => self.during.1 += 1,
            2 => self.after.1 += 1,
            _ => {}
        }
    }

    /// A logical request finished.
    #[inline]
    pub fn finish(&mut self, t: u64, ok: bool, latency_ns: u64) {
        let b = self.at(t);
        if ok {
            b.successes += 1;
        } else {
            b.failures += 1;
        }
        let us = (latency_ns / 1_000).clamp(1, self.latency.high());
        self.latency.saturating_record(us);
        if ok {
            self.success_latency.saturating_record(us);
        }
    }

    /// A server finished a job of `work_us`, wasted or not.
    #[inline]
    pub fn completion(&mut self, t: u64, ds: u16, work_us: u64, wasted: bool) {
        let b = self.at(t);
        b.completions += 1;
        b.work_us += work_us;
        if wasted {
            b.wasted_us += work_us;
        }
        if let Some(d) = self.ds.get_mut(ds as usize) {
            d.completions += 1;
            d.work_us += work_us;
            if wasted {
                d.wasted_us += work_us;
            }
        }
    }

    /// Downstream `ds` answered (`ok` or not), or refused (`rejected`).
    #[inline]
    pub fn answered(&mut self, t: u64, ds: u16, ok: bool, rejected: bool) {
        if ok && let Some(h) = &mut self.hops {
            let i = ((t / self.bucket_ns) as usize).min(self.buckets.len() - 1);
            if let Some(a) = h.ok.get_mut(ds as usize).and_then(|v| v.get_mut(i)) {
                *a += 1;
            }
        }
        if rejected {
            self.at(t).rejections += 1;
        }
        if let Some(d) = self.ds.get_mut(ds as usize) {
            if ok {
                d.ok += 1;
            } else {
                d.errors += 1;
            }
            if rejected {
                d.rejections += 1;
            }
        }
    }

    /// A retry layer gave up.
    pub fn give_up(&mut self, reason: reliable_core::retry::GiveUpReason) {
        self.give_ups.add(reason);
    }

    /// Gauges at the end of the bucket that holds `t - 1`.
    pub fn sample(&mut self, t: u64, queue_len: u64, busy: u64, in_flight: u64) {
        let open = self.breakers_open;
        let b = self.at(t.saturating_sub(1));
        b.queue_len = queue_len;
        b.busy = busy;
        b.in_flight = in_flight;
        b.breakers_open = open;
    }
}
