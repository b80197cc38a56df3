#pragma once
// conv2d on oneDNN: grouped / depthwise, strided, dilated (oneDNN counts
// dilation from 0, the spec from 1), same (symmetric dil*(k-1)/2) or valid
// padding, activation fused as an eltwise post-op. Source, weights and
// destination layouts are left to the primitive (format_tag::any) unless the
// node asks for NHWC output; constant weights are reordered once at compile
// time.
#include "tsopt/backend/dnnl/plan.hpp"

namespace tsopt::backend::dnnl_impl {

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
    auto dst_md = n.out_layout == spec::layout::nhwc ? dn::memory::desc(odims, f32, tag::nhwc) : any_md(odims);
    dn::convolution_forward::desc d(dn::prop_kind::forward_inference, dn::algorithm::convolution_direct, any_md(L.in_dims(i, 0)),
                                    any_md(wdims), dst_md, {n.params[stride_h], n.params[stride_w]},
                                    {n.params[dil_h] - 1, n.params[dil_w] - 1}, {ph, pw}, {ph, pw});
    dn::convolution_forward::primitive_desc pd(d, L.attr(n.params[act]), L.p.eng);
    tref x = L.convert(L.in(i, 0), pd.src_desc(), i);
    tref w = L.convert(L.plain(L.in(i, 1), wdims, i), pd.weights_desc(), i);
    tref y = L.fresh(pd.dst_desc());
    L.add<dn::convolution_forward>(i, pd, {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y}},
                                   groups == 1 ? "convolution" : "grouped convolution");
    L.set(i, 0, y);
}

}  // namespace tsopt::backend::dnnl_impl
