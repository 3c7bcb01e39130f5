//! The scenario file's data types, as they appear in RON.
//!
//! Field names and variant names here are the file format: renaming one breaks scenario files.

use reliable_core::Duration;
use serde::{Deserialize, Serialize};

/// A whole scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name; the report folder is named after it.
    pub name: String,
    /// What the scenario shows, in a sentence or two (the first line is what `sim list` prints).
    #[serde(default)]
    pub description: String,
    /// How much virtual time to simulate. Events at or after the horizon do not run.
    pub horizon: Duration,
    /// Width of a metrics bucket. Default 1 s.
    #[serde(default = "default_bucket")]
    pub bucket: Duration,
    /// Master seed of the first run. Default 1.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Runs per policy, with seeds `seed, seed + 1, ...`. Default 1.
    #[serde(default = "default_seeds")]
    pub seeds: u32,
    /// Who sends requests, and when.
    pub workload: Workload,
    /// The services called, by name.
    pub downstreams: Vec<Downstream>,
    /// What goes wrong, and when.
    #[serde(default)]
    pub faults: Vec<Fault>,
    /// The client policies to compare; each runs on the same arrivals.
    pub policies: Vec<Policy>,
    /// The stores a `Fleet` scope keeps its state in, by name: the round trip to each and what
    /// goes wrong with it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stores: Vec<Store>,
    /// What goes wrong with one client instance's own network.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub client_faults: Vec<ClientFault>,
    /// Whether a client can interrupt an attempt at its timer. Default true: an async client
    /// drops an attempt when its timer (the `Call`'s timeout, the retry's attempt timeout, a
    /// deadline) fires. False models blocking clients, each call a thread waiting on its answer:
    /// no timer ends an attempt (nor wakes the call while one is out); the answer is taken as it
    /// comes, whenever it comes (a success after the timeout is the call's success, a failure is
    /// what it says, never a timeout). Every `Call` must then be one the call engine drives.
    #[serde(
        default = "default_interruptible",
        skip_serializing_if = "is_interruptible"
    )]
    pub interruptible: bool,
    /// How recovery after the faults is judged.
    #[serde(default)]
    pub recovery: Recovery,
    /// A parameter to vary for `sim sweep` (`sim run` uses the value written in the scenario).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<Sweep>,
    /// Two parameters to vary together for `sim map` (every x value with every y value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map: Option<Map>,
}

/// What `sim map` varies: two parameters, each given like a [`Sweep`]; every (x, y) pair of
/// values runs every policy under the same seeds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Map {
    /// The horizontal axis.
    pub x: Sweep,
    /// The vertical axis.
    pub y: Sweep,
}

/// What `sim sweep` varies: one parameter of the scenario, set to each value in turn; every value
/// runs every policy under the same seeds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sweep {
    /// The field to set, as a path from the top of the scenario: fields joined by `.`, list
    /// elements by index or by name in brackets; enum variants are looked through. E.g.
    /// `downstreams[api].model.error_rate`, `workload.rate`, `faults[0].rate`,
    /// `policies[retry].stack.policy.attempt_timeout`.
    pub parameter: String,
    /// Short name for tables and plots (default: the path's last field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The values, numbers or durations (`"250ms"`), as the field takes.
    pub values: Vec<SweepValue>,
}

/// One value of a [`Sweep`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SweepValue {
    /// A number (a rate, a share, a count).
    Number(f64),
    /// A duration, or any other text the field takes.
    Text(String),
}

impl std::fmt::Display for SweepValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SweepValue::Number(x) => write!(f, "{x}"),
            SweepValue::Text(t) => f.write_str(t),
        }
    }
}

fn default_bucket() -> Duration {
    Duration::from_secs(1)
}
fn default_seed() -> u64 {
    1
}
fn default_seeds() -> u32 {
    1
}
fn default_interruptible() -> bool {
    true
}
fn is_interruptible(interruptible: &bool) -> bool {
    *interruptible
}

