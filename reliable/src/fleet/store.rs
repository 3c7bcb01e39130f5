//! The store interface: what a fleet breaker and a fleet budget ask a store, and what it answers.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use reliable_core::breaker::{BreakerPolicy, Outcome, ProbeRule, State, WindowConfig};
use reliable_core::budget::{RatioConfig, RatioPolicy};
use reliable_core::limit::{RateConfig, RatePolicy};
use reliable_core::{ConfigError, Duration};

/// A future a [`Store`] returns.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Where fleet state lives: every operation is atomic in the store (one Lua script in Redis, one
/// lock in memory), and names are namespaced by the store.
///
/// `now_us` is the time of the operation in microseconds; 0 means the store's own clock (in
/// Redis, the server's `TIME`: one clock for the whole fleet). Tests pass explicit times.
pub trait Store: Send + Sync + fmt::Debug + 'static {
    /// One breaker operation on the breaker `name`.
    fn breaker<'a>(
        &'a self,
        name: &'a str,
        spec: &'a BreakerSpec,
        now_us: u64,
        op: BreakerOp,
    ) -> StoreFuture<'a, BreakerReply>;
    /// One budget operation on the budget `name`.
    fn budget<'a>(
        &'a self,
        name: &'a str,
        spec: &'a BudgetSpec,
        now_us: u64,
        op: BudgetOp,
    ) -> StoreFuture<'a, BudgetReply>;
    /// One call asking the rate limit `name` to admit it.
    fn rate<'a>(
        &'a self,
        name: &'a str,
        spec: &'a RateSpec,
        now_us: u64,
    ) -> StoreFuture<'a, RateReply>;
    /// One call asking the bulkhead `name` for a slot, or giving one back.
    fn bulkhead<'a>(
        &'a self,
        name: &'a str,
        spec: &'a BulkheadSpec,
        now_us: u64,
        op: BulkheadOp,
    ) -> StoreFuture<'a, BulkheadReply>;
    /// What to show of the store in logs and answers: never its credentials.
    fn describe(&self) -> String;
}

/// A bulkhead operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BulkheadOp {
    /// Ask for a slot.
    Acquire,
    /// Give slot `lease` back.
    Release {
        /// The slot's lease.
        lease: u64,
    },
}

/// A bulkhead operation's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BulkheadReply {
    /// Acquire: whether a slot was given.
    pub admitted: bool,
    /// The slot's lease (0 when none was given).
    pub lease: u64,
    /// Calls in flight fleet-wide after the operation.
    pub in_flight: u32,
    /// The store's time of the call, in microseconds.
    pub now_us: u64,
}

/// A fleet-wide bulkhead: at most `max` calls in flight fleet-wide, each holding a lease of
/// `lease` (a process that dies mid-call gives its slots back when their leases run out).
#[derive(Clone, Copy, Debug)]
pub struct BulkheadSpec {
    pub(crate) max: u32,
    pub(crate) lease_us: u64,
}

impl BulkheadSpec {
    /// At most `max` calls in flight, each slot leased for `lease` (whole microseconds at least 1).
    pub fn new(max: u32, lease: Duration) -> Result<Self, SpecError> {
        if max == 0 {
            return Err(SpecError::Config(ConfigError::new(
                "max",
                reliable_core::Problem::Zero,
            )));
        }
        if lease.as_nanos() < 1_000 || lease == Duration::MAX {
            return Err(unsupported(
                "lease",
                "a slot's lease is at least 1 µs and finite: a process may die mid-call",
            ));
        }
        Ok(BulkheadSpec {
            max,
            lease_us: micros_up(lease),
        })
    }
}

/// A rate limit's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateReply {
    /// Whether the call is admitted.
    pub admitted: bool,
    /// Refused: when a call would next be admitted.
    pub retry_after: Duration,
    /// The store's time of the call, in microseconds.
    pub now_us: u64,
}

