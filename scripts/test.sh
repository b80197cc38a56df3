#!/usr/bin/env bash
# Installs dependencies, builds, and runs the whole test suite.
#   bash scripts/test.sh            normal build in ./build
#   SANITIZE=1 bash scripts/test.sh AddressSanitizer + UBSan build in ./build-asan
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh

builddir=build
opts=()
slower=1
if [ "${SANITIZE:-0}" = 1 ]; then
  builddir=build-asan
  # -O0 without debug info: the same translation units compile about 4x
  # faster than at -O2 -g (the heavy template instantiations dominate), which
  # is what lets this run fit in CI beside the plain one; ASan still names
  # the functions in its reports. The rules are not regenerated here (Z3
  # dominates that, not our code, and the plain build has just checked the
  # snapshot), so the build uses the committed snapshot.
  opts=(-Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=plain -Doptimization=0 -Ddebug=false
        -Dregenerate_rules=false)
  # Instrumented -O0 code runs the Z3-free parts of the suite 10-20x slower
  # (pet, axiom validation's symbolic execution), so the per-test limits that
  # catch hangs in the plain run are scaled.
  slower=8
fi
if [ -d "$builddir/meson-private" ]; then
  meson setup --reconfigure "$builddir" "${opts[@]}" >/dev/null
else
  meson setup "$builddir" "${opts[@]}"
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
meson test -C "$builddir" --print-errorlogs --num-processes 2 --timeout-multiplier "$slower" || status=$?
python3 scripts/test_summary.py "$builddir/meson-logs/testlog.json"
exit $status