/// Who sends logical requests, and when.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum Workload {
    /// Requests arrive at a rate whatever happens to earlier ones (users, upstream services).
    /// One aggregate source; each arrival belongs to a client drawn uniformly from `clients`.
    OpenLoop {
        /// Logical requests per second.
        rate: f64,
        /// Poisson (exponential gaps) or constant gaps. Default Poisson.
        #[serde(default)]
        arrivals: Arrivals,
        /// Clients the arrivals are spread over (matters for per-client breakers and budgets).
        /// Default 1.
        #[serde(default = "default_clients")]
        clients: u32,
        /// First possible arrival. With constant gaps, the first arrival is exactly here.
        #[serde(default)]
        start: Duration,
        /// Rate changes over time: from `at` on, the rate is `rate`.
        #[serde(default)]
        steps: Vec<RateStep>,
    },
    /// `clients` serial clients: each sends a request, waits for its final answer, thinks, repeats.
    ClosedLoop {
        /// Number of clients.
        clients: u32,
        /// Think time between a final answer and the next request.
        #[serde(default = "zero_dist")]
        think: Dist,
        /// Clients start spread uniformly over `[0, start_spread)`. Default 0 (all at once).
        #[serde(default)]
        start_spread: Duration,
    },
    /// `clients` clients that each need one logical request done, all starting together.
    JobSet {
        /// Number of clients (jobs).
        clients: u32,
        /// Clients start spread uniformly over `[0, start_spread)`. Default 0 (all at t = 0).
        #[serde(default)]
        start_spread: Duration,
    },
}

fn default_clients() -> u32 {
    1
}
fn zero_dist() -> Dist {
    Dist::Constant(Duration::ZERO)
}

/// How open-loop gaps are drawn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Arrivals {
    /// Exponential gaps (a Poisson process).
    #[default]
    Poisson,
    /// Equal gaps of `1 / rate`.
    Constant,
}

/// A change of the open-loop rate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateStep {
    /// From when.
    pub at: Duration,
    /// The new rate, per second.
    pub rate: f64,
}

/// A named downstream service.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Downstream {
    /// The name stacks and faults refer to.
    pub name: String,
    /// What it is.
    pub model: DownstreamModel,
    /// Network delay each way between the clients and it. Default none.
    #[serde(default)]
    pub network: Network,
    /// What its handler calls, making it a *service* in a call graph (a `Server` model only):
    /// each job, once served, calls other downstreams through its own policy stacks before it
    /// answers, holding its worker meanwhile. Default none: it answers as a plain server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handler: Option<Handler>,
    /// Independent copies of this downstream (a `Server` model only), each with its own workers,
    /// queue and handler, behind its callers' `balancer`. The report names them `name[0]`,
    /// `name[1]`, ...; a fault naming `name` hits every replica, one naming `name[k]` hits
    /// replica `k` only. Default none: one server, no balancer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<u32>,
    /// How each attempt picks a replica (needs `replicas`). Default `RoundRobin`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balancer: Option<Balancer>,
    /// Outlier detection over the replicas (needs `replicas`), as Envoy's `outlier_detection`:
    /// a replica is ejected from the balancer for a while after consecutive errors, or when its
    /// success rate falls far below the others'. Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outlier_detection: Option<OutlierDetection>,
    /// Where a request's later attempts to the replicas go (needs `replicas`). Default `Any`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_host: Option<RetryHost>,
}

/// Where a request's later attempts (retries, hedges) to a replicated downstream go.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum RetryHost {
    /// Wherever the balancer picks, as for a first attempt.
    #[default]
    Any,
    /// The replica of the request's previous attempt, while it is not ejected (a client that
    /// keeps its connection).
    Same,
    /// A replica the request has not tried yet while one is left (Envoy's `previous_hosts` retry
    /// predicate; replica `k` counts as `k % 64`).
    Other,
}

/// Envoy's `outlier_detection`, with its defaults. An answer that is an error, an unavailable
/// answer, a 5xx status, a reset or a timeout counts as a 5xx; any other answer as a success.
/// A replica with `consecutive_5xx` 5xx in a row is ejected at once; every `interval`, ejected
/// replicas whose time is up come back (ejection time = `base_ejection_time` × the times it was
/// ejected, at most `max_ejection_time`; a replica not ejected at a sweep has that count lowered
/// by one), then success-rate detection runs: with at least `success_rate_minimum_hosts`
/// replicas each answering at least `success_rate_request_volume` calls in the interval, a replica
/// whose success rate is below mean − `success_rate_stdev_factor` / 1000 × standard deviation is
/// ejected. Never more than `max_ejection_percent` of the replicas are ejected at once, but one
/// may always be. A balancer sends to ejected replicas only when fewer than half are left (Envoy's
/// panic threshold of 50%).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OutlierDetection {
    /// 5xx in a row that eject a replica (0: off). Default 5.
    pub consecutive_5xx: u32,
    /// Time between sweeps. Default 10 s.
    pub interval: Duration,
    /// Ejection time per ejection so far. Default 30 s.
    pub base_ejection_time: Duration,
    /// Longest ejection time. Default 300 s.
    pub max_ejection_time: Duration,
    /// Most replicas ejected at once, percent. Default 10.
    pub max_ejection_percent: u32,
    /// Replicas with enough calls for success-rate detection to run. Default 5.
    pub success_rate_minimum_hosts: u32,
    /// Calls in an interval for a replica to count in success-rate detection. Default 100.
    pub success_rate_request_volume: u32,
    /// Standard deviations below the mean, × 1000, that eject (0: success-rate detection off).
    /// Default 1900.
    pub success_rate_stdev_factor: u32,
}

