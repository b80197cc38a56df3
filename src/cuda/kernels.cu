// CUDA kernels of the cuDNN/cuBLAS backend (declared in
// include/tsopt/backend/cudnn/kernels.hpp). Kept small: nvcc is slow, and
// everything cuDNN / cuBLAS / cudaMemcpy2DAsync can do is done there.
#include "tsopt/backend/cudnn/kernels.hpp"

namespace tsopt::backend::cudnn_impl::kernels {
namespace {

constexpr int threads = 256;

unsigned blocks_for(std::int64_t n) {
    std::int64_t b = (n + threads - 1) / threads;
    if (b > (1 << 20)) b = 1 << 20;  // grid-stride loops cover the rest
    return static_cast<unsigned>(b < 1 ? 1 : b);
}

__device__ __forceinline__ void offsets(std::int64_t i, const strided& g, std::int64_t& oa, std::int64_t& ob) {
    oa = 0;
    ob = 0;
    for (int d = g.rank - 1; d >= 0; --d) {
        std::int64_t c = i % g.dims[d];
        i /= g.dims[d];
        oa += c * g.a[d];
        ob += c * g.b[d];
    }
}

__global__ void permute_kernel(const float* __restrict__ x, float* __restrict__ y, std::int64_t n, strided g) {
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        std::int64_t oa, ob;
        offsets(i, g, oa, ob);
        y[i] = x[oa];
    }
}

template <int Op, bool Flat>
__global__ void binary_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ y,
                              std::int64_t n, strided g) {
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        std::int64_t oa = i, ob = i;
        if (!Flat) offsets(i, g, oa, ob);
        y[i] = Op == add ? a[oa] + b[ob] : a[oa] * b[ob];
    }
}

__global__ void smul_kernel(const float* __restrict__ x, const float* __restrict__ s, float* __restrict__ y, std::int64_t n) {
    const float v = *s;
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
        y[i] = x[i] * v;
}

__global__ void batchnorm_kernel(const float* __restrict__ x, const float* __restrict__ scale, const float* __restrict__ shift,
                                 float* __restrict__ y, std::int64_t n, std::int64_t c, std::int64_t inner) {
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        std::int64_t ch = (i / inner) % c;
        y[i] = x[i] * scale[ch] + shift[ch];
    }
}

__global__ void pad2d_kernel(const float* __restrict__ x, float* __restrict__ y, std::int64_t n, std::int64_t h,
                             std::int64_t w, std::int64_t oh, std::int64_t ow, std::int64_t top, std::int64_t left) {
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        std::int64_t ox = i % ow, oy = (i / ow) % oh, o = i / (ow * oh);
        std::int64_t ix = ox - left, iy = oy - top;
        y[i] = (ix >= 0 && ix < w && iy >= 0 && iy < h) ? x[(o * h + iy) * w + ix] : 0.f;
    }
}

}  // namespace

cudaError_t permute(const float* x, float* y, std::int64_t total, const strided& g, cudaStream_t s) {
    if (total <= 0) return cudaSuccess;
    permute_kernel<<<blocks_for(total), threads, 0, s>>>(x, y, total, g);
    return cudaGetLastError();
}

cudaError_t binary(int op, const float* a, const float* b, float* y, std::int64_t total, const strided& g, bool flat,
                   cudaStream_t s) {
    if (total <= 0) return cudaSuccess;
    const unsigned nb = blocks_for(total);
    if (op == add) {
        if (flat) binary_kernel<add, true><<<nb, threads, 0, s>>>(a, b, y, total, g);
        else binary_kernel<add, false><<<nb, threads, 0, s>>>(a, b, y, total, g);
    } else {
        if (flat) binary_kernel<mul, true><<<nb, threads, 0, s>>>(a, b, y, total, g);
        else binary_kernel<mul, false><<<nb, threads, 0, s>>>(a, b, y, total, g);
    }
    return cudaGetLastError();
}

cudaError_t smul(const float* x, const float* scalar, float* y, std::int64_t n, cudaStream_t s) {
    if (n <= 0) return cudaSuccess;
    smul_kernel<<<blocks_for(n), threads, 0, s>>>(x, scalar, y, n);
    return cudaGetLastError();
}

cudaError_t batchnorm(const float* x, const float* scale, const float* shift, float* y, std::int64_t n, std::int64_t c,
                      std::int64_t inner, cudaStream_t s) {
    if (n <= 0) return cudaSuccess;
    batchnorm_kernel<<<blocks_for(n), threads, 0, s>>>(x, scale, shift, y, n, c, inner);
    return cudaGetLastError();
}

cudaError_t pad2d(const float* x, float* y, std::int64_t outer, std::int64_t h, std::int64_t w, std::int64_t oh,
                  std::int64_t ow, std::int64_t top, std::int64_t left, cudaStream_t s) {
    const std::int64_t n = outer * oh * ow;
    if (n <= 0) return cudaSuccess;
    pad2d_kernel<<<blocks_for(n), threads, 0, s>>>(x, y, n, h, w, oh, ow, top, left);
    return cudaGetLastError();
}

}  // namespace tsopt::backend::cudnn_impl::kernels
