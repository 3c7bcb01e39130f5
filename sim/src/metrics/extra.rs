//! What runs with hedging, a ledger of extra attempts, concurrency limits or rate limits measure.
//!
//! - **hedges sent**: copies a `Hedge` layer sent after the first (each is also an attempt after
//!   the first, so `retries` counts it too); **hedge share**: hedges sent ÷ first tries.
//! - **hedges won**: hedged calls whose answer came from a hedge rather than the first copy (a
//!   call whose copies all timed out was won by nobody).
//! - **copies cancelled**: copies still out when their call was answered, cancelled then: their
//!   attempts end (no latency is recorded for them), and a server with `cancel_abandoned` drops
//!   those still queued (one already in service runs to its end, as wasted work).
//! - **hedges refused**: hedges the rules allowed but the ledger refused.
//! - **extra attempts by kind**: retries (attempts after the first that are not hedges), hedges,
//!   and probes (calls a half-open breaker let through), whether or not a ledger governs them;
//!   with a ledger, its own counts of draws granted and refused by kind.
//! - **limit** and **admitted concurrency**: the sum of the limits of every limiter (per client
//!   or shared) at each bucket's end, and the calls in flight through them averaged over the
//!   bucket's time (time-weighted, not sampled); **limit refusals**: calls a limiter refused (a
//!   concurrency limit or a rate limit).
//!   Little's law reads the admitted concurrency: a downstream serving `X` calls per second at a
//!   latency of `R` holds `X × R` in flight.

use serde::{Deserialize, Serialize};

use super::mean::Mean;

/// A limiter gauge for one bucket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LimitBucket {
    /// The limits of every limiter summed, at the bucket's end.
    pub limit: u64,
    /// Calls in flight through limiters, averaged over the bucket's time.
    pub admitted: f64,
}

/// Hedging, ledger and limiter counters of one run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExtraCounters {
    /// Hedges sent.
    pub hedges_sent: u64,
    /// Calls answered by a hedge.
    pub hedges_won: u64,
    /// Copies cancelled when their call was answered.
    pub copies_cancelled: u64,
    /// Hedges the ledger refused.
    pub hedges_refused: u64,
    /// Calls a half-open breaker let through.
    pub probes_sent: u64,
    /// Calls a limiter refused.
    pub limit_refusals: u64,
    /// Per bucket.
    pub limits: Vec<LimitBucket>,
    /// Calls in flight through limiters now.
    admitted_now: u64,
    /// When `admitted_now` last changed or was sampled, ns.
    admitted_since: u64,
    /// Σ admitted × ns since the last sample.
    admitted_area: u128,
}

impl ExtraCounters {
    /// Counters for `buckets` buckets.
    pub fn new(buckets: usize) -> Self {
        ExtraCounters {
            limits: vec![LimitBucket::default(); buckets.max(1)],
            ..ExtraCounters::default()
        }
    }

    fn advance(&mut self, t: u64) {
        let dt = t.saturating_sub(self.admitted_since);
        self.admitted_area += u128::from(self.admitted_now) * u128::from(dt);
        self.admitted_since = self.admitted_since.max(t);
    }

    /// A limiter admitted a call (`true`) or one it admitted ended (`false`) at `t`.
    pub fn admitted(&mut self, t: u64, up: bool) {
        self.advance(t);
        self.admitted_now = if up {
            self.admitted_now + 1
        } else {
            self.admitted_now.saturating_sub(1)
        };
    }

    /// Bucket `i`, `width` ns wide, ends at `t`: records the limits then and the time-averaged
    /// admitted concurrency over it.
    pub fn sample(&mut self, i: usize, t: u64, width: u64, limit: u64) {
        self.advance(t);
        let admitted = self.admitted_area as f64 / width.max(1) as f64;
        self.admitted_area = 0;
        if let Some(b) = self.limits.get_mut(i) {
            *b = LimitBucket { limit, admitted };
        }
    }
}

/// Extra attempts by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ByKind {
    /// Retries.
    pub retry: u64,
    /// Hedges.
    pub hedge: u64,
    /// Probes of half-open breakers.
    pub probe: u64,
}

impl ByKind {
    /// From counters in [`reliable_core::ledger::Extra::ALL`] order.
    pub fn from_array([retry, hedge, probe]: [u64; 3]) -> Self {
        ByKind {
            retry,
            hedge,
            probe,
        }
    }

    /// All kinds together.
    pub fn total(&self) -> u64 {
        self.retry + self.hedge + self.probe
    }
}

/// A ledger's own counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerCounts {
    /// Extra attempts granted, by kind.
    pub drawn: ByKind,
    /// Extra attempts refused, by kind.
    pub denied: ByKind,
}

/// The hedging, ledger and limiter figures of a policy's summary (see the module docs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExtraSummary {
    /// Hedges sent.
    pub hedges_sent: u64,
    /// Hedges sent ÷ first tries.
    pub hedge_share: f64,
    /// Calls answered by a hedge.
    pub hedges_won: u64,
    /// Copies cancelled when their call was answered.
    pub copies_cancelled: u64,
    /// Hedges the ledger refused.
    pub hedges_refused: u64,
    /// Extra attempts sent, by kind.
    pub extra_sent: ByKind,
    /// The ledgers' counts, summed over their instances (`null` without a ledger).
    pub ledger: Option<LedgerCounts>,
    /// Calls limiters refused.
    pub limit_refusals: u64,
    /// The limit (summed over limiters) averaged over the buckets (`null` without a limiter).
    pub limit_mean: Option<f64>,
    /// Calls in flight through limiters, time-averaged over the run (`null` without a limiter).
    pub admitted_mean: Option<f64>,
    /// The same over the fault span's whole buckets (`null` without a limiter or faults).
    pub admitted_during_fault: Option<f64>,
}

