#pragma once
// Batched matrix multiplication with an optional fused activation:
// a[..., m, k] x b[..., k, n] -> [..., m, n]. Batch axes broadcast; a rank-2
// operand is shared by every batch.
#include "tsopt/spec/ops/detail.hpp"

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

template <class T>
void matmul_eval(const op_params& p, std::span<const tensor<T>* const> in, std::span<tensor<T>> out) {
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
