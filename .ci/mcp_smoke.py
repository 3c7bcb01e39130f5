"""Smoke test of reliable-mcp with the official Python MCP client (mcp 2.3.0), over stdio, then
briefly over streamable HTTP on loopback.

    python .ci/mcp_smoke.py path/to/reliable-mcp
    python .ci/mcp_smoke.py path/to/python -m reliable.mcp     # any command that starts the server

Starts the server as a subprocess with 127.0.0.1 allow-listed, serves a tiny HTTP endpoint on
127.0.0.1 for reliable_http_call (nothing is sent anywhere else), then: initialize, list tools
(every schema checked against the JSON Schema 2020-12 metaschema, strictly: only its keywords
and formats, integers bounded) and call every one, a bad argument (in-band error), a refused SSRF target, the resource template and
a breaker resource, and the diagnose_breaker prompt. Then the same binary with
`--http 127.0.0.1:0`: initialize, list tools, call one, read the template list and get the prompt.
Over both transports, what agents need from the protocol: resources/subscribe (updated at a
breaker's transition, list_changed on creation), logging/setLevel (transitions and refused calls
as log messages), completion/complete (breaker and scenario names), and simulate_storm's progress
notifications and cancellation (the slot is free again at once).
Exits non-zero on the first failure.
"""

import asyncio
import base64
import json
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from jsonschema import Draft202012Validator

from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

TOOLS = {
    "create_breaker",
    "get_breaker_state",
    "compute_backoff",
    "reliable_http_call",
    "simulate_storm",
    "list_scenarios",
}


# JSON Schema 2020-12: the keywords of its vocabularies, and the formats it defines.
KEYWORDS = set("""$schema $id $ref $defs $anchor $dynamicRef $dynamicAnchor $vocabulary $comment
allOf anyOf oneOf not if then else dependentSchemas prefixItems items contains properties
patternProperties additionalProperties propertyNames unevaluatedItems unevaluatedProperties type
const enum multipleOf maximum exclusiveMaximum minimum exclusiveMinimum maxLength minLength pattern
maxItems minItems uniqueItems maxContains minContains maxProperties minProperties required
dependentRequired title description default deprecated readOnly writeOnly examples format
contentEncoding contentMediaType contentSchema""".split())
FORMATS = set("""date-time date time duration email idn-email hostname idn-hostname ipv4 ipv6 uri
uri-reference iri iri-reference uuid uri-template json-pointer relative-json-pointer regex""".split())
SCHEMA_MAPS = {"properties", "patternProperties", "$defs", "dependentSchemas"}
SCHEMA_LISTS = {"allOf", "anyOf", "oneOf", "prefixItems"}
SCHEMA_ONE = {"items", "not", "if", "then", "else", "contains", "additionalProperties", "propertyNames",
              "unevaluatedItems", "unevaluatedProperties", "contentSchema"}


def strict_problems(path, schema):
    """What a strict 2020-12 validator would reject beyond the metaschema: unknown keywords,
    formats the specification does not define, integers without minimum and maximum."""
    if isinstance(schema, bool):
        return []
    out = []
    for k, v in schema.items():
        at = f"{path}/{k}"
        if k not in KEYWORDS:
            out.append(f"{at}: not a 2020-12 keyword")
        if k == "format" and v not in FORMATS:
            out.append(f"{at}: non-standard format {v!r}")
        if k in SCHEMA_MAPS:
            for name, sub in v.items():
                out += strict_problems(f"{at}/{name}", sub)
        if k in SCHEMA_LISTS:
            for i, sub in enumerate(v):
                out += strict_problems(f"{at}/{i}", sub)
        if k in SCHEMA_ONE:
            out += strict_problems(at, v)
    types = schema.get("type", [])
    if "integer" in (types if isinstance(types, list) else [types]) and not ("minimum" in schema and "maximum" in schema):
        out.append(f"{path}: an integer without minimum and maximum")
    return out


def check_schemas(tools):
    """Every tool's input and output schema against the 2020-12 metaschema, strictly."""
    problems = []
    for t in tools:
        for kind, schema in (("input", t.input_schema), ("output", t.output_schema)):
            if schema is None:
                continue
            Draft202012Validator.check_schema(schema)
            problems += strict_problems(f"{t.name}/{kind}", schema)
    check(not problems, "schemas are strict JSON Schema 2020-12" + "".join(f"\n  {p}" for p in problems))


