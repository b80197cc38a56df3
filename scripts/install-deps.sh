#!/usr/bin/env bash
# Installs everything tsopt needs on a fresh Debian 12 machine (run as root).
# Idempotent: packages already present are left as they are.
set -euo pipefail
packages=(
  meson ninja-build g++ pkg-config
  libz3-dev libboost-graph-dev doctest-dev
  libdnnl-dev libonnx-dev libprotobuf-dev protobuf-compiler
  libonnx-testdata  # ONNX operator conformance tests: tests/io importer oracle
  graphviz          # `dot` for SVG pictures of graphs (tsopt/io/dot.hpp); optional at run time
  clang             # libFuzzer (-fsanitize=fuzzer) for the ONNX importer fuzz target
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "tsopt: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "tsopt: all Debian dependencies present"
fi
