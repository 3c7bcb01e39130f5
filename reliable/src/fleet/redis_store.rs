//! The Redis store: each operation is one Lua script run atomically by the server
//! (`breaker.lua`, `budget.lua`, beside this file), over a multiplexed connection.

use std::fmt;
use std::sync::Mutex;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, Script};
use reliable_core::Duration;
use reliable_core::breaker::{Outcome, State};

use super::store::{
    BreakerAnswer, BreakerOp, BreakerReply, BreakerSpec, BudgetOp, BudgetReply, BudgetSpec,
    BulkheadOp, BulkheadReply, BulkheadSpec, RateReply, RateSpec, Store, StoreError,
    StoreErrorKind, StoreFuture, check_name, redact_url,
};

const BREAKER_LUA: &str = include_str!("breaker.lua");
const BUDGET_LUA: &str = include_str!("budget.lua");
const RATE_LUA: &str = include_str!("rate.lua");
const BULKHEAD_LUA: &str = include_str!("bulkhead.lua");

/// A store in Redis (redis-rs, tokio). Keys are `{namespace:kind:name}` (one hash slot per
/// breaker or budget), plus suffixes; the URL's credentials are used and never shown.
pub struct RedisStore {
    client: Client,
    shown: String,
    secrets: Vec<String>,
    namespace: String,
    conn: Mutex<Option<MultiplexedConnection>>,
    breaker: Script,
    budget: Script,
    rate: Script,
    bulkhead: Script,
    log: bool,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("url", &self.shown)
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// A store at `url` (`redis://[user:password@]host:port[/db]`, `rediss://` with the feature
    /// `fleet-redis-tls`, `redis+unix:///path`). Connects on first use; an error names the URL
    /// without its credentials.
    pub fn open(url: &str, namespace: &str) -> Result<Self, StoreError> {
        let shown = redact_url(url);
        let secrets = secrets_of(url);
        check_name(namespace)
            .map_err(|e| StoreError::new(StoreErrorKind::Refused, e.to_string()))?;
        let client = Client::open(url).map_err(|e| {
            StoreError::new(
                StoreErrorKind::Refused,
                scrub(&format!("{shown}: {e}"), &secrets),
            )
        })?;
        Ok(RedisStore {
            client,
            shown,
            secrets,
            namespace: namespace.to_owned(),
            conn: Mutex::new(None),
            breaker: Script::new(BREAKER_LUA),
            budget: Script::new(BUDGET_LUA),
            rate: Script::new(RATE_LUA),
            bulkhead: Script::new(BULKHEAD_LUA),
            log: false,
        })
    }

    /// A store at a `rediss://` URL whose server certificate is signed by `root_ca` (PEM), not by
    /// a public authority (feature `fleet-redis-tls`).
    #[cfg(feature = "fleet-redis-tls")]
    pub fn open_tls(url: &str, namespace: &str, root_ca: &[u8]) -> Result<Self, StoreError> {
        let mut store = RedisStore::open(url, namespace)?;
        let certs = redis::TlsCertificates {
            client_tls: None,
            root_cert: Some(root_ca.to_vec()),
        };
        store.client = Client::build_with_tls(url, certs).map_err(|e| {
            StoreError::new(
                StoreErrorKind::Refused,
                scrub(&format!("{}: {e}", store.shown), &store.secrets),
            )
        })?;
        Ok(store)
    }

    /// Appends every breaker decision to the list `{namespace:breaker:name}:log` (for tests that
    /// replay a fleet's decisions through the core's sequential breaker).
    pub fn with_decision_log(mut self) -> Self {
        self.log = true;
        self
    }

    /// The keys of breaker `name`: state, leases, window bits, log.
    pub fn breaker_keys(&self, name: &str) -> [String; 4] {
        let k = format!("{{{}:breaker:{name}}}", self.namespace);
        [
            k.clone(),
            format!("{k}:leases"),
            format!("{k}:window"),
            format!("{k}:log"),
        ]
    }

