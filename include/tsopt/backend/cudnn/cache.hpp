#pragma once
// Measured per-operator times of the cuDNN backend: the shared measurement
// cache (backend/measure_cache.hpp: entries keyed by cost::op_key plus which
// inputs are constant, atomic rewrites, corrupt files ignored), its file keyed
// by the machine string cudnn builds from the backend name, the cuDNN / cuBLAS
// / CUDA runtime versions and the GPU name (executor.hpp, init_device).
// Host-only (no CUDA calls).
#include "tsopt/backend/measure_cache.hpp"

namespace tsopt::backend::cudnn_impl {

using measure_cache = backend::measure_cache;

}  // namespace tsopt::backend::cudnn_impl
