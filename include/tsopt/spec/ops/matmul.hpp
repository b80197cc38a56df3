#pragma once
// Batched matrix multiplication with an optional fused activation:
// a[..., m, k] x b[..., k, n] -> [..., m, n]. Batch axes broadcast; a rank-2
// operand is shared by every batch.
#include <type_traits>

#include "tsopt/spec/ops/detail.hpp"
#include "tsopt/spec/ops/float_gemm.hpp"

namespace tsopt::spec {
namespace matmul_p { enum : int { act }; }
namespace ops {

inline std::string matmul_shape(const op_params& p, std::span<const shape> in, std::span<shape> out) {
    if (auto e = detail::check_activation(p[matmul_p::act]); !e.empty()) return e;
    const shape &a = in[0], &b = in[1];
    if (a.rank < 2 || b.rank < 2) return detail::cat("operands must have rank >= 2, got ", a, " and ", b);
    if (a[a.rank - 1] != b[b.rank - 2])
        return detail::cat("inner extents differ: ", a, " x ", b, " (", a[a.rank - 1], " vs ", b[b.rank - 2], ")");
    shape ba, bb, batch;
    for (int i = 0; i < a.rank - 2; ++i) ba.push_back(a[i]);
    for (int i = 0; i < b.rank - 2; ++i) bb.push_back(b[i]);
    if (auto e = detail::broadcast(ba, bb, batch); !e.empty()) return "batch " + e;
    batch.push_back(a[a.rank - 2]);
    batch.push_back(b[b.rank - 1]);
    out[0] = batch;
    return {};
}

// The definition: each entry sums over k in order from zero.
template <class T>
void matmul_per_term(const op_params& p, std::span<const tensor<T>* const> in, std::span<tensor<T>> out) {
    const auto &a = *in[0], &b = *in[1];
    auto& o = out[0];
    std::int64_t m = a.shape[a.shape.rank - 2], k = a.shape[a.shape.rank - 1], n = b.shape[b.shape.rank - 1];
    shape ob = o.shape, ab = a.shape, bb = b.shape;
    ob.rank -= 2; ab.rank -= 2; bb.rank -= 2;
    std::fill(o.data.begin(), o.data.end(), scalar_traits<T>::zero());
    detail::for_each_broadcast(ob, ab, bb, [&](std::int64_t bo, std::int64_t ba, std::int64_t bbi) {
        const T* A = a.data.data() + ba * m * k;
        const T* B = b.data.data() + bbi * k * n;
        T* C = o.data.data() + bo * m * n;
        for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t kk = 0; kk < k; ++kk) {
                T av = A[i * k + kk];
                for (std::int64_t j = 0; j < n; ++j) C[i * n + j] += av * B[kk * n + j];
            }
    });
    detail::activate_all(o, p[matmul_p::act]);
}

// Floats: the same sums in the same order, 4 x 8 entries at a time in
// registers (float_gemm.hpp); a b shared by every batch is packed once.
inline void matmul_float_by_gemm(const op_params& p, const tensor<float>& a, const tensor<float>& b, tensor<float>& o) {
    const std::int64_t m = a.shape[a.shape.rank - 2], k = a.shape[a.shape.rank - 1], n = b.shape[b.shape.rank - 1];
    shape ob = o.shape, ab = a.shape, bb = b.shape;
    ob.rank -= 2; ab.rank -= 2; bb.rank -= 2;
    float_gemm::panel_buffer a_buf, b_buf;
    std::span<const float> packed_b;
    std::int64_t packed = -1;
    detail::for_each_broadcast(ob, ab, bb, [&](std::int64_t bo, std::int64_t ba, std::int64_t bbi) {
        if (bbi != packed) packed_b = float_gemm::pack_b(b.data.data() + bbi * k * n, k, n, b_buf), packed = bbi;
        const auto packed_a = float_gemm::pack_a(a.data.data() + ba * m * k, m, k, k, a_buf);
        float_gemm::blocks(packed_a.data(), packed_b.data(), k, m, n, o.data.data() + bo * m * n, n);
    });
    detail::activate_all(o, p[matmul_p::act]);
}

template <class T>
void matmul_eval(const op_params& p, std::span<const tensor<T>* const> in, std::span<tensor<T>> out) {
    if constexpr (std::is_same_v<T, float>) matmul_float_by_gemm(p, *in[0], *in[1], out[0]);
    else matmul_per_term(p, in, out);
}

inline std::int64_t matmul_flops(const op_params&, std::span<const shape> in, std::span<const shape> out) {
    return 2 * out[0].elements() * in[0][in[0].rank - 1];
}

}  // namespace ops

inline constexpr op_decl matmul_decl{
    .kind = op_kind::matmul, .name = "matmul", .math = "act(a @ b) (batched)",
    .min_inputs = 2, .max_inputs = 2, .input_names = {"a", "b"},
    .params = {param_decl{"act", detail::off_on}}, .num_params = 1,
    .cls = op_class::linear, .multilinear = true,
    .layouts = static_cast<layout_mask>((1 << int(layout::row_major)) | (1 << int(layout::col_major))),
    .infer = ops::matmul_shape, .eval_float = ops::matmul_eval<float>, .eval_modp = ops::matmul_eval<modp>,
    .flops = ops::matmul_flops};

}  // namespace tsopt::spec