    /// The key of rate limit `name`.
    pub fn rate_key(&self, name: &str) -> String {
        format!("{{{}:rate:{name}}}", self.namespace)
    }

    async fn rate_op(
        &self,
        name: &str,
        spec: &RateSpec,
        now_us: u64,
    ) -> Result<RateReply, StoreError> {
        check_name(name).map_err(|e| StoreError::new(StoreErrorKind::Refused, e.to_string()))?;
        let key = self.rate_key(name);
        let mut inv = self.rate.key(&key);
        inv.arg(now_us).arg(spec.interval_us).arg(spec.tau_us);
        let v = self.run(inv).await?;
        let garbage = || {
            StoreError::new(
                StoreErrorKind::Garbage,
                format!("{}: a rate answer of {} values", self.shown, v.len()),
            )
        };
        let &[admitted, left, now] = v.as_slice() else {
            return Err(garbage());
        };
        if !(0..=1).contains(&admitted) {
            return Err(garbage());
        }
        Ok(RateReply {
            admitted: admitted == 1,
            retry_after: Duration::from_nanos(
                u64::try_from(left)
                    .map_err(|_| garbage())?
                    .saturating_mul(1_000),
            ),
            now_us: u64::try_from(now).map_err(|_| garbage())?,
        })
    }

    /// The keys of bulkhead `name`: its leases and its last lease id.
    pub fn bulkhead_keys(&self, name: &str) -> [String; 2] {
        let k = format!("{{{}:bulkhead:{name}}}", self.namespace);
        [format!("{k}:leases"), format!("{k}:next")]
    }

    async fn bulkhead_op(
        &self,
        name: &str,
        spec: &BulkheadSpec,
        now_us: u64,
        op: BulkheadOp,
    ) -> Result<BulkheadReply, StoreError> {
        check_name(name).map_err(|e| StoreError::new(StoreErrorKind::Refused, e.to_string()))?;
        let keys = self.bulkhead_keys(name);
        let mut inv = self.bulkhead.key(&keys[0]);
        inv.key(&keys[1]);
        let (op_name, lease) = match op {
            BulkheadOp::Acquire => ("acquire", 0),
            BulkheadOp::Release { lease } => ("release", lease),
        };
        inv.arg(op_name)
            .arg(now_us)
            .arg(spec.max)
            .arg(spec.lease_us)
            .arg(lease);
        let v = self.run(inv).await?;
        let garbage = || {
            StoreError::new(
                StoreErrorKind::Garbage,
                format!("{}: a bulkhead answer of {} values", self.shown, v.len()),
            )
        };
        let &[admitted, lease, in_flight, now] = v.as_slice() else {
            return Err(garbage());
        };
        if !(0..=1).contains(&admitted) {
            return Err(garbage());
        }
        Ok(BulkheadReply {
            admitted: admitted == 1,
            lease: u64::try_from(lease).map_err(|_| garbage())?,
            in_flight: u32::try_from(in_flight).map_err(|_| garbage())?,
            now_us: u64::try_from(now).map_err(|_| garbage())?,
        })
    }

    /// The key of budget `name`.
    pub fn budget_key(&self, name: &str) -> String {
        format!("{{{}:budget:{name}}}", self.namespace)
    }

    fn error(&self, e: &redis::RedisError) -> StoreError {
        let kind = if e.is_timeout() {
            StoreErrorKind::Timeout
        } else if e.is_io_error() || e.is_connection_refusal() || e.is_connection_dropped() {
            StoreErrorKind::Unavailable
        } else if e.code().is_some() || e.kind() == redis::ErrorKind::AuthenticationFailed {
            StoreErrorKind::Refused
        } else {
            StoreErrorKind::Garbage
        };
        StoreError::new(kind, scrub(&format!("{}: {e}", self.shown), &self.secrets))
    }