impl Default for OutlierDetection {
    fn default() -> Self {
        OutlierDetection {
            consecutive_5xx: 5,
            interval: Duration::from_secs(10),
            base_ejection_time: Duration::from_secs(30),
            max_ejection_time: Duration::from_secs(300),
            max_ejection_percent: 10,
            success_rate_minimum_hosts: 5,
            success_rate_request_volume: 100,
            success_rate_stdev_factor: 1900,
        }
    }
}

/// How an attempt to a replicated downstream picks its replica. The random draws come from the
/// run's own stream for the downstream, so runs stay deterministic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Balancer {
    /// Each replica in turn.
    #[default]
    RoundRobin,
    /// A replica drawn uniformly.
    Random,
    /// The replica with the fewest attempts outstanding (sent, not yet answered or timed out)
    /// from this run's callers; ties go to the first after the last pick.
    LeastOutstanding,
    /// Two distinct replicas drawn uniformly, the one with fewer attempts outstanding taken (the
    /// first drawn on a tie): Envoy's `LEAST_REQUEST` with its default `choice_count` of 2.
    PowerOfTwo,
}

/// A service's handler: the calls each job makes once its own service time is over, and how it
/// answers from their results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Handler {
    /// The calls, each through its own policy stack (in the policy format, like a policy's
    /// `stack`).
    pub calls: Vec<HopCall>,
    /// Send every call at once (a fan-out) instead of one after another. Default false.
    #[serde(default)]
    pub parallel: bool,
    /// Deadline propagation: this service honours its caller's deadline less `margin` (refuses
    /// an arrival past it, drops a queued job past it or whose caller is gone, stops a job past
    /// it before its calls), and its calls carry that deadline, which what they call honours the
    /// same way. Default none: no deadline travels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub propagate_deadline: Option<DeadlineMargin>,
    /// A service that failed a required call answers with `x-should-retry: false` (the
    /// do-not-retry signal the core's answer table reads), so callers that honour it retry
    /// only where the request entered. Default false: a plain transient error.
    #[serde(default)]
    pub no_retry_on_failure: bool,
}

/// What deadline propagation takes off the remaining time at each hop.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeadlineMargin {
    /// Taken off the remaining deadline at each hop. Default 0.
    #[serde(default)]
    pub margin: Duration,
}

/// One call a service's handler makes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HopCall {
    /// The policy stack the call goes through (its `Call` layers name the downstreams).
    pub stack: Layer,
    /// Whether the service fails when this call fails. Default true; an optional call's failure
    /// is ignored.
    #[serde(default = "default_required")]
    pub required: bool,
}

fn default_required() -> bool {
    true
}

/// The kinds of downstream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum DownstreamModel {
    /// A queueing server: `workers` serve jobs from a bounded queue. Work goes on after the client
    /// gave up (counted as wasted) unless `cancel_abandoned`.
    Server {
        /// Jobs served at once. A large number models an unlimited-concurrency (delay) server.
        workers: u32,
        /// Waiting room and order. Default: unbounded FIFO.
        #[serde(default)]
        queue: QueueSpec,
        /// Service time of one job.
        service: Dist,
        /// Added to each job's service time for every job in the server when it starts (itself,
        /// those in service, those queued): latency that grows with load. Default 0.
        #[serde(default)]
        per_in_flight: Duration,
        /// Share of jobs that fail (after being served) even when healthy. Default 0.
        #[serde(default)]
        error_rate: f64,
        /// Skip queued jobs whose client attempt has already timed out. Default false.
        #[serde(default)]
        cancel_abandoned: bool,
    },
    /// A register with optimistic concurrency: an attempt reads the version (a round trip), then
    /// writes conditionally on it (a round trip); the write fails with a conflict if another write
    /// committed in between. Reads and writes take no time at the register.
    Register,
    /// Answers by call number: the `n`-th call (from 1) gets `script[n - 1]`, later calls `then`.
    Scripted {
        /// Answers of the first calls, in order.
        script: Vec<ScriptAnswer>,
        /// The answer to every call after the script. Default `Ok`.
        #[serde(default = "default_then")]
        then: ScriptAnswer,
        /// Time to answer. Default 0.
        #[serde(default)]
        latency: Duration,
        /// Time to answer the `n`-th call (from 1), for the first calls; later calls take
        /// `latency`. Default none.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        latencies: Vec<Duration>,
    },
    /// An LLM provider (see [`LlmProvider`](super::LlmProvider)).
    LlmProvider(super::LlmProvider),
}

