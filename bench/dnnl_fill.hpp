// Shared by the oneDNN layer benchmarks in bench/: what their buffers hold.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>

namespace tsopt::bench {

// Every buffer holds small non-zero values: uninitialised memory can hold
// denormals and NaNs, which slowed one form 10x in a first version of
// dnnl_grouped_conv_layouts.
inline void fill(dnnl::memory& m) {
    auto* p = static_cast<float*>(m.get_data_handle());
    const std::size_t n = m.get_desc().get_size() / sizeof(float);
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<float>((i * 2654435761u) % 1000) / 1000.f - 0.5f;
}

}  // namespace tsopt::bench
