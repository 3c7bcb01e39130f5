//! [`ReliableServer`]: the MCP surface. Tools, the breaker resource and the diagnosis prompt are
//! thin: each parses its arguments (schemas come from the argument types' doc comments), calls
//! the module that does the work, and returns structured output; bad arguments come back in-band
//! as tool errors (`isError: true`) naming the field.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use base64::Engine as _;
use rmcp::handler::server::router::prompt::PromptRouter;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, CustomRequest, CustomResult, ErrorCode, ErrorData,
    GetPromptResult, Implementation, ListResourceTemplatesResult, ListResourcesResult,
    PaginatedRequestParams, PromptMessage, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, Resource, ResourceContents, ResourceTemplate, Role, ServerCapabilities,
    ServerConfig,
};
#[allow(deprecated)] // SetLevelRequestParams, SubscribeRequestParams: see ServerHandler below
use rmcp::model::{
    CompleteRequestParams, CompleteResult, CompletionInfo, ProgressNotificationParam, Reference,
    SetLevelRequestParams, SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{
    Json, RoleServer, ServerHandler, prompt, prompt_handler, prompt_router, tool, tool_handler,
    tool_router,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::args::Args;
use crate::backoff::{self, BackoffArgs, BackoffReport};
use crate::breakers::{BreakerState, Breakers, CreateBreakerArgs, Created, check_name};
use crate::echo::{clip, quoted};
use crate::http_call::{self, HttpCallArgs, HttpCallResult, HttpCaller};
use crate::inflight::InFlight;
use crate::notify::Hub;
use crate::ssrf::{Guard, Limits};
use crate::storm::{self, ScenarioInfo, StormLimits};

/// The prefix of every breaker resource.
pub const BREAKER_URI: &str = "reliable://breaker/";

/// The breaker resource template.
pub const BREAKER_TEMPLATE: &str = "reliable://breaker/{name}";
/// The prefix of every scenario resource.
pub const SCENARIO_URI: &str = "reliable://scenario/";
/// The scenario resource template.
pub const SCENARIO_TEMPLATE: &str = "reliable://scenario/{name}";

/// The breaker name in `uri`, or the error for a URI that names no breaker.
fn breaker_name(uri: &str) -> Result<&str, ErrorData> {
    uri.strip_prefix(BREAKER_URI).ok_or_else(|| {
        ErrorData::resource_not_found(
            format!(
                "no resource {}: resources are {BREAKER_TEMPLATE} and {SCENARIO_TEMPLATE}",
                quoted(uri)
            ),
            None,
        )
    })
}

/// The methods of the MCP specification that this server (through the SDK) answers.
pub(crate) const KNOWN_METHODS: [&str; 13] = [
    "initialize",
    "ping",
    "completion/complete",
    "logging/setLevel",
    "prompts/get",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "tools/call",
    "tools/list",
];

/// The operator's settings.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// What `reliable_http_call` may reach besides public addresses.
    pub guard: Guard,
    /// Limits on outgoing requests.
    pub limits: Limits,
    /// Limits on simulations.
    pub storm: StormLimits,
}

/// State shared by every session (over HTTP, each client session gets a server value; the
/// breakers are the same).
#[derive(Debug)]
struct Shared {
    breakers: Arc<Breakers>,
    caller: HttpCaller,
    storm: StormLimits,
    /// One permit per simulation that may run at once.
    simulations: Arc<tokio::sync::Semaphore>,
    /// The `reliable_http_call`s in flight, at most `Limits::max_http_calls`, shared between
    /// sessions ([`InFlight`]).
    http_calls: Arc<InFlight>,
    /// The clients to tell of changes and log messages.
    hub: Arc<Hub>,
    /// Sessions started so far (each gets the next number).
    sessions: AtomicU64,
}

/// The MCP server.
#[derive(Debug, Clone)]
pub struct ReliableServer {
    shared: Arc<Shared>,
    /// This session's number (over HTTP each session has its own value, see [`Self::session`]).
    session: u64,
    tool_router: ToolRouter<Self>,
    prompt_router: PromptRouter<Self>,
}

/// A breaker's name.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NameArgs {
    /// The breaker's name, as given to create_breaker.
    pub name: String,
}

