#!/usr/bin/env python3
"""Where a cold `.ci/run` spends its compile time, without compiling anything.

For every cargo invocation of every job, in `.ci/run`'s order, asks cargo for its unit graph
(`cargo ... --unit-graph -Z unstable-options`, allowed on stable with RUSTC_BOOTSTRAP=1: cargo
only plans, it compiles nothing) and counts the compilation units that no earlier invocation
built into the same target directory. Two units are the same artifact when cargo would reuse
it: same package, target, mode, features, profile settings (not the profile's name), platform,
toolchain, RUSTFLAGS, and the same dependencies, recursively (a dependency built with other
features is another artifact, and so is everything above it).

    .ci/units.py            per-job table: units new to the run (compiled, build scripts run)
    .ci/units.py -v         and each invocation's count, and the packages compiled twice or more

INVOCATIONS below is a model of `.ci/run`'s cargo commands, kept by hand: change it with them.
Things that are not cargo (maturin, cargo install, cargo fuzz) are modelled by the cargo
command they run, with a tag where their flags make the artifacts differ.
"""

import hashlib
import json
import os
import subprocess
import sys
from collections import Counter, defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# CI=true's profile settings (see the top of .ci/run).
CI_ENV = {
    "CARGO_PROFILE_DEV_DEBUG": "line-tables-only",
    "CARGO_PROFILE_TEST_DEBUG": "line-tables-only",
    "CARGO_INCREMENTAL": "0",
}

