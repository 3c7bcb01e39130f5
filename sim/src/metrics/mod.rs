//! What a run measures, and how the summary is computed from it.
//!
//! # Definitions
//!
//! Counts are taken when the event happens, in virtual time; a *bucket* is `[k·w, (k+1)·w)` for the
//! scenario's bucket width `w`.
//!
//! - **first tries**: logical requests started by the workload (one per arrival or client turn).
//! - **attempts**: calls a client sent to any downstream (first calls, retries, fallback calls).
//!   **retries** are attempts that were not the first call of their logical request.
//! - **server arrivals**: calls that reached a downstream (counted at arrival, whatever happens next:
//!   served, queued, rejected, swallowed by a hanging outage). For a register, the read.
//! - **completions**: jobs a server finished serving. **rejections**: calls a downstream refused
//!   without serving (full queue, fail-fast outage, throttling). **local rejections**: calls a
//!   client layer refused without calling (open breaker). **timeouts**: attempts whose timer ran
//!   out.
//! - **successes** / **failures**: logical requests whose final answer was / was not a success.
//! - **amplification** = server arrivals ÷ first tries. *overall*: over the whole run. *peak*: the
//!   largest per-bucket ratio among buckets with at least one first try. *during fault*: arrivals
//!   and first tries counted while any fault is active, i.e. in `[first fault start, last fault
//!   end)`; *after fault*: in `[last fault end, horizon)`. Both `null` without faults.
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
//! - **recovery** (only with faults): the *baseline* is the mean successes per bucket over the
//!   whole buckets before the first fault, leaving out bucket 0 (warm-up) when there are at least
//!   two; with no whole bucket before the first fault, the mean first tries per bucket over the
//!   run. A bucket is *healthy* when its successes reach `recovery.threshold` × baseline. The run
//!   *recovered* if, among buckets starting at or after the last fault's end, `ceil(sustain ÷ w)`
//!   consecutive healthy buckets fit before the horizon; `recovery_s` is the start of the first
//!   such run of buckets minus the last fault's end. Otherwise it is *stuck* (`recovery_s` null).
//!   Without faults the verdict is `no-fault`.
//! - **breaker open share** (per bucket): breaker instances whose last transition was to open (or
//!   forced open), ÷ all breaker instances, at the bucket's end.

pub mod recorder;
pub mod summary;

pub use recorder::{Bucket, Recorder};
pub use summary::{Amplification, DownstreamSummary, Latency, PolicySummary, Verdict};
