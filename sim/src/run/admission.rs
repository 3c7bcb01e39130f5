//! Admission: what a batch of runs will cost in memory and work ([`Estimate`]), computed from the
//! product of the compiled scenario's dimensions before anything runs, and checked against
//! [`Limits`]: a batch over them is refused with the field that drives it.
//!
//! Per run (one policy, one seed):
//!
//! - **requests**: the workload's first tries. Open loop: the rate integrated over the horizon,
//!   steps and load spikes included (overlapping spikes multiply). Closed loop: clients × horizon
//!   ÷ one turn (think time plus the quickest downstream's round trip). Job set: clients.
//! - **attempts per request**: the stack's most, down a call graph too (a call to a service
//!   adds its handler's calls' attempts, each with what it makes below; so the attempts at each
//!   hop multiply) (a retry multiplies its inner layer's by
//!   `max_attempts`; unlimited attempts count as many as fit in the horizon at one backoff plus
//!   one round trip each; a fallback adds its children's). Against a contended register, each of
//!   N clients may conflict with every other: min(attempts, N) attempts each (work grows with N²).
//! - **events**: about [`EVENTS_PER_ATTEMPT`] per attempt, plus one per bucket; the batch's work
//!   is the sum over policies, times seeds, times a sweep's values.
//! - **requests in flight**: closed loops and job sets: clients. Open loop: the peak arrival rate
//!   × the longest a request can live (its timeouts, deadline and backoffs, or the horizon when a
//!   call has no timeout: a hanging downstream keeps it forever).
//! - **memory**: in-flight requests × bytes each (request, frames, attempt, events), clients ×
//!   per-client policy state, buckets and histograms per run in progress (one per thread), and
//!   the buckets every finished run keeps for the report.
//!
//! The estimate is an upper bound in the common cases (the figures are the worst policy's), not an
//! exact prediction; [`Limits`] leave room for it being off by a small factor.

use crate::client::{CompiledStack, NodeKind};
use crate::compile::{Compiled, Limits};
use crate::model::bounds::{backoff_s, max_s, mean_s, min_s};
use crate::scenario::{DownstreamModel, Fault, Layer, Path, Scenario, ScenarioError, Workload};

/// Events an attempt costs, about: a network hop each way, a service completion, a timer, and
/// a backoff wake-up.
pub const EVENTS_PER_ATTEMPT: f64 = 6.0;

/// Bytes a world needs whatever its load: two latency histograms and the engine's fixed parts.
const WORLD_FIXED_BYTES: f64 = 2.0 * 1024.0 * 1024.0;

/// Bytes a finished run keeps besides its buckets (its summary and latency curve).
const RESULT_BYTES: f64 = 8.0 * 1024.0;

/// What a batch of runs costs, by the estimate.
#[derive(Clone, Debug, PartialEq)]
pub struct Estimate {
    /// Events all runs process together.
    pub events: f64,
    /// Peak memory, bytes.
    pub memory: f64,
    /// Logical requests one run starts.
    pub requests: f64,
    /// Most requests in flight at once in one run (the worst policy).
    pub in_flight: f64,
    /// The field that drives the work most, as a path (`workload.rate`, `policies[2].stack`).
    pub events_field: String,
    /// The field that drives the memory most.
    pub memory_field: String,
}

/// Shortest and mean time for downstream `i` to answer an attempt (network both ways and the
/// service), seconds.
fn round_trip(s: &Scenario, i: usize) -> (f64, f64) {
    let d = &s.downstreams[i];
    let (mut lo, mut mean) = (
        min_s(&d.network.request) + min_s(&d.network.response),
        mean_s(&d.network.request) + mean_s(&d.network.response),
    );
    match &d.model {
        DownstreamModel::Server { service, .. } => {
            lo += min_s(service);
            mean += mean_s(service);
        }
        DownstreamModel::Scripted {
            latency, latencies, ..
        } => {
            let least = latencies.iter().fold(*latency, |a, b| a.min(*b));
            lo += least.as_secs_f64();
            mean += latency.as_secs_f64();
        }
        // A read and a write: two round trips.
        DownstreamModel::Register => {
            lo *= 2.0;
            mean *= 2.0;
        }
        // Refusals (429, 529) come back at once; the unloaded answer takes the first token.
        DownstreamModel::LlmProvider(l) => {
            mean += l.first_token.as_secs_f64();
        }
    }
    (lo, mean)
}

/// infinity when some call has no timeout).
#[derive(Clone, Copy, Debug)]
struct Cost {
    attempts: f64,
    min_s: f64,
    mean_s: f64,
    life_s: f64,
}

