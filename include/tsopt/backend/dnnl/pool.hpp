#pragma once
// avgpool (oneDNN pooling_avg_include_padding: the spec divides by the full
// window, padding counted) and maxpool, in the layout the input already has,
// with same (symmetric (k-1)/2) or valid padding. The activation is a fused
// eltwise post-op where the pooling implementation takes one, a separate
// eltwise step otherwise; a pooling without one runs the elementwise chain
// after it as post-ops, unless its source is row-major NCHW.
#include "tsopt/backend/dnnl/eltwise.hpp"

namespace tsopt::backend::dnnl_impl {

// Pooling node i over x with the given paddings (counted in an average).
inline void pool_step(lowering& L, std::size_t i, tref x, const dims& pad_l, const dims& pad_r) {
    using namespace spec::pool_p;
    const node& n = L.at(i);
    const auto alg = n.is_op(spec::op_kind::maxpool) ? dn::algorithm::pooling_max : dn::algorithm::pooling_avg_include_padding;
    dims od = L.out_dims(i);
    auto dst_md = n.out_layout == spec::layout::nhwc ? dn::memory::desc(od, f32, tag::nhwc) : any_md(od);
    auto pool_pd = [&](const dn::primitive_attr& a) {
        return dn::pooling_forward::primitive_desc(L.p.eng, dn::prop_kind::forward_inference, alg, x.md, dst_md,
                                                   {n.params[stride_h], n.params[stride_w]}, {n.params[kh], n.params[kw]}, {0, 0},
                                                   pad_l, pad_r, a);
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
    const char* what = alg == dn::algorithm::pooling_max ? "max pooling" : "average pooling";
    if (!act_) {
        // Without an activation of its own, the elementwise chain after it as
        // post-ops: NASNet's cells add two pools, or a pool and the cell's
        // input (fused_elementwise). Not on row-major NCHW: there oneDNN 3.2's
        // jit pooling (which transposes to channels-last internally) adds a
        // full-size post-op operand wrongly, under the same kernel name: an
        // avgpool plus a maxpool came out 26-61 % off, a maxpool plus its own
        // input exactly half the sum. Channels-last and blocked sources add
        // it right (dnnl_ops_test "pooling post-ops in every layout").
        const bool ncsp = x.md.get_ndims() == 4 && is_plain(x.md);
        L.set(i, 0, fused_elementwise<dn::pooling_forward>(L, i, *pd, pool_pd, {{DNNL_ARG_SRC, x}}, what, !ncsp));
        return;
    }
    tref y = L.fresh(pd->dst_desc());
    L.add<dn::pooling_forward>(i, *pd, {{DNNL_ARG_SRC, x}, {DNNL_ARG_DST, y}}, what);
    if (!fused) y = eltwise_step(L, i, y, *act_algorithm(act_), 0.f, 0.f, "pooling activation");
    L.set(i, 0, y);
}

// The padding a pooling node's own pad mode gives each side: {rows, columns}.
inline dims own_padding(const node& n) {
    using namespace spec::pool_p;
    const auto pm = static_cast<spec::pad_mode>(n.params[pad]);
    return {spec::detail::window_pad(n.params[kh], 1, pm), spec::detail::window_pad(n.params[kw], 1, pm)};
}

inline void lower_pool(lowering& L, std::size_t i) {
    const dims p = own_padding(L.at(i));
    pool_step(L, i, L.in(i, 0), p, p);
}

// A zero pad read only by an average pool (PyTorch exports avg_pool2d with
// padding as Pad + AveragePool) is the pool's own padding, counted: both run
// as one pooling, lowered here at the pad, so the padded copy is never made
// (inception_v3: 9 such pools ran on the padded row-major copy with oneDNN's
// reference-speed simple_nchw kernel, a quarter of the model's time). False
// where that does not apply; nothing is lowered then.
inline bool lower_pad_into_avgpool(lowering& L, std::size_t i) {
    if (L.is_graph_output(i) || L.consumers[i].size() != 1) return false;
    const auto pool = static_cast<std::size_t>(L.consumers[i][0].first);
    if (!L.at(pool).is_op(spec::op_kind::avgpool)) return false;
    using namespace spec::pad_p;
    const auto& pp = L.at(i).params;
    const dims own = own_padding(L.at(pool));
    auto m = L.checkpoint();
    try {
        pool_step(L, pool, L.in(i, 0), {pp[top] + own[0], pp[left] + own[1]}, {pp[bottom] + own[0], pp[right] + own[1]});
    } catch (const dn::error&) {
        L.rollback(m, pool);
        return false;
    }
    // The pad runs inside the pool's primitive and has no value of its own;
    // the pool, already lowered, is skipped when its turn comes.
    L.fuse(i, pool);
    L.absorbed[pool] = true;
    return true;
}

}  // namespace tsopt::backend::dnnl_impl