    /// The connection, made now if there is none (the caller bounds the wait).
    async fn connection(&self) -> Result<MultiplexedConnection, StoreError> {
        if let Some(c) = self.conn.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            return Ok(c);
        }
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(std::time::Duration::from_secs(1)))
            .set_response_timeout(None);
        let c = self
            .client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|e| self.error(&e))?;
        *self.conn.lock().unwrap_or_else(|e| e.into_inner()) = Some(c.clone());
        Ok(c)
    }

    /// Connects and loads both scripts now (at start-up, outside any call's wait bound), so
    /// that the first decisions take one round trip each.
    pub async fn warm_up(&self) -> Result<(), StoreError> {
        let mut c = self.connection().await?;
        for script in [&self.breaker, &self.budget, &self.rate, &self.bulkhead] {
            script
                .prepare_invoke()
                .load_async(&mut c)
                .await
                .map_err(|e| self.error(&e))?;
        }
        Ok(())
    }

    /// Forgets a connection that failed, so that the next operation makes a new one.
    fn drop_connection(&self) {
        *self.conn.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    async fn run(&self, inv: redis::ScriptInvocation<'_>) -> Result<Vec<i64>, StoreError> {
        let mut c = self.connection().await?;
        match inv.invoke_async::<Vec<i64>>(&mut c).await {
            Ok(v) => Ok(v),
            Err(e) => {
                let err = self.error(&e);
                if err.kind != StoreErrorKind::Refused {
                    self.drop_connection();
                }
                Err(err)
            }
        }
    }

    async fn breaker_op(
        &self,
        name: &str,
        spec: &BreakerSpec,
        now_us: u64,
        op: BreakerOp,
    ) -> Result<BreakerReply, StoreError> {
        check_name(name).map_err(|e| StoreError::new(StoreErrorKind::Refused, e.to_string()))?;
        let keys = self.breaker_keys(name);
        let opens = spec
            .open_us
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let mut inv = self.breaker.prepare_invoke();
        for k in &keys {
            inv.key(k);
        }
        let op_name = match op {
            BreakerOp::Acquire => "acquire",
            BreakerOp::Record { .. } => "record",
            BreakerOp::Batch { .. } => "batch",
            BreakerOp::View => "view",
        };
        inv.arg(op_name)
            .arg(now_us)
            .arg(spec.consecutive)
            .arg(spec.failure_ppm)
            .arg(spec.minimum_calls)
            .arg(spec.window_calls)
            .arg(opens)
            .arg(spec.probes)
            .arg(spec.successes)
            .arg(spec.lease_us)
            .arg(if self.log { "1" } else { "0" });
        match &op {
            BreakerOp::Record {
                generation,
                lease,
                outcome,
            } => {
                inv.arg(*generation).arg(*lease).arg(letter(*outcome));
            }
            BreakerOp::Batch {
                generation,
                outcomes,
            } => {
                let s: String = outcomes.iter().map(|o| letter(*o)).collect();
                inv.arg(*generation).arg(s);
            }
            _ => {}
        }
        let v = self.run(inv).await?;
        self.decode_breaker(&v)
    }

    fn decode_breaker(&self, v: &[i64]) -> Result<BreakerReply, StoreError> {
        let garbage = || {
            StoreError::new(
                StoreErrorKind::Garbage,
                format!("{}: a breaker answer of {} values", self.shown, v.len()),
            )
        };
        let &[code, generation, x, state, until, now, probes] = v else {
            return Err(garbage());
        };
        let u = |n: i64| u64::try_from(n).map_err(|_| garbage());
        let answer = match code {
            0 => BreakerAnswer::Done,
            1 => BreakerAnswer::Admitted { lease: u(x)? },
            2 => BreakerAnswer::Probe { lease: u(x)? },
            3 => BreakerAnswer::Open {
                retry_after: Duration::from_nanos(u(x)?.saturating_mul(1_000)),
            },
            4 => BreakerAnswer::HalfOpenFull,
            _ => return Err(garbage()),
        };
        let state = match state {
            0 => State::Closed,
            1 => State::Open,
            2 => State::HalfOpen,
            _ => return Err(garbage()),
        };
        Ok(BreakerReply {
            answer,
            generation: u(generation)?,
            state,
            until_us: u(until)?,
            now_us: u(now)?,
            probes_in_flight: u32::try_from(probes).map_err(|_| garbage())?,
        })
    }

    async fn budget_op(
        &self,
        name: &str,
        spec: &BudgetSpec,
        now_us: u64,
        op: BudgetOp,
    ) -> Result<BudgetReply, StoreError> {
        check_name(name).map_err(|e| StoreError::new(StoreErrorKind::Refused, e.to_string()))?;
        let key = self.budget_key(name);
        let mut inv = self.budget.key(&key);
        inv.arg(now_us)
            .arg(spec.deposit)
            .arg(spec.reserve)
            .arg(spec.width_us)
            .arg(spec.slots)
            .arg(op.first_tries)
            .arg(op.retries);
        let v = self.run(inv).await?;
        let garbage = || {
            StoreError::new(
                StoreErrorKind::Garbage,
                format!("{}: a budget answer of {} values", self.shown, v.len()),
            )
        };
        let &[granted, a, b, now] = v.as_slice() else {
            return Err(garbage());
        };
        let granted = u32::try_from(granted)
            .ok()
            .filter(|g| *g <= op.retries)
            .ok_or_else(garbage)?;
        let (a, b) = (i128::from(a), i128::from(b));
        let balance = i128::from(spec.reserve) + a * i128::from(spec.deposit) - b * 1_000_000;
        Ok(BudgetReply {
            granted,
            balance_micros: balance.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64,
            now_us: u64::try_from(now).map_err(|_| garbage())?,
        })
    }
}

