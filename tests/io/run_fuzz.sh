#!/bin/sh
# Runs the importer fuzz target for a bounded time (TSOPT_FUZZ_SECONDS, default
# 60) over the seed corpus; new corpus entries go to a scratch directory.
# usage: run_fuzz.sh FUZZER SEED_DIR WORK_DIR
set -eu
fuzzer=$(realpath "$1"); seeds=$(realpath "$2"); work=$3
seconds=${TSOPT_FUZZ_SECONDS:-60}
rm -rf "$work"; mkdir -p "$work/corpus" "$work/artifacts"
cd "$work"
exec "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
     -artifact_prefix="$work/artifacts/" -print_final_stats=1 "$work/corpus" "$seeds"
