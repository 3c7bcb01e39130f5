"""Smoke test of reliable-mcp with the official Python MCP client (mcp 2.3.0), over stdio, then
briefly over streamable HTTP on loopback.

    python .ci/mcp_smoke.py path/to/reliable-mcp

Starts the server as a subprocess with 127.0.0.1 allow-listed, serves a tiny HTTP endpoint on
127.0.0.1 for reliable_http_call (nothing is sent anywhere else), then: initialize, list tools and
call every one, a bad argument (in-band error), a refused SSRF target, the resource template and
a breaker resource, and the diagnose_breaker prompt. Then the same binary with
`--http 127.0.0.1:0`: initialize, list tools, call one, read the template list and get the prompt.
Exits non-zero on the first failure.
"""

import asyncio
import base64
import json
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from mcp import ClientSession, StdioServerParameters
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


class Echo(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (the stdlib's name)
        body = b"hello from loopback"
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


def text_of(result):
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def main(binary):
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
    params = StdioServerParameters(command=binary, args=["--allow-ip", "127.0.0.1"], env=env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            check(init.server_info.name == "reliable-mcp", f"initialize: {init.server_info.name} {init.server_info.version}")

            tools = (await session.list_tools()).tools
            names = {t.name for t in tools}
            check(names == TOOLS, f"list_tools: {sorted(names)}")

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
            check([t.uri_template for t in templates] == ["reliable://breaker/{name}"], "list_resource_templates")
            resources = (await session.list_resources()).resources
            check([str(x.uri) for x in resources] == ["reliable://breaker/smoke"], "list_resources")
            res = await session.read_resource("reliable://breaker/smoke")
            state = json.loads(res.contents[0].text)
            check(state["name"] == "smoke" and state["totals"]["succeeded"] == 1, f"read_resource: {state['state']}, {state['totals']}")

            prompts = (await session.list_prompts()).prompts
            check([p.name for p in prompts] == ["diagnose_breaker"], "list_prompts")
            p = await session.get_prompt("diagnose_breaker", {"name": "smoke"})
            check("smoke" in p.messages[0].content.text, "get_prompt diagnose_breaker")
    http.shutdown()
    await over_http(binary)
    print("python mcp client smoke test passed")


async def over_http(binary):
    proc = await asyncio.create_subprocess_exec(binary, "--http", "127.0.0.1:0", stderr=asyncio.subprocess.PIPE)
    try:
        url = None
        while url is None:
            line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
            if not line:
                raise SystemExit("FAIL: the HTTP server exited before listening")
            if "streamable HTTP at " in line:
                url = line.rsplit(" ", 1)[1].strip()
        check(url.startswith("http://127.0.0.1:"), f"HTTP server listening at {url}")
        # Keep reading its log, so that a full pipe never blocks the server.
        drain = asyncio.ensure_future(proc.stderr.read())
        async with streamable_http_client(url) as (read, write):
            async with ClientSession(read, write) as session:
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
    finally:
        # Ended on every path, and waited for with a bound: SIGTERM, then SIGKILL after 10 s.
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except asyncio.TimeoutError:
                proc.kill()
                await proc.wait()


async def bounded(binary):
    # A hang fails the test (and its processes end with the context managers) instead of CI
    # waiting forever; a passing run takes a few seconds.
    try:
        await asyncio.wait_for(main(binary), 300)
    except asyncio.TimeoutError:
        raise SystemExit("FAIL: the smoke test did not finish within 300 s")


if __name__ == "__main__":
    asyncio.run(bounded(sys.argv[1]))
