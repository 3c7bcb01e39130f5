"""Checks server.json (the MCP registry's entry for reliable-mcp) against the wheels it names.

    python .ci/check_server_json.py server.json dist/reliable_mcp-*.whl dist/reliablekit-*.whl

For every package in server.json: it is on PyPI, a wheel given here has that name and version,
its description (the README) carries the `mcp-name:` line with server.json's name (how the
registry checks ownership), and it installs a command of the package's name (what `uvx NAME`
runs). Also: the name's form, the description's length, the repository, and that the
reliablekit wheel's `mcp` extra asks for a version of reliable-mcp that server.json lists.
Exits non-zero with every problem found.
"""

import json
import re
import sys
import zipfile
from email.parser import Parser


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def read_wheel(path):
    with zipfile.ZipFile(path) as z:
        meta_name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        meta = Parser().parsestr(z.read(meta_name).decode())
        scripts = {n.rsplit("/", 1)[1] for n in z.namelist() if "/scripts/" in n and ".data/" in n}
        entry = next((n for n in z.namelist() if n.endswith(".dist-info/entry_points.txt")), None)
        if entry:
            text = z.read(entry).decode()
            section = re.search(r"\[console_scripts\]\n(.*?)(\n\[|\Z)", text, re.S)
            if section:
                scripts |= {line.split("=")[0].strip() for line in section.group(1).splitlines() if "=" in line}
    return meta, scripts


def main(server_json, wheels):
    problems = []
    server = json.load(open(server_json))
    name = server.get("name", "")
    if not re.fullmatch(r"io\.github\.[A-Za-z0-9-]+/[A-Za-z0-9._-]+", name):
        problems.append(f"name {name!r} is not io.github.OWNER/NAME")
    if not 0 < len(server.get("description", "")) <= 100:
        problems.append("description must be 1 to 100 characters")
    for key in ("$schema", "version", "packages", "repository"):
        if key not in server:
            problems.append(f"no {key}")
    owner = name.split("/")[0].removeprefix("io.github.")
    repo_url = server.get("repository", {}).get("url", "")
    if not repo_url.startswith(f"https://github.com/{owner}/"):
        problems.append(f"repository {repo_url!r} is not under github.com/{owner}")
    by_name = {}
    for w in wheels:
        meta, scripts = read_wheel(w)
        by_name[normalize(meta["Name"])] = (w, meta, scripts)
    listed = {}
    for p in server.get("packages", []):
        ident = p.get("identifier", "")
        listed[normalize(ident)] = p.get("version")
        if p.get("registryType") != "pypi":
            problems.append(f"{ident}: registryType {p.get('registryType')!r}, not pypi")
        if p.get("transport", {}).get("type") != "stdio":
            problems.append(f"{ident}: transport is not stdio")
        if normalize(ident) not in by_name:
            problems.append(f"{ident}: no wheel of that name given ({sorted(by_name)})")
            continue
        w, meta, scripts = by_name[normalize(ident)]
        if meta["Version"] != p.get("version"):
            problems.append(f"{ident}: server.json says {p.get('version')}, the wheel is {meta['Version']}")
        if p.get("version") != server.get("version"):
            problems.append(f"{ident}: version {p.get('version')} differs from the server's {server.get('version')}")
        if f"mcp-name: {name}" not in (meta.get_payload() or ""):
            problems.append(f"{ident}: its README has no line `mcp-name: {name}`")
        if ident not in scripts:
            problems.append(f"{ident}: the wheel installs no command {ident!r} (it has {sorted(scripts)})")
        for url in meta.get_all("Project-URL") or []:
            if url.startswith("Repository") and not url.endswith(repo_url):
                problems.append(f"{ident}: wheel says {url}, server.json {repo_url}")
        print(f"{ident} {meta['Version']}: {w}")
    kit = by_name.get("reliablekit")
    if kit:
        _, meta, scripts = kit
        wants = [r for r in meta.get_all("Requires-Dist") or [] if re.search(r"extra\s*==\s*[\"']mcp[\"']", r)]
        ok = any(normalize(re.split(r"[ <>=!;\[]", r, 1)[0]) in listed for r in wants)
        if not ok:
            problems.append(f"reliablekit's mcp extra ({wants}) names no package of server.json")
        for command in ("reliablekit", "reliablekit-mcp"):
            if command not in scripts:
                problems.append(f"reliablekit installs no {command} command")
    for p in problems:
        print(f"FAIL: server.json: {p}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"server.json ({name}) agrees with {len(wheels)} wheels")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
