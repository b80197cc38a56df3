#pragma once
// avgpool (oneDNN pooling_avg_include_padding: the spec divides by the full
// window, padding counted) and maxpool, in the layout the input already has,
// with same (symmetric (k-1)/2) or valid padding. The activation is a fused
// eltwise post-op where the pooling implementation takes one, a separate
// eltwise step otherwise.
#include "tsopt/backend/dnnl/eltwise.hpp"

namespace tsopt::backend::dnnl_impl {

inline void lower_pool(lowering& L, std::size_t i) {
    using namespace spec::pool_p;
    const node& n = L.at(i);
    const auto pm = static_cast<spec::pad_mode>(n.params[pad]);
    const std::int64_t ph = spec::detail::window_pad(n.params[kh], 1, pm), pw = spec::detail::window_pad(n.params[kw], 1, pm);
    const auto alg = n.is_op(spec::op_kind::maxpool) ? dn::algorithm::pooling_max : dn::algorithm::pooling_avg_include_padding;
    dims od = L.out_dims(i);
    auto dst_md = n.out_layout == spec::layout::nhwc ? dn::memory::desc(od, f32, tag::nhwc) : any_md(od);
    tref x = L.in(i, 0);
    auto pool_pd = [&](const dn::primitive_attr& a) {
        return dn::pooling_forward::primitive_desc(L.p.eng, dn::prop_kind::forward_inference, alg, x.md, dst_md,
                                                   {n.params[stride_h], n.params[stride_w]}, {n.params[kh], n.params[kw]}, {0, 0},
                                                   {ph, pw}, {ph, pw}, a);
    };
    const std::int32_t act_ = n.params[act];
    std::optional<dn::pooling_forward::primitive_desc> pd;
    bool fused = true;
    try {
        pd.emplace(pool_pd(L.attr(act_)));
    } catch (const dn::error&) {
        if (!act_) throw;
        pd.emplace(pool_pd(L.attr()));
        fused = false;
    }
    tref y = L.fresh(pd->dst_desc());
    L.add<dn::pooling_forward>(i, *pd, {{DNNL_ARG_SRC, x}, {DNNL_ARG_DST, y}},
                               alg == dn::algorithm::pooling_max ? "max pooling" : "average pooling");
    if (!fused) y = eltwise_step(L, i, y, *act_algorithm(act_), 0.f, 0.f, "pooling activation");
    L.set(i, 0, y);
}

}  // namespace tsopt::backend::dnnl_impl