fn default_then() -> ScriptAnswer {
    ScriptAnswer::Ok
}

/// One scripted answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScriptAnswer {
    /// Success.
    Ok,
    /// A transient error.
    Error,
    /// A permanent error: retrying cannot help.
    Fatal,
    /// Throttled, with this Retry-After.
    Throttled(Duration),
    /// Never answers (the client's timeout decides).
    Hang,
    /// An HTTP-like status with the signals its headers would carry; what it means is the core's
    /// table's business (`reliable_core::answer`), like every answer's.
    Status {
        /// The status, in 100..=599.
        status: u16,
        /// The server's delay (`Retry-After` / `retry-after-ms`). Default none.
        #[serde(default)]
        retry_after: Option<Duration>,
        /// `x-should-retry`. Default none.
        #[serde(default)]
        should_retry: Option<bool>,
    },
    /// The connection is reset (after the latency): no answer.
    Reset,
}

impl ScriptAnswer {
    /// The core's answer a `Status` stands for (`None` for the other kinds, which the simulator's
    /// `AnswerKind` stands for).
    pub fn status(self) -> Option<reliable_core::answer::Answer> {
        use reliable_core::answer::{Answer, Signals};
        match self {
            ScriptAnswer::Status {
                status,
                retry_after,
                should_retry,
            } => Some(Answer::status(
                status,
                Signals {
                    retry_after,
                    should_retry,
                    overloaded: false,
                },
            )),
            _ => None,
        }
    }
}

/// A server's waiting room.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueSpec {
    /// Jobs that may wait; an arrival finding it full is rejected at once. `None`: unbounded.
    #[serde(default)]
    pub capacity: Option<u32>,
    /// Which waiting job is served next. Default FIFO.
    #[serde(default)]
    pub discipline: Discipline,
}

/// Queue order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Discipline {
    /// Oldest first.
    #[default]
    Fifo,
    /// Newest first (keeps latency low for some under overload, starves the rest).
    Lifo,
}

/// One-way network delays.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    /// Client to downstream.
    #[serde(default = "zero_dist")]
    pub request: Dist,
    /// Downstream to client.
    #[serde(default = "zero_dist")]
    pub response: Dist,
}

impl Default for Network {
    fn default() -> Self {
        Network {
            request: zero_dist(),
            response: zero_dist(),
        }
    }
}

/// A distribution of durations.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum Dist {
    /// Always this.
    Constant(Duration),
    /// Exponential with this mean.
    Exponential {
        /// The mean.
        mean: Duration,
    },
    /// `scale × exp(N(mu, sigma))`: `LogNormal(scale: "10ms", mu: 0.0, sigma: 0.25)` is Yandex's
    /// handler time.
    LogNormal {
        /// Multiplies the log-normal variate.
        scale: Duration,
        /// Mean of the underlying normal. Default 0.
        #[serde(default)]
        mu: f64,
        /// Standard deviation of the underlying normal.
        sigma: f64,
    },
    /// `|N(mean, std_dev)|` (Brooker's network hop: `Normal(mean: "10ms", std_dev: "2ms")`).
    Normal {
        /// The mean.
        mean: Duration,
        /// The standard deviation.
        std_dev: Duration,
    },
    /// Uniform on `[low, high]`.
    Uniform {
        /// Smallest value.
        low: Duration,
        /// Largest value.
        high: Duration,
    },
    /// One of these values, each as likely (`Choice(["100ms", "200ms", "300ms"])`).
    Choice(Vec<Duration>),
    /// `slow` with probability `slow_share`, else `fast`.
    Bimodal {
        /// Share of slow draws, in [0, 1].
        slow_share: f64,
        /// The usual case.
        fast: Box<Dist>,
        /// The slow case.
        slow: Box<Dist>,
    },
}