/// A rate limit as the store runs it: the core's [`RateConfig`] (validated by [`RatePolicy`]),
/// and the numbers the Redis script reads.
#[derive(Clone, Copy, Debug)]
pub struct RateSpec {
    pub(crate) policy: RatePolicy,
    pub(crate) interval_us: u64,
    pub(crate) tau_us: u64,
}

impl RateSpec {
    /// The fleet form of `config`, or the field it cannot share.
    pub fn new(config: RateConfig) -> Result<Self, SpecError> {
        let policy = RatePolicy::new(config)?;
        let interval = policy.interval().as_nanos();
        if !interval.is_multiple_of(1_000) {
            return Err(unsupported(
                "period",
                "period / rate must be whole microseconds (the store's clock)",
            ));
        }
        Ok(RateSpec {
            policy,
            interval_us: interval / 1_000,
            tau_us: interval / 1_000 * u64::from(config.burst - 1),
        })
    }
}

/// A breaker operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BreakerOp {
    /// Ask to make one call.
    Acquire,
    /// How a call the store admitted ended: its permit's generation and lease.
    Record {
        /// The generation the permit was issued in.
        generation: u64,
        /// The permit's lease (opaque).
        lease: u64,
        /// How the call ended.
        outcome: Outcome,
    },
    /// Results of calls a process admitted on its cached view of generation `generation`, in
    /// order (none of them a probe).
    Batch {
        /// The generation of the view the calls were admitted on.
        generation: u64,
        /// Their outcomes.
        outcomes: Vec<Outcome>,
    },
    /// Read the state.
    View,
}

/// What a breaker operation answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BreakerAnswer {
    /// A record, batch or view: done.
    Done,
    /// Admitted (not a probe).
    Admitted {
        /// The permit's lease (opaque), to hand back with the result.
        lease: u64,
    },
    /// Admitted as a half-open probe.
    Probe {
        /// The probe's lease.
        lease: u64,
    },
    /// Rejected: open, for `retry_after` more.
    Open {
        /// Time left until the breaker admits a probe.
        retry_after: Duration,
    },
    /// Rejected: half-open, every probe slot in use fleet-wide.
    HalfOpenFull,
}

/// A breaker operation's answer and the breaker's state after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BreakerReply {
    /// The answer to the operation.
    pub answer: BreakerAnswer,
    /// The breaker's generation (it moves on at every change of state).
    pub generation: u64,
    /// The stored state: closed, open (perhaps with its time up) or half-open.
    pub state: State,
    /// Open: when the open time is up, in the store's microseconds.
    pub until_us: u64,
    /// The store's time of the operation, in microseconds.
    pub now_us: u64,
    /// Half-open probes holding a lease, fleet-wide.
    pub probes_in_flight: u32,
}

/// A budget operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BudgetOp {
    /// First tries to deposit first.
    pub first_tries: u32,
    /// Then the most retries wanted (0: only deposit, or read).
    pub retries: u32,
}

/// A budget operation's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BudgetReply {
    /// Retries granted, at most the number wanted.
    pub granted: u32,
    /// Retries available after the operation, in millionths: reserve + deposits − withdrawals in
    /// the window (the core's `RatioBudget::micro_balance`).
    pub balance_micros: i64,
    /// The store's time of the operation, in microseconds.
    pub now_us: u64,
}

/// Why the store did not answer. The message never holds credentials.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreError {
    /// What kind of failure.
    pub kind: StoreErrorKind,
    /// What the store said, credentials removed.
    pub message: String,
}

/// Kinds of [`StoreError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StoreErrorKind {
    /// No answer within the wait bound.
    Timeout,
    /// Not reached (refused, reset, closed), or not asked: the store is resting after failures.
    Unavailable,
    /// The store refused the operation (out of memory, wrong type, a script error).
    Refused,
    /// The store answered something that is not a valid answer.
    Garbage,
}