/// Arguments of `simulate_storm`: a shipped scenario by name, or a scenario in RON.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StormArgs {
    /// A scenario from list_scenarios, by name.
    #[serde(default)]
    pub scenario: Option<String>,
    /// A scenario written in RON (the simulator's format; see scenarios/README.md).
    #[serde(default)]
    pub ron: Option<String>,
    /// Master seed of the first run (default: the scenario's).
    #[serde(default)]
    pub seed: Option<u64>,
    /// Runs per policy, seeds seed, seed+1, ... (default: the scenario's; at most 1000, and within the event budget).
    #[serde(default)]
    pub seeds: Option<u32>,
}

/// What `list_scenarios` returns.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct ScenarioList {
    /// The scenarios, in file order.
    pub scenarios: Vec<ScenarioInfo>,
    /// The most events (the simulator's estimate) this server runs in one simulation.
    pub event_budget: f64,
}

impl ReliableServer {
    /// A server with `settings`, its breakers empty.
    pub fn new(settings: Settings) -> Result<Self, String> {
        Self::with_store(settings, None)
    }

    /// A server with `settings` whose breakers live in `store` (`--store`): shared with every
    /// server on the same store, and kept across restarts.
    pub fn with_store(
        settings: Settings,
        store: Option<Arc<dyn reliable::fleet::Store>>,
    ) -> Result<Self, String> {
        let hub = Arc::new(Hub::default());
        let mut breakers = Breakers::new(settings.limits.clone()).with_hub(hub.clone());
        if let Some(store) = store {
            breakers = breakers.with_store(store);
        }
        let breakers = Arc::new(breakers);
        let tool_router = with_ceilings(standard_schemas(Self::tool_router()), &settings.limits);
        Ok(ReliableServer {
            session: 0,
            shared: Arc::new(Shared {
                hub,
                sessions: AtomicU64::new(1),
                http_calls: Arc::new(InFlight::new(
                    settings.limits.max_http_calls,
                    settings.limits.max_call_time,
                )),
                caller: HttpCaller::new(settings.guard, settings.limits, breakers.clone())?,
                breakers,
                simulations: Arc::new(tokio::sync::Semaphore::new(settings.storm.max_running)),
                storm: settings.storm,
            }),
            tool_router,
            prompt_router: Self::prompt_router(),
        })
    }
}

impl ReliableServer {
    /// The same server for a new session: shared breakers and limits, its own subscriptions and
    /// log level.
    pub fn session(&self) -> Self {
        ReliableServer {
            session: self.shared.sessions.fetch_add(1, Ordering::Relaxed),
            ..self.clone()
        }
    }

    /// The `reliable_http_call`s in flight now, across all sessions (at most
    /// `Limits::max_http_calls`).
    pub fn http_calls_in_flight(&self) -> usize {
        self.shared.http_calls.in_flight()
    }
}

/// `router` with every tool's schemas in standard JSON Schema ([`crate::schema`]).
fn standard_schemas(mut router: ToolRouter<ReliableServer>) -> ToolRouter<ReliableServer> {
    for route in router.map.values_mut() {
        let tool = &mut route.attr;
        tool.input_schema = Arc::new(crate::schema::standard(&tool.input_schema));
        if let Some(output) = &tool.output_schema {
            tool.output_schema = Some(Arc::new(crate::schema::standard(output)));
        }
    }
    router
}

/// `router` with the operator's ceilings in the schemas, where an agent reads them before it
/// calls: every `attempts` has the configured ceiling as its `maximum` (`--max-attempts`), and
/// `policy`'s description ends with the ceilings it is held to, as configured.
fn with_ceilings(
    mut router: ToolRouter<ReliableServer>,
    limits: &Limits,
) -> ToolRouter<ReliableServer> {
    for route in router.map.values_mut() {
        let tool = &mut route.attr;
        let mut schema = (*tool.input_schema).clone();
        let Some(serde_json::Value::Object(properties)) = schema.get_mut("properties") else {
            continue;
        };
        if let Some(serde_json::Value::Object(attempts)) = properties.get_mut("attempts") {
            attempts.insert("minimum".into(), 1.into());
            attempts.insert("maximum".into(), limits.max_attempts.into());
        }
        if let Some(serde_json::Value::Object(policy)) = properties.get_mut("policy") {
            let described = policy
                .get("description")
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default();
            let text = format!("{described} {}", ceilings(limits));
            policy.insert("description".into(), text.trim_start().into());
        }
        tool.input_schema = Arc::new(schema);
    }
    router
}

