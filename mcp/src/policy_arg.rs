//! `reliable_http_call`'s `policy`: a policy format stack (`reliable_core::policy::Layer`, as
//! serde writes it in JSON, the format of the simulator's scenario files), loaded by
//! [`reliable::policy`], the loader every `Reliable` is built from, into the instance the call
//! goes through. An agent runs exactly the policy an SRE tried in the simulator.
//!
//! The argument is hostile input:
//! - its size and nesting are bounded before it is read as a policy ([`MAX_POLICY_BYTES`],
//!   [`MAX_POLICY_DEPTH`]);
//! - it is read by the core's engine ([`reliable_core::engine::Stack::from_layer`], which
//!   validates each layer's config where it is written) and loaded by `reliable::policy`, and
//!   every refusal names its place in the argument (`policy.inner: failure_rate: ...`), scrubbed
//!   of the call's credentials and clipped;
//! - what it may ask for is held to the server's own ceilings, the operator's settings
//!   ([`Limits`]), the same as the seed arguments': at most `max_attempts` attempts
//!   (`--max-attempts`), each at most the operator's per-attempt timeout, a deadline of at most
//!   the operator's whole-call time (waits and server delays included), and at most `max_hedges`
//!   hedges per attempt (`--max-hedges`). A value over a ceiling is refused, saying the ceiling
//!   and the flag that sets it; an absent timeout or deadline is the ceiling.
//!
//! Its state (breaker, budget, ledger, throttle, limits, hedge estimate) is as its layers'
//! `scope` says, as `reliable::policy` builds instances: `PerClient` (the default), each call is
//! its own client and builds its instance afresh, so a policy cannot fill or trip state other
//! calls share; `Shared`, the server keeps the instance for that policy (the same layers, read
//! and written back canonically, and the same idempotence) across calls, like a `create_breaker`
//! breaker, so a breaker opened by one call refuses the next. Kept policies are bounded
//! ([`Kept`]): at most [`MAX_KEPT`]; when the store is full, one unused for [`KEPT_IDLE`] makes
//! room, else one of the client keeping the most (if it keeps more than the caller), else the
//! call is refused saying when a slot frees up: one client cannot lock others out. `Fleet` (a
//! breaker or a retry budget kept in the server's `--store`, which a policy names
//! [`FLEET_STORE_NAME`]), the state is the store's, shared with every server on it; the
//! instance that reads it is kept as a `Shared` one is (a fresh one per call would have no view
//! of the store and decide alone). Without a store, or in `mode: Exact`, it is refused.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use reliable::Reliable;
use reliable::fleet::Store;
use reliable::policy::{Plan, PolicyEntry, PolicyLayer, Route, Scope, Stores};
use reliable_core::Duration;
use reliable_core::hedge::HedgeDelay;
use reliable_core::policy::Layer;
use serde_json::Value;

use crate::instrument::Instrument;
use crate::redact::Secrets;
use crate::ssrf::Limits;

/// Largest `policy`, in bytes of compact JSON.
pub const MAX_POLICY_BYTES: usize = 16 * 1024;
/// Deepest `policy`, in JSON objects and arrays nested.
pub const MAX_POLICY_DEPTH: usize = 40;
/// Most policies with `Shared` state the server keeps at once.
pub const MAX_KEPT: usize = 64;
/// A kept policy unused this long may be dropped to make room for another.
pub const KEPT_IDLE: StdDuration = StdDuration::from_secs(600);

/// Who makes a call: over HTTP, its session's number; over stdio, the one client.
pub type Client = u64;

/// One kept instance.
#[derive(Debug)]
struct Entry {
    reliable: Reliable,
    /// The client whose call made it (the one it counts against).
    owner: Client,
    used: tokio::time::Instant,
}

/// The instances of policies whose state is `Shared`, kept across calls: keyed by the policy
/// (its layers as the server read them, written back canonically, and whether the request is
/// idempotent), at most [`MAX_KEPT`].
#[derive(Debug, Default)]
pub struct Kept {
    entries: Mutex<BTreeMap<(String, bool), Entry>>,
}