impl StoreError {
    pub(crate) fn new(kind: StoreErrorKind, message: impl Into<String>) -> Self {
        StoreError {
            kind,
            message: message.into(),
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            StoreErrorKind::Timeout => "no answer in time",
            StoreErrorKind::Unavailable => "unavailable",
            StoreErrorKind::Refused => "refused",
            StoreErrorKind::Garbage => "bad answer",
        };
        write!(f, "fleet store {kind}: {}", self.message)
    }
}

impl std::error::Error for StoreError {}

/// A policy the fleet cannot share, with the field to blame.
#[derive(Clone, Debug, PartialEq)]
pub enum SpecError {
    /// The core refused the config.
    Config(ConfigError),
    /// A field set to something a fleet breaker or budget does not do.
    Unsupported {
        /// The config field, as in the policy format.
        field: &'static str,
        /// Why.
        why: &'static str,
    },
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpecError::Config(e) => write!(f, "{e}"),
            SpecError::Unsupported { field, why } => write!(f, "{field}: {why}"),
        }
    }
}

impl std::error::Error for SpecError {}

impl From<ConfigError> for SpecError {
    fn from(e: ConfigError) -> Self {
        SpecError::Config(e)
    }
}

fn unsupported(field: &'static str, why: &'static str) -> SpecError {
    SpecError::Unsupported { field, why }
}

/// The most probes a fleet breaker lets out at once (the core's rule for a fleet breaker).
pub const MAX_PROBES: u32 = reliable_core::breaker::FLEET_MAX_PROBES;
/// The longest count window of a fleet breaker (the core's rule: each process's fallback breaker
/// keeps that many calls).
pub const MAX_WINDOW: u32 = reliable_core::breaker::FLEET_MAX_WINDOW;
/// The most slots of a fleet budget's window (the core's rule: each process's fallback budget
/// keeps that many).
pub const MAX_SLOTS: u32 = reliable_core::budget::FLEET_MAX_SLOTS;

/// Microseconds, rounded up: the store's clock counts microseconds.
fn micros_up(d: Duration) -> u64 {
    d.as_nanos().div_ceil(1_000)
}

/// A breaker policy as the store runs it: the core's [`BreakerPolicy`] (which the in-memory store
/// and each process's local fallback run) and the numbers the Redis script reads.
///
/// A fleet breaker takes the rules a fleet can share: failures in a row and a failure rate over a
/// count window, open times that grow per re-open, and a half-open round of at most
/// `max_in_flight` leased probes closed by `successes` in a row. [`BreakerSpec::new`] refuses the
/// rest by field, as the core's [`fleet_refusal`] says (the policy format and the simulator
/// refuse the same).
///
/// [`fleet_refusal`]: reliable_core::breaker::BreakerConfig::fleet_refusal
#[derive(Clone, Debug)]
pub struct BreakerSpec {
    pub(crate) policy: BreakerPolicy,
    pub(crate) consecutive: u32,
    pub(crate) failure_ppm: u32,
    pub(crate) minimum_calls: u32,
    pub(crate) window_calls: u32,
    /// Open time by re-opens (the last repeats), in µs, as the core computes it.
    pub(crate) open_us: Vec<u64>,
    pub(crate) probes: u32,
    pub(crate) successes: u32,
    pub(crate) lease_us: u64,
}

