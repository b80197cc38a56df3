#pragma once
// overwrite: x with the box of patch's extents at offset (o0, o1, o2, o3)
// replaced by patch (rank <= 4). PET's correction kernels write the exactly
// recomputed values of a non-equivalent output box back with it
// (pet/correction.hpp). Jointly linear in (x, patch), like concat, but not
// in either input alone.
#include "tsopt/spec/ops/detail.hpp"

namespace tsopt::spec {
namespace overwrite_p { enum : int { o0, o1, o2, o3 }; }
namespace ops {

inline std::string overwrite_shape(const op_params& p, std::span<const shape> in, std::span<shape> out) {
    const shape &x = in[0], &t = in[1];
    if (x.rank < 1 || x.rank > 4) return detail::cat("input must have rank 1..4, got ", x);
    if (t.rank != x.rank) return detail::cat("patch ", t, " and input ", x, " differ in rank");
    for (int i = 0; i < 4; ++i) {
        std::int64_t o = p[overwrite_p::o0 + i];
        if (i >= x.rank) {
            if (o != 0) return detail::cat("offset on axis ", i, " but input ", x, " has rank ", x.rank);
            continue;
        }
        if (o < 0 || o + t[i] > x[i])
            return detail::cat("patch ", t, " at offset ", o, " on axis ", i, " does not fit input ", x);
    }
    out[0] = x;
    return {};
}

template <class T>
void overwrite_eval(const op_params& p, std::span<const tensor<T>* const> in, std::span<tensor<T>> out) {
    const auto &x = *in[0], &t = *in[1];
    auto& o = out[0];
    o.data = x.data;
    const int r = x.shape.rank;
    auto st = strides_of(x.shape);
    std::int64_t base = 0;
    for (int i = 0; i < r; ++i) base += std::int64_t(p[overwrite_p::o0 + i]) * st[i];
    const std::int64_t row = t.shape[r - 1], rows = t.size() / row;
    std::array<std::int64_t, max_rank> idx{};
    for (std::int64_t k = 0; k < rows; ++k) {
        std::int64_t dst = base;
        for (int i = 0; i + 1 < r; ++i) dst += idx[i] * st[i];
        std::copy_n(t.data.begin() + k * row, row, o.data.begin() + dst);
        for (int d = r - 2; d >= 0; --d) {
            if (++idx[d] < t.shape[d]) break;
            idx[d] = 0;
        }
    }
}

}  // namespace ops

inline constexpr op_decl overwrite_decl{
    .kind = op_kind::overwrite, .name = "overwrite", .math = "x with x[o : o + shape(patch)] = patch",
    .min_inputs = 2, .max_inputs = 2, .input_names = {"x", "patch"},
    .params = {param_decl{"o0"}, param_decl{"o1"}, param_decl{"o2"}, param_decl{"o3"}}, .num_params = 4,
    .cls = op_class::data_movement, .multilinear = false, .generated = false,
    .infer = ops::overwrite_shape, .eval_float = ops::overwrite_eval<float>, .eval_modp = ops::overwrite_eval<modp>,
    .flops = detail::no_flops};

}  // namespace tsopt::spec