/// Per downstream of a call graph, the attempts one call to it makes below it (its handler's
/// calls and theirs, retries multiplied), once computed.
type Below = Vec<Option<f64>>;

/// The attempts a call to downstream `ds` makes below it: its handler's calls' attempts, each
/// with what its callees make below them (the graph is acyclic and at most
/// `compile::graph::MAX_GRAPH_DEPTH` deep, checked before).
fn below(s: &Scenario, stack: &CompiledStack, ds: usize, horizon_s: f64, memo: &mut Below) -> f64 {
    if let Some(Some(x)) = memo.get(ds) {
        return *x;
    }
    let mut total = 0.0;
    if let (Some(h), Some(roots)) = (&s.downstreams[ds].handler, stack.handlers.get(ds)) {
        for (call, &root) in h.calls.iter().zip(roots) {
            total += cost(s, stack, &call.stack, root, horizon_s, memo).attempts;
        }
    }
    if let Some(m) = memo.get_mut(ds) {
        *m = Some(total);
    }
    total
}

fn cost(
    s: &Scenario,
    stack: &CompiledStack,
    layer: &Layer,
    node: u16,
    horizon_s: f64,
    memo: &mut Below,
) -> Cost {
    let n = &stack.nodes[node as usize];
    match (&n.kind, layer) {
        (NodeKind::Call { ds, timeout, .. }, Layer::Call { timeout_dist, .. }) => {
            let (lo, mean) = round_trip(s, *ds as usize);
            let life = match (timeout, timeout_dist) {
                (Some(t), _) => t.as_secs_f64(),
                (None, Some(d)) => max_s(d),
                (None, None) => f64::INFINITY,
            };
            let under = if stack.handlers.is_empty() {
                0.0
            } else {
                below(s, stack, *ds as usize, horizon_s, memo)
            };
            Cost {
                attempts: 1.0 + under,
                min_s: lo,
                mean_s: mean.min(life),
                life_s: life,
            }
        }
        (NodeKind::Breaker { inner, .. }, Layer::Breaker { inner: l, .. })
        | (NodeKind::Throttle { inner, .. }, Layer::Throttle { inner: l, .. })
        | (NodeKind::Ledger { inner, .. }, Layer::Ledger { inner: l, .. })
        | (NodeKind::Limit { inner, .. }, Layer::Limit { inner: l, .. })
        | (NodeKind::RateLimit { inner, .. }, Layer::RateLimit { inner: l, .. }) => {
            // An open breaker, a throttle, a spent ledger, a full limit or a rate limit answers
            // at once.
            let c = cost(s, stack, l, *inner, horizon_s, memo);
            Cost { min_s: 0.0, ..c }
        }
        (
            NodeKind::Hedge { inner, .. },
            Layer::Hedge {
                config, inner: l, ..
            },
        ) => {
            // Every copy may be sent (one timer event more each).
            let c = cost(s, stack, l, *inner, horizon_s, memo);
            let copies = f64::from(config.max_hedges) + 1.0;
            Cost {
                attempts: c.attempts * copies,
                ..c
            }
        }
        (
            NodeKind::Retry { inner, .. },
            Layer::Retry {
                policy,
                budget,
                inner: l,
                ..
            },
        ) => {
            let c = cost(s, stack, l, *inner, horizon_s, memo);
            let (lo_wait, wait) = backoff_s(&policy.backoff);
            let turn = wait + c.mean_s;
            let attempt_life = policy
                .attempt_timeout
                .map_or(c.life_s, |t| t.as_secs_f64().min(c.life_s));
            let m = match policy.max_attempts {
                Some(m) => f64::from(m.max(1)),
                // As many as fit in the horizon (or the deadline).
                None => {
                    let span = policy
                        .deadline
                        .map_or(horizon_s, |d| d.as_secs_f64().min(horizon_s));
                    let fit = if turn > 0.0 {
                        span / turn
                    } else {
                        f64::INFINITY
                    };
                    // A budget bounds retries to a share of first tries, roughly.
                    if budget.is_some() {
                        fit.min(100.0)
                    } else {
                        fit
                    }
                    .max(1.0)
                }
            };
            let mut life = m * (attempt_life + wait);
            if let Some(d) = policy.deadline {
                life = life.min(d.as_secs_f64());
            }
            Cost {
                attempts: m * c.attempts,
                min_s: c.min_s + if m > 1.0 { lo_wait } else { 0.0 },
                mean_s: c.mean_s,
                life_s: life,
            }
        }
        (NodeKind::Fallback { children }, Layer::Fallback(layers)) => {
            let mut out = Cost {
                attempts: 0.0,
                min_s: f64::INFINITY,
                mean_s: 0.0,
                life_s: 0.0,
            };
            for (&child, l) in children.iter().zip(layers) {
                let c = cost(s, stack, l, child, horizon_s, memo);
                out.attempts += c.attempts;
                out.min_s = out.min_s.min(c.min_s);
                out.mean_s = out.mean_s.max(c.mean_s);
                out.life_s += c.life_s;
            }
            out
        }
        // Compiled from this very layer: the shapes always match.
        _ => Cost {
            attempts: 1.0,
            min_s: 0.0,
            mean_s: 0.0,
            life_s: f64::INFINITY,
        },
    }
}

