#!/usr/bin/env bash
# Installs dependencies, builds, and runs the project's main job: the `tsopt`
# command optimizes the bundled model (models/demo.onnx, a small NasNet-A)
# with measured oneDNN costs, verifies the result, writes it with a JSON
# report and before/after pictures, then times both models side by side.
#   DEMO_BUDGET=60 bash scripts/demo.sh        a longer search (default 20 s)
#   DEMO_MODEL=resnext50 bash scripts/demo.sh  afterwards also run a zoo example
#                                              (build/examples/<model>, DEMO_ARGS)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
[ -d build/meson-private ] || meson setup build
meson compile -C build tools/tsopt/tsopt
# One thread by default: see docs/benchmarks.md (2 threads on a loaded 2-core
# machine make per-operator measurements meaningless).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
tsopt=build/tools/tsopt/tsopt

"$tsopt" optimize models/demo.onnx -o build/demo.opt.onnx --backend cpu --budget "${DEMO_BUDGET:-20}" \
  --report build/demo.report.json --dot build/demo-pictures
echo
echo "== report (build/demo.report.json) =="
cat build/demo.report.json
echo
echo "== tsopt bench: original vs optimized =="
"$tsopt" bench models/demo.onnx build/demo.opt.onnx --reps 50

if [ -n "${DEMO_MODEL:-}" ]; then
  # A zoo model through its example program (examples/driver.cpp).
  echo
  echo "== example: $DEMO_MODEL =="
  meson compile -C build "examples/$DEMO_MODEL"
  # shellcheck disable=SC2086
  "build/examples/$DEMO_MODEL" ${DEMO_ARGS:-"--width-div 4 --image 112 --budget 40"}
fi
