#pragma once
// Softmax along one axis. Not used by the rule generator; in the fingerprint
// number system it is a normalised polynomial so it stays non-linear.
#include <cmath>

#include "tsopt/spec/ops/detail.hpp"

namespace tsopt::spec {
namespace softmax_p { enum : int { axis }; }
namespace ops {

inline std::string softmax_shape(const op_params& p, std::span<const shape> in, std::span<shape> out) {
    if (p[softmax_p::axis] < 0 || p[softmax_p::axis] >= in[0].rank)
        return detail::cat("axis ", p[softmax_p::axis], " out of range for rank ", in[0].rank);
    out[0] = in[0];
    return {};
}
template <class T>
void softmax_eval(const op_params& p, std::span<const tensor<T>* const> in, std::span<tensor<T>> out) {
    const auto& x = *in[0];
    int ax = p[softmax_p::axis];
    std::int64_t n = x.shape[ax], inner = 1, outer = 1;
    for (int d = ax + 1; d < x.shape.rank; ++d) inner *= x.shape[d];
    for (int d = 0; d < ax; ++d) outer *= x.shape[d];
    for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t i = 0; i < inner; ++i) {
            std::int64_t base = o * n * inner + i;
            if constexpr (std::is_same_v<T, float>) {
                float mx = x[base];
                for (std::int64_t k = 1; k < n; ++k) mx = std::max(mx, x[base + k * inner]);
                float sum = 0;
                for (std::int64_t k = 0; k < n; ++k) sum += out[0][base + k * inner] = std::exp(x[base + k * inner] - mx);
                for (std::int64_t k = 0; k < n; ++k) out[0][base + k * inner] /= sum;
            } else {
                T sum = scalar_traits<T>::zero();
                for (std::int64_t k = 0; k < n; ++k) {
                    T v = x[base + k * inner];
                    sum += out[0][base + k * inner] = v * v + T(7);
                }
                T inv = sum.inverse();
                for (std::int64_t k = 0; k < n; ++k) out[0][base + k * inner] *= inv;
            }
        }
}

}  // namespace ops

inline constexpr op_decl softmax_decl{
    .kind = op_kind::softmax, .name = "softmax", .math = "exp(x) / sum(exp(x)) along axis",
    .input_names = {"x"}, .params = {param_decl{"axis"}}, .num_params = 1, .cls = op_class::nonlinear,
    .generated = false,
    .infer = ops::softmax_shape, .eval_float = ops::softmax_eval<float>, .eval_modp = ops::softmax_eval<modp>,
    .flops = [](const op_params&, std::span<const shape>, std::span<const shape> out) { return 5 * out[0].elements(); }};

}  // namespace tsopt::spec
