#pragma once
// slice: the sub-tensor x[b0:e0, b1:e1, b2:e2, b3:e3] of a tensor of rank <= 4
// (an end of 0 means "to the extent", so all-zero parameters are the
// identity). PET's correction kernels read the input region a non-equivalent
// output box depends on with it (pet/correction.hpp).
#include "tsopt/spec/ops/detail.hpp"

namespace tsopt::spec {
namespace slice_p { enum : int { b0, b1, b2, b3, e0, e1, e2, e3 }; }
namespace ops {

// [begin, end) of axis i of a slice of `in` (end 0: the extent).
inline std::pair<std::int64_t, std::int64_t> slice_range(const op_params& p, const shape& in, int i) {
    std::int64_t b = p[slice_p::b0 + i], e = p[slice_p::e0 + i];
    return {b, e == 0 ? in[i] : e};
}

inline std::string slice_shape(const op_params& p, std::span<const shape> in, std::span<shape> out) {
    const shape& x = in[0];
    if (x.rank < 1 || x.rank > 4) return detail::cat("input must have rank 1..4, got ", x);
    shape r;
    for (int i = 0; i < 4; ++i) {
        if (i >= x.rank) {
            if (p[slice_p::b0 + i] != 0 || p[slice_p::e0 + i] != 0)
                return detail::cat("axis ", i, " is sliced but input ", x, " has rank ", x.rank);
            continue;
        }
        auto [b, e] = slice_range(p, x, i);
        if (b < 0 || e > x[i] || b >= e)
            return detail::cat("range [", b, ", ", e, ") of axis ", i, " is empty or outside extent ", x[i]);
        r.push_back(e - b);
    }
    out[0] = r;
    return {};
}

template <class T>
void slice_eval(const op_params& p, std::span<const tensor<T>* const> in, std::span<tensor<T>> out) {
    const auto& x = *in[0];
    auto& o = out[0];
    const int r = x.shape.rank;
    auto st = strides_of(x.shape);
    std::int64_t base = 0;
    for (int i = 0; i < r; ++i) base += slice_range(p, x.shape, i).first * st[i];
    // Copy rows of the innermost axis.
    const std::int64_t row = o.shape[r - 1], rows = o.size() / row;
    std::array<std::int64_t, max_rank> idx{};
    for (std::int64_t k = 0; k < rows; ++k) {
        std::int64_t src = base;
        for (int i = 0; i + 1 < r; ++i) src += idx[i] * st[i];
        std::copy_n(x.data.begin() + src, row, o.data.begin() + k * row);
        for (int d = r - 2; d >= 0; --d) {
            if (++idx[d] < o.shape[d]) break;
            idx[d] = 0;
        }
    }
}

}  // namespace ops

inline constexpr op_decl slice_decl{
    .kind = op_kind::slice, .name = "slice", .math = "x[b0:e0, b1:e1, b2:e2, b3:e3] (end 0: the extent)",
    .input_names = {"x"},
    .params = {param_decl{"b0"}, param_decl{"b1"}, param_decl{"b2"}, param_decl{"b3"}, param_decl{"e0"},
               param_decl{"e1"}, param_decl{"e2"}, param_decl{"e3"}},
    .num_params = 8, .cls = op_class::data_movement, .multilinear = true, .generated = false,
    .infer = ops::slice_shape, .eval_float = ops::slice_eval<float>, .eval_modp = ops::slice_eval<modp>,
    .flops = detail::no_flops};

}  // namespace tsopt::spec
