#!/bin/sh
# Rule generator benchmark: generation + verification at N (default 4), with
# per-phase time and peak memory (targets: < 2 min, < 4 GiB on 2 cores).
#   bench/generator_bench.sh [BUILD_DIR] [N] [extra tsopt-gen options...]
# e.g. bench/generator_bench.sh build-gen 2 --timeout-ms 1000
#      bench/generator_bench.sh build-gen 3 --no-verify      (counts only)
#      bench/generator_bench.sh build-gen 3 --budget-s 300   (derived / Z3 within a budget)
#      bench/generator_bench.sh build 5 ... --partitions 1024 --no-verify
#                                               (N=5: 1/1024 of the graph store at a time)
#      bench/generator_bench.sh build 4 --representative-params --distinct-operands \
#        --distinct-values --all-pairs-limit 1 --inputs x,w,v,a,b,s \
#        --timeout-ms 60000 --rlimit 10000 --max-instances 3000 --reuse-solver
#                                               (N=4 in under 2 minutes, docs/generator.md)
# Defaults: 2 threads. Only proven rules are emitted; the rest are in
# summary.json (unproven_listing) and unproven_rules.txt.
set -eu
build=${1:-build}; n=${2:-4}
[ $# -ge 2 ] && shift 2 || shift $#
out=$(mktemp -d)
/usr/bin/time -v "$build/generator/tsopt-gen" --max-ops "$n" --header "$out/generated_rules.hpp" \
  --listing "$out/rules.txt" --summary "$out/summary.json" \
  --unproven "$out/unproven_rules.txt" --threads 2 "$@" 2> "$out/stderr" || true
grep -v '^\[tsopt-gen\] .*\.\.\.$' "$out/stderr" | grep -E -v '^\s+(Average|Page|Socket|Signal|Swap|File|Exit|Percent|Voluntary|Involuntary|Major|Minor|Command)' || true
echo "summary: $out/summary.json"
# Incremental verification and Z3 counters (docs/verification.md).
sed -n 's/^ *"\(derived\|settled\|z3_queries\|max_z3_memory_mb\|proven\|timeouts\|rules_emitted\)": *\([0-9]*\),*$/\1=\2/p' "$out/summary.json" | tr '\n' ' '; echo