impl Kept {
    /// How many are kept.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// None are kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, bool), Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The instance kept for `key`, or the one `build` makes, kept for `client` if there is room
    /// (see the [module docs](self)); at `now`.
    pub fn get_or_keep(
        &self,
        key: (String, bool),
        client: Client,
        now: tokio::time::Instant,
        build: impl FnOnce() -> Result<Reliable, String>,
    ) -> Result<Reliable, String> {
        let mut entries = self.lock();
        if let Some(e) = entries.get_mut(&key) {
            e.used = now;
            return Ok(e.reliable.clone());
        }
        if entries.len() >= MAX_KEPT {
            make_room(&mut entries, client, now)?;
        }
        let reliable = build()?;
        entries.insert(
            key,
            Entry {
                reliable: reliable.clone(),
                owner: client,
                used: now,
            },
        );
        Ok(reliable)
    }
}

/// Drops one kept instance for `client`'s new one: the least recently used of those idle for
/// [`KEPT_IDLE`]; else the least recently used of the client keeping the most, if it keeps more
/// than `client`; else refuses, saying when one will be idle.
fn make_room(
    entries: &mut BTreeMap<(String, bool), Entry>,
    client: Client,
    now: tokio::time::Instant,
) -> Result<(), String> {
    fn lru(
        entries: &BTreeMap<(String, bool), Entry>,
        owner: Option<Client>,
    ) -> Option<((String, bool), tokio::time::Instant)> {
        entries
            .iter()
            .filter(|(_, e)| owner.is_none_or(|o| e.owner == o))
            .min_by_key(|(_, e)| e.used)
            .map(|(k, e)| (k.clone(), e.used))
    }
    let Some((oldest, used)) = lru(entries, None) else {
        return Ok(());
    };
    let idle = now.saturating_duration_since(used);
    if idle >= KEPT_IDLE {
        entries.remove(&oldest);
        return Ok(());
    }
    let mut counts: BTreeMap<Client, usize> = BTreeMap::new();
    for e in entries.values() {
        *counts.entry(e.owner).or_default() += 1;
    }
    let mine = counts.get(&client).copied().unwrap_or(0);
    let (top, most) = counts
        .iter()
        .max_by_key(|&(&o, &n)| (n, std::cmp::Reverse(o)))
        .map(|(&o, &n)| (o, n))
        .unwrap_or((client, 0));
    if most > mine
        && let Some((k, _)) = lru(entries, Some(top))
    {
        entries.remove(&k);
        return Ok(());
    }
    let wait = KEPT_IDLE - idle;
    Err(format!(
        "policy: the server keeps at most {MAX_KEPT} policies with Shared state, and this client \
         keeps {mine} of them, at least as many as any other client; none has been unused for {} s yet: \
         come back in {} s (when the least recently used may make room), or give the layers \
         `scope: PerClient` (state for this call only)",
        KEPT_IDLE.as_secs(),
        wait.as_secs() + u64::from(wait.subsec_nanos() > 0),
    ))
}

/// Whether the route's stateful layers are `Shared` (a route mixing scopes is refused by its
/// builder; one with no state keeps nothing worth keeping).
fn shared(route: &Route) -> bool {
    let estimates = route
        .hedge
        .filter(|h| matches!(h.config.delay, HedgeDelay::Quantile(_)))
        .map(|h| h.scope);
    route
        .budget
        .map(|b| b.1)
        .into_iter()
        .chain(route.breaker.map(|b| b.scope))
        .chain(route.throttle.map(|t| t.scope))
        .chain(estimates)
        .chain(route.ledger.map(|l| l.scope))
        .chain(route.limit.map(|l| l.scope))
        .chain(route.rate_limit.map(|r| r.scope))
        .any(|s| s == Scope::Shared)
}