fn letter(o: Outcome) -> &'static str {
    match o {
        Outcome::Success => "S",
        Outcome::Failure => "F",
        Outcome::Ignored => "I",
    }
}

/// The user and password of a URL, to remove from anything shown.
fn secrets_of(url: &str) -> Vec<String> {
    let Some((_, rest)) = url.split_once("://") else {
        return vec![url.to_owned()];
    };
    let authority = rest.split('/').next().unwrap_or("");
    match authority.rfind('@') {
        Some(i) => authority[..i]
            .split(':')
            .filter(|s| s.len() >= 3)
            .map(str::to_owned)
            .collect(),
        None => Vec::new(),
    }
}

/// `text` with every secret replaced by `***`.
fn scrub(text: &str, secrets: &[String]) -> String {
    let mut s = text.to_owned();
    for secret in secrets {
        s = s.replace(secret.as_str(), "***");
    }
    s
}

impl Store for RedisStore {
    fn bulkhead<'a>(
        &'a self,
        name: &'a str,
        spec: &'a BulkheadSpec,
        now_us: u64,
        op: BulkheadOp,
    ) -> StoreFuture<'a, BulkheadReply> {
        Box::pin(self.bulkhead_op(name, spec, now_us, op))
    }

    fn rate<'a>(
        &'a self,
        name: &'a str,
        spec: &'a RateSpec,
        now_us: u64,
    ) -> StoreFuture<'a, RateReply> {
        Box::pin(self.rate_op(name, spec, now_us))
    }

    fn breaker<'a>(
        &'a self,
        name: &'a str,
        spec: &'a BreakerSpec,
        now_us: u64,
        op: BreakerOp,
    ) -> StoreFuture<'a, BreakerReply> {
        Box::pin(self.breaker_op(name, spec, now_us, op))
    }

    fn budget<'a>(
        &'a self,
        name: &'a str,
        spec: &'a BudgetSpec,
        now_us: u64,
        op: BudgetOp,
    ) -> StoreFuture<'a, BudgetReply> {
        Box::pin(self.budget_op(name, spec, now_us, op))
    }

    fn describe(&self) -> String {
        self.shown.clone()
    }
}