/// load spikes (overlapping ones multiply).
fn open_loop(s: &Scenario) -> (f64, f64) {
    let Workload::OpenLoop {
        rate, start, steps, ..
    } = &s.workload
    else {
        return (0.0, 0.0);
    };
    let h = s.horizon.as_secs_f64();
    // Boundaries where the rate or the spike product changes: (time, kind), kinds applied in
    // order of time.
    enum Edge {
        Rate(f64),
        Spike(f64),
        Unspike(f64),
    }
    let mut edges: Vec<(f64, Edge)> = steps
        .iter()
        .map(|st| (st.at.as_secs_f64(), Edge::Rate(st.rate)))
        .collect();
    for f in &s.faults {
        if let Fault::LoadSpike { factor, .. } = f {
            let (from, until) = f.window();
            edges.push((from.as_secs_f64(), Edge::Spike(*factor)));
            edges.push((until.as_secs_f64(), Edge::Unspike(*factor)));
        }
    }
    edges.sort_by(|a, b| a.0.total_cmp(&b.0));
    let start = start.as_secs_f64();
    let (mut t, mut r, mut spike, mut total, mut peak) = (0.0f64, *rate, 1.0f64, 0.0, 0.0f64);
    // Spike factors multiply; track them as a sum of logarithms so leaving one is exact enough.
    let mut log_spike = 0.0f64;
    for (at, e) in edges
        .iter()
        .chain(std::iter::once(&(h, Edge::Rate(f64::NAN))))
    {
        let at = at.min(h);
        let from = t.max(start);
        if at > from {
            total += r * spike * (at - from);
            peak = peak.max(r * spike);
        }
        t = t.max(at);
        match e {
            Edge::Rate(x) if x.is_finite() => r = *x,
            Edge::Rate(_) => {}
            Edge::Spike(f) => log_spike += f.max(1e-300).ln(),
            Edge::Unspike(f) => log_spike -= f.max(1e-300).ln(),
        }
        spike = log_spike.exp();
    }
    (total, peak)
}

impl Compiled {
    /// Estimates a batch of `seeds` seeds × `runs_per_seed` (1, or a sweep's number of values) of
    /// every policy on `threads` threads, and refuses it if it is over `limits`: the error names
    /// the estimate, the limit and the field that drives it, at its position in the file.
    pub fn estimate(
        &self,
        seeds: u32,
        runs_per_seed: usize,
        threads: usize,
        limits: &Limits,
    ) -> Result<Estimate, ScenarioError> {
        let (e, events_at, memory_at) = self.estimate_of(seeds, runs_per_seed, threads);
        if e.events.is_nan() || e.events > limits.max_events {
            return Err(self.refuse(
                &events_at,
                format!(
                    "about {:.2e} events for {seeds} seed(s) × {} policies{}, more than the limit of {:.2e} (--max-events): expected a smaller product of rate, horizon, attempts, policies and seeds",
                    e.events,
                    self.stacks.len(),
                    if runs_per_seed > 1 {
                        format!(" × {runs_per_seed} values")
                    } else {
                        String::new()
                    },
                    limits.max_events
                ),
            ));
        }
        if e.memory.is_nan() || e.memory > limits.max_memory as f64 {
            return Err(self.refuse(
                &memory_at,
                format!(
                    "needs about {} of memory ({:.2e} requests in flight, {} clients, {} buckets × {} runs), more than the limit of {} (--max-memory)",
                    bytes(e.memory),
                    e.in_flight,
                    self.clients(),
                    self.buckets,
                    u64::from(seeds) * (runs_per_seed * self.stacks.len()) as u64,
                    bytes(limits.max_memory as f64)
                ),
            ));
        }
        Ok(e)
    }

    fn refuse(&self, field: &Path, message: String) -> ScenarioError {
        self.origin.fail(field, message)
    }

