#pragma once
// matmul on oneDNN: a[..., m, k] x b[..., k, n], batch axes broadcast (a
// lower-rank operand is viewed with leading 1s), activation fused as an
// eltwise post-op. A constant rank-2 b is reordered once into the layout the
// primitive prefers; a constant per-column add after it is its bias, and the
// elementwise chain after that (a transformer's GELU, its residual add) runs
// as the product's post-ops (matmul_chain). Where
// oneDNN's inner product has a faster kernel for the shape
// (prefer_inner_product), a constant-weight product runs as one.
#include "tsopt/backend/dnnl/post_chain.hpp"

namespace tsopt::backend::dnnl_impl {

// Where in a cache line oneDNN's gemm:jit reads a constant row-major [k, n]
// weight fastest for m rows (bench/dnnl_matmul_weights.cpp; figures in
// docs/benchmarks.md, "Where the weights lie"). 32-byte aligned, oneDNN 3.2
// on AVX2 reads it unpacked, which for rows a multiple of 2 KiB apart keeps
// evicting itself from cache: 1.2-1.8x slower than 16 bytes off, where it
// packs the weight first ([64, 1024] x [1024, 1024]: 3.85 against 2.18 ms). For a few rows
// unpacked is faster ([8, 1024] x [1024, 1024]: 0.56 against 0.95 ms).
// Left to the allocator, which placed large tensors 16 bytes past a page and
// reused ones anywhere, the same model ran 1.4x slower when loaded second.
inline std::size_t gemm_weight_placement(dn::memory::dim m, dn::memory::dim n) {
    return (n * static_cast<dn::memory::dim>(sizeof(float))) % 2048 == 0 && m >= 32 ? 16 : 0;
}

// Whether [m, k] x [k, n] with a constant weight runs faster as a oneDNN
// inner product (y = x W^T, the weight reordered once into the blocked
// layout its brgemm kernel reads) than as a matmul. oneDNN 3.2 has no brgemm
// matmul on AVX2, only gemm:jit, while its inner product has brgemm:avx2
// (bench/dnnl_matmul_weights.cpp; docs/benchmarks.md, "Inner product or
// matmul"). Measured on AVX2, one and two threads: brgemm wins for 2 to 64
// rows with k up to 2048 ([8, 1024] x [1024, 1024] 2.1-2.3x, [64, 1024] x
// [1024, 1024] 1.2-1.3x, [64, 1024] x [1024, 3072] 1.4-1.6x), loses with a
// longer k ([64, 4096] x [4096, 1024] 0.66-0.76x) and for one row (gemv).
// From 65 to 128 rows it wins where the weight is wide (n >= 2048: BERT-
// base's [128, 768] x [768, 3072] 1.05-1.44x on two days' runs, with the
// weight coming from memory as it does in a model: `dnnl_matmul_weights
// --cold`) and the two
// trade places otherwise; from 196 rows on they are even. Only taken where
// the matmul would run gemm and the inner product brgemm (lower_matmul), so
// where oneDNN has a brgemm matmul (AVX-512) nothing changes.
inline bool prefer_inner_product(dn::memory::dim m, dn::memory::dim k, dn::memory::dim n) {
    return m >= 2 && k <= 2048 && (m <= 64 || (m <= 128 && n >= 2048));
}

// The elementwise chain after node `from` (the matmul, or the bias add it
// absorbs) that the product runs as post-ops: eltwise forms, and adds /
// multiplies by tensors computed earlier that broadcast to the output
// (fusible_chain with run-time operands), cut at the first operand it cannot
// read. `full`: the node's output; `od`: the product's, where a weight
// product views it as rows x columns (an operand then has to be full-size
// over the rows or constant along them).
inline post_chain matmul_chain(lowering& L, std::size_t from, const dims& full, const dims& od) {
    post_chain chain = fusible_chain(L, from, 0, false, false, true);
    for (std::size_t k = 0; k < chain.nodes.size(); ++k) {
        if (chain.kinds[k] != post_chain::kind::binary) continue;
        tref& operand = chain.ops[k].second;
        const dims d = pad_front(operand.md.get_dims(), full.size());
        const bool rows_full = std::equal(d.begin(), d.end() - 1, full.begin());
        const bool rows_one = std::all_of(d.begin(), d.end() - 1, [](auto e) { return e == 1; });
        if (!is_plain(operand.md) || (od != full && !rows_full && !rows_one)) {
            chain.truncate(k);
            break;
        }
        operand = operand.as(plain_md(od == full ? d : dims{rows_full ? od[0] : 1, d.back()}));
    }
    return chain;
}

inline void lower_matmul(lowering& L, std::size_t i) {
    const node& n = L.at(i);
    dims od = L.out_dims(i);
    dims ad = pad_front(L.in_dims(i, 0), od.size()), bd = pad_front(L.in_dims(i, 1), od.size());
    // A constant 2-D weight applied to every row of a higher-rank input (a
    // transformer's linear layers: [1, seq, hidden] x [hidden, out]) is one
    // 2-D product over the rows, so the weight is packed once at compile
    // time instead of at every run.
    const dims out_dims = od;
    if (L.is_const(i, 1) && L.in_dims(i, 1).size() == 2 && od.size() > 2) {
        const std::int64_t rows = elements(od) / od.back();
        ad = {rows, ad.back()};
        bd = L.in_dims(i, 1);
        od = {rows, od.back()};
    }
    auto wmd = L.is_const(i, 1) && od.size() == 2 ? any_md(bd) : plain_md(bd);
    // The single reader that adds a constant per-column vector (a linear
    // layer's bias) runs as the matmul's bias, before its activation.
    std::optional<std::size_t> bias_node;
    tref bias;
    if (od.size() == 2 && !n.params[spec::matmul_p::act] && !L.is_graph_output(i) && L.consumers[i].size() == 1) {
        const auto [nx32, slot] = L.consumers[i][0];
        const auto nx = static_cast<std::size_t>(nx32);
        const node& add = L.at(nx);
        const int other = slot == 0 ? 1 : 0;
        if (add.is_op(spec::op_kind::ewadd) && add.inputs.size() == 2 && add.inputs[0] != add.inputs[1] &&
            add.out_layout == n.out_layout && add.shapes[0] == n.shapes[0] && L.is_const(nx, other) && L.lowered(nx, other) &&
            pad_front(L.in_dims(nx, other), out_dims.size()) == pad_front(dims{od.back()}, out_dims.size())) {
            bias = L.plain(L.in(nx, other), {1, od.back()}, nx);
            if (L.persistent(bias)) bias_node = nx;
        }
    }
    // The elementwise chain after the matmul (or its bias): GELU, a residual
    // add, attention's scaling.
    post_chain chain = matmul_chain(L, bias_node.value_or(i), out_dims, od);
    const std::int32_t act = n.params[spec::matmul_p::act];
    // The attributes with chain operators [0, k) as post-ops after the activation.
    auto attr_with = [&](std::size_t k) {
        dn::primitive_attr at = L.attr(act);
        dn::post_ops po = at.get_post_ops();
        append_post_ops(po, chain, 0, k);
        at.set_post_ops(po);
        return at;
    };
    auto make_matmul = [&](const dn::primitive_attr& at) {
        return bias_node ? dn::matmul::primitive_desc(L.p.eng, plain_md(ad), wmd, bias.md, plain_md(od), at)
                         : dn::matmul::primitive_desc(L.p.eng, plain_md(ad), wmd, plain_md(od), at);
    };
    // The longest prefix of the chain that oneDNN runs with the kernel it
    // picks without one (a broadcast operand can send it to another).
    auto with_chain = [&](auto pd, const auto& make) {
        for (std::size_t k = chain.nodes.size(); k > 0; --k) try {
                auto fused = make(attr_with(k));
                if (std::string_view(fused.impl_info_str()) == pd.impl_info_str()) {
                    chain.truncate(k);
                    return fused;
                }
            } catch (const dn::error&) {  // an operand it cannot read
            }
        chain = {};
        return pd;
    };
    const auto pd = make_matmul(attr_with(0));
    tref a = L.plain(L.in(i, 0), ad, i);
    const bool gemm = std::string_view(pd.impl_info_str()).starts_with("gemm");
    // The step, its output bound as the node's (and the absorbed nodes') value.
    auto emit = [&]<class Prim>(const auto& prim_pd, const tref& weights, const dn::memory::desc& bias_md) {
        tref y = L.fresh(prim_pd.dst_desc());
        std::vector<std::pair<int, tref>> args{{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, y}};
        if (bias_node) args.push_back({DNNL_ARG_BIAS, bias.as(bias_md)});
        add_post_op_args(args, chain, 0, act_algorithm(act) ? 1 : 0);
        std::string what = bias_node ? "matmul + bias" : "matmul";
        if (!chain.nodes.empty()) what += " + " + std::to_string(chain.nodes.size()) + " fused";
        L.add<Prim>(i, prim_pd, std::move(args), std::move(what));
        const tref value = y.as(plain_md(out_dims));
        L.set(i, 0, value);
        if (bias_node) L.absorb(*bias_node, i, value);
        absorb_chain(L, chain, i, value);
    };
    if (L.is_const(i, 1) && L.in_dims(i, 1).size() == 2 && od.size() == 2 && prefer_inner_product(od[0], ad[1], od[1]) && gemm) {
        const dn::memory::dim k = ad[1], cols = od[1];
        const auto kind = dn::prop_kind::forward_inference;
        const dn::memory::desc w_any({cols, k}, f32, tag::any), bias_md({cols}, f32, tag::a);
        auto make_ip = [&](const dn::primitive_attr& at) {
            return bias_node ? dn::inner_product_forward::primitive_desc(L.p.eng, kind, plain_md(ad), w_any, bias_md, plain_md(od), at)
                             : dn::inner_product_forward::primitive_desc(L.p.eng, kind, plain_md(ad), w_any, plain_md(od), at);
        };
        auto ipd = make_ip(attr_with(0));
        if (std::string_view(ipd.impl_info_str()).starts_with("brgemm")) {
            ipd = with_chain(ipd, make_ip);
            // The row-major [k, n] weight is W^T: W viewed column-major.
            const tref w_t = L.plain(L.in(i, 1), bd, i).as(dn::memory::desc({cols, k}, f32, tag::ba));
            emit.template operator()<dn::inner_product_forward>(ipd, L.convert(w_t, ipd.weights_desc(), i), bias_md);
            return;
        }
    }
    const auto mpd = with_chain(pd, make_matmul);
    tref b = L.convert(L.plain(L.in(i, 1), bd, i), mpd.weights_desc(), i);
    if (L.persistent(b) && od.size() == 2 && is_plain(b.md) && gemm)
        b = L.placed(b, gemm_weight_placement(od[0], od[1]));
    emit.template operator()<dn::matmul>(mpd, b, bias.md);
}

}  // namespace tsopt::backend::dnnl_impl
