#!/bin/sh
# Runs the importer fuzz target for a bounded time (TSOPT_FUZZ_SECONDS, default
# 60) and number of runs (TSOPT_FUZZ_RUNS) from a fixed seed (TSOPT_FUZZ_SEED)
# over the seed corpus; new corpus entries go to a scratch directory.
# usage: run_fuzz.sh FUZZER SEED_DIR WORK_DIR
set -eu
fuzzer=$(realpath "$1"); seeds=$(realpath "$2"); work=$3
seconds=${TSOPT_FUZZ_SECONDS:-60}
rm -rf "$work"; mkdir -p "$work/corpus" "$work/artifacts"
cd "$work"
# A fixed seed and a bounded number of runs make the run reproducible (CI
# must not fail by luck); the time limit still bounds it on a slow machine.
# -error_exitcode: libFuzzer's default for a crash is 77, which meson reads
# as a skipped test: a crash it found was reported as SKIP.
exec "$fuzzer" -seed="${TSOPT_FUZZ_SEED:-1}" -runs="${TSOPT_FUZZ_RUNS:-150000}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
     -error_exitcode=1 \
     -artifact_prefix="$work/artifacts/" -print_final_stats=1 "$work/corpus" "$seeds"
