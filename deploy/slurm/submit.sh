#!/usr/bin/env bash
# Submits a sharded `sim map` (or `sim sweep`) to Slurm: an array of N shard tasks, then a merge
# job that runs only if every task succeeded (afterok).
#
#   deploy/slurm/submit.sh SCENARIO.ron [SHARDS] [OUT]
#
# SHARDS defaults to 4 and OUT to ./results (it must be on a file system every node sees).
# Environment: SIM (the sim binary, default: `sim` on PATH), COMMAND (map or sweep, default map),
# NAME (the scenario's name, default: the file name without .ron), SBATCH_ARGS (extra sbatch
# options for both jobs, such as a partition or an account).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
SCENARIO="${1:?usage: submit.sh SCENARIO.ron [SHARDS] [OUT]}"
SHARDS_N="${2:-4}"
OUT="${3:-results}"
NAME="${NAME:-$(basename "$SCENARIO" .ron)}"
SIM="${SIM:-$(command -v sim || echo sim)}"
COMMAND="${COMMAND:-map}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
# The jobs run in this folder, so SCENARIO keeps the path it was given: the report quotes the
# command, and an unsharded run from here writes the same bytes.
# shellcheck disable=SC2086
array=$(sbatch --parsable ${SBATCH_ARGS:-} --array="0-$((SHARDS_N - 1))" --chdir="$PWD" \
    --output="$OUT/sim-shard-%A_%a.out" \
    --export="ALL,SIM=$SIM,COMMAND=$COMMAND,SCENARIO=$SCENARIO,OUT=$OUT" "$here/shard.sbatch")
# shellcheck disable=SC2086
merge=$(sbatch --parsable ${SBATCH_ARGS:-} --dependency="afterok:$array" --chdir="$PWD" \
    --output="$OUT/sim-merge-%j.out" \
    --export="ALL,SIM=$SIM,SHARDS=$OUT/$NAME.shards,OUT=$OUT" "$here/merge.sbatch")
echo "shards: job $array (array 0-$((SHARDS_N - 1))); merge: job $merge (after all shards succeed)"
echo "report: $OUT/$NAME/ once job $merge has finished (squeue -j $array,$merge)"
