#pragma once
// relu / sigmoid / tanh as oneDNN eltwise (logistic for sigmoid), in the
// layout the input already has; smul by a constant scalar as eltwise_linear
// (alpha = s, beta = 0, so exactly x * s). smul by a run-time scalar is a
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

}  // namespace tsopt::backend::dnnl_impl