/// The ceilings of this server, in words.
fn ceilings(limits: &Limits) -> String {
    format!(
        "This server's ceilings: {} attempts per call, {} per attempt, {:?} per attempt, {:?} per call.",
        limits.max_attempts,
        crate::policy_arg::hedges(limits.max_hedges),
        limits.max_attempt_timeout,
        limits.max_call_time,
    )
}

#[tool_router]
impl ReliableServer {
    /// Create a named circuit breaker for one downstream (an LLM provider, an API). Start from a
    /// preset (default: the Python reliablekit breaker: >= 50% failures over 20 calls opens it for
    /// 30 s, then 3 successes in a row close it) and change any of failure_rate, window,
    /// minimum_calls, consecutive_failures, cooldown, probes, max_probes_in_flight. Creating the
    /// same name with the same settings keeps its state; new settings replace it.
    #[tool(annotations(idempotent_hint = true, open_world_hint = false))]
    async fn create_breaker(
        &self,
        Parameters(Args(args)): Parameters<Args<CreateBreakerArgs>>,
    ) -> Result<Json<Created>, String> {
        self.shared
            .breakers
            .create(&args)
            .map(Json)
            .map_err(|e| clip(&e))
    }

    /// A breaker's state (closed, open, half-open), the calls and failures in its window,
    /// retry_after while open, and its recent transitions.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn get_breaker_state(
        &self,
        Parameters(Args(args)): Parameters<Args<NameArgs>>,
    ) -> Result<Json<BreakerState>, String> {
        self.shared
            .breakers
            .synced_snapshot(&args.name)
            .await
            .map(Json)
            .map_err(|e| clip(&e))
    }

    /// The delays before retries 1..n for an exponential backoff (base, factor, cap) with a
    /// jitter (none, full, equal, decorrelated, proportional) and a seed, each with the range
    /// jitter could have put it in. Pure: the same arguments give the same delays.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn compute_backoff(
        &self,
        Parameters(Args(args)): Parameters<Args<BackoffArgs>>,
    ) -> Result<Json<BackoffReport>, String> {
        backoff::compute(&args).map(Json).map_err(|e| clip(&e))
    }

    /// Make an HTTP request through a named breaker with bounded retries and jittered backoff,
    /// or through `policy`: a policy stack in the simulator's format (JSON), bounded by the
    /// server's ceilings (attempts per call, hedges per attempt, times; set by its operator), to
    /// run exactly the policy tried in `simulate_storm`. Returns status, selected headers, a
    /// capped body, every attempt, time taken and what served it. While the breaker is open
    /// nothing is sent and `fallback` is returned. Only http/https to public addresses (private,
    /// loopback, link-local and metadata addresses are refused, also after DNS and on every
    /// redirect; a redirect not followed comes back as a refusal with its reason); Authorization
    /// and Cookie are never echoed, and a URL carrying user:password@ is refused: pass
    /// credentials as headers. The server runs a bounded number of these calls at once, a share
    /// per session: one over is refused at once, saying when to retry.
    #[tool(annotations(open_world_hint = true))]
    async fn reliable_http_call(
        &self,
        Parameters(Args(args)): Parameters<Args<HttpCallArgs>>,
        context: RequestContext<RoleServer>,
    ) -> Result<Json<HttpCallResult>, String> {
        self.http_call(args, context).await.map_err(|e| clip(&e))
    }

    /// Simulate a retry storm before choosing a retry policy: run a shipped scenario (see
    /// list_scenarios) or your own in RON, and get the comparison table of the policies (load on
    /// the downstream, success rate, recovery), the conclusion in words, the summary as JSON and
    /// the amplification plot as a PNG. Deterministic for a seed. Scenarios over the server's work
    /// budget (estimated events) are refused with their estimate.
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn simulate_storm(
        &self,
        Parameters(Args(args)): Parameters<Args<StormArgs>>,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, String> {
        self.simulate(args, context).await.map_err(|e| clip(&e))
    }

    /// The storm scenarios this server can simulate: name, description, policies compared, the
    /// simulated time and the estimated events (compare with event_budget).
    #[tool(annotations(read_only_hint = true, open_world_hint = false))]
    async fn list_scenarios(&self) -> Result<Json<ScenarioList>, String> {
        Ok(Json(ScenarioList {
            scenarios: storm::list(&self.shared.storm)?,
            event_budget: self.shared.storm.max_events,
        }))
    }
}

