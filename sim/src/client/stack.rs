//! A policy's layers compiled into a flat array of nodes with parent links.
//!
//! Node 0 is the outermost layer. Each node knows its parent (answers travel up), its children
//! (calls travel down), the index of its per-request frame (the state one logical request keeps in
//! that layer: a breaker permit, a fallback position) and its `served_by` label: the layer path an
//! answer produced there went through, fallbacks left out, e.g. `breaker(retry(primary))` for a
//! call to `primary` inside a retry inside a breaker, or `breaker` for a breaker's own rejection.

use reliable_core::Duration;
use reliable_core::breaker::BreakerPolicy;
use reliable_core::budget::BudgetPolicy;
use reliable_core::retry::RetryPolicy;
use reliable_core::throttle::ThrottlePolicy;

use crate::client::breakers::BreakerProto;
use crate::client::budgets::{BudgetSlot, ThrottleSlot};
use crate::client::ledgers::LedgerSlot;
use crate::model::Sampler;
use crate::scenario::{Checker, Layer, Path, ScenarioError, Scope};

/// Deepest nesting of layers.
const MAX_DEPTH: usize = 64;

/// Most hedges a `Hedge` layer may send per call (a hedged call keeps room for every copy it
/// may have in flight).
pub const MAX_HEDGES: u32 = 8;

/// What encloses a layer being compiled.
#[derive(Clone, Copy, Debug, Default)]
struct Within {
    /// The innermost enclosing ledger's slot.
    ledger: Option<u16>,
    /// Whether a retry layer encloses it.
    retry: bool,
    /// Whether it is inside a [`Chain`] (the core's call engine runs it).
    chain: bool,
    /// The depth of the enclosing chain's bottom when the chain ends in a subtree (see
    /// [`Reach`]): that layer and those it holds are nodes again. `usize::MAX` otherwise.
    bottom: usize,
}

/// What [`CompiledStack::add`] needs besides the layer.
struct Cx<'a, 'c> {
    ds_index: &'a dyn Fn(&str) -> Option<u16>,
    c: &'a Checker<'c>,
    /// The policy's `stack` field, where size errors point.
    stack: &'a Path,
    max_layers: usize,
}

impl Cx<'_, '_> {
    /// The index of downstream `name`, named in the `downstream` field of the layer at `at`.
    fn downstream(&self, name: &str, at: &Path) -> Result<u16, ScenarioError> {
        (self.ds_index)(name).ok_or_else(|| {
            self.c.fail(
                &at.field("downstream"),
                format!(
                    "no downstream named \"{name}\": expected one of {}",
                    self.c.downstream_names()
                ),
            )
        })
    }
}

/// Why the simulator refuses a `Fleet` scope elsewhere than on a `Breaker` or a `Retry`'s
/// budget.
pub const FLEET_BREAKER_ONLY: &str = "the simulator models a Fleet scope on a Breaker and on a \
                                      Retry's ratio budget so far (a fleet's bulkhead and rate \
                                      limit are not modelled yet): expected PerClient or Shared \
                                      here";

/// Why the simulator refuses a layer of the core's call engine (a `Ledger`, a `Retry`, a
/// `Throttle`, a `Breaker`, a `Limit`, a `RateLimit`, a `Hedge`) that the engine does not run
/// with the layers inside it (none the policy format accepts).
pub const ENGINE_ONLY: &str = "the simulator runs this layer in the core's call engine \
                               (reliable_core::engine), which does not run it with the layers \
                               inside it: see the order the conformance README states";

/// "No node".
pub const NONE: u16 = u16::MAX;

/// `layer` with an `Llm` directly around its innermost `Call` read as that `Call`: the LLM layer
/// is the chain's I/O (what a copy's send reserves, what its answer means), not a decision of
/// the engine's.
fn llm_as_call(layer: &Layer) -> Layer {
    let mut out = layer.clone();
    let mut at = &mut out;
    loop {
        if let Layer::Llm { inner, .. } = at
            && matches!(**inner, Layer::Call { .. })
        {
            let call = (**inner).clone();
            *at = call;
            return out;
        }
        match at.inner_mut() {
            [one] => at = one,
            _ => return out,
        }
    }
}

/// `layer` with the layer `depth` levels below it read as a `Call`: a chain's subtree, which
/// the engine sees as the call its copies make.
fn subtree_as_call(layer: &Layer, depth: usize) -> Layer {
    let mut out = layer.clone();
    let mut at = &mut out;
    for _ in 0..depth {
        match at.inner_mut() {
            [one] => at = one,
            _ => return out,
        }
    }
    *at = Layer::Call {
        downstream: String::new(),
        timeout: None,
        timeout_dist: None,
    };
    out
}

/// How far the core's call engine runs a [`Chain`] whose top is `layer`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reach {
    /// Down to its `Call` (or an `Llm` directly around it).
    Call,
    /// Down to the layer this many levels below the top, which the engine does not run in this
    /// chain (a `Fallback`, an `Llm` away from its `Call`, a layer the chain holds already):
    /// each copy of the chain's call is an invocation of it, and its answer the copy's.
    Subtree(usize),
}

/// Whether the core's call engine runs `layer` as one layer of a chain (not its bottom): every
/// layer that decides (a `Ledger`, a `Retry`, a `Throttle`, a `Breaker` of any scope, a `Limit`,
/// a `RateLimit`, a `Hedge`), not a `Call`, a `Fallback` or an `Llm`.
fn chain_layer(layer: &Layer) -> bool {
    match layer {
        Layer::Retry { .. }
        | Layer::Limit { .. }
        | Layer::RateLimit { .. }
        | Layer::Hedge { .. } => true,
        Layer::Breaker { .. } | Layer::Throttle { .. } | Layer::Ledger { .. } => true,
        Layer::Call { .. } | Layer::Fallback(_) | Layer::Llm { .. } => false,
    }
}

