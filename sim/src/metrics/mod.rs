//! What a run measures, and how the summary is computed from it.
//!
//! # Definitions
//!
//! Counts are taken when the event happens, in virtual time; a *bucket* is `[k·w, (k+1)·w)` for the
//! scenario's bucket width `w`.
//!
//! - **first tries**: logical requests started by the workload (one per arrival or client turn).
//! - **attempts** (*sent*): calls a client sent to any downstream (first calls, retries, fallback
//!   calls). **retries** are attempts that were not the first call of their logical request.
//! - **server arrivals** (*arrived*): calls that reached a downstream (counted at arrival, whatever
//!   happens next: served, queued, rejected). A call swallowed by a hanging outage was sent but
//!   never arrived (`hung`); a call held by a partition arrives when the partition heals (`held`
//!   counts the calls and answers it held). For a register, the read. Load is what arrived.
//! - **completions**: jobs a server finished serving. **rejections**: calls a downstream refused
//!   without serving (full queue, fail-fast outage, throttling). **local rejections**: calls a
//!   client layer refused without calling (open breaker). **timeouts**: attempts whose timer ran
//!   out.
//! - **successes** / **failures**: logical requests whose final answer was / was not a success.
//! - **amplification** = server arrivals ÷ first tries. *overall*: over the whole run. *peak*: the
//!   largest per-bucket ratio among buckets with at least one first try. *during fault*: arrivals
//!   and first tries counted while any fault is active, i.e. in `[first fault start, last fault
//!   end)`; *after fault*: in `[last fault end, horizon)`. Both `null` without faults.
//!   *sent during fault*: attempts sent ÷ first tries in the same span, whether or not they
//!   arrived (a hanging outage or a partition keeps them from the server).
//! - **load vs baseline** (per bucket, for plots): server arrivals ÷ the mean first tries per
//!   bucket over the run.
//! - **goodput**: successful logical requests per second of virtual time (per bucket: successes
//!   finishing in it ÷ bucket width; overall: successes ÷ horizon).
//! - **success rate** (client): successes ÷ first tries; requests still in flight at the horizon
//!   count as not successful. **server success rate**: successful answers ÷ server arrivals.
//! - **latency**: client-observed time from a logical request's start to its final answer, over
//!   every request that finished (success or failure), recorded in microseconds in an
//!   hdrhistogram (3 significant digits); `success_latency_ms` covers successes only.
//! - **wasted work share**: service time a server spent on jobs whose client attempt had already
//!   ended (timed out, or its request finished) when the job completed, ÷ all service time.
//! - **recovery** (only with faults): each bucket gets a number of *healthy successes*. For an
//!   open loop it is the arrivals the bucket is scheduled to get (the configured rate, with its
//!   steps and load spikes, integrated over the bucket) times the pre-fault success ratio
//!   (successes ÷ first tries over the whole buckets before the first fault, leaving out bucket 0
//!   as warm-up when there are at least two; 1 if there are none). For closed loops and job sets
//!   it is the mean successes per pre-fault bucket (or, with none, the mean first tries per
//!   bucket). With `k = ceil(recovery.sustain ÷ w)`, consider every window of `k` whole buckets
//!   that starts at or after the last fault's end and ends by the horizon. A window is *healthy*
//!   when its successes reach `recovery.threshold` × its healthy successes, and *down* when they
//!   fall below `recovery.relapse` × them (default 0.5). The run has *recovered* at the first
//!   healthy window that starts after the last down window, i.e. goodput came back and stayed
//!   back: a run that returns briefly and then collapses again (a metastable failure can take a
//!   few seconds to set in) is stuck. That window's start minus the last fault's end is
//!   `goodput_recovery_s`. Goodput alone cannot see a system that serves at its old rate while a
//!   backlog still makes every answer slow, so recovery also needs **queue and latency back**:
//!   from that window on, the first window of `k` buckets whose mean server queue (sampled at
//!   bucket ends) is at most `recovery.settle` × the largest pre-fault sample (at least 1 job),
//!   and whose mean *attempt latency* (send to answer or timeout, per attempt that ended in it)
//!   is at most `recovery.settle` × the largest pre-fault bucket mean (default 1.5; a window in
//!   which no attempt ended is judged on its queue). `recovery_s` is that window's start minus the
//!   last fault's end; none: *stuck*. With no pre-fault bucket there is no level to compare with,
//!   and recovery is judged on goodput alone. If the horizon leaves less than one whole window after the last fault's end (a fault
//!   that ends at the horizon, or a sustain longer than what is left), the verdict is
//!   *inconclusive*: there was no time to judge. Otherwise the run is *stuck* (`recovery_s`
//!   null). Without faults the verdict is `no-fault`.
//! - **a fault from t = 0**: there is no healthy level to measure, so the run is judged against
//!   its demand: for an open loop, every scheduled arrival succeeding (pre-fault success ratio 1);
//!   for closed loops and job sets, the mean first tries per bucket over the run.
//!   `baseline_goodput_per_s` is then `null`.
//! - **verdicts over seeds**: the most common verdict; a tie goes to the more severe
//!   (`no-fault` < `recovered` < `inconclusive` < `stuck`), so a policy stuck in half its runs
//!   is reported stuck.
//!   Judging windows rather than single buckets keeps Poisson noise from delaying the verdict, and
//!   the gap between `relapse` and `threshold` keeps it from flapping; judging against the
//!   scheduled rate means a rate step after the fault is not mistaken for a failure to recover.
//! - **breaker open share** (per bucket): breaker instances whose last transition was to open (or
//!   forced open), ÷ all breaker instances, at the bucket's end. A breaker in shadow mode is never
//!   open here: it admits every call.
//! - **shadow** (policies with a breaker in shadow mode): the calls such a breaker admitted that it
//!   would have rejected (`would_reject`), its would-be transitions and openings, and when it
//!   first would have opened and rejected. They are not counted in `local_rejections`,
//!   `breaker_transitions` or the open share: the policy sends as it would without the breaker.
//! - **LLM figures** (tokens, cost, cost wasted, cost per success): see [`llm`].
//! - **Hedges, extra attempts by kind, limits and admitted concurrency**: see [`extra`].
//! - **Call graphs** (amplification by depth, per-hop goodput, latency, waste and verdicts): see
//!   [`hops`].

pub mod extra;
mod give_up;
pub mod hops;
pub mod llm;
mod mean;
pub(crate) mod recorder;
pub(crate) mod summary;
mod verdict;

pub use give_up::GiveUps;
pub use mean::Mean;
pub use recorder::Bucket;
pub(crate) use recorder::Recorder;
pub use summary::{
    Amplification, DownstreamSummary, FleetBudgetSummary, FleetSummary, Latency, PolicySummary,
    ShadowSummary,
};
pub use verdict::{Verdict, Verdicts};
