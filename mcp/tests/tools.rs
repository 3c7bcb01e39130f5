//! The server as an MCP client sees it: an in-process rmcp client over a duplex pipe lists and
//! calls every tool, reads the breaker resource, gets the prompt, and checks that bad arguments
//! come back in-band (`isError: true`, naming the field) while the session carries on.

mod support;

use base64::Engine as _;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, GetPromptRequestParams, ReadResourceRequestParams,
    ResourceContents,
};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

use reliable_mcp::ssrf::{AllowList, Guard, Limits};
use reliable_mcp::storm::StormLimits;
use reliable_mcp::{ReliableServer, Settings};

const TOOLS: [&str; 6] = [
    "compute_backoff",
    "create_breaker",
    "get_breaker_state",
    "list_scenarios",
    "reliable_http_call",
    "simulate_storm",
];

/// A small scenario in RON: 50 jobs against a flaky server, two policies.
const RON: &str = r#"Scenario(
    name: "tiny",
    description: "Fifty jobs, a server failing 30% of calls.",
    horizon: "20s",
    workload: JobSet(clients: 50, start_spread: "1s"),
    downstreams: [(name: "api", model: Server(workers: 4, service: Constant("50ms"), error_rate: 0.3))],
    policies: [
        (name: "no retries", stack: Call(downstream: "api", timeout: "1s")),
        (name: "3 attempts", stack: Retry(
            policy: (max_attempts: 3, backoff: (shape: Exponential(base: "100ms"), cap: "1s", jitter: Full)),
            inner: Call(downstream: "api", timeout: "1s"),
        )),
    ],
)"#;

async fn connect(settings: Settings) -> RunningService<RoleClient, ()> {
    let (server_io, client_io) = tokio::io::duplex(1 << 16);
    let server = ReliableServer::new(settings).unwrap();
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    ().serve(client_io).await.expect("initialize")
}

fn settings() -> Settings {
    Settings {
        guard: Guard::new(AllowList::parse(&["127.0.0.1"]).unwrap()),
        storm: StormLimits {
            max_events: 1e6,
            ..StormLimits::default()
        },
        ..Settings::default()
    }
}

async fn call(client: &RunningService<RoleClient, ()>, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments are an object")
    };
    client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(args))
        .await
        .unwrap_or_else(|e| panic!("{tool}: protocol error {e}"))
}

/// The structured result of a successful call.
async fn ok(client: &RunningService<RoleClient, ()>, tool: &str, args: Value) -> Value {
    let r = call(client, tool, args).await;
    assert_ne!(r.is_error, Some(true), "{tool}: {:?}", r.content);
    r.structured_content
        .unwrap_or_else(|| panic!("{tool}: no structured content"))
}