    fn estimate_of(
        &self,
        seeds: u32,
        runs_per_seed: usize,
        threads: usize,
    ) -> (Estimate, Path, Path) {
        let root = &self.origin.root;
        let s = &self.scenario;
        let h = s.horizon.as_secs_f64();
        let clients = f64::from(self.clients());
        let runs = f64::from(seeds) * runs_per_seed as f64;
        let buckets = self.buckets as f64;
        let bucket_bytes = std::mem::size_of::<crate::metrics::Bucket>() as f64;
        let (open_requests, peak_rate) = open_loop(s);
        let (mut events, mut worst_events, mut worst_policy) = (0.0f64, 0.0f64, 0usize);
        let mut worst_attempts = 1.0f64;
        let (mut world_bytes, mut in_flight, mut mem_policy) = (0.0f64, 0.0f64, 0usize);
        let mut requests = 0.0f64;
        let register = s
            .downstreams
            .iter()
            .any(|d| matches!(d.model, DownstreamModel::Register));
        for (p, (stack, policy)) in self.stacks.iter().zip(&s.policies).enumerate() {
            let mut memo: Below = vec![None; s.downstreams.len()];
            let c = cost(s, stack, &policy.stack, 0, h, &mut memo);
            let req = match &s.workload {
                Workload::OpenLoop { .. } => open_requests,
                Workload::ClosedLoop { think, .. } => {
                    let turn = (mean_s(think) + c.mean_s).max(1e-6);
                    clients * h / turn
                }
                Workload::JobSet { .. } => clients,
            };
            requests = requests.max(req);
            let mut attempts = c.attempts;
            if register && !matches!(s.workload, Workload::OpenLoop { .. }) {
                attempts = attempts.min(clients).max(1.0);
                // Conflicts: every write can invalidate every other client's read.
                attempts = attempts.max(c.attempts.min(clients));
            }
            let ev = req * attempts * EVENTS_PER_ATTEMPT + buckets;
            events += ev * runs;
            if ev > worst_events {
                worst_events = ev;
                worst_policy = p;
                worst_attempts = attempts;
            }
            let flight = match &s.workload {
                Workload::OpenLoop { .. } => peak_rate * c.life_s.min(h),
                _ => clients,
            };
            let fleet = stack.nodes.iter().any(|n| {
                matches!(n.kind, crate::client::NodeKind::Breaker { store, .. } if store != crate::client::stack::NONE)
            });
            let fleet_bytes = if fleet {
                super::world::fleet_bytes_per_request(stack.breakers.len())
            } else {
                0
            };
            let mut per_request =
                (super::world::bytes_per_request(stack) + fleet_bytes) as f64 + 16.0;
            if !stack.handlers.is_empty() {
                // Each attempt down a call graph may be a service's call in flight too.
                per_request *= c.attempts;
            }
            let wb = flight * per_request
                + clients * stack.per_client_bytes as f64
                + buckets * bucket_bytes
                + WORLD_FIXED_BYTES;
            if wb > world_bytes {
                world_bytes = wb;
                in_flight = flight;
                mem_policy = p;
            }
        }
        let live = (threads.max(1) as f64).min(runs * self.stacks.len() as f64);
        let kept = runs * self.stacks.len() as f64 * (buckets * bucket_bytes + RESULT_BYTES);
        let memory = live * world_bytes + kept;
        // Name the dimension that dominates.
        // The seeds drive the work when one seed of every policy alone would be well within a
        // typical limit; otherwise what makes one run big.
        let events_at = if runs > 1.0 && events / runs <= Limits::default().max_events / 2.0 {
            root.field("seeds")
        } else if worst_attempts < 10.0 {
            match s.workload {
                Workload::OpenLoop { .. } => root.field("workload").field("rate"),
                _ => root.field("workload").field("clients"),
            }
        } else {
            root.field("policies").index(worst_policy).field("stack")
        };
        let memory_at = if kept > live * world_bytes {
            root.field("bucket")
        } else if clients * self.stacks[mem_policy].per_client_bytes as f64 > world_bytes / 2.0
            || !matches!(s.workload, Workload::OpenLoop { .. })
        {
            root.field("workload").field("clients")
        } else if in_flight * 200.0 > world_bytes / 2.0 {
            root.field("policies").index(mem_policy).field("stack")
        } else {
            root.field("horizon")
        };
        let e = Estimate {
            events,
            memory,
            requests,
            in_flight,
            events_field: events_at.to_string(),
            memory_field: memory_at.to_string(),
        };
        (e, events_at, memory_at)
    }
}

/// `1.5 GiB`, `300 MiB`.
fn bytes(b: f64) -> String {
    if b >= 1024.0 * 1024.0 * 1024.0 {
        format!("{:.1} GiB", b / (1024.0 * 1024.0 * 1024.0))
    } else {
        format!("{:.0} MiB", (b / (1024.0 * 1024.0)).ceil())
    }
}
