"""Runs the MCP client config snippets of the README as written, with the official Python client.

    python .ci/mcp_readme_configs.py mcp/README.md VENV/bin

Every ```json block of the README holding "mcpServers" is a client config. A server with a
"command" is started as a client would (the command looked up on PATH, VENV/bin first, with its
"args"), over stdio; a server with a "url" needs the command the README gives for it
(`reliable-mcp --http HOST:PORT`, in backquotes), which is run as written, and the client connects
to the URL. Each must initialize, list the six tools and answer compute_backoff. Exits non-zero
on the first failure, or if the README has no stdio or no HTTP snippet.
"""

import asyncio
import json
import os
import re
import shlex
import shutil
import sys
from urllib.parse import urlparse

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


def fail(what):
    raise SystemExit(f"FAIL: README config: {what}")


async def exercise(session, label):
    init = await session.initialize()
    if init.server_info.name != "reliable-mcp":
        fail(f"{label}: initialize answered {init.server_info.name}")
    tools = {t.name for t in (await session.list_tools()).tools}
    if len(tools) != 6:
        fail(f"{label}: {sorted(tools)}")
    r = await session.call_tool("compute_backoff", {"retries": 2, "backoff": {"base": "100ms", "jitter": "none"}})
    delays = [d["delay_ms"] for d in r.structured_content["delays"]]
    if delays != [100.0, 200.0]:
        fail(f"{label}: compute_backoff gave {delays}")
    print(f"ok: {label}")


async def stdio(config, path, label):
    command = shutil.which(config["command"], path=path)
    if command is None:
        fail(f"{label}: {config['command']!r} is not on PATH")
    env = dict(os.environ, PATH=path)
    params = StdioServerParameters(command=command, args=config.get("args", []), env=env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await exercise(session, label)


async def http(config, readme, path, label):
    url = config["url"]
    where = urlparse(url).netloc
    commands = [c for c in re.findall(r"`(reliable-mcp --http [^`]+)`", readme) if where in c]
    if not commands:
        fail(f"{label}: the README gives no `reliable-mcp --http {where}` command for {url}")
    argv = shlex.split(commands[0])
    argv[0] = shutil.which(argv[0], path=path) or fail(f"{label}: {argv[0]} is not on PATH")
    proc = await asyncio.create_subprocess_exec(*argv, stderr=asyncio.subprocess.PIPE)
    try:
        while True:
            line = (await asyncio.wait_for(proc.stderr.readline(), 30)).decode()
            if not line:
                fail(f"{label}: `{commands[0]}` exited before listening")
            if "streamable HTTP at " in line:
                break
        async with streamable_http_client(url) as (read, write):
            async with ClientSession(read, write) as session:
                await exercise(session, f"{label} (started with `{commands[0]}`)")
    finally:
        proc.terminate()
        await proc.wait()


async def main(readme_path, bin_dir):
    readme = open(readme_path).read()
    path = bin_dir + os.pathsep + os.environ.get("PATH", "")
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", readme, re.S) if '"mcpServers"' in b]
    kinds = set()
    for i, block in enumerate(blocks):
        for name, config in block["mcpServers"].items():
            label = f"snippet {i + 1} ({name}: {config.get('command') or config.get('url')})"
            if "command" in config:
                kinds.add("stdio")
                await stdio(config, path, label)
            else:
                kinds.add("http")
                await http(config, readme, path, label)
    if kinds != {"stdio", "http"}:
        fail(f"the README has snippets for {sorted(kinds)}, not both stdio and http")
    print(f"README: {len(blocks)} MCP client config snippets work as written")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
