#pragma once
// Grouped 2-D convolution (NCHW input, [Cout, Cin/groups, kh, kw] weights;
// the group count is Cin / weight's Cin), with stride, dilation, same/valid
// padding and a fused activation; and enlarge, which zero-pads a kernel to a
// larger (kh, kw), centred, so that convolutions of different kernel sizes can
// be fused (TASO, MetaFlow Figure 1).
#include <type_traits>

#include "tsopt/spec/ops/detail.hpp"
#include "tsopt/spec/ops/float_gemm.hpp"

namespace tsopt::spec {
namespace conv2d_p { enum : int { stride_h, stride_w, pad, act, dil_h, dil_w }; }
namespace enlarge_p { enum : int { kh, kw }; }
namespace ops {

inline std::string conv2d_shape(const op_params& p, std::span<const shape> in, std::span<shape> out) {
    using namespace conv2d_p;
    const shape &x = in[0], &w = in[1];
    if (x.rank != 4) return detail::cat("input must be NCHW (rank 4), got ", x);
    if (w.rank != 4) return detail::cat("weight must be [Cout, Cin/groups, kh, kw], got ", w);
    if (auto e = detail::check_window_params(int(w[2]), int(w[3]), p[stride_h], p[stride_w], p[pad], p[dil_h], p[dil_w]); !e.empty())
        return e;
    if (auto e = detail::check_activation(p[act]); !e.empty()) return e;
    if (w[1] <= 0 || x[1] % w[1] != 0)
        return detail::cat("input channels ", x[1], " are not a multiple of the weight's input channels ", w[1]);
    std::int64_t groups = x[1] / w[1];
    if (w[0] % groups != 0)
        return detail::cat("output channels ", w[0], " are not a multiple of the group count ", groups);
    auto pm = static_cast<pad_mode>(p[pad]);
    std::int64_t oh = detail::window_out(x[2], w[2], p[stride_h], p[dil_h], pm);
    std::int64_t ow = detail::window_out(x[3], w[3], p[stride_w], p[dil_w], pm);
    if (oh <= 0 || ow <= 0) return detail::cat("kernel ", w, " does not fit input ", x, " with valid padding");
    out[0] = shape{x[0], w[0], oh, ow};
    return {};
}

// Float convolution as a matrix product per group (float_gemm.hpp): the
// input patches of a few output rows laid out as a K x columns matrix (K =
// Cin/groups * kh * kw, zeros where a tap falls in the padding), times the
// group's [Cout/groups, K] weights. Each output still sums its taps in (ci,
// ky, kx) order from zero; a padded tap adds w * 0, which leaves a sum
// started at +0 unchanged for finite weights. Symbolic and modular element
// types keep conv2d_per_tap (no zero terms).
inline void conv2d_float_by_gemm(const op_params& p, const tensor<float>& x, const tensor<float>& w, tensor<float>& o) {
    using namespace conv2d_p;
    using float_gemm::NR;
    const std::int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
    const std::int64_t CO = w.shape[0], CI = w.shape[1], KH = w.shape[2], KW = w.shape[3];
    const std::int64_t OH = o.shape[2], OW = o.shape[3];
    const std::int64_t G = C / CI, COG = CO / G, K = CI * KH * KW;
    const std::int64_t sh = p[stride_h], sw = p[stride_w], dh = p[dil_h], dw = p[dil_w];
    const auto pm = static_cast<pad_mode>(p[pad]);
    const std::int64_t ph = detail::window_pad(KH, dh, pm), pw = detail::window_pad(KW, dw, pm);
    // Whole output rows per chunk, about 256 columns: the patch panel stays
    // in the L2 cache next to the weights.
    const std::int64_t rows = std::clamp<std::int64_t>((256 + OW - 1) / OW, 1, OH);
    float_gemm::panel_buffer weight_buf, patch_buf;
    for (std::int64_t g = 0; g < G; ++g) {
        const auto weights = float_gemm::pack_a(w.data.data() + g * COG * K, COG, K, K, weight_buf);
        for (std::int64_t n = 0; n < N; ++n)
            for (std::int64_t oy0 = 0; oy0 < OH; oy0 += rows) {
                const std::int64_t cols = std::min(rows, OH - oy0) * OW;
                // Patches in panels of 8 columns, one tap after another.
                const auto patches = patch_buf.zeroed((cols + NR - 1) / NR * K * NR);
                for (std::int64_t ci = 0; ci < CI; ++ci) {
                    const float* ip = x.data.data() + ((n * C + g * CI + ci) * H) * W;
                    for (std::int64_t ky = 0; ky < KH; ++ky)
                        for (std::int64_t kx = 0; kx < KW; ++kx) {
                            const std::int64_t k = (ci * KH + ky) * KW + kx;
                            const std::int64_t x0 = kx * dw - pw;  // ix = ox * sw + x0
                            const std::int64_t ox_lo = x0 >= 0 ? 0 : (-x0 + sw - 1) / sw;
                            const std::int64_t ox_hi = W - 1 - x0 < 0 ? 0 : std::min(OW, (W - 1 - x0) / sw + 1);
                            for (std::int64_t c0 = 0; c0 < cols; c0 += OW) {
                                const std::int64_t iy = (oy0 + c0 / OW) * sh - ph + ky * dh;
                                if (iy < 0 || iy >= H) continue;
                                const float* irow = ip + iy * W + x0;
                                for (std::int64_t ox = ox_lo; ox < ox_hi; ++ox) {
                                    const std::int64_t c = c0 + ox;
                                    patches[static_cast<std::size_t>(((c / NR) * K + k) * NR + c % NR)] = irow[ox * sw];
                                }
                            }
                        }
                }
                float_gemm::blocks(weights.data(), patches.data(), K, COG, cols,
                                   o.data.data() + ((n * CO + g * COG) * OH + oy0) * OW, OH * OW);
            }
    }
}

// The definition, tap by tap: each output sums its taps in (ci, ky, kx)
// order from zero, skipping taps in the padding.
template <class T>
void conv2d_per_tap(const op_params& p, std::span<const tensor<T>* const> in, std::span<tensor<T>> out) {
    using namespace conv2d_p;
    const auto &x = *in[0], &w = *in[1];
    auto& o = out[0];
    const std::int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
    const std::int64_t CO = w.shape[0], CI = w.shape[1], KH = w.shape[2], KW = w.shape[3];
    const std::int64_t OH = o.shape[2], OW = o.shape[3];
    const std::int64_t G = C / CI, COG = CO / G;
    const std::int64_t sh = p[stride_h], sw = p[stride_w], dh = p[dil_h], dw = p[dil_w];
    auto pm = static_cast<pad_mode>(p[pad]);
    const std::int64_t ph = detail::window_pad(KH, dh, pm), pw = detail::window_pad(KW, dw, pm);
    std::fill(o.data.begin(), o.data.end(), scalar_traits<T>::zero());
    for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t co = 0; co < CO; ++co) {
            const std::int64_t g = co / COG;
            T* op = o.data.data() + ((n * CO + co) * OH) * OW;
            for (std::int64_t ci = 0; ci < CI; ++ci) {
                const T* ip = x.data.data() + ((n * C + g * CI + ci) * H) * W;
                for (std::int64_t ky = 0; ky < KH; ++ky)
                    for (std::int64_t kx = 0; kx < KW; ++kx) {
                        const T wv = w.data[static_cast<std::size_t>(((co * CI + ci) * KH + ky) * KW + kx)];
                        // The outputs whose tap lands inside the input, as a
                        // range instead of a test per element: the same sums
                        // in the same order, and a loop the compiler
                        // vectorizes (verifying a ResNet-50 spent 80% here).
                        const std::int64_t x0 = kx * dw - pw;  // ix = ox * sw + x0
                        const std::int64_t ox_lo = x0 >= 0 ? 0 : (-x0 + sw - 1) / sw;
                        const std::int64_t ox_hi = W - 1 - x0 < 0 ? 0 : std::min(OW, (W - 1 - x0) / sw + 1);
                        // A tap that reads whole input rows at unit strides
                        // (a 1x1 conv, a centre column) reads consecutive
                        // rows as one run.
                        if (sw == 1 && sh == 1 && x0 == 0 && OW == W) {
                            const std::int64_t y0 = ky * dh - ph;  // iy = oy + y0
                            const std::int64_t oy_lo = std::max<std::int64_t>(0, -y0);
                            const std::int64_t oy_hi = std::min(OH, H - y0);
                            if (oy_lo < oy_hi)
                                detail::add_scaled_row(op + oy_lo * OW, ip + (oy_lo + y0) * W, wv, (oy_hi - oy_lo) * OW);
                            continue;
                        }
                        for (std::int64_t oy = 0; oy < OH; ++oy) {
                            const std::int64_t iy = oy * sh - ph + ky * dh;
                            if (iy < 0 || iy >= H) continue;
                            T* orow = op + oy * OW;
                            const T* irow = ip + iy * W;
                            if (sw == 1)
                                detail::add_scaled_row(orow + ox_lo, irow + ox_lo + x0, wv, ox_hi - ox_lo);
                            else
                                for (std::int64_t ox = ox_lo; ox < ox_hi; ++ox) orow[ox] += wv * irow[ox * sw + x0];
                        }
                    }
            }
        }
    detail::activate_all(o, p[act]);
}

template <class T>
void conv2d_eval(const op_params& p, std::span<const tensor<T>* const> in, std::span<tensor<T>> out) {
    if constexpr (std::is_same_v<T, float>) {
        // With few output channels per group (depthwise, ResNeXt's 4 or 8)
        // laying out the patches costs more than the product saves.
        if (in[1]->shape[0] / (in[0]->shape[1] / in[1]->shape[1]) >= 16) {
            conv2d_float_by_gemm(p, *in[0], *in[1], out[0]);
            detail::activate_all(out[0], p[conv2d_p::act]);
            return;
        }
    }
    conv2d_per_tap(p, in, out);
}

inline std::int64_t conv2d_flops(const op_params&, std::span<const shape> in, std::span<const shape> out) {
    return 2 * out[0].elements() * in[1][1] * in[1][2] * in[1][3];
}

inline std::string enlarge_shape(const op_params& p, std::span<const shape> in, std::span<shape> out) {
    const shape& w = in[0];
    if (w.rank != 4) return detail::cat("kernel must be rank 4, got ", w);
    std::int32_t kh = p[enlarge_p::kh], kw = p[enlarge_p::kw];
    if (kh < w[2] || kw < w[3]) return detail::cat("target size ", kh, "x", kw, " is smaller than kernel ", w);
    if ((kh - w[2]) % 2 != 0 || (kw - w[3]) % 2 != 0)
        return detail::cat("kernel ", w, " cannot be centred in ", kh, "x", kw);
    out[0] = shape{w[0], w[1], kh, kw};
    return {};
}

template <class T>
void enlarge_eval(const op_params&, std::span<const tensor<T>* const> in, std::span<tensor<T>> out) {
    const auto& w = *in[0];
    auto& o = out[0];
    std::fill(o.data.begin(), o.data.end(), scalar_traits<T>::zero());
    const std::int64_t KH = w.shape[2], KW = w.shape[3], OH = o.shape[2], OW = o.shape[3];
    const std::int64_t oy0 = (OH - KH) / 2, ox0 = (OW - KW) / 2;
    for (std::int64_t c = 0; c < w.shape[0] * w.shape[1]; ++c)
        for (std::int64_t y = 0; y < KH; ++y)
            for (std::int64_t x = 0; x < KW; ++x) o[(c * OH + y + oy0) * OW + x + ox0] = w[(c * KH + y) * KW + x];
}

}  // namespace ops

