#!/usr/bin/env bash
# The optimized builds of the simulator, the emulator and the MCP server use one build of the
# simulator library (sim/Cargo.toml turns on, in crates they share, the features the other two
# turn on). Cargo resolves features per build: when a dependency drifts (a new feature in a crate
# the simulator uses too), each of the three builds the simulator and everything under it again,
# minutes of a CI run, and nothing else would notice.
#
# Prints the library's artifact in each build; exits 1 if they differ, with how to find the crate.
# Run after the three are built (CI: job `shared_build`), every build here is then a no-op.
set -euo pipefail

# The library's artifact name in a build: libsim-<hash>, the hash cargo gives each distinct build
# (the package built directly names its uplifted copy first, then its metadata under deps/).
sim_lib() {
    cargo build --release --message-format=json "$@" |
        grep -o '/deps/libsim-[0-9a-f]*\.r\(lib\|meta\)' | sed 's|^/deps/||; s|\.r[a-z]*$||' | sort -u
}

declare -A built=(
    [sim]=$(sim_lib -p sim)
    [emulate]=$(sim_lib -p emulate --bins --example staging_replay)
    [reliable-mcp]=$(sim_lib -p reliable-mcp)
)
for name in sim emulate reliable-mcp; do
    if [ -z "${built[$name]}" ]; then
        echo "FAIL: cargo named no simulator library in the optimized build of $name" >&2
        exit 1
    fi
    printf '  %-13s the simulator library is %s\n' "$name:" "${built[$name]}"
done
distinct=$(printf '%s\n' "${built[@]}" | sort -u | grep -c .)
if [ "$distinct" -ne 1 ]; then
    echo "FAIL: $distinct optimized builds of the simulator where one should serve all three." >&2
    echo "  A crate they share is built with other features in one of them: compare" >&2
    echo "  cargo tree -e normal,build -f '{p} {f}' -p sim   (and -p emulate, -p reliable-mcp)" >&2
    echo "  and turn the missing features on in sim/Cargo.toml's section for them." >&2
    exit 1
fi
echo "one optimized build of the simulator serves sim, the emulator and the MCP server"