# (job, directory, target dir (relative to ROOT), cargo arguments, tag, extra environment)
# A tag marks artifacts that flags outside the unit graph make different (another toolchain,
# RUSTFLAGS, clippy's wrapper on workspace members, rustdoc flags): "drop" after a job means
# drop_target removed that target dir.
T = "target"
INVOCATIONS = [
    ("clippy", ".", T, ["check", "--workspace", "--all-targets"], "clippy", {}),
    ("clippy", ".", T, ["check", "-p", "reliable-core", "--all-targets", "--features", "serde,policy"], "clippy", {}),
    ("tests", ".", T, ["test", "--workspace", "--no-run"], "", {}),
    ("doc", ".", T, ["doc", "--no-deps", "--all-features", "-p", "reliable-core", "-p", "reliablekit", "-p", "sim", "-p", "reliable-mcp"], "rustdoc", {}),
    ("proptest_long", ".", T, ["test", "-p", "reliable-core", "--release", "--test", "*state_machine*", "--no-run"], "", {}),
    ("loom", ".", "target/loom", ["test", "-p", "reliable-core", "--release", "--lib", "--no-run"], "loom", {}),
    ("loom", "drop", "target/loom", [], "", {}),
    ("nostd_check", "nostd-check", "nostd-check/target", ["build", "--release"], "", {}),
    ("nostd_check", "drop", "nostd-check/target", [], "", {}),
    ("bench_smoke", ".", T, ["test", "-p", "reliable-benches", "--benches", "--no-run"], "", {}),
    ("thumbv7em", ".", T, ["build", "-p", "reliable-core", "--target", "thumbv7em-none-eabihf"], "", {}),
    ("thumbv7em", ".", T, ["build", "-p", "reliable-core", "--target", "thumbv7em-none-eabihf", "--release"], "", {}),
    ("firmware", "firmware", "firmware/target", ["build", "--release"], "", {}),
    ("sim_scenarios", ".", T, ["build", "-p", "sim", "--release"], "", {}),
    ("sim_scenarios", ".", T, ["test", "-p", "sim", "--release", "--test", "partition_heal", "--no-run"], "", {}),
    ("sim_scenarios", ".", T, ["test", "-p", "sim", "--release", "--test", "shadow", "--no-run"], "", {}),
    ("sim_scenarios", ".", T, ["test", "-p", "sim", "--release", "--test", "fleet", "--no-run"], "", {}),
    ("default_report", ".", T, ["build", "-p", "sim", "--release"], "", {}),
    # cargo fuzz run -s none: release with debug assertions, sancov RUSTFLAGS, --target host.
    ("fuzz", "fuzz", "fuzz/target", ["build", "--release", "--bins", "--target", "x86_64-unknown-linux-gnu"], "fuzz", {"CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS": "true"}),
    ("fuzz", "drop", "fuzz/target", [], "", {}),
    ("validation", ".", T, ["test", "-p", "sim", "--release", "--test", "validation", "--no-run"], "", {}),
    ("validation", ".", T, ["build", "-p", "sim", "--release"], "", {}),
    ("sim_hostile", ".", T, ["build", "-p", "sim", "--release"], "", {}),
    ("sim_map", ".", T, ["build", "-p", "sim", "--release"], "", {}),
    ("reliable_crate", ".", T, ["test", "-p", "reliablekit", "--no-default-features", "--no-run"], "", {}),
    ("reliable_crate", ".", T, ["check", "-p", "reliablekit", "--all-targets", "--no-default-features"], "clippy", {}),
    ("reliable_crate", ".", T, ["check", "-p", "reliablekit", "--no-default-features", "--features", "metrics"], "", {}),
    ("reliable_crate", ".", T, ["check", "-p", "reliablekit", "--no-default-features", "--features", "tower"], "", {}),
    ("reliable_crate", ".", T, ["build", "-p", "reliablekit", "--example", "llm_client"], "", {}),
    ("reliable_crate", ".", T, ["build", "-p", "reliablekit", "--example", "layered"], "", {}),
    ("reliable_crate", ".", T, ["doc", "--no-deps", "--all-features", "-p", "reliable-core", "-p", "reliablekit", "-p", "sim", "-p", "reliable-mcp"], "rustdoc", {}),
    ("llm_report", ".", T, ["build", "-p", "sim", "--release"], "", {}),
    ("mcp_python", ".", T, ["test", "--workspace", "--no-run", "--test", "binary"], "", {}),
    # maturin build --release -m mcp/Cargo.toml (bin bindings): cargo rustc on the workspace.
    ("mcp_wheel", ".", T, ["build", "-p", "reliable-mcp", "--release"], "", {}),
    # maturin build -m python/Cargo.toml --release (the build python_wheel reuses)
    ("mcp_wheel", "python", "python/target", ["build", "--lib", "--release"], "", {}),
    # cargo install --locked --path mcp --target-dir target
    ("mcp_wheel", ".", T, ["build", "-p", "reliable-mcp", "--release", "--locked"], "", {}),
    ("mcp_wheel", ".", T, ["test", "--workspace", "--test", "abuse", "--no-run"], "", {}),
    ("tower_emulate", ".", T, ["test", "--workspace", "--test", "tower_layers", "--test", "tower_http", "--test", "chaos", "--test", "chaos_kill", "--test", "chaos_reqwest", "--no-run"], "", {}),
    ("tower_emulate", ".", T, ["build", "-p", "emulate", "--release", "--bins", "--example", "staging_replay"], "", {}),
    ("shared_build", ".", T, ["build", "-p", "sim", "--release"], "", {}),
    ("shared_build", ".", T, ["build", "-p", "emulate", "--release", "--bins", "--example", "staging_replay"], "", {}),
    ("shared_build", ".", T, ["build", "-p", "reliable-mcp", "--release"], "", {}),
    # cargo publish --dry-run: the two packages built from their packaged sources, in a
    # temporary target dir.
    ("publish_dry_run", ".", "publish-tmp", ["build", "-p", "reliable-core", "-p", "reliablekit"], "packaged", {}),
    ("publish_dry_run", "drop", "publish-tmp", [], "", {}),
    ("msrv", ".", "target/msrv", ["check", "-p", "reliable-core", "--features", "serde"], "msrv", {}),
    ("msrv", ".", "target/msrv", ["check", "-p", "reliablekit", "--all-features"], "msrv", {}),
    ("msrv", ".", "target/msrv", ["check", "-p", "sim"], "msrv", {}),
    ("msrv", "drop", "target/msrv", [], "", {}),
    ("python_wheel", "python", "python/target", ["check", "--all-targets"], "clippy", {}),
    ("python_wheel", "python", "python/target", ["build", "--lib", "--release"], "", {}),
    ("python_wheel", "drop", "python/target", [], "", {}),
    ("js_package", "js/wasm", "js/wasm/target", ["check", "--all-targets"], "clippy", {}),
    ("js_package", "js/wasm", "js/wasm/target", ["check", "--release", "--target", "wasm32-unknown-unknown"], "clippy", {}),
    ("js_package", "js/wasm", "js/wasm/target", ["test", "--no-run"], "", {}),
    # npm run build: the glue crate for wasm32 in release (js/package.json's build script).
    ("js_package", "js/wasm", "js/wasm/target", ["build", "--release", "--target", "wasm32-unknown-unknown", "--lib"], "", {}),
    ("js_package", "drop", "js/wasm/target", [], "", {}),
    ("firmware_qemu", ".", T, ["build", "-p", "decision-trace"], "", {}),
    ("firmware_qemu", "firmware", "firmware/target", ["build", "--release", "--bin", "qemu", "--target", "thumbv7em-none-eabihf"], "", {}),
    ("firmware_qemu", "firmware", "firmware/target", ["build", "--release", "--bin", "qemu", "--target", "thumbv7m-none-eabi"], "", {}),
    ("embassy", ".", T, ["build", "-p", "reliable-embassy", "--target", "thumbv7em-none-eabihf"], "", {}),
    ("embassy", ".", T, ["build", "-p", "reliable-embassy", "--target", "thumbv7em-none-eabihf", "--no-default-features"], "", {}),
    ("embassy", ".", T, ["build", "-p", "reliable-embassy", "--example", "sensor"], "", {}),
    ("embassy", "firmware", "firmware/target", ["build", "--release", "--bin", "async_client", "--bin", "baseline"], "", {}),
    ("conformance", ".", T, ["test", "--workspace", "--test", "faces", "--test", "generated", "--test", "conformance", "--test", "chaos", "--no-run"], "", {}),
    ("sim_hedging", ".", T, ["test", "-p", "sim", "--release", "--test", "hedging", "--no-run"], "", {}),
    ("sim_hedging", ".", T, ["build", "-p", "sim", "--release"], "", {}),
    ("playground", ".", T, ["build", "-p", "sim", "--release", "--locked"], "", {}),
    ("playground", "playground/wasm", "playground/wasm/target", ["check", "--release", "--target", "wasm32-wasip1"], "clippy", {}),
    # npm run build: the module for wasm32-wasip1 in release (playground/package.json).
    ("playground", "playground/wasm", "playground/wasm/target", ["build", "--release", "--target", "wasm32-wasip1"], "", {}),
    ("playground", "drop", "playground/wasm/target", [], "", {}),
    ("fleet_redis", ".", T, ["test", "--workspace", "--test", "fleet_store", "--test", "fleet_reliable", "--test", "fleet_redis", "--test", "fleet_redis_tls", "--no-run"], "", {}),
    ("fleet_redis", ".", T, ["test", "--workspace", "--test", "store", "--no-run"], "", {}),
    ("sim_graphs", ".", T, ["test", "-p", "sim", "--release", "--test", "graphs", "--no-run"], "", {}),
]


