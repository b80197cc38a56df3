#pragma once
// The float matrix product under the reference convolution and matmul:
// C[i][j] = sum over k of A[i][k] * B[k][j], each sum taken in order of k
// from +0, exactly as the definitions' loops, so results are the same bit
// for bit. Speed comes only from keeping a 4 x 8 block of C in registers
// while A (packed 4 rows interleaved) and B (packed in panels of 8 columns)
// stream past: the definitions' loops load and store C once per term, and
// verifying a ResNet-50 or a BERT encoder spent most of its time there.
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace tsopt::spec::ops::float_gemm {

inline constexpr std::int64_t MR = 4, NR = 8;  // rows of A x columns of B held in registers

// Inlined into each instruction-set variant of `blocks` below, so that each
// is compiled for its own vector width.
#if defined(__GNUC__)
#define TSOPT_FLOAT_GEMM_INLINE __attribute__((always_inline)) inline
#else
#define TSOPT_FLOAT_GEMM_INLINE inline
#endif

// out[i][j] (i < rows, j < cols) = sum over k < K of a[k][i] * b[k][j], in
// order of k, from +0: a is K x 4, b is K x 8 (32-byte aligned).
TSOPT_FLOAT_GEMM_INLINE void block(const float* a, const float* b, std::int64_t K, float* out, std::int64_t row_stride,
                                   std::int64_t rows, std::int64_t cols) {
    float acc[MR][NR];
#if defined(__GNUC__)
    // A row of 8 as one vector: one instruction per row and term whatever
    // the optimization level (two on SSE-only targets).
    typedef float row8 __attribute__((vector_size(NR * sizeof(float)), may_alias));
    row8 r0 = {}, r1 = {}, r2 = {}, r3 = {};
    for (std::int64_t k = 0; k < K; ++k, a += MR, b += NR) {
        const row8 bk = *reinterpret_cast<const row8*>(b);
        r0 += a[0] * bk, r1 += a[1] * bk, r2 += a[2] * bk, r3 += a[3] * bk;
    }
    __builtin_memcpy(acc[0], &r0, sizeof r0), __builtin_memcpy(acc[1], &r1, sizeof r1);
    __builtin_memcpy(acc[2], &r2, sizeof r2), __builtin_memcpy(acc[3], &r3, sizeof r3);
#else
    for (auto& r : acc) std::fill(r, r + NR, 0.0f);
    for (std::int64_t k = 0; k < K; ++k, a += MR, b += NR)
        for (std::int64_t i = 0; i < MR; ++i)
            for (std::int64_t j = 0; j < NR; ++j) acc[i][j] += a[i] * b[j];
#endif
    for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t j = 0; j < cols; ++j) out[i * row_stride + j] = acc[i][j];
}

// All of C: `rows` rows of A (packed by 4) by `cols` columns of B (packed
// by 8), written at out with row stride `ld`.
TSOPT_FLOAT_GEMM_INLINE void each_block(const float* a, const float* b, std::int64_t K, std::int64_t rows,
                                        std::int64_t cols, float* out, std::int64_t ld) {
    for (std::int64_t ib = 0; ib * MR < rows; ++ib)
        for (std::int64_t jb = 0; jb * NR < cols; ++jb)
            block(a + ib * K * MR, b + jb * K * NR, K, out + ib * MR * ld + jb * NR, ld, std::min(MR, rows - ib * MR),
                  std::min(NR, cols - jb * NR));
}
#undef TSOPT_FLOAT_GEMM_INLINE

inline void blocks_baseline(const float* a, const float* b, std::int64_t K, std::int64_t rows, std::int64_t cols,
                            float* out, std::int64_t ld) {
    each_block(a, b, K, rows, cols, out, ld);
}
#if defined(__GNUC__) && defined(__x86_64__)
// The same operations on 8-wide vectors where the CPU has them. No fused
// multiply-add is enabled, so every sum rounds exactly as in the baseline.
__attribute__((target("avx2"))) inline void blocks_avx2(const float* a, const float* b, std::int64_t K,
                                                         std::int64_t rows, std::int64_t cols, float* out,
                                                         std::int64_t ld) {
    each_block(a, b, K, rows, cols, out, ld);
}
#endif

// C (rows x cols, row stride ld) = packed A x packed B.
inline void blocks(const float* a, const float* b, std::int64_t K, std::int64_t rows, std::int64_t cols, float* out,
                   std::int64_t ld) {
#if defined(__GNUC__) && defined(__x86_64__)
    static const bool avx2 = __builtin_cpu_supports("avx2");
    if (avx2) return blocks_avx2(a, b, K, rows, cols, out, ld);
#endif
    blocks_baseline(a, b, K, rows, cols, out, ld);
}

// Zeroed storage whose start is 32-byte aligned (a row of B's panel is
// loaded as one vector).
class panel_buffer {
public:
    std::span<float> zeroed(std::int64_t n) {
        const auto size = static_cast<std::size_t>(n);
        if (storage_.size() < size + NR) storage_.resize(size + NR);
        const auto misalign = reinterpret_cast<std::uintptr_t>(storage_.data()) / sizeof(float) % NR;
        std::span<float> s(storage_.data() + (NR - misalign) % NR, size);
        std::fill(s.begin(), s.end(), 0.0f);
        return s;
    }

private:
    std::vector<float> storage_;
};

// A (rows x K, row stride ld) packed for `blocks`: 4 rows interleaved per k,
// zeros past the last row.
inline std::span<const float> pack_a(const float* src, std::int64_t rows, std::int64_t K, std::int64_t ld,
                                     panel_buffer& buf) {
    auto out = buf.zeroed((rows + MR - 1) / MR * K * MR);
    for (std::int64_t i = 0; i < rows; ++i) {
        float* dst = out.data() + (i / MR) * K * MR + i % MR;
        for (std::int64_t k = 0; k < K; ++k) dst[k * MR] = src[i * ld + k];
    }
    return out;
}

// B (K x cols, row-major) packed for `blocks`: panels of 8 columns, zeros
// past the last column.
inline std::span<const float> pack_b(const float* src, std::int64_t K, std::int64_t cols, panel_buffer& buf) {
    auto out = buf.zeroed((cols + NR - 1) / NR * K * NR);
    for (std::int64_t k = 0; k < K; ++k)
        for (std::int64_t j = 0; j < cols; ++j) out[static_cast<std::size_t>(((j / NR) * K + k) * NR + j % NR)] = src[k * cols + j];
    return out;
}

}  // namespace tsopt::spec::ops::float_gemm
