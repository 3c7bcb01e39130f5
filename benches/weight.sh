#!/usr/bin/env bash
# Dependency weight of the std crate next to its peers: for a new library crate that depends on
# each, the crates in `cargo tree -e normal` and the CPU time (user + sys) of a cold debug build,
# twice each. CPU time, not wall time, so a busy machine changes the figure little.
#   benches/weight.sh [RUNS]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
runs="${1:-2}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
unset RUSTC_WRAPPER

declare -A deps=(
    ["reliable (default features)"]="reliable = { path = \"$root/reliable\" }"
    ["reliable (no default features)"]="reliable = { path = \"$root/reliable\", default-features = false }"
    ["tower 0.5.3 (retry + limit)"]='tower = { version = "0.5.3", features = ["retry", "limit"] }'
    ["failsafe 1.3"]='failsafe = "1.3"'
)
printf '| dependency | crates | cold debug build, CPU s (user + sys) |\n|---|--:|---|\n'
for name in "reliable (default features)" "reliable (no default features)" "tower 0.5.3 (retry + limit)" "failsafe 1.3"; do
    dir="$work/probe"
    rm -rf "$dir"
    cargo new -q --lib "$dir"
    echo "${deps[$name]}" >>"$dir/Cargo.toml"
    crates=$(cd "$dir" && cargo tree -q -e normal --prefix none | sort -u | grep -vc '^probe ')
    times=()
    for _ in $(seq "$runs"); do
        rm -rf "$dir/target"
        start=$(awk '{print $14 + $15 + $16 + $17}' /proc/$$/stat)
        (cd "$dir" && cargo build -q)
        # Children's CPU time, in clock ticks, of this shell after the build.
        ticks=$(awk '{print $14 + $15 + $16 + $17}' /proc/$$/stat)
        times+=("$(awk -v t=$((ticks - start)) -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.1f", t / hz }')")
    done
    printf '| %s | %s | %s |\n' "$name" "$crates" "${times[*]}"
done