impl ReliableServer {
    /// `reliable_http_call`, at most `Limits::max_http_calls` at once, shared between sessions
    /// ([`InFlight`]): one over is refused at once (a queue would hold the caller for up to
    /// `--max-call-time` with no word of why), saying when to come back. The slot goes with the
    /// work: it is held while the call runs and given back when it ends, or when it is dropped:
    /// on `notifications/cancelled`, or when the session ends (the SDK cancels its requests),
    /// the call stops there, its requests in flight dropped (their sockets closed, a breaker's
    /// probe handed back) and nothing more sent.
    async fn http_call(
        &self,
        args: HttpCallArgs,
        context: RequestContext<RoleServer>,
    ) -> Result<Json<HttpCallResult>, String> {
        let _slot = self
            .shared
            .http_calls
            .try_take(self.session, tokio::time::Instant::now())?;
        tokio::select! {
            done = http_call::call_from(&self.shared.caller, &args, self.session) => done.map(Json),
            () = context.ct.cancelled() => Err(
                "cancelled by the client: the call stopped, its requests in flight dropped".into(),
            ),
        }
    }

    /// `simulate_storm`, at most `StormLimits::max_running` at once: one more is refused at once
    /// (a queue would hold the caller for minutes with no word of why). With a progress token it
    /// reports seeds done; `notifications/cancelled` stops it before its next group of seeds,
    /// which frees its slot.
    async fn simulate(
        &self,
        args: StormArgs,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, String> {
        let limits = self.shared.storm.clone();
        let Ok(running) = self.shared.simulations.clone().try_acquire_owned() else {
            return Err(format!(
                "{} simulations are running, the most this server runs at once (--max-simulations): \
                 try again when one has finished",
                limits.max_running
            ));
        };
        let scenario = match (&args.scenario, &args.ron) {
            (Some(name), None) => storm::by_name(name, &limits)?,
            (None, Some(text)) => storm::from_ron(text, &limits)?,
            _ => {
                return Err(
                    "give exactly one of scenario (a name from list_scenarios) and ron (a scenario in RON)"
                        .into(),
                );
            }
        };
        // The permit goes with the work: a caller that gives up does not free the slot while
        // the simulation still runs; a cancelled one stops at its next group of seeds.
        let stop = Arc::new(AtomicBool::new(false));
        let (progress, mut steps) = tokio::sync::mpsc::unbounded_channel();
        let stopping = stop.clone();
        let mut work = tokio::task::spawn_blocking(move || {
            let _running = running;
            storm::run_with(
                &scenario,
                args.seed,
                args.seeds,
                &limits,
                &mut |done, total| {
                    let _ = progress.send((done, total));
                },
                &stopping,
            )
        });
        let token = context.meta.get_progress_token();
        let report = loop {
            tokio::select! {
                done = &mut work => break done,
                Some((done, total)) = steps.recv() => {
                    if let Some(token) = &token {
                        let mut p = ProgressNotificationParam::new(token.clone(), f64::from(done));
                        p.total = Some(f64::from(total));
                        p.message = Some(format!("{done} of {total} seeds simulated"));
                        let _ = context.peer.notify_progress(p).await;
                    }
                }
                _ = context.ct.cancelled(), if !stop.load(Ordering::SeqCst) => {
                    stop.store(true, Ordering::SeqCst);
                }
            }
        }
        .map_err(|e| format!("the simulation stopped: {e}"))??;
        let png = base64::engine::general_purpose::STANDARD.encode(&report.amplification_png);
        let mut result = CallToolResult::success(vec![
            ContentBlock::text(format!("{}\n\n{}", report.table, report.conclusion)),
            ContentBlock::image(png, "image/png"),
        ]);
        result.structured_content = Some(serde_json::json!({
            "conclusion": report.conclusion,
            "estimated_events": report.estimated_events,
            "summary": report.summary,
        }));
        Ok(result)
    }
}

// The macro generates an undocumented accessor for the prompt's definition.
#[allow(missing_docs)]
#[prompt_router]
impl ReliableServer {
    /// Diagnose a circuit breaker: its state, window counts and recent transitions, with a
    /// request for a diagnosis and a next step.
    #[prompt]
    async fn diagnose_breaker(
        &self,
        Parameters(Args(args)): Parameters<Args<NameArgs>>,
    ) -> Result<GetPromptResult, ErrorData> {
        let state = self
            .shared
            .breakers
            .synced_snapshot(&args.name)
            .await
            .map_err(|e| ErrorData::invalid_params(clip(&e), None))?;
        let json = serde_json::to_string_pretty(&state)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let text = format!(
            "You are diagnosing the circuit breaker \"{name}\", which protects one downstream service.\n\n\
             Its state now is {state}{retry}. Its window holds {calls} calls, {failures} of them failures; \
             {consecutive} failures in a row. Since it was created: {succeeded} calls succeeded, \
             {failed} failed, {refused} were refused while it was open, {retries} retries were sent. \
             Recent transitions (seconds since the server started) and its config:\n\n```json\n{json}\n```\n\n\
             Diagnose it: is the downstream failing, recovering or healthy? Is the breaker tuned sensibly \
             for this traffic (window, failure rate, cooldown, probes)? Say what to do next: wait \
             (and how long), lower the load, change the breaker, or investigate the downstream. \
             Do not suggest retrying harder while it is open: that is how retry storms start.",
            name = state.name,
            state = state.state,
            retry = state
                .retry_after_ms
                .map(|ms| format!(" (a probe goes through in {:.1} s)", ms / 1e3))
                .unwrap_or_default(),
            calls = state.window.calls,
            failures = state.window.failures,
            consecutive = state.consecutive_failures,
            succeeded = state.totals.succeeded,
            failed = state.totals.failed,
            refused = state.totals.refused,
            retries = state.totals.retries,
        );
        Ok(
            GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
                .with_description(format!("Diagnose breaker {}", quoted(&state.name))),
        )
    }
}

#[tool_handler(router = self.tool_router)]
#[prompt_handler(router = self.prompt_router)]
impl ServerHandler for ReliableServer {
    fn get_info(&self) -> ServerConfig {
        #[allow(deprecated)] // logging: rmcp marks it legacy; the 2025 protocol has it
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .enable_prompts()
            .enable_completions()
            .enable_logging()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("reliable-mcp", env!("CARGO_PKG_VERSION")).with_title("reliable"))
            .with_instructions(
                "Circuit breakers, backoff and storm simulation for agents that call flaky services. \
                 Create one breaker per downstream (create_breaker), send requests through it \
                 (reliable_http_call), check it (get_breaker_state, reliable://breaker/{name}, the \
                 diagnose_breaker prompt), and try retry policies in simulation first (list_scenarios, \
                 simulate_storm). Do not retry a call the breaker refused: wait for retry_after.",
            )
    }