/// How far the core's call engine runs `layer` and the layers inside it as one [`Chain`], if
/// it does: the layers down to the first the engine does not run in this chain are a chain it
/// accepts ([`reliable_core::engine::Stack::from_layer_with_store`]), with more than a bare
/// `Call`. That first layer is the chain's `Call` ([`Reach::Call`]; an `Llm` directly around
/// it is the call's I/O), or a subtree its copies invoke ([`Reach::Subtree`]): a layer the
/// engine does not run, one a chain holds once met a second time (a `Retry` inside a `Retry`,
/// a second breaker: it tops a chain of its own), or anything below a `Hedge` but its call.
pub(crate) fn engine_reach(layer: &Layer) -> Option<Reach> {
    if !chain_layer(layer) {
        return None;
    }
    let mut truncated = layer.clone();
    let mut at = &mut truncated;
    let mut depth = 0;
    // The kinds of layer the chain holds so far (one bit each), and whether a hedge is among them.
    let mut held = 0u8;
    let mut hedged = false;
    let reach = loop {
        if let Layer::Llm { inner, .. } = at
            && matches!(**inner, Layer::Call { .. })
        {
            let call = (**inner).clone();
            *at = call;
            break Reach::Call;
        }
        let kind = 1u8 << (layer_kind(at) & 7);
        match at {
            Layer::Call { .. } => break Reach::Call,
            _ if hedged || !chain_layer(at) || held & kind != 0 => {
                // The engine sees a call where the subtree is.
                *at = Layer::Call {
                    downstream: String::new(),
                    timeout: None,
                    timeout_dist: None,
                };
                break Reach::Subtree(depth);
            }
            _ => {}
        }
        held |= kind;
        hedged = matches!(at, Layer::Hedge { .. });
        match at.inner_mut() {
            [one] => at = one,
            _ => return None,
        }
        depth += 1;
    };
    engine_stack(&truncated).ok()?;
    Some(reach)
}

/// A number per kind of layer a chain holds at most once.
fn layer_kind(layer: &Layer) -> u8 {
    match layer {
        Layer::Ledger { .. } => 0,
        Layer::Retry { .. } => 1,
        Layer::Throttle { .. } => 2,
        Layer::Breaker { .. } => 3,
        Layer::Limit { .. } => 4,
        Layer::RateLimit { .. } => 5,
        Layer::Hedge { .. } => 6,
        Layer::Call { .. } | Layer::Fallback(_) | Layer::Llm { .. } => 7,
    }
}

/// The core's reading of a chain's layers (`layer`, cut at its call): its plan. A breaker per
/// host is read as a client's (the core refuses `PerHost`, having one host per downstream): the
/// world keeps its breakers, one per replica, and picks among them as the engine asks.
fn engine_stack(
    layer: &Layer,
) -> Result<reliable_core::engine::Stack, reliable_core::engine::StackError> {
    let mut layer = layer.clone();
    let mut at = &mut layer;
    loop {
        if let Layer::Breaker { scope, .. } = at
            && *scope == Scope::PerHost
        {
            *scope = Scope::PerClient;
        }
        match at.inner_mut() {
            [one] => at = one,
            _ => break,
        }
    }
    reliable_core::engine::Stack::from_layer_with_store(&layer)
}

/// One compiled layer.
#[derive(Clone, Debug)]
pub struct Node {
    /// What it does.
    pub kind: NodeKind,
    /// The enclosing layer, or [`NONE`] for the outermost.
    pub parent: u16,
    /// Index of this node's per-request frame, or [`NONE`] if it keeps no per-request state.
    pub frame: u16,
    /// The layer path of answers produced here.
    pub served_by: String,
    /// On the top layer of a [`Chain`] and on its `Call`: the chain's index in
    /// [`CompiledStack::chains`]; [`NONE`] elsewhere.
    pub chain: u16,
    /// On the subtree a [`Chain`]'s copies invoke (see [`Chain::subtree`]): the chain's index;
    /// [`NONE`] elsewhere.
    pub subtree_of: u16,
}

/// Layers the core's call engine runs as one ([`reliable_core::engine`]): a chain of `Ledger`,
/// `Retry` and the gates (`Throttle`, `Breaker`, `Limit`, `RateLimit`), each at most once, then
/// an optional `Hedge`, down to a `Call` (or an `Llm` directly around it), or down to a subtree
/// it does not run (see [`Reach`]), which each copy invokes. Every such chain of a stack is run
/// by the engine, a `CallState` per logical request; the world only sends its copies, keeps
/// their timers and hands their answers back, and keeps the state the engine draws from (a
/// `Fleet` retry budget and breaker with their stores, the breakers of a breaker per host, the
/// world's balancer picking the replica as the engine asks). Every decision layer of a stack is
/// in a chain (a stack the engine would not run is refused at load: [`ENGINE_ONLY`]); a chain
/// may sit inside a node of the world's own (a `Fallback`, an `Llm`).
#[derive(Clone, Debug)]
pub struct Chain {
    /// Its index in [`CompiledStack::chains`].
    pub index: u16,
    /// Its outermost layer: the chain starts when this node is invoked, and its answer goes up
    /// from here.
    pub top: u16,
    /// Its `Call` node, or the subtree its copies invoke (`subtree`).
    pub call: u16,
    /// The engine runs it down to a subtree, not a `Call`: each copy invokes `call`, and the
    /// answer that comes up from it is the copy's.
    pub subtree: bool,
    /// What the policy says about the whole call.
    pub plan: reliable_core::engine::Plan,
    /// The chain's layers that keep state, by node ([`NONE`]: none): the breaker, the retry (its
    /// budget), the throttle, the hedge, the limit and the rate limit.
    pub breaker: u16,
    /// See [`Chain::breaker`].
    pub retry: u16,
    /// See [`Chain::breaker`].
    pub throttle: u16,
    /// The slot of the ledger, its own or the one enclosing it (which its breaker's probes,
    /// its hedges and its retries draw from).
    pub ledger: Option<u16>,
    /// Whether the ledger is the chain's own (each call deposits in it).
    pub own_ledger: bool,
    /// See [`Chain::breaker`].
    pub hedge: u16,
    /// See [`Chain::breaker`].
    pub limit: u16,
    /// See [`Chain::breaker`].
    pub rate: u16,
    /// The `Llm` layer directly around the `Call`, if any: the world's I/O of each copy (its
    /// spend reservation, the provider's signals), run as the `Llm` node runs outside a chain.
    pub llm: u16,
    /// Copies its call may have out at once: 1, or 1 + its hedge's `max_hedges`.
    pub copies: u32,
}

