#pragma once
// 2-D average and max pooling over NCHW with kernel, stride, same/valid
// padding and a fused activation. Average pooling divides by the full window
// (padding counted), which makes it a depthwise convolution with the Cpool
// kernel — an identity the rules rely on.
#include "tsopt/spec/ops/detail.hpp"

namespace tsopt::spec {
namespace pool_p { enum : int { kh, kw, stride_h, stride_w, pad, act }; }
namespace ops {

inline std::string pool_shape(const op_params& p, std::span<const shape> in, std::span<shape> out) {
    using namespace pool_p;
    const shape& x = in[0];
    if (x.rank != 4) return detail::cat("input must be NCHW (rank 4), got ", x);
    if (p[kh] < 1 || p[kw] < 1) return detail::cat("kernel must be at least 1x1, got ", p[kh], "x", p[kw]);
    if (auto e = detail::check_window_params(p[kh], p[kw], p[stride_h], p[stride_w], p[pad]); !e.empty()) return e;
    if (auto e = detail::check_activation(p[act]); !e.empty()) return e;
    auto pm = static_cast<pad_mode>(p[pad]);
    std::int64_t oh = detail::window_out(x[2], p[kh], p[stride_h], 1, pm);
    std::int64_t ow = detail::window_out(x[3], p[kw], p[stride_w], 1, pm);
    if (oh <= 0 || ow <= 0) return detail::cat("window ", p[kh], "x", p[kw], " does not fit input ", x);
    out[0] = shape{x[0], x[1], oh, ow};
    return {};
}

template <class T, bool Max>
void pool_eval(const op_params& p, std::span<const tensor<T>* const> in, std::span<tensor<T>> out) {
    using namespace pool_p;
    using S = scalar_traits<T>;
    const auto& x = *in[0];
    auto& o = out[0];
    const std::int64_t NC = x.shape[0] * x.shape[1], H = x.shape[2], W = x.shape[3];
    const std::int64_t OH = o.shape[2], OW = o.shape[3], KH = p[kh], KW = p[kw];
    auto pm = static_cast<pad_mode>(p[pad]);
    const std::int64_t ph = detail::window_pad(KH, 1, pm), pw = detail::window_pad(KW, 1, pm);
    const T inv = S::reciprocal(KH * KW);
    for (std::int64_t c = 0; c < NC; ++c)
        for (std::int64_t oy = 0; oy < OH; ++oy)
            for (std::int64_t ox = 0; ox < OW; ++ox) {
                T acc = S::zero();
                bool first = true;
                for (std::int64_t ky = 0; ky < KH; ++ky) {
                    std::int64_t iy = oy * p[stride_h] - ph + ky;
                    if (iy < 0 || iy >= H) continue;
                    for (std::int64_t kx = 0; kx < KW; ++kx) {
                        std::int64_t ix = ox * p[stride_w] - pw + kx;
                        if (ix < 0 || ix >= W) continue;
                        T v = x[(c * H + iy) * W + ix];
                        if constexpr (Max) { acc = first ? v : S::max(acc, v); first = false; }
                        else acc += v;
                    }
                }
                if constexpr (!Max) acc = acc * inv;
                o[(c * OH + oy) * OW + ox] = detail::activate(acc, p[act]);
            }
}

inline std::int64_t pool_flops(const op_params& p, std::span<const shape>, std::span<const shape> out) {
    return out[0].elements() * p[pool_p::kh] * p[pool_p::kw];
}

}  // namespace ops

inline constexpr std::array<param_decl, max_params> pool_params{
    param_decl{.name = "kh", .domain = detail::three, .fallback = 3, .any_value = true, .probe = detail::probe_window},
    param_decl{.name = "kw", .domain = detail::three, .fallback = 3, .any_value = true, .probe = detail::probe_window},
    param_decl{.name = "stride_h", .domain = detail::one_two, .fallback = 1, .any_value = true, .probe = detail::probe_stride},
    param_decl{.name = "stride_w", .domain = detail::one_two, .fallback = 1, .any_value = true, .probe = detail::probe_stride},
    param_decl{.name = "pad", .domain = detail::off_on, .any_value = true}, param_decl{"act", detail::off_on}};

inline constexpr op_decl avgpool_decl{
    .kind = op_kind::avgpool, .name = "avgpool", .math = "act(mean over kh x kw windows, padding counted)",
    .input_names = {"x"}, .params = pool_params, .num_params = 6, .cls = op_class::linear, .multilinear = true,
    .layouts = image_layouts, .infer = ops::pool_shape, .eval_float = ops::pool_eval<float, false>, .eval_modp = ops::pool_eval<modp, false>,
    .flops = ops::pool_flops};

inline constexpr op_decl maxpool_decl{
    .kind = op_kind::maxpool, .name = "maxpool", .math = "act(max over kh x kw windows)",
    .input_names = {"x"}, .params = pool_params, .num_params = 6, .cls = op_class::nonlinear,
    .layouts = image_layouts, .infer = ops::pool_shape, .eval_float = ops::pool_eval<float, true>, .eval_modp = ops::pool_eval<modp, true>,
    .flops = ops::pool_flops};

}  // namespace tsopt::spec