impl ExtraSummary {
    /// The summary of `c`: `retries` are the run's attempts after the first, `first_tries` its
    /// logical requests, `ledger` the ledgers' counts if the stack has any, `limited` whether it
    /// has limiters, `fault_buckets` the buckets wholly inside the fault span.
    pub fn new(
        c: &ExtraCounters,
        retries: u64,
        first_tries: u64,
        ledger: Option<LedgerCounts>,
        limited: bool,
        fault_buckets: Option<std::ops::Range<usize>>,
    ) -> Self {
        let n = c.limits.len().max(1) as f64;
        let mean_of = |f: fn(&LimitBucket) -> f64, r: &[LimitBucket]| {
            (!r.is_empty()).then(|| r.iter().map(f).sum::<f64>() / r.len() as f64)
        };
        ExtraSummary {
            hedges_sent: c.hedges_sent,
            hedge_share: if first_tries == 0 {
                0.0
            } else {
                c.hedges_sent as f64 / first_tries as f64
            },
            hedges_won: c.hedges_won,
            copies_cancelled: c.copies_cancelled,
            hedges_refused: c.hedges_refused,
            extra_sent: ByKind {
                retry: retries.saturating_sub(c.hedges_sent),
                hedge: c.hedges_sent,
                probe: c.probes_sent,
            },
            ledger,
            limit_refusals: c.limit_refusals,
            limit_mean: limited.then(|| c.limits.iter().map(|b| b.limit as f64).sum::<f64>() / n),
            admitted_mean: limited.then(|| c.limits.iter().map(|b| b.admitted).sum::<f64>() / n),
            admitted_during_fault: fault_buckets
                .filter(|_| limited)
                .and_then(|r| mean_of(|b| b.admitted, c.limits.get(r).unwrap_or(&[]))),
        }
    }
}

impl Mean for ByKind {
    fn mean(runs: &[&Self]) -> Self {
        let of = |f: fn(&ByKind) -> u64| {
            crate::stats::mean_count(runs.iter().map(|r| f(r)).sum(), runs.len())
        };
        ByKind {
            retry: of(|k| k.retry),
            hedge: of(|k| k.hedge),
            probe: of(|k| k.probe),
        }
    }
}

impl Mean for Option<LedgerCounts> {
    fn mean(runs: &[&Self]) -> Self {
        let present: Vec<&LedgerCounts> = runs.iter().filter_map(|x| x.as_ref()).collect();
        (!present.is_empty()).then(|| LedgerCounts {
            drawn: ByKind::mean(&present.iter().map(|l| &l.drawn).collect::<Vec<_>>()),
            denied: ByKind::mean(&present.iter().map(|l| &l.denied).collect::<Vec<_>>()),
        })
    }
}

impl Mean for Option<ExtraSummary> {
    fn mean(runs: &[&Self]) -> Self {
        let present: Vec<&ExtraSummary> = runs.iter().filter_map(|x| x.as_ref()).collect();
        (!present.is_empty()).then(|| ExtraSummary::mean(&present))
    }
}

impl Mean for ExtraSummary {
    fn mean(runs: &[&Self]) -> Self {
        fn of<'a, F: Mean + 'a>(
            runs: &[&'a ExtraSummary],
            get: impl Fn(&'a ExtraSummary) -> &'a F,
        ) -> F {
            F::mean(&runs.iter().map(|r| get(r)).collect::<Vec<_>>())
        }
        ExtraSummary {
            hedges_sent: of(runs, |s| &s.hedges_sent),
            hedge_share: of(runs, |s| &s.hedge_share),
            hedges_won: of(runs, |s| &s.hedges_won),
            copies_cancelled: of(runs, |s| &s.copies_cancelled),
            hedges_refused: of(runs, |s| &s.hedges_refused),
            extra_sent: of(runs, |s| &s.extra_sent),
            ledger: of(runs, |s| &s.ledger),
            limit_refusals: of(runs, |s| &s.limit_refusals),
            limit_mean: of(runs, |s| &s.limit_mean),
            admitted_mean: of(runs, |s| &s.admitted_mean),
            admitted_during_fault: of(runs, |s| &s.admitted_during_fault),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admitted_concurrency_is_time_weighted() {
        let mut c = ExtraCounters::new(2);
        // One call in flight for the whole first bucket (0-100 ns), a second from 50 ns.
        c.admitted(0, true);
        c.admitted(50, true);
        c.sample(0, 100, 100, 7);
        assert_eq!(
            c.limits[0],
            LimitBucket {
                limit: 7,
                admitted: 1.5
            }
        );
        // Both end at 150 ns: half a bucket at 2.
        c.admitted(150, false);
        c.admitted(150, false);
        c.sample(1, 200, 100, 7);
        assert_eq!(c.limits[1].admitted, 1.0);
        let s = ExtraSummary::new(&c, 10, 20, None, true, Some(1..2));
        assert_eq!(s.admitted_mean, Some(1.25));
        assert_eq!(s.admitted_during_fault, Some(1.0));
        assert_eq!(s.limit_mean, Some(7.0));
        assert_eq!(s.extra_sent.retry, 10);
    }
}