class Echo(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (the stdlib's name)
        body = b"hello from loopback"
        if self.path == "/fail":
            self.send_response(500)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def check(cond, what):
    if not cond:
        raise SystemExit(f"FAIL: {what}")
    print(f"ok: {what}")


class Heard:
    """What the server said without being asked: notifications and log messages."""

    def __init__(self):
        self.notifications = []
        self.logs = []

    async def on_message(self, message):
        if not isinstance(message, Exception):
            self.notifications.append(message)

    async def on_log(self, params):
        self.logs.append(params)

    def methods(self):
        return [getattr(n, "method", "") for n in self.notifications]

    async def wait_for(self, what, cond, seconds=10):
        for _ in range(int(seconds * 20)):
            if cond():
                return
            await asyncio.sleep(0.05)
        raise SystemExit(f"FAIL: {what}: heard {self.methods()} and {len(self.logs)} log messages")


async def agent_features(session, init, heard, echo_port, label):
    """Subscriptions, completions, progress with cancellation and logging, through `session`
    (the server was started with --max-simulations 1 and 127.0.0.1 allowed)."""
    caps = init.capabilities
    check(caps.resources.subscribe and caps.resources.list_changed and caps.completions is not None and caps.logging is not None,
          f"{label}: capabilities resources.subscribe, listChanged, completions, logging")
    await session.set_logging_level("info")
    uri = "reliable://breaker/agent"
    await session.subscribe_resource(uri)
    r = await session.call_tool("create_breaker", {"name": "agent", "consecutive_failures": 1, "attempts": 1, "cooldown": "60s"})
    check(not r.is_error, f"{label}: create_breaker agent")
    await heard.wait_for(f"{label}: list_changed on create", lambda: "notifications/resources/list_changed" in heard.methods())
    check(True, f"{label}: creating a breaker sent notifications/resources/list_changed")
    fail = f"http://127.0.0.1:{echo_port}/fail"
    r = await session.call_tool("reliable_http_call", {"url": fail, "breaker": "agent"})
    check(r.structured_content["status"] == 500, f"{label}: a failing call through the breaker")
    updated = lambda: any(getattr(n, "method", "") == "notifications/resources/updated" and str(n.params.uri) == uri for n in heard.notifications)
    await heard.wait_for(f"{label}: resources/updated when the breaker opened", updated)
    check(True, f"{label}: the breaker's transition sent notifications/resources/updated for {uri}")
    opened = lambda: any(isinstance(l.data, dict) and l.data.get("transition", {}).get("to") == "open" for l in heard.logs)
    await heard.wait_for(f"{label}: a log message for the transition", opened)
    check(True, f"{label}: the transition came as a log message (warning)")
    r = await session.call_tool("reliable_http_call", {"url": fail, "breaker": "agent", "fallback": "later"})
    refused = lambda: any(isinstance(l.data, dict) and "refused" in l.data for l in heard.logs)
    await heard.wait_for(f"{label}: a log message for the refused call", refused)
    check(r.structured_content["served_by"] != "downstream", f"{label}: the refused call came as a log message too")
    await session.unsubscribe_resource(uri)

    def values(result):
        return result.completion.values

    c = await session.complete(types.ResourceTemplateReference(type="ref/resource", uri="reliable://breaker/{name}"), {"name": "name", "value": "ag"})
    check(values(c) == ["agent"], f"{label}: completion of the breaker template's name: {values(c)}")
    c = await session.complete(types.PromptReference(type="ref/prompt", name="diagnose_breaker"), {"name": "name", "value": ""})
    check("agent" in values(c), f"{label}: completion of diagnose_breaker's name: {values(c)}")
    c = await session.complete(types.ResourceTemplateReference(type="ref/resource", uri="reliable://scenario/{name}"), {"name": "name", "value": "layered"})
    check(values(c) == ["layered-stack"], f"{label}: completion of a scenario name: {values(c)}")

    steps = []
    first = asyncio.Event()

    async def on_progress(progress, total, message):
        steps.append((progress, total))
        first.set()

    long = asyncio.create_task(session.call_tool("simulate_storm", {"scenario": "layered-stack", "seeds": 1000}, progress_callback=on_progress))
    # Cancelled as soon as the first progress notification arrives.
    await asyncio.wait([long, asyncio.create_task(first.wait())], timeout=60, return_when=asyncio.FIRST_COMPLETED)
    check(steps and not long.done(), f"{label}: simulate_storm reports progress: {steps[:1]} of 1000 seeds")
    long.cancel()
    try:
        await long
    except asyncio.CancelledError:
        pass
    # The cancelled simulation frees its slot (--max-simulations 1): a small one gets it soon.
    for attempt in range(100):
        r = await session.call_tool("simulate_storm", {"scenario": "layered-stack", "seeds": 1})
        if not r.is_error:
            break
        check("--max-simulations" in text_of(r), f"{label}: busy, not failed: {text_of(r)[:80]}")
        await asyncio.sleep(0.1)
    check(not r.is_error, f"{label}: notifications/cancelled stopped the simulation and freed its slot ({attempt} retries)")
    done = steps[-1][0] if steps else 0
    check(done < 1000, f"{label}: the cancelled simulation stopped at {done} of 1000 seeds")


def text_of(result):
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def main(command):
    binary, prefix = command[0], command[1:]
    http = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    port = http.server_address[1]
    # A port on 127.0.0.2 that nobody listens on: the refusal must come before any connection.
    with socket.socket() as s:
        s.bind(("127.0.0.2", 0))
        refused_port = s.getsockname()[1]

    # A proxy trap: the server must ignore proxy settings from its environment.
    trap = socket.socket()
    trap.bind(("127.0.0.1", 0))
    trap.listen()
    trapped = []
    threading.Thread(target=lambda: trapped.append(trap.accept()), daemon=True).start()
    proxy = f"http://127.0.0.1:{trap.getsockname()[1]}"
    env = {"HTTP_PROXY": proxy, "HTTPS_PROXY": proxy, "ALL_PROXY": proxy, "http_proxy": proxy, "https_proxy": proxy}
    params = StdioServerParameters(command=binary, args=[*prefix, "--allow-ip", "127.0.0.1", "--max-simulations", "1"], env=env)
    heard = Heard()
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, message_handler=heard.on_message, logging_callback=heard.on_log) as session:
            init = await session.initialize()
            check(init.server_info.name == "reliable-mcp", f"initialize: {init.server_info.name} {init.server_info.version}")

            tools = (await session.list_tools()).tools
            names = {t.name for t in tools}
            check(names == TOOLS, f"list_tools: {sorted(names)}")
            check_schemas(tools)

            r = await session.call_tool("create_breaker", {"name": "smoke", "attempts": 2, "cooldown": "5s"})
            check(not r.is_error and r.structured_content["action"] == "created", "call create_breaker")

            r = await session.call_tool("get_breaker_state", {"name": "smoke"})
            check(not r.is_error and r.structured_content["state"] == "closed", "call get_breaker_state")

            r = await session.call_tool("compute_backoff", {"retries": 3, "backoff": {"base": "100ms", "jitter": "none"}})
            delays = [d["delay_ms"] for d in r.structured_content["delays"]]
            check(delays == [100.0, 200.0, 400.0], f"call compute_backoff: {delays}")

            url = f"http://127.0.0.1:{port}/"
            r = await session.call_tool("reliable_http_call", {"url": url, "breaker": "smoke", "headers": {"Authorization": "Bearer smoke-secret-token"}})
            sc = r.structured_content
            check(not r.is_error and sc["status"] == 200 and sc["body"] == "hello from loopback", f"call reliable_http_call: {sc['status']} via {sc['served_by']}")
            check("smoke-secret-token" not in json.dumps(sc) + text_of(r), "reliable_http_call echoes no credentials")
            check(not trapped, "HTTP_PROXY and friends in the server's environment are ignored")

            r = await session.call_tool("reliable_http_call", {"url": f"http://127.0.0.2:{refused_port}/"})
            check(r.is_error and "refused" in text_of(r), f"SSRF target refused in-band: {text_of(r)[:90]}")

            r = await session.call_tool("list_scenarios", {})
            scenarios = [s["name"] for s in r.structured_content["scenarios"]]
            check(not r.is_error and "default" in scenarios, f"call list_scenarios: {len(scenarios)} scenarios")

            r = await session.call_tool("simulate_storm", {"scenario": "layered-stack"})
            kinds = [c.type for c in r.content]
            png = base64.b64decode(next(c.data for c in r.content if c.type == "image"))
            check(not r.is_error and kinds == ["text", "image"] and png[:4] == b"\x89PNG", f"call simulate_storm: {kinds}, PNG of {len(png)} bytes")

            r = await session.call_tool("create_breaker", {"name": "smoke", "failure_rate": 2})
            check(r.is_error and "failure_rate" in text_of(r), f"bad argument in-band: {text_of(r)[:80]}")

            templates = (await session.list_resource_templates()).resource_templates
            check([t.uri_template for t in templates] == ["reliable://breaker/{name}", "reliable://scenario/{name}"], "list_resource_templates")
            resources = (await session.list_resources()).resources
            check([str(x.uri) for x in resources] == ["reliable://breaker/smoke"], "list_resources")
            res = await session.read_resource("reliable://breaker/smoke")
            state = json.loads(res.contents[0].text)
            check(state["name"] == "smoke" and state["totals"]["succeeded"] == 1, f"read_resource: {state['state']}, {state['totals']}")

            prompts = (await session.list_prompts()).prompts
            check([p.name for p in prompts] == ["diagnose_breaker"], "list_prompts")
            p = await session.get_prompt("diagnose_breaker", {"name": "smoke"})
            check("smoke" in p.messages[0].content.text, "get_prompt diagnose_breaker")
            await agent_features(session, init, heard, port, "stdio")
    await over_http(command, port)
    http.shutdown()
    print("python mcp client smoke test passed")


async def over_http(command, echo_port):
    proc = await asyncio.create_subprocess_exec(
        *command, "--http", "127.0.0.1:0", "--allow-ip", "127.0.0.1", "--max-simulations", "1", stderr=asyncio.subprocess.PIPE
    )
    try:
        url = None
        while url is None:
            line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
            if not line:
                raise SystemExit("FAIL: the HTTP server exited before listening")
            if "streamable HTTP at " in line:
                url = line.rsplit(" ", 1)[1].strip()
        check(url.startswith("http://127.0.0.1:"), f"HTTP server listening at {url}")
        heard = Heard()
        # Keep reading its log, so that a full pipe never blocks the server.
        drain = asyncio.ensure_future(proc.stderr.read())
        async with streamable_http_client(url) as (read, write):
            async with ClientSession(read, write, message_handler=heard.on_message, logging_callback=heard.on_log) as session:
                init = await session.initialize()
                check(init.server_info.name == "reliable-mcp", "HTTP: initialize")
                names = {t.name for t in (await session.list_tools()).tools}
                check(names == TOOLS, "HTTP: list_tools")
                r = await session.call_tool("create_breaker", {"name": "over-http"})
                check(not r.is_error, "HTTP: call create_breaker")
                res = await session.read_resource("reliable://breaker/over-http")
                check(json.loads(res.contents[0].text)["state"] == "closed", "HTTP: read_resource")
                p = await session.get_prompt("diagnose_breaker", {"name": "over-http"})
                check("over-http" in p.messages[0].content.text, "HTTP: get_prompt")
                await agent_features(session, init, heard, echo_port, "HTTP")
    finally:
        # Ended on every path, and waited for with a bound: SIGTERM, then SIGKILL after 10 s.
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except asyncio.TimeoutError:
                proc.kill()
                await proc.wait()


async def bounded(args):
    # A hang fails the test (and its processes end with the context managers) instead of CI
    # waiting forever; a passing run takes a few seconds.
    try:
        await asyncio.wait_for(main(args), 300)
    except asyncio.TimeoutError:
        raise SystemExit("FAIL: the smoke test did not finish within 300 s")


if __name__ == "__main__":
    asyncio.run(bounded(sys.argv[1:]))
