#pragma once
// avgpool (oneDNN pooling_avg_include_padding: the spec divides by the full
// window, padding counted) and maxpool, in the layout the input already has,
// with same (symmetric (k-1)/2) or valid padding. The activation is a fused
// eltwise post-op where the pooling implementation takes one, a separate
// eltwise step otherwise; a pooling without one runs the elementwise chain
// after it as post-ops, unless its source is row-major NCHW. A 1x1 window
// over a row-major source is a strided copy (lower_subsample), and so is a
// pad followed by crops and such a window (lower_pad_into_subsample).
#include <algorithm>

#include "tsopt/backend/dnnl/channel_blocks.hpp"
#include "tsopt/backend/dnnl/eltwise.hpp"

namespace tsopt::backend::dnnl_impl {

// Pooling node i over x with the given paddings (counted in an average).
inline void pool_step(lowering& L, std::size_t i, tref x, const dims& pad_l, const dims& pad_r) {
    using namespace spec::pool_p;
    const node& n = L.at(i);
    const auto alg = n.is_op(spec::op_kind::maxpool) ? dn::algorithm::pooling_max : dn::algorithm::pooling_avg_include_padding;
    dims od = L.out_dims(i);
    // Channels-last asked for, over a source in another layout: oneDNN 3.2
    // pools between two layouts only in its reference kernel (a blocked
    // source into channels-last took SqueezeNet's first max pool from 0.1 ms
    // to 77), so the output keeps the source's layout and a reader that
    // wants channels-last converts it (a quarter of the source's bytes at
    // stride 2).
    const bool nhwc_source = x.md.get_ndims() == 4 && x.md == dn::memory::desc(x.md.get_dims(), f32, tag::nhwc);
    auto dst_md = n.out_layout == spec::layout::nhwc && nhwc_source ? dn::memory::desc(od, f32, tag::nhwc) : any_md(od);
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

// y(b, c, oh, ow) = x(b, c, r0 + sh * oh, c0 + sw * ow), 0 where that falls
// outside x: a 1x1 pooling window's subsampling, with the zero border of a
// pad and the offsets of crops before it folded in. x of extents [N, C, H,
// W] and y of [N, C, OH, OW] both row-major, or both channels-last (then a
// pixel's C channels move as one run).
struct strided_window {
    std::int64_t N, C, H, W, OH, OW, r0, c0, sh, sw;
    bool channels_last;

    void operator()(const float* x, float* y) const {
        if (channels_last)
            parallel_tasks(N * OH, [&](std::int64_t line) {
                const std::int64_t b = line / OH, r = r0 + (line % OH) * sh;
                float* dst = y + line * OW * C;
                if (r < 0 || r >= H) {
                    std::fill(dst, dst + OW * C, 0.f);
                    return;
                }
                const float* src = x + (b * H + r) * W * C;
                for (std::int64_t ow = 0; ow < OW; ++ow) {
                    const std::int64_t c = c0 + ow * sw;
                    if (c >= 0 && c < W) std::copy_n(src + c * C, C, dst + ow * C);
                    else std::fill_n(dst + ow * C, C, 0.f);
                }
            });
        else
            parallel_tasks(N * C, [&](std::int64_t plane) {
                const float* src = x + plane * H * W;
                float* dst = y + plane * OH * OW;
                for (std::int64_t oh = 0; oh < OH; ++oh) {
                    const std::int64_t r = r0 + oh * sh;
                    float* row = dst + oh * OW;
                    if (r < 0 || r >= H) {
                        std::fill(row, row + OW, 0.f);
                        continue;
                    }
                    for (std::int64_t ow = 0; ow < OW; ++ow) {
                        const std::int64_t c = c0 + ow * sw;
                        row[ow] = c >= 0 && c < W ? src[r * W + c] : 0.f;
                    }
                }
            });
    }
};

// Node `pool` (its 1x1 window) as one strided copy from x of extents xd,
// offset by (r0, c0), in x's layout (row-major or channels-last; a blocked
// one is converted to channels-last first, what the 1x1 convolutions that
// read NASNet's reductions take); `what` names the step.
inline void window_copy_step(lowering& L, std::size_t pool, tref x, const dims& xd, std::int64_t r0, std::int64_t c0, std::string what) {
    using namespace spec::pool_p;
    const node& n = L.at(pool);
    const dims od = L.out_dims(pool);
    const dn::memory::desc nhwc(xd, f32, tag::nhwc);
    if (!is_plain(x.md) && x.md != nhwc) x = L.convert(x, nhwc, pool);
    const bool channels_last = x.md == nhwc;
    const strided_window w{xd[0], xd[1], xd[2], xd[3], od[2], od[3], r0, c0, n.params[stride_h], n.params[stride_w], channels_last};
    const tref y = L.fresh(channels_last ? dn::memory::desc(od, f32, tag::nhwc) : plain_md(od));
    L.custom(pool, [w](std::span<float* const> in, std::span<float* const> out) { w(in[0], out[0]); }, {x}, {y}, std::move(what));
    L.set(pool, 0, y);
}

// Whether node n is a pooling of a 1x1 window without padding or activation
// whose result is not asked to be channels-last: a subsampling.
inline bool is_subsample(const node& n) {
    using namespace spec::pool_p;
    return (n.is_op(spec::op_kind::avgpool) || n.is_op(spec::op_kind::maxpool)) && n.params[kh] == 1 && n.params[kw] == 1 &&
           !n.params[act] && n.out_layout != spec::layout::nhwc;
}

// A pooling of a 1x1 window on a row-major source keeps every sh-th row
// and sw-th column of each plane: a strided copy. oneDNN 3.2's pooling
// transposes such a source to channels-last and back (NASNet's factorized
// reductions, avgpool(1, stride 2): 32x111x111 took 0.14 ms, the copy 0.04;
// docs/benchmarks.md, "Subsampling pools"). Channels-last and blocked
// sources stay with oneDNN's pooling, which reads them directly (0.008 ms on
// 264x28x28 against the copy's 0.019). A copy, not a reorder through a
// strided view: oneDNN refuses a descriptor whose row stride times the rows
// kept exceeds the plane (odd sizes: 111 rows, 56 kept). False, lowering
// nothing, where that does not apply.
inline bool lower_subsample(lowering& L, std::size_t i) {
    if (!is_subsample(L.at(i)) || L.in_dims(i, 0).size() != 4 || !is_plain(L.in(i, 0).md)) return false;
    window_copy_step(L, i, L.in(i, 0), L.in_dims(i, 0), 0, 0, "subsample (1x1 window)");
    return true;
}

// NASNet's factorized reduction pads (0,1,0,1), crops the first row and
// column (splits whose first parts nobody reads) and subsamples by a 1x1
// pool of stride 2: x(2i + 1, 2j + 1), zero past the edge. Lowered at the
// pad, the chain is one strided copy of the pad's input (the padded and
// cropped copies are never made: 0.25 ms of pads and 0.20 of crops in
// zoo_nasnet_mobile). Any chain of splits along the rows or columns each
// read by one part is folded the same way. False where node i does not
// start such a chain; nothing is lowered then.
inline bool lower_pad_into_subsample(lowering& L, std::size_t i) {
    using namespace spec::pad_p;
    const dims xd = L.in_dims(i, 0);
    if (xd.size() != 4) return false;
    const auto& pp = L.at(i).params;
    std::int64_t r0 = -pp[top], c0 = -pp[left];
    std::vector<std::size_t> chain{i};
    std::int32_t out = 0;  // the output of chain.back() read next
    for (;;) {
        const std::size_t cur = chain.back();
        if (L.is_graph_output(cur) || L.consumers[cur].size() != 1) return false;
        const auto next = static_cast<std::size_t>(L.consumers[cur][0].first);
        const node& m = L.at(next);
        if (m.inputs[0] != value{static_cast<std::int32_t>(cur), out}) return false;
        if (is_subsample(m)) {
            chain.push_back(next);
            break;
        }
        if (!m.is_op(spec::op_kind::split)) return false;
        const int ax = m.params[spec::split_p::axis];
        const bool first = L.output_read(next, 0), second = L.output_read(next, 1);
        if ((ax != 2 && ax != 3) || first == second) return false;
        if (second) (ax == 2 ? r0 : c0) += L.out_dims(next, 0)[static_cast<std::size_t>(ax)];
        out = second ? 1 : 0;
        chain.push_back(next);
    }
    const std::size_t pool = chain.back();
    window_copy_step(L, pool, L.in(i, 0), xd, r0, c0, "pad, crops and subsample (1x1 window) as one copy");
    // The pad and the crops have no values of their own; each is skipped
    // when its turn comes, and so is the pool, already lowered.
    for (std::size_t k = 0; k + 1 < chain.size(); ++k) L.fuse(chain[k], pool);
    L.absorbed[pool] = true;
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
