#pragma once
// relu / sigmoid / tanh as oneDNN eltwise (logistic for sigmoid), in the
// layout the input already has; smul by a constant scalar as eltwise_linear
// (alpha = s, beta = 0, so exactly x * s), or by -1 left to the sum that
// reads it (leave_negation_to_sum). smul by a run-time scalar is a
// broadcast binary multiply (binary.hpp).
#include "tsopt/backend/dnnl/post_chain.hpp"

namespace tsopt::backend::dnnl_impl {

// An eltwise step for node i; `fuse`: with the elementwise operators after
// node i as post-ops (fused_elementwise).
inline tref eltwise_step(lowering& L, std::size_t i, const tref& x, dn::algorithm alg, float alpha, float beta, std::string what,
                         bool fuse = false) {
    auto make = [&](const dn::primitive_attr& at) {
        return dn::eltwise_forward::primitive_desc(L.p.eng, dn::prop_kind::forward_inference, alg, x.md, x.md, alpha, beta, at);
    };
    return fused_elementwise<dn::eltwise_forward>(L, i, make(L.attr()), make, {{DNNL_ARG_SRC, x}}, std::move(what), fuse);
}

inline void lower_unary(lowering& L, std::size_t i, std::int32_t act) {
    L.set(i, 0, eltwise_step(L, i, L.in(i, 0), *act_algorithm(act), 0.f, 0.f, std::string(L.at(i).type_name()), true));
}

// Returns false when the scalar is not known at compile time.
inline bool lower_smul_constant(lowering& L, std::size_t i) {
    const tensor<float>* s = L.const_tensor(i, 1);
    if (!s) return false;
    L.set(i, 0, eltwise_step(L, i, L.in(i, 0), dn::algorithm::eltwise_linear, (*s)[0], 0.f, "smul (eltwise linear)", true));
    return true;
}

// A smul by -1 whose only reader is a sum of it and a full-size tensor is
// left to that sum, which subtracts its operand (binary_sub: lower_binary,
// or a post-op of the chain the sum continues). An SRU cell's c - x_t and
// tanh(c) - x_t negate slices of a product or of the input, which have no
// producer to run them inside: zoo_rnntc ran 225 of its 745 steps for them.
// Decided in topological order, so of -a + -b only the first is left.
inline bool leave_negation_to_sum(lowering& L, std::size_t i) {
    const tensor<float>* s = L.const_tensor(i, 1);
    if (!s || s->data.size() != 1 || s->data[0] != -1.f || L.is_graph_output(i) || L.consumers[i].size() != 1) return false;
    const auto [r32, slot] = L.consumers[i][0];
    const auto r = static_cast<std::size_t>(r32);
    const node& sum = L.at(r);
    if (!sum.is_op(spec::op_kind::ewadd) || sum.inputs.size() != 2) return false;
    const int other = slot == 0 ? 1 : 0;
    const dims od = L.out_dims(r);
    if (pad_front(L.in_dims(r, other), od.size()) != od || L.negation(r, other)) return false;
    L.negated[i] = true;
    return true;
}

// Node i, about to run on the reference, reads its operands' values: a
// negation left to it is computed after all.
inline void compute_left_negations(lowering& L, std::size_t i) {
    for (int slot = 0; slot < static_cast<int>(L.at(i).inputs.size()); ++slot)
        if (const auto p = L.negation(i, slot)) {
            L.negated[*p] = false;
            L.set(*p, 0, eltwise_step(L, *p, L.in(*p, 0), dn::algorithm::eltwise_linear, -1.f, 0.f, "smul (eltwise linear)"));
        }
}

}  // namespace tsopt::backend::dnnl_impl
