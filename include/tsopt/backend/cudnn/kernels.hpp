#pragma once
// The few CUDA kernels the libraries do not provide, compiled by nvcc in
// src/cuda/kernels.cu (a small static library) and called from the host-only
// code of this backend. Every launcher returns the launch's cudaError_t; the
// caller checks it and names the operator. All tensors are dense float.
//
//   permute    y[out index] = x[sum coord_k * in_stride_k]: transpose, and
//              every layout conversion (row-major, col-major, NHWC)
//   binary     ewadd / ewmul with numpy broadcasting (strides 0 on broadcast axes)
//   smul       y = x * s[0], s read on the device (stays valid in CUDA Graphs)
//   batchnorm  y = x * scale[ch] + shift[ch], ch = (i / inner) % c
//   pad2d      zero-padding of the last two axes (pad, enlarge)
#include <cstdint>

#include <cuda_runtime_api.h>

namespace tsopt::backend::cudnn_impl::kernels {

inline constexpr int max_rank = 6;

// Geometry of a strided walk over a dense output of `rank` axes.
struct strided {
    int rank = 0;
    std::int64_t dims[max_rank] = {};  // output extents
    std::int64_t a[max_rank] = {};     // first operand's element stride per output axis
    std::int64_t b[max_rank] = {};     // second operand's (binary only)
};

enum binary_op : int { add = 0, mul = 1 };

cudaError_t permute(const float* x, float* y, std::int64_t total, const strided& g, cudaStream_t s);
// flat: both operands have the output's shape and layout (g is ignored).
cudaError_t binary(int op, const float* a, const float* b, float* y, std::int64_t total, const strided& g, bool flat,
                   cudaStream_t s);
cudaError_t smul(const float* x, const float* scalar, float* y, std::int64_t n, cudaStream_t s);
cudaError_t batchnorm(const float* x, const float* scale, const float* shift, float* y, std::int64_t n, std::int64_t c,
                      std::int64_t inner, cudaStream_t s);
cudaError_t pad2d(const float* x, float* y, std::int64_t outer, std::int64_t h, std::int64_t w, std::int64_t oh,
                  std::int64_t ow, std::int64_t top, std::int64_t left, cudaStream_t s);

}  // namespace tsopt::backend::cudnn_impl::kernels