/// A writer that only counts, and stops past a limit.
struct Counter {
    n: usize,
    limit: usize,
}

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.n += buf.len();
        if self.n > self.limit {
            return Err(std::io::Error::other("over the limit"));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The nesting depth of `v`, stopping once past `limit` (iterative: no recursion on input).
fn deeper_than(v: &Value, limit: usize) -> bool {
    let mut stack = vec![(v, 1usize)];
    while let Some((v, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Object(m) => Box::new(m.values()),
            Value::Array(a) => Box::new(a.iter()),
            _ => continue,
        };
        if depth > limit {
            return true;
        }
        stack.extend(children.map(|c| (c, depth + 1)));
    }
    false
}

/// The longest an attempt may take, and the flag that sets it.
const ATTEMPT_TIME: (&str, &str) = ("the longest an attempt may take", "--max-attempt-timeout");
/// The longest a call may take, and the flag that sets it.
const CALL_TIME: (&str, &str) = ("the longest a call may take", "--max-call-time");

fn over(
    field: &str,
    given: Duration,
    ceiling: Duration,
    (what, flag): (&str, &str),
) -> Result<(), String> {
    if given > ceiling {
        return Err(format!(
            "{field}: {given} is over the server's ceiling of {ceiling} ({what}, set by {flag})"
        ));
    }
    Ok(())
}

/// `n hedge` or `n hedges`.
pub(crate) fn hedges(n: u32) -> String {
    format!("{n} hedge{}", if n == 1 { "" } else { "s" })
}

fn duration(d: std::time::Duration) -> Duration {
    Duration::from_nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Holds every layer of `stack` to the server's ceilings, naming the field that is over one.
fn bounded(stack: &PolicyLayer, limits: &Limits) -> Result<(), String> {
    let attempt_max = duration(limits.max_attempt_timeout);
    let call_max = duration(limits.max_call_time);
    let mut todo = vec![(stack, "policy".to_string())];
    while let Some((layer, path)) = todo.pop() {
        match layer {
            Layer::Call { timeout, .. } => {
                if let Some(t) = timeout {
                    over(&format!("{path}.timeout"), *t, attempt_max, ATTEMPT_TIME)?;
                }
            }
            Layer::Retry { policy, inner, .. } => {
                let field = format!("{path}.policy.max_attempts");
                let ceiling = limits.max_attempts;
                match policy.max_attempts {
                    None => {
                        return Err(format!(
                            "{field}: unbounded attempts: expected at most {ceiling} (the server's ceiling, set by --max-attempts)"
                        ));
                    }
                    Some(n) if n > ceiling => {
                        return Err(format!(
                            "{field}: {n} is over the server's ceiling of {ceiling} attempts (set by --max-attempts)"
                        ));
                    }
                    Some(_) => {}
                }
                if let Some(t) = policy.attempt_timeout {
                    over(
                        &format!("{path}.policy.attempt_timeout"),
                        t,
                        attempt_max,
                        ATTEMPT_TIME,
                    )?;
                }
                if let Some(d) = policy.deadline {
                    over(&format!("{path}.policy.deadline"), d, call_max, CALL_TIME)?;
                }
                over(
                    &format!("{path}.policy.max_server_delay"),
                    policy.max_server_delay,
                    call_max,
                    CALL_TIME,
                )?;
                todo.push((inner, format!("{path}.inner")));
            }
            Layer::Hedge { config, inner, .. } => {
                if config.max_hedges > limits.max_hedges {
                    return Err(format!(
                        "{path}.config.max_hedges: {} is over the server's ceiling of {} per attempt (set by --max-hedges)",
                        config.max_hedges,
                        hedges(limits.max_hedges),
                    ));
                }
                todo.push((inner, format!("{path}.inner")));
            }
            Layer::Breaker { inner, .. }
            | Layer::Throttle { inner, .. }
            | Layer::Ledger { inner, .. }
            | Layer::Limit { inner, .. }
            | Layer::RateLimit { inner, .. }
            | Layer::Llm { inner, .. } => todo.push((inner, format!("{path}.inner"))),
            Layer::Fallback(layers) => {
                for (i, l) in layers.iter().enumerate() {
                    todo.push((l, format!("{path}[{i}]")));
                }
            }
        }
    }
    Ok(())
}

/// The loader's path (`stack.inner`) as the argument's (`policy.inner`).
fn argument_path(field: &str) -> String {
    match field.strip_prefix("stack") {
        Some(rest) => format!("policy{rest}"),
        None => format!("policy.{field}"),
    }
}

/// The instance `policy` describes, for a request that is `idempotent` (or not), within
/// `limits`, built afresh whatever its scope; or why not, naming the field. Messages are
/// scrubbed of `secrets`.
pub fn instance(
    policy: &Value,
    idempotent: bool,
    limits: &Limits,
    instrument: &Instrument,
    secrets: &Secrets,
) -> Result<Reliable, String> {
    load(policy, idempotent, limits, instrument, None)
        .and_then(Loaded::build)
        .map_err(|e| secrets.scrub(&e))
}

/// The instance a call from `client` goes through: as [`instance`], but a policy whose state is
/// `Shared` gets the instance `kept` keeps for it (made and kept on its first call, room
/// permitting).
#[allow(clippy::too_many_arguments)]
pub fn kept_instance(
    policy: &Value,
    idempotent: bool,
    limits: &Limits,
    instrument: &Instrument,
    secrets: &Secrets,
    kept: &Kept,
    client: Client,
    store: Option<&Arc<dyn Store>>,
) -> Result<Reliable, String> {
    let scrub = |e: String| secrets.scrub(&e);
    let loaded = load(policy, idempotent, limits, instrument, store).map_err(scrub)?;
    if !loaded.shared {
        return loaded.build().map_err(scrub);
    }
    let key = (loaded.key.clone(), idempotent);
    kept.get_or_keep(key, client, tokio::time::Instant::now(), || loaded.build())
        .map_err(scrub)
}

/// The name a `policy` argument's `Fleet` scope gives the server's `--store`: the name the
/// simulator's scenarios give their store (`scenarios/fleet-breaker.ron`), so their policies run
/// here unchanged. Another name is refused, naming this one.
pub const FLEET_STORE_NAME: &str = "redis";

/// Why a `Fleet` scope is refused by a server without a store.
const NO_STORE: &str = "scope Fleet keeps its state in the server's store, and this server has none: expected PerClient or Shared (or a server started with --store redis://HOST:PORT, which a policy names \"redis\")";

/// A policy read, checked and ready to build.
struct Loaded {
    builder: reliable::Builder,
    /// Its stateful layers are `Shared`, or kept in the server's store (`Fleet`: an instance
    /// built per call would have no view of the store yet, and decide alone).
    shared: bool,
    /// Its layers as read, written back as compact JSON (the same policy, however written).
    key: String,
}

impl Loaded {
    fn build(self) -> Result<Reliable, String> {
        self.builder.build().map_err(|e| format!("policy: {e}"))
    }
}

fn load(
    policy: &Value,
    idempotent: bool,
    limits: &Limits,
    instrument: &Instrument,
    store: Option<&Arc<dyn Store>>,
) -> Result<Loaded, String> {
    let mut counter = Counter {
        n: 0,
        limit: MAX_POLICY_BYTES,
    };
    if serde_json::to_writer(&mut counter, policy).is_err() {
        return Err(format!(
            "policy: over the limit of {MAX_POLICY_BYTES} bytes (as compact JSON)"
        ));
    }
    if deeper_than(policy, MAX_POLICY_DEPTH) {
        return Err(format!(
            "policy: nested deeper than {MAX_POLICY_DEPTH} levels: expected a flatter policy"
        ));
    }
    let stack: PolicyLayer = serde_path_to_error::deserialize(policy).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        if path == "." {
            format!("policy: {inner}")
        } else {
            format!("policy.{path}: {inner}")
        }
    })?;
    bounded(&stack, limits)?;
    // The engine's reading first: it validates every layer's config where it is written.
    let read = match store {
        Some(_) => reliable_core::engine::Stack::from_layer_with_store(&stack),
        None => reliable_core::engine::Stack::from_layer(&stack),
    };
    read.map_err(|e| {
        let why = if e.message == reliable_core::policy::FLEET_NO_STORE {
            NO_STORE
        } else {
            &e.message
        };
        format!("{}: {why}", argument_path(&e.path))
    })?;
    let key = serde_json::to_string(&stack).map_err(|e| format!("policy: {e}"))?;
    let entry = PolicyEntry {
        name: "policy".into(),
        stack,
    };
    let refused = |e: reliable::policy::PolicyError| match &e.field {
        Some(f) => format!("{}: {}", argument_path(f), e.message),
        None => format!("policy: {}", e.message),
    };
    let plan = Plan::new(&entry, "policy").map_err(refused)?;
    let mut route = plan.route().map_err(refused)?.clone();
    if route.llm_signals {
        return Err(format!(
            "{}: Llm signals: this tool classifies answers by HTTP rules; expected no Llm layer, or `signals: false`",
            argument_path(&route.path)
        ));
    }
    if route.hedge.is_some() && !idempotent {
        return Err(
            "policy: a Hedge sends the request twice: expected a GET, HEAD, PUT, DELETE or OPTIONS, or `idempotent: true`"
                .into(),
        );
    }
    // An absent timeout or deadline is the server's ceiling; a request that is not idempotent is
    // not retried after a timeout (it may have been received).
    let retry = &mut route.retry;
    let attempt_max = duration(limits.max_attempt_timeout);
    let call_max = duration(limits.max_call_time);
    retry.attempt_timeout = Some(
        retry
            .attempt_timeout
            .map_or(attempt_max, |t| t.min(attempt_max)),
    );
    retry.deadline = Some(retry.deadline.map_or(call_max, |d| d.min(call_max)));
    retry.retry_timeouts &= idempotent;
    let fleet = route.is_fleet();
    let shared = shared(&route) || fleet;
    let builder = match store.filter(|_| fleet) {
        Some(store) => {
            let stores = Stores::new().add(FLEET_STORE_NAME, store.clone());
            route.fleet_builder(&stores).map_err(refused)?
        }
        None => route.builder().map_err(refused)?,
    };
    Ok(Loaded {
        builder: instrument.apply(builder),
        shared,
        key,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn load_default(v: Value) -> Result<Reliable, String> {
        load(&v, true, &Limits::default(), &Instrument::default(), None).and_then(Loaded::build)
    }

    fn dummy() -> Result<Reliable, String> {
        Reliable::builder("kept").build().map_err(|e| e.to_string())
    }

    /// `policy` for an idempotent call of `client`, kept in `kept` if its scope says so, with the
    /// server's defaults and `store`.
    fn keep_policy(
        kept: &Kept,
        policy: &Value,
        client: Client,
        store: Option<&Arc<dyn Store>>,
    ) -> Result<Reliable, String> {
        kept_instance(
            policy,
            true,
            &Limits::default(),
            &Instrument::default(),
            &Secrets::default(),
            kept,
            client,
            store,
        )
    }

    fn key(i: usize) -> (String, bool) {
        (format!("policy {i}"), true)
    }

    /// Keeps `key` for `client` at `at`, answering whether it was built (not kept already).
    fn keep(
        kept: &Kept,
        key: (String, bool),
        client: Client,
        at: tokio::time::Instant,
    ) -> Result<bool, String> {
        let mut built = false;
        kept.get_or_keep(key, client, at, || {
            built = true;
            dummy()
        })?;
        Ok(built)
    }

    #[test]
    fn a_shared_policy_is_kept_once_and_a_per_client_one_never() {
        let shared = |scope: &str| {
            json!({"Retry": {
                "policy": {"max_attempts": 2, "backoff": {"shape": {"Constant": {"delay": "10ms"}}}},
                "budget": "Unlimited",
                "budget_scope": scope,
                "inner": {"Call": {"downstream": "api", "timeout": "1s"}}
            }})
        };
        let kept = Kept::default();
        let get = |v: &Value, client| {
            let _rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .unwrap()
                .enter();
            keep_policy(&kept, v, client, None)
        };
        get(&shared("PerClient"), 1).unwrap();
        assert!(kept.is_empty(), "a PerClient policy is each call's own");
        get(&shared("Shared"), 1).unwrap();
        get(&shared("Shared"), 2).unwrap();
        assert_eq!(kept.len(), 1, "one instance for one policy, whoever calls");
    }

    /// A `Fleet` scope: refused without a store, saying how to start one; with one, its instance
    /// is kept (every call reads one view of the store), and another store name or exact mode is
    /// refused at the field.
    #[test]
    fn a_fleet_policy_is_refused_without_a_store_and_kept_with_one() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let _inside = rt.enter();
        let fleet = |store: &str, mode: Value| {
            json!({"Breaker": {
                "config": {"consecutive_failures": 3},
                "scope": {"Fleet": {"store": store, "mode": mode}},
                "inner": {"Call": {"downstream": "orders", "timeout": "1s"}}
            }})
        };
        let cached = json!({"Cached": {"refresh": "100ms"}});
        let e = load_default(fleet("redis", cached.clone())).unwrap_err();
        assert!(
            e.starts_with("policy.scope: scope Fleet keeps its state in the server's store")
                && e.contains("--store redis://"),
            "{e}"
        );
        let store: Arc<dyn Store> = Arc::new(reliable::fleet::MemoryStore::new("mcp-test"));
        let kept = Kept::default();
        let get = |v: &Value, client| keep_policy(&kept, v, client, Some(&store));
        get(&fleet("redis", cached.clone()), 1).unwrap();
        get(&fleet("redis", cached.clone()), 2).unwrap();
        assert_eq!(kept.len(), 1, "one instance reads the store for every call");
        let e = get(&fleet("orders", cached), 1).unwrap_err();
        assert!(
            e.starts_with("policy.scope.store: ")
                && e.contains(r#"no store named "orders""#)
                && e.contains(r#"["redis"]"#),
            "{e}"
        );
        let e = get(&fleet("redis", json!("Exact")), 1).unwrap_err();
        assert!(e.starts_with("policy.scope.mode: mode Exact"), "{e}");
        assert_eq!(kept.len(), 1);
    }

    /// The store as an attack: one client keeping as many policies as it can never locks another
    /// out; it is refused itself, told when to come back, once it keeps more than anyone.
    #[test]
    fn one_client_filling_the_store_locks_no_other_out() {
        let kept = Kept::default();
        let t0 = tokio::time::Instant::now();
        for i in 0..MAX_KEPT {
            assert!(keep(&kept, key(i), 1, t0).unwrap());
        }
        assert_eq!(kept.len(), MAX_KEPT);
        let t1 = t0 + StdDuration::from_secs(1);
        // Another client gets room: the flooder's least recently used goes.
        assert!(keep(&kept, key(1000), 2, t1).unwrap());
        assert_eq!(kept.len(), MAX_KEPT);
        // The flooder keeps the most, and none is idle: refused, told when to come back.
        let e = keep(&kept, key(2000), 1, t1).unwrap_err();
        assert!(e.contains("come back in 599 s"), "{e}");
        assert!(e.contains("scope: PerClient"), "{e}");
        // A third client still gets room; a policy already kept is shared, never refused.
        assert!(keep(&kept, key(3000), 3, t1).unwrap());
        assert!(!keep(&kept, key(5), 3, t1).unwrap());
        assert!(!keep(&kept, key(1000), 1, t1).unwrap());
        assert_eq!(kept.len(), MAX_KEPT);
        // Once one has been unused long enough, it makes room for anyone.
        assert!(keep(&kept, key(2000), 1, t0 + KEPT_IDLE).unwrap());
        assert_eq!(kept.len(), MAX_KEPT);
    }

    /// Many clients with one each: a newcomer gets room, one asking for a second is refused.
    #[test]
    fn fair_shares_when_every_client_keeps_one() {
        let kept = Kept::default();
        let t0 = tokio::time::Instant::now();
        for i in 0..MAX_KEPT {
            keep(&kept, key(i), i as Client, t0).unwrap();
        }
        let e = keep(&kept, key(1000), 0, t0).unwrap_err();
        assert!(e.contains("keeps 1 of them"), "{e}");
        assert!(keep(&kept, key(1001), 999, t0).unwrap());
        assert_eq!(kept.len(), MAX_KEPT);
    }

    #[test]
    fn depth_is_counted_without_recursion() {
        let mut v = json!(1);
        for _ in 0..1_000 {
            v = Value::Array(vec![v]);
        }
        assert!(deeper_than(&v, MAX_POLICY_DEPTH));
        assert!(!deeper_than(&json!({"a": [{"b": 1}]}), 3));
        assert!(deeper_than(&json!({"a": [{"b": {}}]}), 3));
    }

    #[test]
    fn a_retry_policy_loads_with_ceilings_filled_in() {
        let rel = load_default(json!({"Retry": {
            "policy": {"max_attempts": 3, "backoff": {"shape": {"Constant": {"delay": "10ms"}}}},
            "inner": {"Call": {"downstream": "api", "timeout": "1s"}}
        }}))
        .unwrap();
        assert_eq!(rel.label(), "retry(api)");
    }

    #[test]
    fn refusals_name_the_field_and_the_ceiling() {
        let e = load_default(json!({"Retry": {
            "policy": {"max_attempts": 50, "backoff": {"shape": {"Constant": {"delay": "10ms"}}}},
            "inner": {"Call": {"downstream": "api"}}
        }}))
        .unwrap_err();
        assert_eq!(
            e,
            "policy.policy.max_attempts: 50 is over the server's ceiling of 5 attempts (set by --max-attempts)"
        );
        let e = load_default(json!({"Call": {"downstream": "api", "timeout": "10m"}})).unwrap_err();
        assert!(e.starts_with("policy.timeout: 600s"), "{e}");
        assert!(e.contains("ceiling of 30s"), "{e}");
        assert!(e.contains("set by --max-attempt-timeout"), "{e}");
        let e = load_default(json!({"Retry": {
            "policy": {"max_attempts": 2, "deadline": "1h", "backoff": {"shape": {"Constant": {"delay": "10ms"}}}},
            "inner": {"Call": {"downstream": "api"}}
        }}))
        .unwrap_err();
        assert!(
            e.starts_with("policy.policy.deadline: 3600s is over the server's ceiling of 120s")
                && e.contains("set by --max-call-time"),
            "{e}"
        );
        let e = load_default(json!({"Circuit": {}})).unwrap_err();
        assert!(e.starts_with("policy: unknown variant `Circuit`"), "{e}");
    }

    fn retry(attempts: u32, inner: Value) -> Value {
        json!({"Retry": {
            "policy": {"max_attempts": attempts, "backoff": {"shape": {"Constant": {"delay": "10ms"}}}},
            "inner": inner,
        }})
    }

    fn hedge(n: u32) -> Value {
        json!({"Hedge": {
            "config": {"delay": {"Fixed": "10ms"}, "max_hedges": n},
            "idempotent": true,
            "inner": {"Call": {"downstream": "api", "timeout": "1s"}},
        }})
    }

    fn load_with(v: Value, max_attempts: u32, max_hedges: u32) -> Result<Reliable, String> {
        let limits = Limits {
            max_attempts,
            max_hedges,
            ..Limits::default()
        };
        load(&v, true, &limits, &Instrument::default(), None).and_then(Loaded::build)
    }

    /// The ceilings are the operator's settings: a policy up to them loads, one past them is
    /// refused naming the ceiling as configured and its flag, wherever the layer sits.
    #[test]
    fn the_configured_ceilings_are_the_ones_held() {
        // The defaults: 5 attempts, 1 hedge.
        load_with(retry(5, hedge(1)), 5, 1).unwrap();
        let e = load_with(retry(6, hedge(1)), 5, 1).unwrap_err();
        assert_eq!(
            e,
            "policy.policy.max_attempts: 6 is over the server's ceiling of 5 attempts (set by --max-attempts)"
        );
        let e = load_with(retry(5, hedge(2)), 5, 1).unwrap_err();
        assert_eq!(
            e,
            "policy.inner.config.max_hedges: 2 is over the server's ceiling of 1 hedge per attempt (set by --max-hedges)"
        );
        // Raised: what the defaults refused loads; one past the new ceiling is refused, saying it.
        load_with(retry(6, hedge(2)), 6, 2).unwrap();
        load_with(retry(20, hedge(3)), 20, 3).unwrap();
        let e = load_with(retry(7, hedge(2)), 6, 2).unwrap_err();
        assert!(
            e.contains("7 is over the server's ceiling of 6 attempts"),
            "{e}"
        );
        let e = load_with(retry(6, hedge(3)), 6, 2).unwrap_err();
        assert!(
            e.contains("3 is over the server's ceiling of 2 hedges"),
            "{e}"
        );
        let e = load_with(
            json!({"Retry": {"policy": {"max_attempts": null, "backoff": {"shape": {"Constant": {"delay": "10ms"}}}},
                   "inner": {"Call": {"downstream": "api"}}}}),
            9,
            1,
        )
        .unwrap_err();
        assert!(
            e.contains("expected at most 9 (the server's ceiling, set by --max-attempts)"),
            "{e}"
        );
        // Lowered: no hedging at all.
        let e = load_with(hedge(1), 5, 0).unwrap_err();
        assert!(
            e.ends_with(
                "1 is over the server's ceiling of 0 hedges per attempt (set by --max-hedges)"
            ),
            "{e}"
        );
    }
}
