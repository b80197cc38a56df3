#!/usr/bin/env bash
# Every zoo model: baseline vs optimized end-to-end time on oneDNN, measured
# in the same run (examples/<model>: interleaved rounds after the search),
# their ratio and the search time, as one table.
#
#   bash bench/models_bench.sh [build-dir] [-- extra example options]
#   MODELS="bert nasrnn" BUDGET=60 OMP_NUM_THREADS=2 bash bench/models_bench.sh build
#
# Environment: MODELS (default: all eleven), BUDGET (search seconds, default
# 30), OMP_NUM_THREADS (default 1, always printed: on the shared 2-core
# machine under load, 2 OpenMP threads make oneDNN's isolated per-operator
# timings degenerate to ~16 ms each, see docs/benchmarks.md), EXTRA (options passed to
# every example, e.g. "--quick" or "--rules all"). The build directory
# (default build) must be configured; the examples are (re)built as needed.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
[ "${1:-}" = "--" ] && shift
models=${MODELS:-"resnet18 resnet50 resnext50 inception_v3 squeezenet nasnet_a nasnet_mobile nasrnn bert rnntc csrnet"}
budget=${BUDGET:-30}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
[ -d "$build/meson-private" ] || { echo "models_bench: $build is not a configured meson build directory" >&2; exit 2; }
targets=()
for m in $models; do targets+=("examples/$m"); done
# Always through ninja: a stale example would time the previous backend.
ninja -C "$build" -j2 "${targets[@]}" >/dev/null

logdir=$(mktemp -d)
printf 'models_bench: OMP_NUM_THREADS=%s, budget %s s, extra options: %s\n' "$OMP_NUM_THREADS" "$budget" "${EXTRA:-none} $*"
printf '%-14s %12s %12s %8s %9s %11s %7s\n' model baseline_ms optimized_ms ratio search_s ops agree
status=0
for m in $models; do
  log=$logdir/$m.log
  rc=0
  # shellcheck disable=SC2086
  "$build/examples/$m" --budget "$budget" ${EXTRA:-} "$@" >"$log" 2>&1 </dev/null || rc=$?
  line=$(grep '^RESULT ' "$log" | tail -1 || true)
  if [ -z "$line" ]; then
    printf '%-14s failed (exit %s): %s\n' "$m" "$rc" "$(tail -1 "$log")"
    status=1
    continue
  fi
  get() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$line"; }
  printf '%-14s %12.3f %12.3f %7.2fx %9.1f %5s->%-5s %5s\n' "$m" "$(get baseline_ms)" "$(get optimized_ms)" "$(get ratio)" \
    "$(get search_s)" "$(get ops_before)" "$(get ops_after)" "$([ "$(get agree)" = 1 ] && echo yes || echo NO)"
  [ "$rc" -eq 0 ] || status=1
done
echo "full reports: $logdir"
exit $status