/// The in-band error text of a failed call.
async fn in_band_error(client: &RunningService<RoleClient, ()>, tool: &str, args: Value) -> String {
    let r = call(client, tool, args).await;
    assert_eq!(
        r.is_error,
        Some(true),
        "{tool}: expected an in-band error, got {r:?}"
    );
    r.content
        .iter()
        .filter_map(|c| c.as_text())
        .map(|t| t.text.clone())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn every_tool_is_listed_with_a_documented_schema() {
    let client = connect(settings()).await;
    let tools = client.list_all_tools().await.unwrap();
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort();
    assert_eq!(names, TOOLS);
    for t in &tools {
        assert!(
            t.description.as_deref().is_some_and(|d| d.len() > 40),
            "{}: {:?}",
            t.name,
            t.description
        );
        let schema = serde_json::to_value(&t.input_schema).unwrap();
        for (field, spec) in schema["properties"].as_object().into_iter().flatten() {
            let described = spec.get("description").is_some()
                || spec.get("$ref").is_some()
                || spec.get("anyOf").is_some();
            assert!(described, "{}.{field} has no description: {spec}", t.name);
        }
    }
    let by_name = |n: &str| tools.iter().find(|t| t.name == n).unwrap();
    for structured in [
        "create_breaker",
        "get_breaker_state",
        "compute_backoff",
        "reliable_http_call",
        "list_scenarios",
    ] {
        assert!(
            by_name(structured).output_schema.is_some(),
            "{structured} declares its output"
        );
    }
    let create = serde_json::to_value(&by_name("create_breaker").input_schema).unwrap();
    assert_eq!(create["required"], json!(["name"]));
    assert!(
        create["properties"]["failure_rate"]["description"]
            .as_str()
            .unwrap()
            .contains("failures")
    );
    client.cancel().await.unwrap();
}

/// JSON Schema 2020-12's keywords (core, applicator, unevaluated, validation, meta-data,
/// format-annotation and content vocabularies).
const KEYWORDS: [&str; 57] = [
    "$schema",
    "$id",
    "$ref",
    "$defs",
    "$anchor",
    "$dynamicRef",
    "$dynamicAnchor",
    "$vocabulary",
    "$comment",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "prefixItems",
    "items",
    "contains",
    "properties",
    "patternProperties",
    "additionalProperties",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "type",
    "const",
    "enum",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxContains",
    "minContains",
    "maxProperties",
    "minProperties",
    "required",
    "dependentRequired",
    "title",
    "description",
    "default",
    "deprecated",
    "readOnly",
    "writeOnly",
    "examples",
    "format",
    "contentEncoding",
    "contentMediaType",
    "contentSchema",
];

/// Every keyword of `schema` (at `path`) and of its subschemas is in [`KEYWORDS`], every format is
/// one the specification defines, and every integer has a minimum and a maximum.
fn check_standard(path: &str, schema: &Value, problems: &mut Vec<String>) {
    let Some(m) = schema.as_object() else {
        if !schema.is_boolean() {
            problems.push(format!("{path}: not a schema: {schema}"));
        }
        return;
    };
    for (k, v) in m {
        let at = format!("{path}/{k}");
        if !KEYWORDS.contains(&k.as_str()) {
            problems.push(format!("{at}: not a 2020-12 keyword"));
        }
        match k.as_str() {
            "format" => {
                let f = v.as_str().unwrap_or_default();
                if !reliable_mcp::schema::STANDARD_FORMATS.contains(&f) {
                    problems.push(format!("{at}: non-standard format {f:?}"));
                }
            }
            "properties" | "patternProperties" | "$defs" | "dependentSchemas" => {
                for (name, sub) in v.as_object().into_iter().flatten() {
                    check_standard(&format!("{at}/{name}"), sub, problems);
                }
            }
            "allOf" | "anyOf" | "oneOf" | "prefixItems" => {
                for (i, sub) in v.as_array().into_iter().flatten().enumerate() {
                    check_standard(&format!("{at}/{i}"), sub, problems);
                }
            }
            "items"
            | "not"
            | "if"
            | "then"
            | "else"
            | "contains"
            | "additionalProperties"
            | "propertyNames"
            | "unevaluatedItems"
            | "unevaluatedProperties"
            | "contentSchema" => check_standard(&at, v, problems),
            _ => {}
        }
    }
    let integer = match m.get("type") {
        Some(Value::String(t)) => t == "integer",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "integer"),
        _ => false,
    };
    if integer && !(m.contains_key("minimum") && m.contains_key("maximum")) {
        problems.push(format!("{path}: an integer without minimum and maximum"));
    }
}