impl BreakerSpec {
    /// The fleet form of `policy`, or the field it cannot share.
    pub fn new(policy: &BreakerPolicy) -> Result<Self, SpecError> {
        let c = policy.config();
        if let Some(r) = c.fleet_refusal() {
            return Err(unsupported(r.field, r.why));
        }
        // What the core's check leaves: a count window of at most `MAX_WINDOW` calls (or none,
        // for failures in a row only); at most `MAX_PROBES` probes, by successes in a row.
        let window_calls = match c.window {
            WindowConfig::Count { calls } => calls,
            WindowConfig::Time { .. } => 1,
        };
        let probes = c.half_open.max_in_flight.unwrap_or(1);
        let successes = match c.half_open.rule {
            ProbeRule::Consecutive { successes } => successes,
            ProbeRule::Rate { .. } => 1,
        };
        // The open times by re-opens, from the core, until they reach the cap.
        let mut open_us = Vec::new();
        for reopens in 0..64 {
            let t = policy.open_time_before_jitter(reopens);
            open_us.push(micros_up(t));
            if t >= policy.max_open_time() {
                break;
            }
        }
        Ok(BreakerSpec {
            policy: *policy,
            consecutive: c.consecutive_failures.unwrap_or(0),
            // As the core's `fraction_ppm` (at least 1 when on).
            failure_ppm: c
                .failure_rate
                .map_or(0, |r| ((r * 1e6 + 0.5) as u32).max(1)),
            minimum_calls: c.minimum_calls,
            window_calls,
            open_us,
            probes,
            successes,
            lease_us: micros_up(c.half_open.probe_timeout),
        })
    }

    /// The core policy.
    pub fn policy(&self) -> &BreakerPolicy {
        &self.policy
    }

    /// Probes allowed in flight at once, fleet-wide.
    pub fn probes(&self) -> u32 {
        self.probes
    }
}

/// A ratio budget as the store runs it: the core's [`RatioConfig`] (validated by
/// [`RatioPolicy`]) and the numbers the Redis script reads.
#[derive(Clone, Debug)]
pub struct BudgetSpec {
    pub(crate) config: RatioConfig,
    pub(crate) policy: RatioPolicy,
    /// Millionths of a retry per first try (the core's `micro(ratio)`).
    pub(crate) deposit: u64,
    /// Millionths of a retry of reserve.
    pub(crate) reserve: u64,
    pub(crate) width_us: u64,
    pub(crate) slots: u32,
}

impl BudgetSpec {
    /// The fleet form of `config`, or the field it cannot share.
    pub fn new(config: RatioConfig) -> Result<Self, SpecError> {
        let policy = RatioPolicy::new(config)?;
        // The core's rule for a fleet budget, which the policy format and the simulator hold
        // files to as well.
        if let Some(r) = config.fleet_refusal() {
            return Err(unsupported(r.field, r.why));
        }
        let width = config.ttl.as_nanos() / u64::from(config.slots);
        Ok(BudgetSpec {
            config,
            policy,
            deposit: (config.ratio * 1e6 + 0.5) as u64,
            reserve: (u128::from(config.min_per_sec) * u128::from(config.ttl.as_nanos()) / 1_000)
                as u64,
            width_us: width / 1_000,
            slots: config.slots,
        })
    }

    /// The core config.
    pub fn config(&self) -> &RatioConfig {
        &self.config
    }
}

/// Checks a name: 1 to 128 characters of `A-Z a-z 0-9 . _ - :`.
pub(crate) fn check_name(name: &str) -> Result<(), SpecError> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b':'));
    if ok {
        Ok(())
    } else {
        Err(unsupported(
            "name",
            "1 to 128 characters of A-Z a-z 0-9 . _ - :",
        ))
    }
}

/// A store URL as it may be shown: the user and password replaced by `***`, the query dropped.
///
/// ```
/// use reliable::fleet::redact_url;
/// assert_eq!(redact_url("redis://app:s3cret@127.0.0.1:6379/0"), "redis://***@127.0.0.1:6379/0");
/// assert_eq!(redact_url("rediss://:pw@cache:6380?x=1"), "rediss://***@cache:6380");
/// assert_eq!(redact_url("redis://127.0.0.1"), "redis://127.0.0.1");
/// ```
pub fn redact_url(url: &str) -> String {
    let url = url.split(['?', '#']).next().unwrap_or("");
    let Some((scheme, rest)) = url.split_once("://") else {
        // Not a URL: show nothing of it that could be a secret.
        return "<store>".to_owned();
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    match authority.rfind('@') {
        Some(i) => format!("{scheme}://***@{}{path}", &authority[i + 1..]),
        None => format!("{scheme}://{authority}{path}"),
    }
}
