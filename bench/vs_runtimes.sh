#!/usr/bin/env bash
# The judge: tsopt against ONNX Runtime and OpenVINO on real models exported
# from PyTorch, interleaved in one run (bench/vs_runtimes.py has the method).
#
#   bash bench/vs_runtimes.sh [build-dir] [-- vs_runtimes.py options]
#   bash bench/vs_runtimes.sh build -- --only resnet50,bert --threads 1 --markdown /tmp/t.md
#
# Creates its virtual environment (VENV, default ~/.cache/tsopt/venv-bench:
# onnxruntime, openvino, onnx, numpy from PyPI) and the models (MODELS_DIR,
# default ~/.cache/tsopt/models, by bench/export_models.py with Debian's
# python3-torch, installed here when missing, and tsopt's zoo models as
# zoo_<name>.onnx by build/bench/export_zoo), builds the tsopt command, then
# runs the comparison. ZOO=0 leaves the zoo models out of a fresh models folder.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
[ "${1:-}" = "--" ] && shift
venv=${VENV:-$HOME/.cache/tsopt/venv-bench}
models=${MODELS_DIR:-$HOME/.cache/tsopt/models}
[ -d "$build/meson-private" ] || { echo "vs_runtimes: $build is not a configured meson build directory" >&2; exit 2; }
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import onnxruntime, openvino, onnx, numpy' 2>/dev/null; then
  echo "vs_runtimes: creating $venv (onnxruntime, openvino, onnx, numpy)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --upgrade onnxruntime openvino onnx numpy
fi
exporter_packages=(python3-torch python3-torchvision python3-onnx)
if ! /usr/bin/python3 -c 'import torch, torchvision, onnx' 2>/dev/null; then
  # The exporter runs on Debian's PyTorch (the PyPI wheel is 10x the download).
  echo "vs_runtimes: installing ${exporter_packages[*]}" >&2
  [ "$(id -u)" = 0 ] || { echo "vs_runtimes: run as root, or install ${exporter_packages[*]}" >&2; exit 2; }
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${exporter_packages[@]}" >/dev/null
fi
/usr/bin/python3 bench/export_models.py "$models" --set issue >&2
ninja -C "$build" tools/tsopt/tsopt bench/export_zoo bench/core_round_trip >/dev/null
[ "${ZOO:-1}" = 0 ] || "$build/bench/export_zoo" "$models" >&2
exec "$venv/bin/python" bench/vs_runtimes.py --models "$models" --tsopt "$build/tools/tsopt/tsopt" \
  --core-probe "$build/bench/core_round_trip" "$@"