#[tokio::test]
async fn every_schema_is_standard_json_schema_2020_12() {
    let client = connect(settings()).await;
    let mut problems = Vec::new();
    for t in client.list_all_tools().await.unwrap() {
        let input = serde_json::to_value(&t.input_schema).unwrap();
        check_standard(&format!("{}/input", t.name), &input, &mut problems);
        if let Some(output) = &t.output_schema {
            let output = serde_json::to_value(output).unwrap();
            check_standard(&format!("{}/output", t.name), &output, &mut problems);
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn breakers_backoff_resource_and_prompt() {
    let client = connect(settings()).await;
    let created = ok(
        &client,
        "create_breaker",
        json!({"name": "openai", "failure_rate": 0.25, "window": 40, "cooldown": "5s"}),
    )
    .await;
    assert_eq!(created["action"], "created");
    assert_eq!(created["breaker"]["state"], "closed");
    assert_eq!(created["breaker"]["config"]["failure_rate"], 0.25);
    let again = ok(
        &client,
        "create_breaker",
        json!({"name": "openai", "failure_rate": 0.25, "window": 40, "cooldown": "5s"}),
    )
    .await;
    assert_eq!(again["action"], "unchanged");

    let state = ok(&client, "get_breaker_state", json!({"name": "openai"})).await;
    assert_eq!(
        (state["state"].as_str(), state["window"]["calls"].as_u64()),
        (Some("closed"), Some(0))
    );
    // Slow calls split into slow successes and slow failures.
    let split = ["slow", "slow_successes", "slow_failures"].map(|k| state["window"][k].as_u64());
    assert_eq!(split, [Some(0); 3]);

    let backoff = ok(
        &client,
        "compute_backoff",
        json!({"retries": 4, "backoff": {"base": "100ms", "jitter": "none"}, "seed": 3}),
    )
    .await;
    let delays: Vec<f64> = backoff["delays"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["delay_ms"].as_f64().unwrap())
        .collect();
    assert_eq!(delays, [100.0, 200.0, 400.0, 800.0]);

    // The resources: two templates, a concrete resource per breaker, and its content.
    let templates = client.list_all_resource_templates().await.unwrap();
    assert_eq!(
        templates
            .iter()
            .map(|t| t.uri_template.as_str())
            .collect::<Vec<_>>(),
        ["reliable://breaker/{name}", "reliable://scenario/{name}"]
    );
    let resources = client.list_all_resources().await.unwrap();
    assert_eq!(
        resources.iter().map(|r| r.uri.as_str()).collect::<Vec<_>>(),
        ["reliable://breaker/openai"]
    );
    let read = client
        .read_resource(ReadResourceRequestParams::new("reliable://breaker/openai"))
        .await
        .unwrap();
    let ResourceContents::TextResourceContents {
        text, mime_type, ..
    } = &read.contents[0]
    else {
        panic!("text")
    };
    assert_eq!(mime_type.as_deref(), Some("application/json"));
    let body: Value = serde_json::from_str(text).unwrap();
    assert_eq!(body["name"], "openai");
    // A missing breaker is a protocol error (resource not found), not an empty document.
    let missing = client
        .read_resource(ReadResourceRequestParams::new("reliable://breaker/nope"))
        .await;
    assert!(
        missing
            .unwrap_err()
            .to_string()
            .contains("no breaker named")
    );
    assert!(
        client
            .read_resource(ReadResourceRequestParams::new("file:///etc/passwd"))
            .await
            .is_err()
    );

    // The prompt: listed with its argument, and it carries the state.
    let prompts = client.list_all_prompts().await.unwrap();
    assert_eq!(prompts.len(), 1);
    assert_eq!(prompts[0].name, "diagnose_breaker");
    let arg = &prompts[0].arguments.as_ref().unwrap()[0];
    assert_eq!((arg.name.as_str(), arg.required), ("name", Some(true)));
    let Value::Object(args) = json!({"name": "openai"}) else {
        unreachable!()
    };
    let prompt = client
        .get_prompt(GetPromptRequestParams::new("diagnose_breaker").with_arguments(args))
        .await
        .unwrap();
    let text = serde_json::to_string(&prompt.messages).unwrap();
    assert!(
        text.contains("openai") && text.contains("closed") && text.contains("Diagnose"),
        "{text}"
    );
    let Value::Object(args) = json!({"name": "nope"}) else {
        unreachable!()
    };
    assert!(
        client
            .get_prompt(GetPromptRequestParams::new("diagnose_breaker").with_arguments(args))
            .await
            .is_err()
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn reliable_http_call_through_a_breaker_to_loopback() {
    let good = support::serve("127.0.0.1").await;
    let client = connect(settings()).await;
    ok(
        &client,
        "create_breaker",
        json!({"name": "local", "attempts": 1}),
    )
    .await;
    let headers = json!({"Authorization": "Bearer sk-mcp-secret-1"});
    let r = ok(
        &client,
        "reliable_http_call",
        json!({"url": good.url("/echo"), "breaker": "local", "headers": headers}),
    )
    .await;
    assert_eq!(
        (r["status"].as_u64(), r["ok"].as_bool()),
        (Some(200), Some(true))
    );
    assert_eq!(
        r["served_by"], "breaker(local)",
        "one attempt: no retry layer"
    );
    assert_eq!(r["breaker"]["state"], "closed");
    let everything = serde_json::to_string(
        &call(
            &client,
            "reliable_http_call",
            json!({"url": good.url("/echo"), "breaker": "local", "headers": headers}),
        )
        .await,
    )
    .unwrap();
    assert!(
        !everything.contains("sk-mcp-secret-1"),
        "the token never reaches the agent: {everything}"
    );
    let state = ok(&client, "get_breaker_state", json!({"name": "local"})).await;
    assert_eq!(state["totals"]["succeeded"], 2);

    // Refused targets are in-band errors, and nothing is dialled.
    let other = support::serve("127.0.0.2").await;
    let e = in_band_error(
        &client,
        "reliable_http_call",
        json!({"url": other.url("/ok")}),
    )
    .await;
    assert!(e.contains("refused") && e.contains("127.0.0.2"), "{e}");
    // Non-loopback targets (cloud metadata at 169.254.169.254 among them) are refused by the same
    // guard and judged by the pure classifier's tests (`ssrf::guard`), so no test ever risks
    // dialling one.
    assert_eq!(other.connections(), 0);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn storms_are_simulated_and_bounded() {
    let client = connect(settings()).await;
    let list = ok(&client, "list_scenarios", json!({})).await;
    let names: Vec<&str> = list["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"default") && names.contains(&"layered-stack"),
        "{names:?}"
    );
    assert_eq!(list["event_budget"], 1e6);

    // A shipped scenario by name: the table and conclusion as text, the plot as a PNG.
    let r = call(
        &client,
        "simulate_storm",
        json!({"scenario": "layered-stack"}),
    )
    .await;
    assert_ne!(r.is_error, Some(true), "{:?}", r.content);
    let text = r.content[0].as_text().unwrap().text.clone();
    assert!(text.contains("layered"), "{text}");
    let image = r.content[1].as_image().expect("an image");
    assert_eq!(image.mime_type, "image/png");
    let png = base64::engine::general_purpose::STANDARD
        .decode(&image.data)
        .unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let structured = r.structured_content.unwrap();
    assert_eq!(structured["summary"]["scenario"], "layered-stack");

    // The caller's own scenario, with seeds; the same seed gives the same summary.
    let a = ok(
        &client,
        "simulate_storm",
        json!({"ron": RON, "seed": 7, "seeds": 2}),
    )
    .await;
    let b = ok(
        &client,
        "simulate_storm",
        json!({"ron": RON, "seed": 7, "seeds": 2}),
    )
    .await;
    assert_eq!(a["summary"], b["summary"]);
    assert_eq!(a["summary"]["seeds"], json!([7, 8]));

    // Over the budget: refused with the estimate.
    let e = in_band_error(&client, "simulate_storm", json!({"scenario": "default"})).await;
    assert!(
        e.contains("events") && e.contains("more than the limit of 1.00e6"),
        "{e}"
    );
    let e = in_band_error(
        &client,
        "simulate_storm",
        json!({"ron": "Scenario(name: \"x\")"}),
    )
    .await;
    assert!(e.contains("1:"), "a parse error with its position: {e}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn bad_arguments_come_back_in_band_naming_the_field() {
    let client = connect(settings()).await;
    let cases = [
        ("create_breaker", json!({}), "name"),
        (
            "create_breaker",
            json!({"name": "x", "failure_rate": "half"}),
            "failure_rate",
        ),
        (
            "create_breaker",
            json!({"name": "x", "failure_rate": 1.5}),
            "failure_rate",
        ),
        (
            "create_breaker",
            json!({"name": "x", "colour": "red"}),
            "colour",
        ),
        ("create_breaker", json!({"name": "x y"}), "name"),
        (
            "create_breaker",
            json!({"name": "x", "cooldown": "soon"}),
            "cooldown",
        ),
        (
            "get_breaker_state",
            json!({"name": "nope"}),
            "no breaker named",
        ),
        ("compute_backoff", json!({"retries": 0}), "retries"),
        (
            "compute_backoff",
            json!({"retries": 3, "backoff": {"factor": 0.5}}),
            "factor",
        ),
        (
            "reliable_http_call",
            json!({"url": "gopher://127.0.0.1/"}),
            "scheme",
        ),
        (
            "reliable_http_call",
            json!({"url": "http://127.0.0.1/", "attempts": 50}),
            "attempts",
        ),
        (
            "reliable_http_call",
            json!({"url": "http://127.0.0.1/", "method": "TRACE"}),
            "method",
        ),
        ("simulate_storm", json!({}), "exactly one"),
        (
            "simulate_storm",
            json!({"scenario": "nope"}),
            "no scenario named",
        ),
        (
            "simulate_storm",
            json!({"scenario": "layered-stack", "seeds": 5000}),
            "seeds",
        ),
    ];
    for (tool, args, needle) in cases {
        let e = in_band_error(&client, tool, args.clone()).await;
        assert!(e.contains(needle), "{tool} {args}: {e}");
    }
    // The session is still usable.
    ok(&client, "list_scenarios", json!({})).await;
    client.cancel().await.unwrap();
}

/// A policy in the simulator's format: `attempts` attempts 10 ms apart, each at most 1 s.
fn retry_policy(attempts: u32, inner: Value) -> Value {
    json!({"Retry": {
        "policy": {"max_attempts": attempts, "backoff": {"shape": {"Constant": {"delay": "10ms"}}}},
        "inner": inner,
    }})
}

fn call_layer() -> Value {
    json!({"Call": {"downstream": "api", "timeout": "1s"}})
}

#[tokio::test]
async fn reliable_http_call_runs_a_policy_in_the_simulators_format() {
    let target = support::serve("127.0.0.1").await;
    let client = connect(settings()).await;
    let tools = client.list_all_tools().await.unwrap();
    let http = tools
        .iter()
        .find(|t| t.name == "reliable_http_call")
        .unwrap();
    let schema = serde_json::to_value(&http.input_schema).unwrap();
    let described = schema["properties"]["policy"]["description"]
        .as_str()
        .unwrap_or_default();
    assert!(
        described.contains("simulator") && described.contains("Not together with breaker"),
        "{described}"
    );
    let policy = retry_policy(3, call_layer());
    // A transient status is retried to the policy's attempts; a fatal one and a success end it.
    let r = ok(
        &client,
        "reliable_http_call",
        json!({"url": target.url("/status?code=500"), "policy": policy}),
    )
    .await;
    assert_eq!(r["served_by"], "retry(api)");
    assert_eq!(r["attempts"].as_array().map(Vec::len), Some(3), "{r}");
    assert_eq!(
        (r["ok"].as_bool(), r["status"].as_u64()),
        (Some(false), Some(500))
    );
    assert_eq!(target.requests(), 3);
    let r = ok(
        &client,
        "reliable_http_call",
        json!({"url": target.url("/status?code=404"), "policy": policy}),
    )
    .await;
    assert_eq!(r["attempts"].as_array().map(Vec::len), Some(1), "{r}");
    let r = ok(
        &client,
        "reliable_http_call",
        json!({"url": target.url("/ok"), "policy": policy}),
    )
    .await;
    assert_eq!(
        (r["ok"].as_bool(), r["status"].as_u64()),
        (Some(true), Some(200))
    );
    assert_eq!(target.requests(), 5);
    // A breaker inside the retry, opened by two failures of two: the third attempt is not sent.
    let breaker = json!({"Breaker": {
        "config": {"failure_rate": 0.5, "minimum_calls": 2},
        "inner": call_layer(),
    }});
    let r = ok(
        &client,
        "reliable_http_call",
        json!({"url": target.url("/status?code=500"), "policy": retry_policy(3, breaker)}),
    )
    .await;
    assert_eq!(r["served_by"], "retry(breaker(api))");
    assert_eq!(target.requests(), 7, "{r}");
    assert!(
        r["error"].as_str().is_some_and(|e| e.contains("breaker")),
        "{r}"
    );
    client.cancel().await.unwrap();
}

/// Two sessions of one server, as two agents over HTTP see it.
async fn two_sessions() -> (
    RunningService<RoleClient, ()>,
    RunningService<RoleClient, ()>,
) {
    let server = ReliableServer::new(settings()).unwrap();
    let mut clients = Vec::new();
    for s in [server.session(), server.session()] {
        let (server_io, client_io) = tokio::io::duplex(1 << 16);
        tokio::spawn(async move {
            if let Ok(running) = s.serve(server_io).await {
                let _ = running.waiting().await;
            }
        });
        clients.push(().serve(client_io).await.expect("initialize"));
    }
    let b = clients.pop().unwrap();
    (clients.pop().unwrap(), b)
}

#[tokio::test]
async fn a_shared_policy_keeps_its_breaker_across_calls_and_a_per_client_one_does_not() {
    let target = support::serve("127.0.0.1").await;
    let (a, b) = two_sessions().await;
    let policy = |scope: &str| {
        json!({"Breaker": {
            "config": {"failure_rate": 0.5, "minimum_calls": 2},
            "scope": scope,
            "inner": call_layer(),
        }})
    };
    let failing =
        |scope: &str| json!({"url": target.url("/status?code=500"), "policy": policy(scope)});
    // Each call its own client: a fresh breaker every time, every call is sent.
    for _ in 0..3 {
        ok(&a, "reliable_http_call", failing("PerClient")).await;
    }
    assert_eq!(target.requests(), 3);
    // Shared: two failures of two open it, and it refuses the next call, from any session.
    ok(&a, "reliable_http_call", failing("Shared")).await;
    ok(&b, "reliable_http_call", failing("Shared")).await;
    assert_eq!(target.requests(), 5);
    let r = ok(&b, "reliable_http_call", failing("Shared")).await;
    assert_eq!(target.requests(), 5, "sent through an open breaker: {r}");
    assert!(
        r["error"]
            .as_str()
            .is_some_and(|e| e.contains("breaker is open")),
        "{r}"
    );
    a.cancel().await.unwrap();
    b.cancel().await.unwrap();
}

#[tokio::test]
async fn a_hostile_policy_is_refused_naming_the_field_and_nothing_is_sent() {
    let target = support::serve("127.0.0.1").await;
    let client = connect(settings()).await;
    let url = target.url("/ok");
    let mut deep = call_layer();
    // 2 levels each: deeper than the bound, within the transport's own JSON limit of 128.
    for _ in 0..25 {
        deep = json!({"Fallback": [deep]});
    }
    let huge = json!({"Call": {"downstream": "x".repeat(20_000)}});
    let cases = [
        (huge, "policy: over the limit of 16384 bytes".to_string()),
        (deep, "policy: nested deeper than 40 levels".to_string()),
        (
            retry_policy(50, call_layer()),
            "policy.policy.max_attempts: 50 is over the server's ceiling of 5 attempts (set by --max-attempts)".to_string(),
        ),
        (
            json!({"Retry": {"policy": {"max_attempts": null, "backoff": {"shape": {"Constant": {"delay": "10ms"}}}}, "inner": call_layer()}}),
            "policy.policy.max_attempts: unbounded attempts: expected at most 5".to_string(),
        ),
        (
            retry_policy(2, json!({"Call": {"downstream": "api", "timeout": "1h"}})),
            "policy.inner.timeout: 3600s is over the server's ceiling of 30s".to_string(),
        ),
        (
            json!({"Hedge": {"config": {"delay": {"Fixed": "10ms"}, "max_hedges": 4}, "idempotent": true, "inner": call_layer()}}),
            "policy.config.max_hedges: 4 is over the server's ceiling of 1 hedge per attempt (set by --max-hedges)".to_string(),
        ),
        (
            json!({"Circuit": {"inner": call_layer()}}),
            "policy: unknown variant `Circuit`".to_string(),
        ),
        (
            retry_policy(2, json!({"Call": {"downstrem": "api"}})),
            "policy.Retry.inner.Call.downstrem".to_string(),
        ),
        (
            retry_policy(2, retry_policy(2, call_layer())),
            "policy.inner: a second Retry on the route".to_string(),
        ),
        (
            retry_policy(
                2,
                json!({"Breaker": {"config": {"failure_rate": 7.0}, "inner": call_layer()}}),
            ),
            "policy.inner: failure_rate: 7 is not a fraction".to_string(),
        ),
    ];
    for (policy, needle) in cases {
        let e = in_band_error(
            &client,
            "reliable_http_call",
            json!({"url": url, "policy": policy}),
        )
        .await;
        assert!(e.contains(&needle), "expected {needle:?} in: {e}");
        assert!(e.len() < 2048, "clipped: {} bytes", e.len());
    }
    // The policy and the seed arguments together are refused, not merged.
    let e = in_band_error(
        &client,
        "reliable_http_call",
        json!({"url": url, "policy": call_layer(), "attempts": 2}),
    )
    .await;
    assert!(e.starts_with("attempts: a call with a policy"), "{e}");
    // A credential the call carries is never echoed, even when the policy quotes it.
    let e = in_band_error(
        &client,
        "reliable_http_call",
        json!({
            "url": url,
            "headers": {"Authorization": "Bearer sk-policy-secret-9"},
            "policy": {"Call": {"downstream": "api", "timeout": "Bearer sk-policy-secret-9"}},
        }),
    )
    .await;
    assert!(!e.contains("sk-policy-secret-9"), "{e}");
    assert!(e.contains("policy.Call.timeout"), "{e}");
    assert_eq!(target.requests(), 0, "a refused policy sends nothing");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_policy_without_timeouts_gets_the_servers_ceilings() {
    let target = support::serve("127.0.0.1").await;
    let client = connect(Settings {
        limits: Limits {
            max_attempt_timeout: std::time::Duration::from_millis(300),
            read_timeout: std::time::Duration::from_secs(5),
            ..Limits::default()
        },
        ..settings()
    })
    .await;
    // No timeout anywhere in the policy: the attempt is still cut at the operator's 300 ms, not
    // left to the read timeout (nor forever).
    let r = ok(
        &client,
        "reliable_http_call",
        json!({"url": target.url("/hang"), "policy": {"Call": {"downstream": "slow"}}}),
    )
    .await;
    assert_eq!(r["served_by"], "slow");
    assert!(
        r["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("timed out: attempt 1")),
        "{r}"
    );
    // A policy asking for more than the ceiling is refused, saying it.
    let e = in_band_error(
        &client,
        "reliable_http_call",
        json!({"url": target.url("/hang"), "policy": {"Call": {"downstream": "slow", "timeout": "1s"}}}),
    )
    .await;
    assert!(e.contains("ceiling of 300ms"), "{e}");
    client.cancel().await.unwrap();
}

/// A server whose operator set `--max-attempts max_attempts --max-hedges max_hedges`.
fn ceilings(max_attempts: u32, max_hedges: u32) -> Settings {
    Settings {
        limits: Limits {
            max_attempts,
            max_hedges,
            ..Limits::default()
        },
        ..settings()
    }
}

/// A policy of `attempts` attempts, each `hedges` hedges 20 ms apart, at most 100 ms an attempt
/// (and a server's `Retry-After` waited at most 100 ms: the default, 30 s, is over a whole-call
/// time shorter than that).
fn hedged_policy(attempts: u32, hedges: u32) -> Value {
    json!({"Retry": {
        "policy": {"max_attempts": attempts, "attempt_timeout": "100ms", "max_server_delay": "100ms",
                   "backoff": {"shape": {"Constant": {"delay": "10ms"}}}},
        "inner": {"Hedge": {
            "config": {"delay": {"Fixed": "20ms"}, "max_hedges": hedges},
            "idempotent": true,
            "inner": call_layer(),
        }},
    }})
}

/// The `maximum` of `attempts` in `tool`'s schema, and `policy`'s description if it has one.
async fn stated(client: &RunningService<RoleClient, ()>, tool: &str) -> (Value, String) {
    let tools = client.list_all_tools().await.unwrap();
    let t = tools.iter().find(|t| t.name == tool).unwrap();
    let schema = serde_json::to_value(&t.input_schema).unwrap();
    let policy = schema["properties"]["policy"]["description"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    (schema["properties"]["attempts"]["maximum"].clone(), policy)
}

/// The ceilings are the operator's: the schemas state them as configured, and the seed
/// arguments, a breaker's attempts and a policy are held to them, not to the defaults; a value
/// over one is refused naming it and its flag, and nothing is sent.
#[tokio::test]
async fn the_operators_ceilings_are_stated_and_held() {
    // Ceilings out of range are refused when the server is made, not at the first call.
    let e = ReliableServer::new(ceilings(5, 4)).unwrap_err();
    assert!(e.starts_with("--max-hedges: 4 is outside 0..=3"), "{e}");
    let e = ReliableServer::new(ceilings(0, 1)).unwrap_err();
    assert!(e.starts_with("--max-attempts: 0 is outside 1..=20"), "{e}");
    let target = support::serve("127.0.0.1").await;
    let defaults = connect(settings()).await;
    let (max, policy) = stated(&defaults, "reliable_http_call").await;
    assert_eq!(max, json!(5));
    assert!(
        policy.contains("This server's ceilings: 5 attempts per call, 1 hedge per attempt"),
        "{policy}"
    );
    assert_eq!(stated(&defaults, "create_breaker").await.0, json!(5));
    defaults.cancel().await.unwrap();

    let client = connect(ceilings(7, 2)).await;
    let (max, policy) = stated(&client, "reliable_http_call").await;
    assert_eq!(max, json!(7));
    assert!(
        policy.contains("This server's ceilings: 7 attempts per call, 2 hedges per attempt"),
        "{policy}"
    );
    assert_eq!(stated(&client, "create_breaker").await.0, json!(7));
    let failing = target.url("/status?code=500");
    let fast = json!({"base": "1ms", "cap": "5ms"});
    // The seed arguments: 7 attempts are made, 8 are refused before anything is sent.
    let r = ok(
        &client,
        "reliable_http_call",
        json!({"url": failing, "attempts": 7, "backoff": fast}),
    )
    .await;
    assert_eq!(r["attempts"].as_array().map(Vec::len), Some(7), "{r}");
    assert_eq!(target.requests(), 7);
    let e = in_band_error(
        &client,
        "reliable_http_call",
        json!({"url": failing, "attempts": 8, "backoff": fast}),
    )
    .await;
    assert_eq!(
        e,
        "attempts: 8 is outside 1..=7 (the server's ceiling of 7 attempts, set by --max-attempts)"
    );
    let e = in_band_error(
        &client,
        "create_breaker",
        json!({"name": "api", "attempts": 8}),
    )
    .await;
    assert!(
        e.contains("ceiling of 7 attempts") && e.contains("--max-attempts"),
        "{e}"
    );
    ok(
        &client,
        "create_breaker",
        json!({"name": "api", "attempts": 7}),
    )
    .await;
    // The policy argument: 7 attempts of 2 hedges load (a GET to /ok: one request, and a hedge
    // or two if it is slower than 20 ms), more do not.
    let r = ok(
        &client,
        "reliable_http_call",
        json!({"url": target.url("/ok"), "policy": hedged_policy(7, 2)}),
    )
    .await;
    assert_eq!(r["status"], json!(200), "{r}");
    let sent = target.requests();
    assert!((8..=10).contains(&sent), "{sent}");
    for (policy, refused) in [
        (
            hedged_policy(8, 2),
            "policy.policy.max_attempts: 8 is over the server's ceiling of 7 attempts (set by --max-attempts)",
        ),
        (
            hedged_policy(7, 3),
            "policy.inner.config.max_hedges: 3 is over the server's ceiling of 2 hedges per attempt (set by --max-hedges)",
        ),
    ] {
        let e = in_band_error(
            &client,
            "reliable_http_call",
            json!({"url": target.url("/ok"), "policy": policy}),
        )
        .await;
        assert_eq!(e, refused);
    }
    assert_eq!(target.requests(), sent, "a refused call sends nothing");
    client.cancel().await.unwrap();
}

/// Raised ceilings as an attack on availability: a call still sends at most
/// `max_attempts × (1 + max_hedges)` requests, and still ends within the whole-call time.
#[tokio::test]
async fn raised_ceilings_keep_a_call_within_its_requests_and_its_time() {
    // Every copy hangs: each attempt sends its copy and every hedge, then times out at 100 ms.
    // 3 hedges (the hard maximum) are all sent: the engine holds 4 copies of an attempt.
    for (attempts, hedges) in [(6, 2), (2, 3)] {
        let target = support::serve("127.0.0.1").await;
        let raised = ceilings(attempts, hedges);
        let most = raised.limits.max_requests_per_call();
        assert_eq!(most, attempts * (1 + hedges));
        let client = connect(raised).await;
        let r = ok(
            &client,
            "reliable_http_call",
            json!({"url": target.url("/hang"), "policy": hedged_policy(attempts, hedges)}),
        )
        .await;
        assert_eq!(
            r["attempts"].as_array().map(Vec::len),
            Some(most as usize),
            "{r}"
        );
        let waited = std::time::Instant::now();
        while (target.requests() as u32) < most
            && waited.elapsed() < std::time::Duration::from_secs(5)
        {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(target.requests() as u32, most);
        client.cancel().await.unwrap();
    }

    // The whole-call time holds whatever the attempts: 250 ms cut the same call short.
    let target = support::serve("127.0.0.1").await;
    let client = connect(Settings {
        limits: Limits {
            max_call_time: std::time::Duration::from_millis(250),
            ..ceilings(6, 2).limits
        },
        ..settings()
    })
    .await;
    let started = std::time::Instant::now();
    let r = ok(
        &client,
        "reliable_http_call",
        json!({"url": target.url("/hang"), "policy": hedged_policy(6, 2)}),
    )
    .await;
    let took = started.elapsed();
    assert!(
        took < std::time::Duration::from_millis(250 + 2_000),
        "{took:?}: {r}"
    );
    let sent = r["attempts"].as_array().map_or(0, Vec::len);
    assert!((1..18).contains(&sent), "{sent} copies sent: {r}");
    client.cancel().await.unwrap();
}
