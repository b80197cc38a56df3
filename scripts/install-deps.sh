#!/usr/bin/env bash
# Installs everything tsopt needs on a fresh Debian 12 machine (run as root).
# Idempotent: packages already present are left as they are.
set -euo pipefail
packages=(
  meson ninja-build g++ pkg-config cmake  # cmake: Meson finds oneDNN through its CMake package config
  libz3-dev libboost-graph-dev doctest-dev
  nlohmann-json3-dev   # JSON for the command's reports (tools/tsopt)
  libcli11-dev         # command-line options of tsopt, tsopt-gen and the examples (CLI11)
  libonnx-dev libprotobuf-dev protobuf-compiler
  python3-pip       # fetches the oneDNN 3.2 wheels below where python3 has no pip of its own
  python3-venv      # tests/python: pip install . into a fresh virtual environment
  libonnx-testdata  # ONNX operator conformance tests: tests/io importer oracle
  graphviz          # `dot` for SVG pictures of graphs (tsopt/io/dot.hpp); optional at run time
  clang             # libFuzzer (-fsanitize=fuzzer) for the ONNX importer fuzz target
  libopenmpi-dev openmpi-bin  # tsopt-gen-mpi: rule generation over MPI ranks (meson option mpi)
  libmimalloc-dev   # tsopt-gen's allocator (meson option gen_allocator)
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

# oneDNN 3.2 (CPU, GNU OpenMP) from PyPI: Debian 12's libdnnl-dev is 2.6,
# whose AVX2 convolutions run ResNet-50's layers 1.6x slower (docs/benchmarks.md,
# "Which oneDNN"). The wheels onednn-cpu-gomp / onednn-devel-cpu-gomp hold the
# library, headers and CMake package config; they are unpacked (not pip-installed,
# so no Python environment is touched) into ONEDNN_PREFIX, which meson.build
# passes to dependency('dnnl', method : 'cmake'). The newer onednn 2026.x wheels
# need Intel's SYCL and OpenCL runtimes (600 MB) for a CPU engine; not used.
onednn_version=2023.2.0
prefix=${ONEDNN_PREFIX:-/opt/tsopt/onednn-$onednn_version}
if [ -f "$prefix/lib/cmake/dnnl/dnnl-config.cmake" ] && [ -f "$prefix/lib/libdnnl.so.3" ]; then
  echo "tsopt: oneDNN $onednn_version present in $prefix"
else
  echo "tsopt: fetching oneDNN $onednn_version (onednn-cpu-gomp, onednn-devel-cpu-gomp) from PyPI into $prefix"
  pip=(python3 -m pip)
  "${pip[@]}" --version >/dev/null 2>&1 || pip=(/usr/bin/python3 -m pip)
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  "${pip[@]}" download --quiet --no-deps --only-binary=:all: --dest "$work" \
    "onednn-cpu-gomp==$onednn_version" "onednn-devel-cpu-gomp==$onednn_version"
  mkdir -p "$work/unpacked"
  for w in "$work"/*.whl; do python3 -m zipfile -e "$w" "$work/unpacked"; done
  mkdir -p "$prefix.partial"
  for d in "$work"/unpacked/*.data/data; do cp -r "$d"/. "$prefix.partial"/; done
  [ -f "$prefix.partial/lib/cmake/dnnl/dnnl-config.cmake" ] || { echo "tsopt: the oneDNN wheels hold no CMake config" >&2; exit 1; }
  rm -rf "$prefix" && mv "$prefix.partial" "$prefix"
  echo "tsopt: oneDNN $onednn_version installed in $prefix"
fi
