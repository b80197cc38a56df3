#pragma once
// avgpool (oneDNN pooling_avg_include_padding: the spec divides by the full
// window, padding counted) and maxpool, in the layout the input already has,
// with same (symmetric (k-1)/2) or valid padding. The activation is a fused
// eltwise post-op where the pooling implementation takes one, a separate
// eltwise step otherwise; a pooling without one runs the elementwise chain
// after it as post-ops, unless its source is row-major NCHW. A 1x1 window
// over a row-major source is a strided copy (lower_subsample).
#include "tsopt/backend/dnnl/channel_blocks.hpp"
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

// A pooling of a 1x1 window without padding or activation on a row-major
// source keeps every sh-th row and sw-th column of each plane: a strided
// copy. oneDNN 3.2's pooling transposes such a source to channels-last and
// back (NASNet's factorized reductions, avgpool(1, stride 2) of the padded
// and cropped input: 32x111x111 took 0.14 ms, the copy 0.04; docs/
// benchmarks.md, "Subsampling pools"). Channels-last and blocked sources
// stay with oneDNN's pooling, which reads them directly (0.008 ms on
// 264x28x28 against the copy's 0.019). A copy, not a reorder through a
// strided view: oneDNN refuses a descriptor whose row stride times the rows
// kept exceeds the plane (odd sizes: 111 rows, 56 kept). False, lowering
// nothing, where that does not apply.
inline bool lower_subsample(lowering& L, std::size_t i) {
    using namespace spec::pool_p;
    const node& n = L.at(i);
    if (n.params[kh] != 1 || n.params[kw] != 1 || n.params[act] || n.out_layout == spec::layout::nhwc) return false;
    const tref x = L.in(i, 0);
    const dims xd = L.in_dims(i, 0), od = L.out_dims(i);
    const std::int64_t sh = n.params[stride_h], sw = n.params[stride_w];
    if (xd.size() != 4 || od[0] != xd[0] || od[1] != xd[1] || (od[2] - 1) * sh >= xd[2] || (od[3] - 1) * sw >= xd[3] || !is_plain(x.md))
        return false;
    const tref y = L.fresh(plain_md(od));
    const std::int64_t H = xd[2], W = xd[3], OH = od[2], OW = od[3];
    auto copy = [=](std::span<float* const> in, std::span<float* const> out) {
        parallel_tasks(od[0] * od[1], [&](std::int64_t plane) {
            const float* src = in[0] + plane * H * W;
            float* dst = out[0] + plane * OH * OW;
            for (std::int64_t oh = 0; oh < OH; ++oh)
                for (std::int64_t ow = 0; ow < OW; ++ow) dst[oh * OW + ow] = src[oh * sh * W + ow * sw];
        });
    };
    L.custom(i, std::move(copy), {x}, {y}, "subsample (1x1 window)");
    L.set(i, 0, y);
    return true;
}

inline void lower_pool(lowering& L, std::size_t i) {
    if (lower_subsample(L, i)) return;
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