    /// A request the SDK could not read as one of the methods it knows lands here with its
    /// method name: for a known method that means its params were missing or malformed, which is
    /// invalid params (-32602, and the SDK answers with the request's id), not "method not found".
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        let method = request.method.as_str();
        if KNOWN_METHODS.contains(&method) {
            Err(ErrorData::invalid_params(
                format!(
                    "{method}: params are missing or malformed (they must be an object, e.g. {{\"name\": ...}})"
                ),
                None,
            ))
        } else {
            Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("no method {}", quoted(method)),
                None,
            ))
        }
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.shared.hub.register(self.session, context.peer);
    }

    #[allow(deprecated)] // resources/subscribe: rmcp marks it legacy; the 2025 protocol has it
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let name = breaker_name(&request.uri)?;
        check_name(name).map_err(|e| ErrorData::invalid_params(clip(&e), None))?;
        self.shared
            .hub
            .subscribe(self.session, &request.uri)
            .map_err(|e| ErrorData::invalid_request(e, None))
    }

    #[allow(deprecated)] // as subscribe
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.shared.hub.unsubscribe(self.session, &request.uri);
        Ok(())
    }

    #[allow(deprecated)] // logging: as get_info
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.shared.hub.set_level(self.session, request.level);
        Ok(())
    }

    /// Breaker names for the breaker template's `{name}` and the prompt's `name`; scenario
    /// names for the scenario template's `{name}`. (Tool arguments have no completion in the
    /// protocol: `completion/complete` refers to a prompt or a resource template.)
    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let arg = &request.argument;
        let names = match (&request.r#ref, arg.name.as_str()) {
            (Reference::Resource(r), "name") if r.uri == BREAKER_TEMPLATE => {
                self.shared.breakers.names()
            }
            (Reference::Prompt(p), "name") if p.name == "diagnose_breaker" => {
                self.shared.breakers.names()
            }
            (Reference::Resource(r), "name") if r.uri == SCENARIO_TEMPLATE => {
                storm::list(&self.shared.storm)
                    .map_err(|e| ErrorData::internal_error(clip(&e), None))?
                    .into_iter()
                    .map(|s| s.name)
                    .collect()
            }
            _ => Vec::new(),
        };
        let matching: Vec<String> = names
            .into_iter()
            .filter(|n| n.starts_with(arg.value.as_str()))
            .collect();
        let total = matching.len();
        let values: Vec<String> = matching
            .into_iter()
            .take(CompletionInfo::MAX_VALUES)
            .collect();
        let mut info = CompletionInfo::default();
        info.has_more = Some(values.len() < total);
        info.total = u32::try_from(total).ok();
        info.values = values;
        Ok(CompleteResult::new(info))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let resources = self
            .shared
            .breakers
            .names()
            .into_iter()
            .map(|name| {
                Resource::new(format!("{BREAKER_URI}{name}"), format!("breaker {name}"))
                    .with_description(format!(
                        "State, window counts and transitions of breaker {name}"
                    ))
                    .with_mime_type("application/json")
            })
            .collect();
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new(BREAKER_TEMPLATE, "breaker")
                .with_description(
                    "A named circuit breaker's state, window counts and recent transitions \
                     (subscribe to hear of every transition)",
                )
                .with_mime_type("application/json"),
            ResourceTemplate::new(SCENARIO_TEMPLATE, "scenario")
                .with_description(
                    "A storm scenario simulate_storm can run: description, policies, horizon \
                     and estimated events",
                )
                .with_mime_type("application/json"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri.as_str();
        if let Some(name) = uri.strip_prefix(SCENARIO_URI) {
            let all = storm::list(&self.shared.storm)
                .map_err(|e| ErrorData::internal_error(clip(&e), None))?;
            let names: Vec<String> = all.iter().map(|s| s.name.clone()).collect();
            let info = all.into_iter().find(|s| s.name == name).ok_or_else(|| {
                ErrorData::resource_not_found(
                    clip(&format!(
                        "no scenario named {}; there are: {}",
                        quoted(name),
                        names.join(", ")
                    )),
                    None,
                )
            })?;
            let json = serde_json::to_string_pretty(&info)
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
            return Ok(ReadResourceResult::new(vec![
                ResourceContents::text(json, uri).with_mime_type("application/json"),
            ])
            .into());
        }
        let name = breaker_name(uri)?;
        check_name(name).map_err(|e| ErrorData::resource_not_found(clip(&e), None))?;
        let state = self
            .shared
            .breakers
            .synced_snapshot(name)
            .await
            .map_err(|e| ErrorData::resource_not_found(clip(&e), None))?;
        let json = serde_json::to_string_pretty(&state)
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(json, uri).with_mime_type("application/json"),
        ])
        .into())
    }
}
