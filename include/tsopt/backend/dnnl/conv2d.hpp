#pragma once
// conv2d on oneDNN: grouped / depthwise, strided, dilated (oneDNN counts
// dilation from 0, the spec from 1), same (symmetric dil*(k-1)/2) or valid
// padding, activation fused as an eltwise post-op. Source, weights and
// destination layouts are left to the primitive (format_tag::any) unless the
// node asks for NHWC output; constant weights are reordered once at compile
// time.
//
// The operators after it that can run inside it: post_chain.hpp. 3x3
// stride-1 convolutions with enough channels run by Winograd: winograd.hpp;
// groups of 2 or 4 channels by tsopt's own kernel: grouped_conv.hpp; which
// form a grouped convolution reading channels-last takes:
// grouped_conv_choice.hpp.
#include "tsopt/backend/dnnl/grouped_conv_choice.hpp"
#include "tsopt/backend/dnnl/winograd.hpp"

namespace tsopt::backend::dnnl_impl {

// A grouped convolution whose input arrives channels-last (from a 1x1
// brgconv: ResNeXt's blocks) computes in that layout where oneDNN runs it with
// the same kernel as in the layout `any` picks. For 4 to 32 channels per group
// `any` picks a blocked form (aBcd4b / aBcd8b) for the direct JIT kernel, and
// the reorders into and out of it cost 20-45 % of the convolution, while that
// kernel runs channels-last about as fast (docs/benchmarks.md, "Grouped
// convolutions channels-last"). Where the backend times choices, it keeps
// the layout only where that is not slower on the machine
// (grouped_conv_choice.hpp). `make(dst)` builds the primitive descriptor
// from `src` and `dst` as they stand. Returns the implementation oneDNN runs
// for the descriptors as it leaves them (the same either way), so the caller
// does not build them once more to learn it.
template <class Make>
std::string keep_channels_last(lowering& L, std::size_t i, dn::memory::desc& src, dn::memory::desc& dst, Make&& make) {
    const auto chosen = make(dst);
    const std::string impl = chosen.impl_info_str();
    const dn::memory::desc nhwc_src(L.in_dims(i, 0), f32, tag::nhwc);
    if (L.in(i, 0).md != nhwc_src || chosen.src_desc() == nhwc_src) return impl;
    const dn::memory::desc any_src = src, any_dst = dst;
    src = nhwc_src;
    if (dst.get_format_kind() == dn::memory::format_kind::any) dst = dn::memory::desc(L.out_dims(i), f32, tag::nhwc);
    try {
        if (make(dst).impl_info_str() == impl) return impl;
    } catch (const dn::error&) {
    }
    src = any_src;
    dst = any_dst;
    return impl;
}

// A depthwise convolution channels-last runs in oneDNN 3.2's direct JIT
// kernel (jit_dw) instead of the brgemm one listed before it (brdgmm_dw),
// with the same source and destination layouts, where that is faster: below
// 512 channels on AVX-512 jit_dw ran NASNet's and MobileNetV2's layers
// 1.05-1.85x as fast at 1 and 2 threads (one, 96 channels at 112x112, only
// in the model's plan, not alone); from 576 channels 0.88-1.28x either way
// (docs/benchmarks.md, "Depthwise convolutions: kernels").
inline constexpr std::int64_t jit_depthwise_below_channels = 512;

// `pd` as `make(src, dst)` built it, or the same convolution with jit_dw
// where the rule above picks it. `make` builds a descriptor from concrete
// source and destination descriptors (weights and attributes its own).
template <class Make>
auto prefer_jit_depthwise(dn::convolution_forward::primitive_desc pd, bool depthwise, std::int64_t channels, Make&& make) {
    if (!depthwise || channels >= jit_depthwise_below_channels || !std::string_view(pd.impl_info_str()).starts_with("brdgmm_dw"))
        return pd;
    try {
        auto alt = make(pd.src_desc(), pd.dst_desc());
        while (alt.next_impl())
            if (std::string_view(alt.impl_info_str()).starts_with("jit_dw")) {
                if (alt.src_desc() == pd.src_desc() && alt.dst_desc() == pd.dst_desc()) return alt;
                break;
            }
    } catch (const dn::error&) {
    }
    return pd;
}

// Whether conv2d node i's step can add a full-size operand computed by
// another step (a sum post-op, lower_conv2d's chain): oneDNN's convolution
// without groups can; Winograd's epilogue takes per-channel operands only,
// and a grouped convolution no binary post-ops.
inline bool conv2d_takes_full_size_operand(const lowering& L, std::size_t i) {
    const shape &xs = L.in_shape(i, 0), &ws = L.in_shape(i, 1);
    return xs.rank == 4 && ws.rank == 4 && xs[1] == ws[1] && !winograd::qualifying_geometry(L, i);
}

inline void lower_conv2d(lowering& L, std::size_t i) {
    using namespace spec::conv2d_p;
    const node& n = L.at(i);
    const shape &xs = L.in_shape(i, 0), &ws = L.in_shape(i, 1);
    const std::int64_t groups = xs[1] / ws[1];
    const auto pm = static_cast<spec::pad_mode>(n.params[pad]);
    const std::int64_t ph = spec::detail::window_pad(ws[2], n.params[dil_h], pm);
    const std::int64_t pw = spec::detail::window_pad(ws[3], n.params[dil_w], pm);
    dims wdims = groups == 1 ? dims{ws[0], ws[1], ws[2], ws[3]} : dims{groups, ws[0] / groups, ws[1], ws[2], ws[3]};
    dims odims = L.out_dims(i);
    const dims strides{n.params[stride_h], n.params[stride_w]}, dilates{n.params[dil_h] - 1, n.params[dil_w] - 1}, pads{ph, pw};
    auto make_pd = [&](const dn::memory::desc& s, const dn::memory::desc& d, const dn::primitive_attr& a, bool with_bias) {
        if (with_bias)
            return dn::convolution_forward::primitive_desc(L.p.eng, dn::prop_kind::forward_inference, dn::algorithm::convolution_direct, s,
                                                           any_md(wdims), plain_md({odims[1]}), d, strides, dilates, pads, pads, a);
        return dn::convolution_forward::primitive_desc(L.p.eng, dn::prop_kind::forward_inference, dn::algorithm::convolution_direct, s,
                                                       any_md(wdims), d, strides, dilates, pads, pads, a);
    };
    const bool depthwise = groups > 1 && ws[1] == 1 && ws[0] == groups;
    auto form = grouped_choice::form::onednn_as_ruled;
    if (groups > 1 && !depthwise) {
        const auto small = small_groups::geometry_of(L, i);
        dn::post_ops relu;  // as such a layer mostly runs: + bias + ReLU
        relu.append_eltwise(dn::algorithm::eltwise_relu, 0.f, 0.f);
        dn::primitive_attr timed = L.attr();
        timed.set_post_ops(relu);
        form = grouped_choice::choose(L, i, [&](const auto& s, const auto& d) { return make_pd(s, d, timed, true); }, small.has_value());
        if (form == grouped_choice::form::small_group_kernel && small_groups::lower(L, i, *small)) return;
    }
    if (winograd::lower(L, i)) return;
    dn::memory::desc src_md = any_md(L.in_dims(i, 0));
    auto conv_pd = [&](const dn::memory::desc& dst_md, const dn::primitive_attr& a, bool with_bias) {
        auto make = [&](const dn::memory::desc& s, const dn::memory::desc& d) { return make_pd(s, d, a, with_bias); };
        return prefer_jit_depthwise(make(src_md, dst_md), depthwise, groups, make);
    };
    auto d = n.out_layout == spec::layout::nhwc ? dn::memory::desc(odims, f32, tag::nhwc) : any_md(odims);
    dn::primitive_attr at = L.attr(n.params[act]);
    auto alone_pd = [&](const dn::memory::desc& dst_md) { return conv_pd(dst_md, at, false); };
    const std::string alone = groups > 1 && form == grouped_choice::form::onednn_as_ruled ? keep_channels_last(L, i, src_md, d, alone_pd)
                                                                                          : alone_pd(d).impl_info_str();
    // With the chain as post-ops, else with the part before its sum, else
    // alone: where oneDNN refuses the combination, or would run it with
    // another kernel than the conv alone (a reference kernel where the conv
    // alone has a JIT one; a slower one for the sum operand's layout).
    post_chain chain = odims.size() == 4 ? fusible_chain(L, i, odims[1], groups == 1, !n.params[act]) : post_chain{};
    // The chain's first operator, a per-channel constant add, is the bias
    // (added in the kernel's epilogue, cheaper than a binary post-op).
    const bool bias = !n.params[act] && !chain.nodes.empty() && chain.kinds[0] == post_chain::kind::binary &&
                      chain.ops[0].first == dn::algorithm::binary_add;
    bool with_bias = false;
    std::optional<dn::convolution_forward::primitive_desc> pd;
    auto try_chain = [&](std::size_t len) {
        dn::post_ops po;
        if (auto alg = act_algorithm(n.params[act])) po.append_eltwise(*alg, 0.f, 0.f);
        std::optional<dn::memory::desc> accumulate;  // the sum writes into its operand: the result takes its layout
        with_bias = bias && len > 0;
        append_post_ops(po, chain, with_bias ? 1 : 0, len);
        if (const auto sum = chain.sum(); sum && *sum < len) accumulate = chain.ops[*sum].second.md;
        dn::primitive_attr fused = L.attr();
        fused.set_post_ops(po);
        try {
            pd.emplace(conv_pd(accumulate ? *accumulate : d, fused, with_bias));
            if (pd->impl_info_str() == alone) {
                chain.truncate(len);
                return true;
            }
        } catch (const dn::error&) {
        }
        pd.reset();
        with_bias = false;
        return false;
    };
    if (!chain.nodes.empty() && !try_chain(chain.nodes.size())) {
        const auto sum = chain.sum();
        if (!sum || *sum == 0 || !try_chain(*sum)) chain = {};
    }
    if (!pd) pd.emplace(conv_pd(d, at, false));
    tref x = L.convert(L.in(i, 0), pd->src_desc(), i);
    tref w = L.convert(L.plain(L.in(i, 1), wdims, i), pd->weights_desc(), i);
    const auto sum = chain.sum();
    tref y = sum ? chain.ops[*sum].second : L.fresh(pd->dst_desc());
    std::vector<std::pair<int, tref>> args{{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y}};
    // The post-op index of chain operator k.
    const int first = (n.params[act] && act_algorithm(n.params[act]) ? 1 : 0) - (with_bias ? 1 : 0);
    std::string what = groups == 1 ? "convolution" : "grouped convolution";
    if (with_bias) {
        args.push_back({DNNL_ARG_BIAS, chain.ops[0].second.as(plain_md({odims[1]}))});
        what += " + bias";
    }
    add_post_op_args(args, chain, with_bias ? 1 : 0, first + (with_bias ? 1 : 0));
    if (!chain.nodes.empty()) what += " + " + std::to_string(chain.nodes.size()) + " fused";
    L.add<dn::convolution_forward>(i, *pd, std::move(args), std::move(what));
    L.set(i, 0, y);
    absorb_chain(L, chain, i, y);
}

}  // namespace tsopt::backend::dnnl_impl