def unit_graph(directory, args, env):
    # `--doc --no-run` is refused; a doc test build is planned as `--doc` (cargo plans only).
    if "--doc" in args:
        args = [a for a in args if a != "--no-run"]
    full_env = dict(os.environ, RUSTC_BOOTSTRAP="1", **CI_ENV, **env)
    out = subprocess.run(
        ["cargo", *args, "--unit-graph", "-Z", "unstable-options"],
        cwd=os.path.join(ROOT, directory), env=full_env, capture_output=True, text=True,
    )
    if out.returncode != 0:
        sys.exit(f"cargo {' '.join(args)} in {directory}: {out.stderr.strip()}")
    return json.loads(out.stdout)


def identities(graph, tag):
    """One hash per unit: what it is, and what it is built from, recursively."""
    units = graph["units"]
    memo = {}

    def ident(i):
        if i in memo:
            return memo[i]
        u = units[i]
        profile = {k: v for k, v in u["profile"].items() if k != "name"}
        member = u["pkg_id"].startswith("path+")
        # clippy's wrapper and rustdoc's flags change only workspace members' artifacts; another
        # toolchain, RUSTFLAGS or packaged sources change everything.
        unit_tag = tag if tag in ("loom", "msrv", "fuzz", "packaged") or member else ""
        key = json.dumps([
            u["pkg_id"], u["target"]["name"], u["target"]["kind"], u["mode"], sorted(u["features"]),
            profile, u["platform"], unit_tag, sorted(ident(d["index"]) for d in u["dependencies"]),
        ], sort_keys=True)
        memo[i] = hashlib.sha256(key.encode()).hexdigest()
        return memo[i]

    return [(ident(i), u) for i, u in enumerate(units)]


def name(u):
    pkg = u["pkg_id"].split("#")[-1]
    return f"{pkg} {u['mode']} {u['target']['kind'][0]}:{u['target']['name']}"


def main():
    verbose = "-v" in sys.argv
    seen = defaultdict(set)  # target dir -> unit hashes built there
    per_job = {}
    order = []
    compiled_by_pkg = Counter()
    for job, directory, target_dir, args, tag, env in INVOCATIONS:
        if job not in per_job:
            per_job[job] = [0, 0, 0]
            order.append(job)
        if directory == "drop":
            seen[target_dir].clear()
            continue
        graph = unit_graph(directory, args, env)
        new_compiled = new_run = total = 0
        for h, u in identities(graph, tag):
            total += 1
            if h in seen[target_dir]:
                continue
            seen[target_dir].add(h)
            if u["mode"] == "run-custom-build":
                new_run += 1
            else:
                new_compiled += 1
                compiled_by_pkg[(u["pkg_id"].split("#")[-1], u["mode"], u["platform"])] += 1
        per_job[job][0] += new_compiled
        per_job[job][1] += new_run
        per_job[job][2] += total
        if verbose:
            print(f"  {job:16} {new_compiled:4} new ({new_run:3} build scripts run) of {total:4}: "
                  f"{'(' + directory + ') ' if directory != '.' else ''}cargo {' '.join(args)}"
                  f"{' [' + tag + ']' if tag else ''}")
    print(f"{'job':18} {'compiled':>8} {'scripts':>8}")
    for job in order:
        c, r, _ = per_job[job]
        print(f"{job:18} {c:8} {r:8}")
    print(f"{'total':18} {sum(v[0] for v in per_job.values()):8} {sum(v[1] for v in per_job.values()):8}")
    if verbose:
        print("\npackages compiled 3 times or more (same mode and platform, other features, profile or deps):")
        for (pkg, mode, platform), n in compiled_by_pkg.most_common():
            if n < 3:
                break
            print(f"  {n:3}  {pkg} {mode}{' ' + platform if platform else ''}")


if __name__ == "__main__":
    main()
