#pragma once
// Constant operators (no inputs; the value is fixed by the parameters):
//   cpool(c, kh, kw)   depthwise kernel [c,1,kh,kw] of 1/(kh*kw): conv with it == avgpool
//   iconv(co, ci, k)   identity kernel [co,ci,k,k]: conv(x, iconv) == x (same padding, stride 1)
//   imatmul(n)         identity matrix [n,n]
//   iewmul(rank, d..)  tensor of ones: ewmul(x, iewmul) == x
// In rules their extents are tied to matched tensors through dim_of terms.
#include "tsopt/spec/ops/detail.hpp"

namespace tsopt::spec {
namespace cpool_p { enum : int { c, kh, kw }; }
namespace iconv_p { enum : int { co, ci, k }; }
namespace imatmul_p { enum : int { n }; }
namespace iewmul_p { enum : int { rank, d0 }; }
namespace ops {

inline std::string positive(const op_params& p, int first, int count) {
    for (int i = first; i < first + count; ++i)
        if (p[i] < 1) return detail::cat("extent parameter ", i, " must be positive, got ", p[i]);
    return {};
}

inline std::string cpool_shape(const op_params& p, std::span<const shape>, std::span<shape> out) {
    if (auto e = positive(p, 0, 3); !e.empty()) return e;
    out[0] = shape{p[cpool_p::c], 1, p[cpool_p::kh], p[cpool_p::kw]};
    return {};
}
template <class T>
void cpool_eval(const op_params& p, std::span<const tensor<T>* const>, std::span<tensor<T>> out) {
    T v = scalar_traits<T>::reciprocal(std::int64_t(p[cpool_p::kh]) * p[cpool_p::kw]);
    std::fill(out[0].data.begin(), out[0].data.end(), v);
}

inline std::string iconv_shape(const op_params& p, std::span<const shape>, std::span<shape> out) {
    if (auto e = positive(p, 0, 3); !e.empty()) return e;
    if (p[iconv_p::k] % 2 == 0) return detail::cat("identity kernel size must be odd, got ", p[iconv_p::k]);
    if (p[iconv_p::co] % p[iconv_p::ci] != 0)
        return detail::cat("output channels ", p[iconv_p::co], " must be a multiple of input channels ", p[iconv_p::ci]);
    out[0] = shape{p[iconv_p::co], p[iconv_p::ci], p[iconv_p::k], p[iconv_p::k]};
    return {};
}
template <class T>
void iconv_eval(const op_params& p, std::span<const tensor<T>* const>, std::span<tensor<T>> out) {
    auto& o = out[0];
    std::fill(o.data.begin(), o.data.end(), scalar_traits<T>::zero());
    std::int64_t ci = p[iconv_p::ci], k = p[iconv_p::k];
    for (std::int64_t c = 0; c < p[iconv_p::co]; ++c) o[((c * ci + c % ci) * k + k / 2) * k + k / 2] = scalar_traits<T>::one();
}

inline std::string imatmul_shape(const op_params& p, std::span<const shape>, std::span<shape> out) {
    if (auto e = positive(p, 0, 1); !e.empty()) return e;
    out[0] = shape{p[imatmul_p::n], p[imatmul_p::n]};
    return {};
}
template <class T>
void imatmul_eval(const op_params& p, std::span<const tensor<T>* const>, std::span<tensor<T>> out) {
    std::fill(out[0].data.begin(), out[0].data.end(), scalar_traits<T>::zero());
    for (std::int64_t i = 0; i < p[imatmul_p::n]; ++i) out[0][i * p[imatmul_p::n] + i] = scalar_traits<T>::one();
}

inline std::string iewmul_shape(const op_params& p, std::span<const shape>, std::span<shape> out) {
    int r = p[iewmul_p::rank];
    // Bounded by both the parameter slots and a shape's capacity (max_rank).
    constexpr int most = std::min(max_rank, max_params - 1);
    if (r < 0 || r > most) return detail::cat("rank ", r, " must be within 0..", most);
    if (auto e = positive(p, iewmul_p::d0, r); !e.empty()) return e;
    shape s;
    for (int i = 0; i < r; ++i) s.push_back(p[iewmul_p::d0 + i]);
    out[0] = s;
    return {};
}
template <class T>
void ones_eval(const op_params&, std::span<const tensor<T>* const>, std::span<tensor<T>> out) {
    std::fill(out[0].data.begin(), out[0].data.end(), scalar_traits<T>::one());
}

}  // namespace ops

inline constexpr op_decl cpool_decl{
    .kind = op_kind::cpool, .name = "cpool", .math = "[c,1,kh,kw] filled with 1/(kh*kw)",
    .min_inputs = 0, .max_inputs = 0,
    // kh/kw any_value as the pool windows they stand for (conv-cpool-avgpool):
    // a rule over a pool window variable keeps its cpool tied to it.
    .params = {param_decl{"c"}, param_decl{.name = "kh", .any_value = true}, param_decl{.name = "kw", .any_value = true}},
    .num_params = 3, .cls = op_class::constant,
    .infer = ops::cpool_shape, .eval_float = ops::cpool_eval<float>, .eval_modp = ops::cpool_eval<modp>,
    .flops = detail::no_flops};

inline constexpr op_decl iconv_decl{
    .kind = op_kind::iconv, .name = "iconv", .math = "identity convolution kernel [co,ci,k,k]",
    .min_inputs = 0, .max_inputs = 0,
    .params = {param_decl{"co"}, param_decl{"ci"}, param_decl{"k"}}, .num_params = 3, .cls = op_class::constant,
    .infer = ops::iconv_shape, .eval_float = ops::iconv_eval<float>, .eval_modp = ops::iconv_eval<modp>,
    .flops = detail::no_flops};

inline constexpr op_decl imatmul_decl{
    .kind = op_kind::imatmul, .name = "imatmul", .math = "identity matrix [n,n]",
    .min_inputs = 0, .max_inputs = 0,
    .params = {param_decl{"n"}}, .num_params = 1, .cls = op_class::constant,
    .infer = ops::imatmul_shape, .eval_float = ops::imatmul_eval<float>, .eval_modp = ops::imatmul_eval<modp>,
    .flops = detail::no_flops};

inline constexpr op_decl iewmul_decl{
    .kind = op_kind::iewmul, .name = "iewmul", .math = "tensor of ones",
    .min_inputs = 0, .max_inputs = 0,
    .params = {param_decl{"rank"}, param_decl{"d0"}, param_decl{"d1"}, param_decl{"d2"}, param_decl{"d3"},
               param_decl{"d4"}, param_decl{"d5"}, param_decl{"d6"}},
    .num_params = 8, .cls = op_class::constant,
    .infer = ops::iewmul_shape, .eval_float = ops::ones_eval<float>, .eval_modp = ops::ones_eval<modp>,
    .flops = detail::no_flops};

}  // namespace tsopt::spec
