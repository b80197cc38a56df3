#pragma once
// ewadd / ewmul as oneDNN binary with numpy broadcasting. oneDNN's
// binary broadcasts only the second source, so the full-size operand goes first
// (add and mul commute); when both operands broadcast (e.g. [3,1] + [1,4])
// the lowering refuses and the node falls back to the reference. A sum of a
// negation left to it (eltwise.hpp, leave_negation_to_sum) is binary_sub.
// smul by a run-time scalar is a binary multiply by a [1,..,1] tensor. batchnorm
// (x * scale[c] + shift[c]) is a binary multiply with a fused binary-add
// post-op in the input's layout; where that has only oneDNN's reference
// kernel, oneDNN batch normalization with global stats mean = 0, variance =
// 1, epsilon = 0 (so scale / sqrt(1 + 0) == scale exactly); else the binary
// on the row-major input.
#include "tsopt/backend/dnnl/post_chain.hpp"

namespace tsopt::backend::dnnl_impl {

struct refused : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// A binary step for node i; `fuse`: with the elementwise operators after
// node i as post-ops (fused_elementwise). `no_reference`: refuse (throw
// refused) where oneDNN offers only its reference kernel, so the caller can
// try another layout first.
inline tref binary_step(lowering& L, std::size_t i, dn::algorithm alg, const tref& a, const tref& b, std::string what,
                        bool no_reference = false, bool fuse = false) {
    auto make = [&](const dn::primitive_attr& at) { return dn::binary::primitive_desc(L.p.eng, alg, a.md, b.md, a.md, at); };
    auto pd = make(L.attr());
    if (no_reference && std::string_view(pd.impl_info_str()).starts_with("ref")) throw refused("only oneDNN's reference binary kernel");
    return fused_elementwise<dn::binary>(L, i, std::move(pd), make, {{DNNL_ARG_SRC_0, a}, {DNNL_ARG_SRC_1, b}}, std::move(what), fuse);
}

inline void lower_binary(lowering& L, std::size_t i) {
    const node& n = L.at(i);
    auto alg = n.is_op(spec::op_kind::ewadd) ? dn::algorithm::binary_add : dn::algorithm::binary_mul;
    dims od = L.out_dims(i);
    int s0 = 0, s1 = 1;
    // a + (-x) with the negation left to this sum: a - x, x second (the
    // other operand is full-size: leave_negation_to_sum).
    std::optional<std::size_t> negation;
    for (int s = 0; s < 2 && n.is_op(spec::op_kind::ewadd) && !negation; ++s)
        if ((negation = L.negation(i, s))) {
            s1 = s;
            s0 = 1 - s;
            alg = dn::algorithm::binary_sub;
        }
    if (!negation && pad_front(L.in_dims(i, 0), od.size()) != od) std::swap(s0, s1);
    dims d0 = pad_front(L.in_dims(i, s0), od.size()), d1 = pad_front(L.in_dims(i, s1), od.size());
    if (d0 != od) throw refused("both operands broadcast, which oneDNN binary does not support");
    const char* what = negation ? "sub" : n.is_op(spec::op_kind::ewadd) ? "add" : "mul";
    // First in the layout the full operand has; if oneDNN refuses that with a
    // broadcast operand, or has only its reference kernel for it (a [C,1,1]
    // bias over a blocked nChw16c tensor: ~100x slower than row-major),
    // row-major.
    for (bool keep_layout : {true, false}) {
        auto m = L.checkpoint();
        try {
            tref a = L.in(i, s0);
            if (a.md.get_dims() != od || !keep_layout) a = L.plain(a, od, i);
            tref b = negation ? L.in(*negation, 0) : L.in(i, s1);
            if (d1 == od) b = L.convert(b.md.get_dims() == od ? b : L.plain(b, od, i), a.md, i);
            else b = L.plain(b, d1, i);
            L.set(i, 0, binary_step(L, i, alg, a, b, what, keep_layout, true));
            if (negation) L.fuse(*negation, i);
            return;
        } catch (const dn::error&) {
            if (!keep_layout) throw;
            L.rollback(m, i);
        } catch (const refused&) {
            if (!keep_layout) throw;
            L.rollback(m, i);
        }
    }
}

inline void lower_smul_runtime(lowering& L, std::size_t i) {
    tref x = L.in(i, 0);
    tref s = L.plain(L.in(i, 1), dims(x.md.get_dims().size(), 1), i);
    L.set(i, 0, binary_step(L, i, dn::algorithm::binary_mul, x, s, "smul (binary mul)", false, true));
}

inline void lower_batchnorm(lowering& L, std::size_t i) {
    dims xd = L.in_dims(i, 0);
    const std::int64_t C = xd[1];
    tref scale = L.plain_in(i, 1), shift = L.plain_in(i, 2);
    dims cd(xd.size(), 1);
    cd[1] = C;
    // x * scale + shift as one binary multiply with a binary-add post-op, in
    // the layout x has (`keep_layout`) or row-major; `no_reference` refuses
    // oneDNN's reference kernel.
    auto as_binary = [&](bool keep_layout, bool no_reference) {
        tref x = L.in(i, 0);
        if (!keep_layout) x = L.plain(x, xd, i);
        tref sc = scale.as(plain_md(cd)), sh = shift.as(plain_md(cd));
        dn::post_ops po;
        po.append_binary(dn::algorithm::binary_add, sh.md);
        dn::primitive_attr at = L.attr();
        at.set_post_ops(po);
        dn::binary::primitive_desc pd(L.p.eng, dn::algorithm::binary_mul, x.md, sc.md, x.md, at);
        if (no_reference && std::string_view(pd.impl_info_str()).starts_with("ref")) throw refused("only oneDNN's reference binary kernel");
        tref y = L.fresh(pd.dst_desc());
        L.add<dn::binary>(i, pd,
                          {{DNNL_ARG_SRC_0, x}, {DNNL_ARG_SRC_1, sc}, {DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, sh},
                           {DNNL_ARG_DST, y}},
                          "batchnorm (binary mul + add)");
        L.set(i, 0, y);
    };
    // oneDNN's inference batch normalization with mean 0, variance 1 and
    // epsilon 0, which computes x * scale + shift exactly.
    auto as_batch_normalization = [&] {
        tref x = L.in(i, 0);
        auto flags = dn::normalization_flags::use_global_stats | dn::normalization_flags::use_scale |
                     dn::normalization_flags::use_shift;
        dn::batch_normalization_forward::primitive_desc pd(L.p.eng, dn::prop_kind::forward_inference, x.md, x.md, 0.f, flags, L.attr());
        if (std::string_view(pd.impl_info_str()).starts_with("ref")) throw refused("only oneDNN's reference batch normalization");
        tref mean = L.constant_buffer(std::make_shared<const tensor<float>>(shape{C}, 0.f));
        tref var = L.constant_buffer(std::make_shared<const tensor<float>>(shape{C}, 1.f));
        tref y = L.fresh(pd.dst_desc());
        L.add<dn::batch_normalization_forward>(i, pd,
                                               {{DNNL_ARG_SRC, x}, {DNNL_ARG_MEAN, mean}, {DNNL_ARG_VARIANCE, var},
                                                {DNNL_ARG_SCALE, scale}, {DNNL_ARG_SHIFT, shift}, {DNNL_ARG_DST, y}},
                                               "batch normalization");
        L.set(i, 0, y);
    };
    // The binary multiply first: on NASNet-Mobile's 192 unfolded batch
    // normalizations (1 thread) it took 2.1 ms where oneDNN's batch
    // normalization took 12.2 (its channels-last kernel, nspc_bnorm, ~0.3 ms
    // each). Over a blocked layout with a per-channel operand the binary has
    // only its reference kernel (45 ms on one of them): then the batch
    // normalization, which has a blocked kernel, else row-major.
    auto attempt = [&](const auto& lower) {
        auto m = L.checkpoint();
        try {
            lower();
            return true;
        } catch (const dn::error&) {
        } catch (const refused&) {
        }
        L.rollback(m, i);
        return false;
    };
    if (attempt([&] { as_binary(true, true); }) || attempt(as_batch_normalization)) return;
    as_binary(false, false);
}

}  // namespace tsopt::backend::dnnl_impl
