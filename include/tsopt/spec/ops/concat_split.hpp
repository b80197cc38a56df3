#pragma once
// concat joins tensors along an axis (variadic in graphs, binary in rules);
// split cuts one tensor in two along an axis at a given extent. The generator
// only splits at a point recovered from the tensor's concat history (TASO's
// split trees), so every generated split undoes a concat.
#include "tsopt/spec/ops/detail.hpp"

namespace tsopt::spec {
namespace concat_p { enum : int { axis }; }
namespace split_p { enum : int { axis, at }; }
namespace ops {

inline std::string concat_shape(const op_params& p, std::span<const shape> in, std::span<shape> out) {
    int ax = p[concat_p::axis];
    const shape& a = in[0];
    if (ax < 0 || ax >= a.rank) return detail::cat("axis ", ax, " out of range for rank ", a.rank);
    shape r = a;
    for (std::size_t i = 1; i < in.size(); ++i) {
        const shape& b = in[i];
        if (b.rank != a.rank) return detail::cat("input ", i, " has rank ", b.rank, ", input 0 has rank ", a.rank);
        for (int d = 0; d < a.rank; ++d)
            if (d != ax && a[d] != b[d])
                return detail::cat("inputs ", a, " and ", b, " differ off the concat axis ", ax);
        r[ax] += b[ax];
    }
    out[0] = r;
    return {};
}

template <class T>
void concat_eval(const op_params& p, std::span<const tensor<T>* const> in, std::span<tensor<T>> out) {
    int ax = p[concat_p::axis];
    const shape& os = out[0].shape;
    std::int64_t outer = 1, inner = 1;
    for (int d = 0; d < ax; ++d) outer *= os[d];
    for (int d = ax + 1; d < os.rank; ++d) inner *= os[d];
    std::int64_t off = 0;
    for (auto* t : in) {
        std::int64_t chunk = t->shape[ax] * inner;
        for (std::int64_t o = 0; o < outer; ++o)
            std::copy_n(t->data.begin() + o * chunk, chunk, out[0].data.begin() + o * os[ax] * inner + off);
        off += chunk;
    }
}

inline std::string split_shape(const op_params& p, std::span<const shape> in, std::span<shape> out) {
    int ax = p[split_p::axis];
    const shape& a = in[0];
    if (ax < 0 || ax >= a.rank) return detail::cat("axis ", ax, " out of range for rank ", a.rank);
    std::int32_t at = p[split_p::at];
    if (at <= 0 || at >= a[ax]) return detail::cat("split point ", at, " must lie strictly inside extent ", a[ax]);
    out[0] = a; out[0][ax] = at;
    out[1] = a; out[1][ax] = a[ax] - at;
    return {};
}

template <class T>
void split_eval(const op_params& p, std::span<const tensor<T>* const> in, std::span<tensor<T>> out) {
    int ax = p[split_p::axis];
    const shape& is = in[0]->shape;
    std::int64_t outer = 1, inner = 1;
    for (int d = 0; d < ax; ++d) outer *= is[d];
    for (int d = ax + 1; d < is.rank; ++d) inner *= is[d];
    std::int64_t off = 0;
    for (auto& t : out) {
        std::int64_t chunk = t.shape[ax] * inner;
        for (std::int64_t o = 0; o < outer; ++o)
            std::copy_n(in[0]->data.begin() + o * is[ax] * inner + off, chunk, t.data.begin() + o * chunk);
        off += chunk;
    }
}

inline constexpr std::int32_t axes4[] = {0, 1, 2, 3};

}  // namespace ops

inline constexpr op_decl concat_decl{
    .kind = op_kind::concat, .name = "concat", .math = "[x | y] along axis",
    .min_inputs = 2, .max_inputs = 64, .input_names = {"x", "y"},
    // Linear in all inputs jointly, like ewadd, but not in each input
    // separately: concat(a + b, y) != concat(a, y) + concat(b, y).
    .params = {param_decl{"axis", ops::axes4}}, .num_params = 1, .cls = op_class::data_movement, .multilinear = false,
    .layouts = image_layouts, .infer = ops::concat_shape, .eval_float = ops::concat_eval<float>, .eval_modp = ops::concat_eval<modp>,
    .flops = detail::no_flops};

inline constexpr op_decl split_decl{
    .kind = op_kind::split, .name = "split", .math = "(x[..:at], x[at:..]) along axis",
    .num_outputs = 2, .input_names = {"x"},
    .params = {param_decl{"axis", ops::axes4}, param_decl{"at"}}, .num_params = 2,
    .cls = op_class::data_movement, .multilinear = true,
    .infer = ops::split_shape, .eval_float = ops::split_eval<float>, .eval_modp = ops::split_eval<modp>,
    .flops = detail::no_flops};

}  // namespace tsopt::spec