/// A compiled layer.
// Nodes are few (one per layer of a stack) and read on every call: keep them inline.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum NodeKind {
    /// A call to downstream `ds`.
    Call {
        /// Downstream index.
        ds: u16,
        /// Per-call timeout.
        timeout: Option<Duration>,
        /// Per-request timeout distribution (each logical request draws once, keyed by its
        /// number).
        timeout_dist: Option<Sampler>,
    },
    /// A circuit breaker.
    Breaker {
        /// A fresh breaker for the validated policy; each client (or the shared scope) starts
        /// from a copy with a seed of its own.
        breaker: BreakerProto,
        /// Per client, shared, or per client and per host (`PerHost`: its `inner` is a `Call`).
        scope: Scope,
        /// With `PerHost` scope, the replicas its call's balancer picks from (one breaker each,
        /// per client); 1 otherwise.
        hosts: u32,
        /// The protected layer.
        inner: u16,
        /// Index among the stack's breakers (state storage and trace columns).
        slot: u16,
        /// With `Fleet` scope, the index of its store among the scenario's; [`NONE`] otherwise.
        store: u16,
    },
    /// A retry policy, with a budget.
    Retry {
        /// A fresh budget for the validated budget policy (unlimited when the scenario sets
        /// none); each client (or the shared scope) starts from a copy.
        budget: BudgetSlot,
        /// Per client or shared budget.
        scope: Scope,
        /// The retried layer.
        inner: u16,
        /// Index among the stack's budgets.
        slot: u16,
        /// A `Fleet` budget scope: its store (index among the scenario's), and one slot of the
        /// budget's window (ns); [`NONE`] and 0 otherwise.
        store: u16,
        /// One slot of a fleet budget's window, ns.
        width_ns: u64,
    },
    /// Adaptive throttling.
    Throttle {
        /// A fresh throttle for the validated policy; each client (or the shared scope) starts
        /// from a copy.
        throttle: ThrottleSlot,
        /// Per client or shared.
        scope: Scope,
        /// The protected layer.
        inner: u16,
        /// Index among the stack's throttles.
        slot: u16,
    },
    /// Hedged calls.
    Hedge {
        /// A fresh hedger (no latency recorded) for the validated policy; each client (or the
        /// shared scope) starts from a copy.
        hedger: reliable_core::hedge::Hedger,
        /// Per client or shared latency estimate.
        scope: Scope,
        /// The hedged `Call` node.
        inner: u16,
        /// Index among the stack's hedgers.
        slot: u16,
    },
    /// A ledger of extra attempts.
    Ledger {
        /// A fresh ledger for the validated config; each client (or the shared scope) starts
        /// from a copy.
        ledger: LedgerSlot,
        /// Per client or shared.
        scope: Scope,
        /// What draws from it.
        inner: u16,
        /// Index among the stack's ledgers.
        slot: u16,
    },
    /// A concurrency limit.
    Limit {
        /// A fresh limiter for the validated policy; each client (or the shared scope) starts
        /// from a copy.
        limiter: reliable_core::limit::Limiter,
        /// Per client or shared.
        scope: Scope,
        /// What it admits calls to.
        inner: u16,
        /// Index among the stack's limiters.
        slot: u16,
    },
    /// A client-side rate limit.
    RateLimit {
        /// A fresh rate limiter (full burst) for the validated policy; each client (or the
        /// shared scope) starts from a copy.
        limiter: reliable_core::limit::RateLimiter,
        /// Per client or shared.
        scope: Scope,
        /// What it admits calls to.
        inner: u16,
        /// Index among the stack's rate limiters.
        slot: u16,
    },
    /// Try each child in turn until one succeeds.
    Fallback {
        /// The children, in order.
        children: Vec<u16>,
    },
    /// An LLM client: provider signals, a spend breaker, proactive quotas.
    Llm {
        /// The `LlmProvider` downstream called inside.
        ds: u16,
        /// Read money limits from the provider's answers.
        signals: bool,
        /// The validated spend policy, if any (spend breakers borrow it).
        spend: Option<reliable_core::spend::SpendPolicy>,
        /// Feed the provider's rate-limit headers to the spend breaker.
        proactive: bool,
        /// Per client or shared.
        scope: Scope,
        /// The wrapped layer.
        inner: u16,
        /// Index among the stack's LLM layers.
        slot: u16,
    },
}

