#pragma once
// conv2d on oneDNN: grouped / depthwise, strided, dilated (oneDNN counts
// dilation from 0, the spec from 1), same (symmetric dil*(k-1)/2) or valid
// padding, activation fused as an eltwise post-op. Source, weights and
// destination layouts are left to the primitive (format_tag::any) unless the
// node asks for NHWC output; constant weights are reordered once at compile
// time.
//
// The single-reader chain after a convolution of per-channel constant adds /
// multiplies ([C,1,1] or [1,C,1,1], e.g. the bias batchnorm folding leaves)
// and relu / sigmoid / tanh runs as the convolution's post-ops: one primitive
// instead of a pass over the whole tensor per operator. (Separately, a
// broadcast add on the convolution's blocked output only finds oneDNN's
// reference kernel, which is two orders of magnitude slower.)
#include "tsopt/backend/dnnl/plan.hpp"

namespace tsopt::backend::dnnl_impl {

struct post_chain {
    std::vector<std::size_t> nodes;                     // absorbed, in order
    std::vector<std::pair<dn::algorithm, tref>> ops;    // per node: eltwise alg (tref unused) or binary alg + operand
    std::vector<bool> binary;
};

// The operators after node i (C output channels) that can run as its post-ops;
// `binary`: per-channel adds / multiplies too (not on grouped convolutions:
// oneDNN 2.6 runs a 4-channel-per-group conv with a per-channel binary
// post-op 20x slower than without, under the same kernel name).
inline post_chain fusible_chain(lowering& L, std::size_t i, std::int64_t C, bool binary) {
    post_chain c;
    std::size_t cur = i;
    const shape& out = L.at(i).shapes[0];
    while (L.at(cur).num_outputs() == 1 && !L.is_graph_output(cur) && L.consumers[cur].size() == 1) {
        const auto [nx32, slot] = L.consumers[cur][0];
        const std::size_t nx = static_cast<std::size_t>(nx32);
        const node& n = L.at(nx);
        if (n.kind != node_kind::op || n.out_layout != L.at(i).out_layout || n.shapes[0] != out) break;
        if (n.is_op(spec::op_kind::relu) || n.is_op(spec::op_kind::sigmoid) || n.is_op(spec::op_kind::tanh)) {
            const int act = n.is_op(spec::op_kind::relu) ? 1 : n.is_op(spec::op_kind::sigmoid) ? 2 : 3;
            c.ops.push_back({*act_algorithm(act), tref{}});
            c.binary.push_back(false);
        } else if (binary && (n.is_op(spec::op_kind::ewadd) || n.is_op(spec::op_kind::ewmul)) && n.inputs.size() == 2 &&
                   n.inputs[0] != n.inputs[1]) {
            const int other = slot == 0 ? 1 : 0;
            if (!L.is_const(nx, other) || !L.lowered(nx, other)) break;
            const dims od = pad_front(L.in_dims(nx, other), 4);
            if (L.in_shape(nx, other).rank > 4 || od != dims{1, C, 1, 1}) break;
            tref b = L.plain(L.in(nx, other), od, nx);
            if (!L.persistent(b)) break;
            c.ops.push_back({n.is_op(spec::op_kind::ewadd) ? dn::algorithm::binary_add : dn::algorithm::binary_mul, b});
            c.binary.push_back(true);
        } else
            break;
        c.nodes.push_back(nx);
        cur = nx;
    }
    return c;
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
    auto dst_md = n.out_layout == spec::layout::nhwc ? dn::memory::desc(odims, f32, tag::nhwc) : any_md(odims);
    dn::convolution_forward::desc d(dn::prop_kind::forward_inference, dn::algorithm::convolution_direct, any_md(L.in_dims(i, 0)),
                                    any_md(wdims), dst_md, {n.params[stride_h], n.params[stride_w]},
                                    {n.params[dil_h] - 1, n.params[dil_w] - 1}, {ph, pw}, {ph, pw});
    // With the chain as post-ops, else alone: where oneDNN refuses the
    // combination, or would run it with another kernel than the conv alone
    // (a reference kernel where the conv alone has a JIT one).
    post_chain chain = odims.size() == 4 ? fusible_chain(L, i, odims[1], groups == 1) : post_chain{};
    std::optional<dn::convolution_forward::primitive_desc> pd;
    dn::primitive_attr at = L.attr(n.params[act]);
    const std::string alone = dn::convolution_forward::primitive_desc(d, at, L.p.eng).impl_info_str();
    if (!chain.nodes.empty()) {
        dn::post_ops po;
        if (auto alg = act_algorithm(n.params[act])) po.append_eltwise(1.f, *alg, 0.f, 0.f);
        for (std::size_t k = 0; k < chain.ops.size(); ++k)
            if (chain.binary[k]) po.append_binary(chain.ops[k].first, chain.ops[k].second.md);
            else po.append_eltwise(1.f, chain.ops[k].first, 0.f, 0.f);
        dn::primitive_attr fused = L.attr();
        fused.set_post_ops(po);
        try {
            pd.emplace(d, fused, L.p.eng);
            if (pd->impl_info_str() != alone) pd.reset();
        } catch (const dn::error&) {
        }
        if (!pd) chain = {};
    }
    if (!pd) pd.emplace(d, at, L.p.eng);
    tref x = L.convert(L.in(i, 0), pd->src_desc(), i);
    tref w = L.convert(L.plain(L.in(i, 1), wdims, i), pd->weights_desc(), i);
    tref y = L.fresh(pd->dst_desc());
    std::vector<std::pair<int, tref>> args{{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y}};
    const int first = n.params[act] && act_algorithm(n.params[act]) ? 1 : 0;  // post-op index of the chain's first
    std::string what = groups == 1 ? "convolution" : "grouped convolution";
    for (std::size_t k = 0; k < chain.nodes.size(); ++k)
        if (chain.binary[k]) args.push_back({DNNL_ARG_ATTR_MULTIPLE_POST_OP(first + static_cast<int>(k)) | DNNL_ARG_SRC_1, chain.ops[k].second});
    if (!chain.nodes.empty()) what += " + " + std::to_string(chain.nodes.size()) + " fused";
    L.add<dn::convolution_forward>(i, *pd, std::move(args), std::move(what));
    L.set(i, 0, y);
    for (std::size_t k : chain.nodes) L.absorb(k, i, y);
}

}  // namespace tsopt::backend::dnnl_impl
