#pragma once
// Element-wise operators: ewadd, ewmul (numpy broadcasting), smul (scalar
// multiply), relu / sigmoid / tanh, and batchnorm in inference form (a
// per-channel affine map; the importer folds mean, variance and epsilon into
// scale and shift, which keeps it exact in both number systems).
#include "tsopt/spec/ops/detail.hpp"

namespace tsopt::spec {
namespace ops {

inline std::string binary_shape(const op_params&, std::span<const shape> in, std::span<shape> out) {
    return detail::broadcast(in[0], in[1], out[0]);
}
template <class T, class F>
void binary_eval(std::span<const tensor<T>* const> in, std::span<tensor<T>> out, F f) {
    const auto& a = *in[0];
    const auto& b = *in[1];
    detail::for_each_broadcast(out[0].shape, a.shape, b.shape,
                               [&](std::int64_t o, std::int64_t ia, std::int64_t ib) { out[0][o] = f(a[ia], b[ib]); });
}
template <class T>
void ewadd_eval(const op_params&, std::span<const tensor<T>* const> in, std::span<tensor<T>> out) {
    binary_eval<T>(in, out, [](T x, T y) { return x + y; });
}
template <class T>
void ewmul_eval(const op_params&, std::span<const tensor<T>* const> in, std::span<tensor<T>> out) {
    binary_eval<T>(in, out, [](T x, T y) { return x * y; });
}

inline std::string smul_shape(const op_params&, std::span<const shape> in, std::span<shape> out) {
    if (in[1].elements() != 1) return detail::cat("scalar operand must hold one element, got shape ", in[1]);
    out[0] = in[0];
    return {};
}
template <class T>
void smul_eval(const op_params&, std::span<const tensor<T>* const> in, std::span<tensor<T>> out) {
    T s = (*in[1])[0];
    for (std::int64_t i = 0; i < out[0].size(); ++i) out[0][i] = (*in[0])[i] * s;
}

inline std::string same_shape(const op_params&, std::span<const shape> in, std::span<shape> out) {
    out[0] = in[0];
    return {};
}
template <class T, std::int32_t Act>
void unary_eval(const op_params&, std::span<const tensor<T>* const> in, std::span<tensor<T>> out) {
    for (std::int64_t i = 0; i < out[0].size(); ++i) out[0][i] = detail::activate((*in[0])[i], Act);
}

inline std::string batchnorm_shape(const op_params&, std::span<const shape> in, std::span<shape> out) {
    if (in[0].rank < 2) return detail::cat("input must have a channel axis (rank >= 2), got ", in[0]);
    for (int i = 1; i <= 2; ++i)
        if (in[i].rank != 1 || in[i][0] != in[0][1])
            return detail::cat(i == 1 ? "scale" : "shift", " must have shape [", in[0][1], "], got ", in[i]);
    out[0] = in[0];
    return {};
}
template <class T>
void batchnorm_eval(const op_params&, std::span<const tensor<T>* const> in, std::span<tensor<T>> out) {
    const auto& x = *in[0];
    std::int64_t c = x.shape[1], inner = 1;
    for (int i = 2; i < x.shape.rank; ++i) inner *= x.shape[i];
    for (std::int64_t i = 0; i < x.size(); ++i) {
        std::int64_t ch = (i / inner) % c;
        out[0][i] = x[i] * (*in[1])[ch] + (*in[2])[ch];
    }
}

}  // namespace ops

inline constexpr op_decl ewadd_decl{
    .kind = op_kind::ewadd, .name = "ewadd", .math = "x + y (element-wise, broadcasting)",
    .min_inputs = 2, .max_inputs = 2, .input_names = {"x", "y"},
    .cls = op_class::elementwise, .multilinear = false, .commutative = true,
    .layouts = image_layouts, .infer = ops::binary_shape, .eval_float = ops::ewadd_eval<float>, .eval_modp = ops::ewadd_eval<modp>,
    .flops = detail::elements_flops};

inline constexpr op_decl ewmul_decl{
    .kind = op_kind::ewmul, .name = "ewmul", .math = "x * y (element-wise, broadcasting)",
    .min_inputs = 2, .max_inputs = 2, .input_names = {"x", "y"},
    .cls = op_class::elementwise, .multilinear = true, .commutative = true,
    .layouts = image_layouts, .infer = ops::binary_shape, .eval_float = ops::ewmul_eval<float>, .eval_modp = ops::ewmul_eval<modp>,
    .flops = detail::elements_flops};

inline constexpr op_decl smul_decl{
    .kind = op_kind::smul, .name = "smul", .math = "x * s (s a scalar)",
    .min_inputs = 2, .max_inputs = 2, .input_names = {"x", "s"},
    .cls = op_class::elementwise, .multilinear = true,
    .infer = ops::smul_shape, .eval_float = ops::smul_eval<float>, .eval_modp = ops::smul_eval<modp>,
    .flops = detail::elements_flops};

inline constexpr op_decl relu_decl{
    .kind = op_kind::relu, .name = "relu", .math = "max(x, 0)",
    .input_names = {"x"}, .cls = op_class::elementwise,
    .layouts = image_layouts, .infer = ops::same_shape, .eval_float = ops::unary_eval<float, 1>, .eval_modp = ops::unary_eval<modp, 1>,
    .flops = detail::elements_flops};

inline constexpr op_decl sigmoid_decl{
    .kind = op_kind::sigmoid, .name = "sigmoid", .math = "1 / (1 + exp(-x))",
    .input_names = {"x"}, .cls = op_class::elementwise, .layouts = image_layouts, .generated = false,
    .infer = ops::same_shape, .eval_float = ops::unary_eval<float, 2>, .eval_modp = ops::unary_eval<modp, 2>,
    .flops = detail::elements_flops};

inline constexpr op_decl tanh_decl{
    .kind = op_kind::tanh, .name = "tanh", .math = "tanh(x)",
    .input_names = {"x"}, .cls = op_class::elementwise, .layouts = image_layouts, .generated = false,
    .infer = ops::same_shape, .eval_float = ops::unary_eval<float, 3>, .eval_modp = ops::unary_eval<modp, 3>,
    .flops = detail::elements_flops};

inline constexpr op_decl batchnorm_decl{
    .kind = op_kind::batchnorm, .name = "batchnorm", .math = "x * scale[c] + shift[c] (inference form)",
    .min_inputs = 3, .max_inputs = 3, .input_names = {"x", "scale", "shift"},
    .cls = op_class::linear, .generated = false,
    .infer = ops::batchnorm_shape, .eval_float = ops::batchnorm_eval<float>, .eval_modp = ops::batchnorm_eval<modp>,
    .flops = detail::elements_flops};

}  // namespace tsopt::spec