/// A policy stack ready to run.
#[derive(Clone, Debug)]
pub struct CompiledStack {
    /// The nodes; node 0 is the outermost.
    pub nodes: Vec<Node>,
    /// Per-request frames each logical request needs.
    pub frames: usize,
    /// Distinct fixed timer lengths: per-call timeouts and retry layers' per-attempt timeouts. Each
    /// gets a FIFO lane in the event queue, since timers of one length expire in the order they
    /// were armed.
    pub timeouts: Vec<Duration>,
    /// The breaker nodes, in stack order.
    pub breakers: Vec<u16>,
    /// The retry nodes (each owns a budget slot), in stack order.
    pub retries: Vec<u16>,
    /// The throttle nodes, in stack order.
    pub throttles: Vec<u16>,
    /// Bytes of policy state each client keeps (breakers, budgets and throttles of `PerClient`
    /// scope).
    pub per_client_bytes: u64,
    /// The LLM nodes, in stack order.
    pub llms: Vec<u16>,
    /// The hedge nodes, in stack order.
    pub hedges: Vec<u16>,
    /// The ledger nodes, in stack order.
    pub ledgers: Vec<u16>,
    /// The limit nodes, in stack order.
    pub limits: Vec<u16>,
    /// The rate-limit nodes, in stack order.
    pub rate_limits: Vec<u16>,
    /// Per downstream, the root nodes of its handler's calls, in order (empty for a downstream
    /// that is not a service). The handlers' nodes follow the policy's own in `nodes`.
    pub handlers: Vec<Vec<u16>>,
    /// The chains the core's call engine runs, in stack order.
    pub chains: Vec<Chain>,
}

impl CompiledStack {
    /// The downstream of a `Call` the call engine does not drive (none of the chains' calls), if
    /// any: an attempt of it could not be left uninterrupted (only the engine models that).
    pub(crate) fn uninterruptible_refused(&self) -> Option<u16> {
        self.nodes
            .iter()
            .enumerate()
            .find_map(|(i, n)| match n.kind {
                NodeKind::Call { ds, .. }
                    if !self.chains.iter().any(|c| usize::from(c.call) == i) =>
                {
                    Some(ds)
                }
                _ => None,
            })
    }

    /// Compiles the stack of the policy at `at` (its `stack` field), building every core policy
    /// once: an unknown downstream, a config the core refuses or a stack too deep is an error at
    /// its file position. `ds_index` resolves downstream names.
    pub(crate) fn compile(
        layer: &Layer,
        ds_index: &dyn Fn(&str) -> Option<u16>,
        c: &Checker<'_>,
        at: &Path,
        max_layers: usize,
    ) -> Result<Self, ScenarioError> {
        let mut s = CompiledStack {
            nodes: Vec::new(),
            frames: 0,
            timeouts: Vec::new(),
            breakers: Vec::new(),
            retries: Vec::new(),
            throttles: Vec::new(),
            per_client_bytes: 0,
            llms: Vec::new(),
            hedges: Vec::new(),
            ledgers: Vec::new(),
            limits: Vec::new(),
            rate_limits: Vec::new(),
            handlers: Vec::new(),
            chains: Vec::new(),
        };
        let cx = Cx {
            ds_index,
            c,
            stack: at,
            max_layers,
        };
        s.add(layer, NONE, &cx, at.clone(), 0, Within::default())?;
        for i in 0..s.nodes.len() {
            s.nodes[i].served_by = s.label_path(i as u16);
        }
        Ok(s)
    }

    /// Compiles the stack of one call of a service's handler (at `at`) after the nodes already
    /// here, as a root of its own (its answers end the call, not a logical request); returns its
    /// root node.
    pub(crate) fn add_root(
        &mut self,
        layer: &Layer,
        ds_index: &dyn Fn(&str) -> Option<u16>,
        c: &Checker<'_>,
        at: &Path,
        max_layers: usize,
    ) -> Result<u16, ScenarioError> {
        let cx = Cx {
            ds_index,
            c,
            stack: at,
            max_layers,
        };
        let from = self.nodes.len();
        let root = self.add(layer, NONE, &cx, at.clone(), 0, Within::default())?;
        for i in from..self.nodes.len() {
            self.nodes[i].served_by = self.label_path(i as u16);
        }
        Ok(root)
    }