/// A store that client instances share a `Fleet` scope's state through (Redis, in a service): one
/// state per layer for every client, each decision a round trip to it (`Exact`) or made on a view
/// refreshed every `refresh` (`Cached`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Store {
    /// The name policies give (`Fleet(store: "orders")`).
    pub name: String,
    /// The round trip from a client to the store and back (one operation).
    pub round_trip: Dist,
    /// What goes wrong with the store, and when.
    #[serde(default)]
    pub faults: Vec<StoreFault>,
}

/// Something that goes wrong with a store during `[from, until)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum StoreFault {
    /// The store is down: each operation fails at once (`FailFast`: a refused connection) or
    /// never answers (`Hang`: each decision waits its `wait` out). Default `Hang`.
    Outage {
        /// Start.
        from: Duration,
        /// End (exclusive).
        until: Duration,
        /// How it fails.
        #[serde(default = "hang")]
        mode: OutageMode,
    },
    /// Each round trip takes `extra` longer (a store swapping, a saturated link).
    Slow {
        /// Start.
        from: Duration,
        /// End (exclusive).
        until: Duration,
        /// Added to every round trip.
        extra: Duration,
    },
}

fn hang() -> OutageMode {
    OutageMode::Hang
}

impl StoreFault {
    /// The window `[from, until)`.
    pub fn window(&self) -> (Duration, Duration) {
        match self {
            StoreFault::Outage { from, until, .. } | StoreFault::Slow { from, until, .. } => {
                (*from, *until)
            }
        }
    }
}

/// Something that goes wrong with one client instance during `[from, until)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub enum ClientFault {
    /// The instance's own network is down (a broken interface, its host's link): its calls fail
    /// at once as unavailable without reaching any downstream, and its store operations fail at
    /// once too (so a `Fleet` scope decides locally, and sends the store what it saw when its
    /// network is back).
    NetworkDown {
        /// The client instance, from 0 (`clients` of the workload).
        client: u32,
        /// Start.
        from: Duration,
        /// End (exclusive).
        until: Duration,
    },
}

/// A scenario's faults: one definition in the core ([`reliable_core::fault`]), which the
/// chaos layers read too, so a storm tried here is replayed from the same file.
pub use reliable_core::fault::{Fault, OutageMode};

/// A client policy to compare: a name and a stack of layers, in the policy format that `reliable`
/// loads too ([`reliable_core::policy`]), with the simulator's distributions for `timeout_dist`.
pub type Policy = reliable_core::policy::Policy<Dist>;

/// One layer of a client policy stack ([`reliable_core::policy::Layer`], with the simulator's
/// distributions for `timeout_dist`). Layers nest: `Breaker(inner: Retry(inner: Call(..)))`
/// retries inside the breaker (the breaker sees one outcome per retried call), while
/// `Retry(inner: Breaker(inner: Call(..)))` lets the breaker see every attempt.
pub type Layer = reliable_core::policy::Layer<Dist>;

pub use reliable_core::policy::{FleetMode, FleetScope, OnStoreFailure, Scope};

/// How recovery after the faults is judged (see the metrics docs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recovery {
    /// A bucket is healthy when its goodput is at least this share of the pre-fault goodput.
    /// Default 0.9.
    #[serde(default = "default_threshold")]
    pub threshold: f64,
    /// Recovered once healthy buckets follow each other for this long. Default 5 s.
    #[serde(default = "default_sustain")]
    pub sustain: Duration,
    /// A later window of `sustain` whose goodput falls below this share of the pre-fault goodput
    /// undoes a recovery (the system came back, then collapsed again). In [0, threshold]; 0 turns
    /// the rule off. Default 0.5.
    #[serde(default = "default_relapse")]
    pub relapse: f64,
    /// Queue and latency count as back to their healthy level in a window whose mean server
    /// queue is at most `settle` × the largest seen in a bucket before the faults (at least one
    /// job), and whose mean attempt latency (send to answer or timeout) is at most `settle` × the
    /// largest before the faults. Recovery needs goodput back and, from then on, a window with
    /// queue and latency back. At least 1. Default 1.5.
    #[serde(default = "default_settle")]
    pub settle: f64,
}

fn default_threshold() -> f64 {
    0.9
}
fn default_sustain() -> Duration {
    Duration::from_secs(5)
}
fn default_settle() -> f64 {
    1.5
}
fn default_relapse() -> f64 {
    0.5
}

impl Default for Recovery {
    fn default() -> Self {
        Recovery {
            threshold: default_threshold(),
            sustain: default_sustain(),
            relapse: default_relapse(),
            settle: default_settle(),
        }
    }
}