inline constexpr op_decl conv2d_decl{
    .kind = op_kind::conv2d, .name = "conv2d", .math = "act(conv(x, w)) (grouped, strided, dilated)",
    .min_inputs = 2, .max_inputs = 2, .input_names = {"x", "w"},
    .params = {param_decl{.name = "stride_h", .domain = detail::one_two, .any_value = true, .probe = detail::probe_stride},
               param_decl{.name = "stride_w", .domain = detail::one_two, .any_value = true, .probe = detail::probe_stride},
               param_decl{.name = "pad", .domain = detail::off_on, .any_value = true},
               param_decl{"act", detail::off_on},
               param_decl{.name = "dil_h", .domain = detail::one, .fallback = 1, .any_value = true, .probe = detail::probe_dilation},
               param_decl{.name = "dil_w", .domain = detail::one, .fallback = 1, .any_value = true, .probe = detail::probe_dilation}},
    .num_params = 6, .cls = op_class::linear, .multilinear = true,
    .layouts = image_layouts,
    .infer = ops::conv2d_shape, .eval_float = ops::conv2d_eval<float>, .eval_modp = ops::conv2d_eval<modp>,
    .flops = ops::conv2d_flops};

inline constexpr op_decl enlarge_decl{
    .kind = op_kind::enlarge, .name = "enlarge", .math = "zero-pad kernel w to kh x kw, centred",
    .input_names = {"w"},
    .params = {param_decl{"kh", detail::three, 3}, param_decl{"kw", detail::three, 3}}, .num_params = 2,
    .cls = op_class::data_movement, .multilinear = true,
    .infer = ops::enlarge_shape, .eval_float = ops::enlarge_eval<float>, .eval_modp = ops::enlarge_eval<modp>,
    .flops = detail::no_flops};

}  // namespace tsopt::spec