    /// The downstreams the nodes from `root` on call (a handler call's stack is compiled last,
    /// so its nodes run to the end).
    pub(crate) fn calls_from(&self, root: u16) -> Vec<u16> {
        let mut out: Vec<u16> = self.nodes[root as usize..]
            .iter()
            .filter_map(|n| match n.kind {
                NodeKind::Call { ds, .. } | NodeKind::Llm { ds, .. } => Some(ds),
                _ => None,
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    fn add(
        &mut self,
        layer: &Layer,
        parent: u16,
        cx: &Cx<'_, '_>,
        at: Path,
        depth: usize,
        within: Within,
    ) -> Result<u16, ScenarioError> {
        if depth > MAX_DEPTH || self.nodes.len() >= cx.max_layers.min(usize::from(NONE - 1)) {
            return Err(cx.c.fail(
                cx.stack,
                format!(
                    "more than {} layers, or nested deeper than {MAX_DEPTH}: expected a smaller stack",
                    cx.max_layers
                ),
            ));
        }
        let id = self.nodes.len() as u16;
        // Placeholder; filled in below once children are known.
        self.nodes.push(Node {
            kind: NodeKind::Fallback {
                children: Vec::new(),
            },
            parent,
            frame: NONE,
            served_by: String::new(),
            chain: NONE,
            subtree_of: NONE,
        });
        // A breaker per host goes around the one call whose balancer picks the host.
        if let Some((field, _)) = layer.scope_fields().find(|(_, s)| *s == Scope::PerHost)
            && !matches!(layer, Layer::Breaker { inner, .. } if matches!(**inner, Layer::Call { .. }))
        {
            return Err(cx
                .c
                .fail(&at.field(field), reliable_core::policy::PER_HOST_BREAKER));
        }
        // A fleet's state is kept in a store the scenario declares, on a layer a fleet can share;
        // the simulator models a fleet's breaker (its budgets and limits not yet).
        let mut store = NONE;
        if let Some((field, scope)) = layer.scope_fields().find(|(_, s)| s.fleet().is_some()) {
            let sp = at.field(field);
            if let Some(why) = layer.fleet_refusal() {
                return Err(cx.c.fail(&sp, why));
            }
            if !matches!(layer, Layer::Breaker { .. } | Layer::Retry { .. }) {
                return Err(cx.c.fail(&sp, FLEET_BREAKER_ONLY));
            }
            if let Some(fleet) = scope.fleet() {
                if let Err((sub, why)) = fleet.check() {
                    return Err(cx.c.fail(&sp.field(sub), why));
                }
                if let Layer::Breaker { config, .. } = layer
                    && let Some(r) = config.fleet_refusal()
                {
                    let config_path = r
                        .field
                        .split('.')
                        .fold(at.field("config"), |p, f| p.field(f));
                    return Err(cx.c.fail(&config_path, r.why));
                }
                if let Layer::Retry {
                    budget: Some(reliable_core::budget::BudgetConfig::Ratio(ratio)),
                    ..
                } = layer
                    && let Some(r) = ratio.fleet_refusal()
                {
                    return Err(cx.c.fail(&at.field("budget").field(r.field), r.why));
                }
                store = cx.c.store(fleet.store.as_str(), &sp.field("store"))?;
            }
        }
        // The bottom of a chain that ends in a subtree: it and what it holds are nodes again.
        let within = if within.chain && depth == within.bottom {
            Within {
                chain: false,
                bottom: usize::MAX,
                ..within
            }
        } else {
            within
        };
        let reach = if within.chain {
            None
        } else {
            engine_reach(layer)
        };
        // The world has no node of its own for a decision layer: the engine runs it, or nothing
        // does (refused once the layers inside are compiled, so that their own errors come first).
        let unrun = !within.chain && reach.is_none() && chain_layer(layer);
        let within = match reach {
            Some(Reach::Subtree(d)) => Within {
                chain: true,
                bottom: depth + d,
                ..within
            },
            Some(Reach::Call) => Within {
                chain: true,
                bottom: usize::MAX,
                ..within
            },
            None => within,
        };
        let kind = match layer {
            Layer::Call {
                downstream,
                timeout,
                timeout_dist,
            } => {
                let ds = cx.downstream(downstream, &at)?;
                if let Some(t) = timeout {
                    cx.c.positive(&at.field("timeout"), *t, "a timeout")?;
                    self.add_timeout(*t);
                }
                if let Some(d) = timeout_dist {
                    let dp = at.field("timeout_dist");
                    if timeout.is_some() {
                        return Err(cx.c.fail(
                            &dp,
                            "both timeout and timeout_dist: expected one of them (a fixed timeout, or one drawn per request)",
                        ));
                    }
                    cx.c.dist(&dp, d, 0)?;
                }
                let timeout_dist = timeout_dist.as_ref().map(Sampler::new);
                for &v in timeout_dist.iter().filter_map(Sampler::values).flatten() {
                    self.add_timeout(Duration::from_nanos(v));
                }
                NodeKind::Call {
                    ds,
                    timeout: *timeout,
                    timeout_dist,
                }
            }
            Layer::Breaker {
                config,
                scope,
                inner,
            } => {
                let cp = at.field("config");
                let policy = BreakerPolicy::new(*config).map_err(|e| cx.c.config_error(&cp, e))?;
                let breaker = BreakerProto::new(policy).map_err(|e| cx.c.config_error(&cp, e))?;
                self.per_client(*scope, breaker.bytes());
                if store != NONE {
                    self.per_client(*scope, crate::client::fleet::FleetClient::BYTES);
                }
                let slot = self.breakers.len() as u16;
                self.breakers.push(id);
                let inner = self.add(inner, id, cx, at.field("inner"), depth + 1, within)?;
                NodeKind::Breaker {
                    breaker,
                    scope: *scope,
                    hosts: 1,
                    inner,
                    slot,
                    store,
                }
            }
            Layer::Retry {
                policy,
                budget,
                budget_scope,
                inner,
            } => {
                if let Some(t) = policy.attempt_timeout {
                    self.add_timeout(t);
                }
                // Validated here; the chain's engine call runs it (its plan).
                RetryPolicy::new(*policy).map_err(|e| cx.c.config_error(&at.field("policy"), e))?;
                let width_ns = match budget {
                    Some(reliable_core::budget::BudgetConfig::Ratio(r)) if store != NONE => {
                        r.ttl.as_nanos() / u64::from(r.slots.max(1))
                    }
                    _ => 0,
                };
                let budget = match budget {
                    Some(b) => {
                        let bp = at.field("budget");
                        let budget =
                            BudgetPolicy::new(*b).map_err(|e| cx.c.config_error(&bp, e))?;
                        let slot =
                            BudgetSlot::new(&budget).map_err(|e| cx.c.config_error(&bp, e))?;
                        self.per_client(*budget_scope, slot.bytes());
                        if store != NONE {
                            self.per_client(
                                *budget_scope,
                                crate::client::fleet_budget::FleetBudgetClient::BYTES,
                            );
                        }
                        slot
                    }
                    None => BudgetSlot::unlimited(),
                };
                let slot = self.retries.len() as u16;
                self.retries.push(id);
                let inner_within = Within {
                    retry: true,
                    ..within
                };
                let inner = self.add(inner, id, cx, at.field("inner"), depth + 1, inner_within)?;
                NodeKind::Retry {
                    budget,
                    scope: *budget_scope,
                    inner,
                    slot,
                    store,
                    width_ns,
                }
            }
            Layer::Throttle {
                config,
                scope,
                inner,
            } => {
                let cp = at.field("config");
                let policy = ThrottlePolicy::new(*config).map_err(|e| cx.c.config_error(&cp, e))?;
                let throttle = ThrottleSlot::new(policy).map_err(|e| cx.c.config_error(&cp, e))?;
                self.per_client(*scope, throttle.bytes());
                let slot = self.throttles.len() as u16;
                self.throttles.push(id);
                let inner = self.add(inner, id, cx, at.field("inner"), depth + 1, within)?;
                NodeKind::Throttle {
                    throttle,
                    scope: *scope,
                    inner,
                    slot,
                }
            }
            Layer::Llm {
                downstream,
                signals,
                spend,
                proactive,
                scope,
                inner,
            } => {
                let ds = cx.downstream(downstream, &at)?;
                let spend = match spend {
                    Some(config) => {
                        let sp = at.field("spend");
                        let policy = reliable_core::spend::SpendPolicy::new(*config)
                            .map_err(|e| cx.c.config_error(&sp, e))?;
                        crate::client::llm::spend_slot(&policy)
                            .map_err(|e| cx.c.config_error(&sp, e))?;
                        self.per_client(
                            *scope,
                            std::mem::size_of::<crate::client::llm::SpendSlot<'static>>(),
                        );
                        Some(policy)
                    }
                    None if *proactive => {
                        return Err(cx.c.fail(
                            &at.field("proactive"),
                            "proactive quotas feed a spend breaker: expected `spend` too",
                        ));
                    }
                    None => None,
                };
                // The frame index also indexes the request's spend reservation.
                self.nodes[id as usize].frame = self.next_frame();
                let slot = self.llms.len() as u16;
                self.llms.push(id);
                let inner = self.add(inner, id, cx, at.field("inner"), depth + 1, within)?;
                NodeKind::Llm {
                    ds,
                    signals: *signals,
                    spend,
                    proactive: *proactive,
                    scope: *scope,
                    inner,
                    slot,
                }
            }
            Layer::Hedge {
                config,
                idempotent: _,
                scope,
                inner,
            } => {
                let cp = at.field("config");
                let policy = reliable_core::hedge::HedgePolicy::new(*config)
                    .map_err(|e| cx.c.config_error(&cp, e))?;
                if policy.max_hedges() > MAX_HEDGES {
                    return Err(cx.c.fail(
                        &cp.field("max_hedges"),
                        format!(
                            "{} hedges per call: expected at most {MAX_HEDGES}",
                            policy.max_hedges()
                        ),
                    ));
                }
                if !matches!(**inner, Layer::Call { .. }) {
                    return Err(cx
                        .c
                        .fail(&at.field("inner"), reliable_core::policy::HEDGE_OF_CALL));
                }
                let hedger = reliable_core::hedge::Hedger::new(policy);
                self.per_client(*scope, std::mem::size_of_val(&hedger));
                let slot = self.hedges.len() as u16;
                self.hedges.push(id);
                let inner = self.add(inner, id, cx, at.field("inner"), depth + 1, within)?;
                NodeKind::Hedge {
                    hedger,
                    scope: *scope,
                    inner,
                    slot,
                }
            }
            Layer::Ledger {
                config,
                scope,
                inner,
            } => {
                let cp = at.field("config");
                if within.retry {
                    return Err(cx.c.fail(&at, reliable_core::policy::LEDGER_IN_RETRY));
                }
                let ledger = LedgerSlot::new(*config).map_err(|e| cx.c.config_error(&cp, e))?;
                self.per_client(*scope, ledger.bytes());
                let slot = self.ledgers.len() as u16;
                self.ledgers.push(id);
                let inner_within = Within {
                    ledger: Some(slot),
                    ..within
                };
                let inner = self.add(inner, id, cx, at.field("inner"), depth + 1, inner_within)?;
                NodeKind::Ledger {
                    ledger,
                    scope: *scope,
                    inner,
                    slot,
                }
            }
            Layer::Limit {
                config,
                scope,
                inner,
            } => {
                let cp = at.field("config");
                let policy = reliable_core::limit::LimiterPolicy::new(*config)
                    .map_err(|e| cx.c.config_error(&cp, e))?;
                let limiter = reliable_core::limit::Limiter::new(policy);
                self.per_client(*scope, std::mem::size_of_val(&limiter));
                let slot = self.limits.len() as u16;
                self.limits.push(id);
                let inner = self.add(inner, id, cx, at.field("inner"), depth + 1, within)?;
                NodeKind::Limit {
                    limiter,
                    scope: *scope,
                    inner,
                    slot,
                }
            }
            Layer::RateLimit {
                config,
                scope,
                inner,
            } => {
                let cp = at.field("config");
                let policy = reliable_core::limit::RatePolicy::new(*config)
                    .map_err(|e| cx.c.config_error(&cp, e))?;
                let limiter = reliable_core::limit::RateLimiter::new(policy);
                self.per_client(*scope, std::mem::size_of_val(&limiter));
                let slot = self.rate_limits.len() as u16;
                self.rate_limits.push(id);
                let inner = self.add(inner, id, cx, at.field("inner"), depth + 1, within)?;
                NodeKind::RateLimit {
                    limiter,
                    scope: *scope,
                    inner,
                    slot,
                }
            }
            Layer::Fallback(layers) => {
                if layers.is_empty() {
                    return Err(cx.c.fail(&at, reliable_core::policy::EMPTY_FALLBACK));
                }
                self.nodes[id as usize].frame = self.next_frame();
                let mut children = Vec::with_capacity(layers.len());
                for (k, l) in layers.iter().enumerate() {
                    children.push(self.add(l, id, cx, at.index(k), depth + 1, within)?);
                }
                NodeKind::Fallback { children }
            }
        };
        self.nodes[id as usize].kind = kind;
        if unrun {
            return Err(cx.c.fail(&at, ENGINE_ONLY));
        }
        if let Some(reach) = reach {
            self.add_chain(layer, id, within.ledger, reach);
        }
        Ok(id)
    }

    /// Records the chain whose top is node `top` (compiled from `layer`, run by the engine as far
    /// as `reach` says: [`engine_reach`]), and `ledger`, the slot of the ledger enclosing it.
    fn add_chain(&mut self, layer: &Layer, top: u16, ledger: Option<u16>, reach: Reach) {
        let stack = match reach {
            Reach::Call => engine_stack(&llm_as_call(layer)),
            Reach::Subtree(d) => engine_stack(&subtree_as_call(layer, d)),
        };
        let Ok(stack) = stack else {
            return;
        };
        let mut chain = Chain {
            index: self.chains.len() as u16,
            top,
            call: NONE,
            subtree: matches!(reach, Reach::Subtree(_)),
            plan: stack.plan,
            breaker: NONE,
            retry: NONE,
            throttle: NONE,
            ledger: None,
            own_ledger: false,
            hedge: NONE,
            limit: NONE,
            rate: NONE,
            llm: NONE,
            copies: 1,
        };
        let mut ledger_node = None;
        let mut at = top;
        let mut depth = 0;
        loop {
            if reach == Reach::Subtree(depth) {
                chain.call = at;
                break;
            }
            depth += 1;
            let inner = match &self.nodes[usize::from(at)].kind {
                NodeKind::Call { .. } => {
                    chain.call = at;
                    break;
                }
                NodeKind::Breaker { inner, .. } => {
                    chain.breaker = at;
                    *inner
                }
                NodeKind::Retry { inner, .. } => {
                    chain.retry = at;
                    *inner
                }
                NodeKind::Throttle { inner, .. } => {
                    chain.throttle = at;
                    *inner
                }
                NodeKind::Ledger { inner, slot, .. } => {
                    ledger_node = Some(*slot);
                    *inner
                }
                NodeKind::Hedge { inner, .. } => {
                    chain.hedge = at;
                    *inner
                }
                NodeKind::Limit { inner, .. } => {
                    chain.limit = at;
                    *inner
                }
                NodeKind::RateLimit { inner, .. } => {
                    chain.rate = at;
                    *inner
                }
                NodeKind::Llm { inner, .. } => {
                    chain.llm = at;
                    *inner
                }
                NodeKind::Fallback { .. } => return,
            };
            at = inner;
        }
        if let Some((config, _)) = stack.hedge
            && let Ok(hedge) = reliable_core::hedge::HedgePolicy::new(config)
        {
            chain.copies = 1 + hedge.max_hedges();
        }
        chain.own_ledger = ledger_node.is_some();
        chain.ledger = ledger_node.or(ledger);
        let index = self.chains.len() as u16;
        self.nodes[usize::from(top)].chain = index;
        if chain.subtree {
            self.nodes[usize::from(chain.call)].subtree_of = index;
        } else {
            self.nodes[usize::from(chain.call)].chain = index;
        }
        self.chains.push(chain);
    }

    /// Whether runs of it keep the hedging, ledger and limiter counters: it has a `Hedge`,
    /// `Ledger`, `Limit` or `RateLimit` layer.
    pub fn counts_extra(&self) -> bool {
        !(self.hedges.is_empty()
            && self.ledgers.is_empty()
            && self.limits.is_empty()
            && self.rate_limits.is_empty())
    }

    /// Gives each breaker of `PerHost` scope its number of hosts (`hosts` of the downstream its
    /// call names: its replicas, or 1), counting their state per client.
    pub(crate) fn count_hosts(&mut self, hosts: &dyn Fn(u16) -> u32) {
        for b in 0..self.breakers.len() {
            let node = usize::from(self.breakers[b]);
            let NodeKind::Breaker { scope, inner, .. } = &self.nodes[node].kind else {
                continue;
            };
            if *scope != Scope::PerHost {
                continue;
            }
            let n = match self.nodes[usize::from(*inner)].kind {
                NodeKind::Call { ds, .. } => hosts(ds).max(1),
                _ => 1,
            };
            if let NodeKind::Breaker {
                hosts: h, breaker, ..
            } = &mut self.nodes[node].kind
            {
                *h = n;
                let more = (breaker.bytes() as u64).saturating_mul(u64::from(n - 1));
                self.per_client_bytes = self.per_client_bytes.saturating_add(more);
            }
        }
    }

    /// Counts `bytes` of state per client for a layer of scope `scope`.
    fn per_client(&mut self, scope: Scope, bytes: usize) {
        if scope != Scope::Shared {
            self.per_client_bytes = self.per_client_bytes.saturating_add(bytes as u64);
        }
    }

    fn add_timeout(&mut self, t: Duration) {
        if !self.timeouts.contains(&t) && self.timeouts.len() < 16 {
            self.timeouts.push(t);
        }
    }

    fn next_frame(&mut self) -> u16 {
        self.frames += 1;
        (self.frames - 1) as u16
    }

    fn label(&self, id: u16) -> Option<String> {
        match &self.nodes[id as usize].kind {
            NodeKind::Call { .. } => None,
            NodeKind::Breaker { .. } => Some("breaker".into()),
            NodeKind::Retry { .. } => Some("retry".into()),
            NodeKind::Throttle { .. } => Some("throttle".into()),
            NodeKind::Llm { spend: Some(_), .. } => Some("spend".into()),
            NodeKind::Llm { .. } => Some("llm".into()),
            NodeKind::Hedge { .. } => Some("hedge".into()),
            NodeKind::Ledger { .. } => Some("ledger".into()),
            NodeKind::Limit { .. } => Some("limit".into()),
            NodeKind::RateLimit { .. } => Some("rate-limit".into()),
            NodeKind::Fallback { .. } => None,
        }
    }

    /// `served_by` of answers produced at `id`, given the downstream names are filled in later by
    /// [`CompiledStack::name_calls`].
    fn label_path(&self, id: u16) -> String {
        let mut s = match &self.nodes[id as usize].kind {
            NodeKind::Call { ds, .. } => format!("#{ds}"),
            _ => self.label(id).unwrap_or_default(),
        };
        let mut p = self.nodes[id as usize].parent;
        while p != NONE {
            if let Some(l) = self.label(p) {
                s = format!("{l}({s})");
            }
            p = self.nodes[p as usize].parent;
        }
        s
    }

    /// Replaces downstream indices in the `served_by` labels by their names.
    pub fn name_calls(&mut self, names: &[String]) {
        for n in &mut self.nodes {
            for (i, name) in names.iter().enumerate().rev() {
                n.served_by = n.served_by.replace(&format!("#{i}"), name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reliable_core::breaker::BreakerConfig;

    #[test]
    fn served_by_names_the_layers_and_skips_fallbacks() {
        let call = |d: &str| Layer::Call {
            downstream: d.into(),
            timeout: Some(Duration::from_secs(1)),
            timeout_dist: None,
        };
        let retry = |inner: Layer| Layer::Retry {
            policy: reliable_core::retry::RetryConfig::new(
                reliable_core::backoff::BackoffConfig::constant(Duration::ZERO),
            ),
            budget: None,
            budget_scope: Scope::PerClient,
            inner: Box::new(inner),
        };
        let layer = Layer::Fallback(vec![
            Layer::Breaker {
                config: BreakerConfig::layered_exercise(),
                scope: Scope::PerClient,
                inner: Box::new(retry(call("primary"))),
            },
            retry(call("backup")),
        ]);
        let names = ["primary".to_string(), "backup".to_string()];
        let index = |n: &str| names.iter().position(|x| x == n).map(|i| i as u16);
        let checker = Checker::for_tests();
        let stack = Path::root().field("stack");
        let mut s = CompiledStack::compile(&layer, &index, &checker, &stack, 256).unwrap();
        s.name_calls(&names);
        let labels: Vec<&str> = s.nodes.iter().map(|n| n.served_by.as_str()).collect();
        assert_eq!(
            labels,
            [
                "",
                "breaker",
                "breaker(retry)",
                "breaker(retry(primary))",
                "retry",
                "retry(backup)"
            ]
        );
        assert_eq!(s.timeouts, [Duration::from_secs(1)]);
        // The fallback's frame only: each branch is a chain, run by the engine.
        assert_eq!(s.frames, 1);
        let chains: Vec<(u16, u16)> = s.chains.iter().map(|c| (c.top, c.call)).collect();
        assert_eq!(chains, [(1, 3), (4, 5)]);
        assert_eq!(s.breakers, [1]);
        assert_eq!(s.retries, [2, 4]);
    }
}

#[cfg(test)]
mod reach_tests {
    use super::*;

    fn layer(text: &str) -> Layer {
        ron::Options::default()
            .with_default_extension(
                ron::extensions::Extensions::IMPLICIT_SOME
                    | ron::extensions::Extensions::UNWRAP_VARIANT_NEWTYPES,
            )
            .from_str(text)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    const RETRY: &str =
        r#"policy: (max_attempts: 3, backoff: (shape: Constant(delay: "10ms"), cap: "1s"))"#;

    #[test]
    fn the_engine_runs_a_chain_down_to_its_call_or_to_a_subtree() {
        let reach = |text: &str| engine_reach(&layer(text));
        let call = r#"Call(downstream: "a")"#;
        let fallback = r#"Fallback([Call(downstream: "a"), Call(downstream: "b")])"#;
        assert_eq!(
            reach(&format!("Retry({RETRY}, inner: {call})")),
            Some(Reach::Call)
        );
        assert_eq!(
            reach(&format!("Retry({RETRY}, inner: {fallback})")),
            Some(Reach::Subtree(1))
        );
        assert_eq!(
            reach(&format!(
                "Retry({RETRY}, inner: Breaker(config: (consecutive_failures: 5), inner: {fallback}))"
            )),
            Some(Reach::Subtree(2))
        );
        // A throttle of any window (one of 60 buckets is kept boxed, as the engine's view hands).
        assert_eq!(
            reach(&format!(
                "Retry({RETRY}, inner: Throttle(config: (window: \"60s\", buckets: 60), inner: {call}))"
            )),
            Some(Reach::Call)
        );
        // A breaker per host is the engine's too (the world picks its replica as it asks)...
        let per_host =
            format!("Breaker(config: (consecutive_failures: 5), scope: PerHost, inner: {call})");
        assert_eq!(
            reach(&format!("Retry({RETRY}, inner: {per_host})")),
            Some(Reach::Call)
        );
        assert_eq!(reach(&per_host), Some(Reach::Call));
        // ...and so is a fleet's (the store's answer is asked for, and handed in later).
        assert_eq!(
            reach(&format!(
                "Retry({RETRY}, inner: Breaker(config: (consecutive_failures: 5), scope: Fleet(store: \"s\"), inner: {call}))"
            )),
            Some(Reach::Call)
        );
        // A layer met a second time ends the chain: it tops a chain of its own.
        assert_eq!(
            reach(&format!(
                "Retry({RETRY}, inner: Retry({RETRY}, inner: {call}))"
            )),
            Some(Reach::Subtree(1))
        );
        let breaker =
            |inner: &str| format!("Breaker(config: (consecutive_failures: 5), inner: {inner})");
        assert_eq!(
            reach(&format!(
                "Retry({RETRY}, inner: {})",
                breaker(&breaker(call))
            )),
            Some(Reach::Subtree(2))
        );
        assert_eq!(reach(call), None);
        assert_eq!(reach(fallback), None);
    }
}
