#pragma once
// matmul on oneDNN: a[..., m, k] x b[..., k, n], batch axes broadcast (a
// lower-rank operand is viewed with leading 1s), activation fused as an
// eltwise post-op. A constant rank-2 b is reordered once into the layout the
// primitive prefers.
#include "tsopt/backend/dnnl/plan.hpp"

namespace tsopt::backend::dnnl_impl {

inline void lower_matmul(lowering& L, std::size_t i) {
    const node& n = L.at(i);
    dims od = L.out_dims(i);
    dims ad = pad_front(L.in_dims(i, 0), od.size()), bd = pad_front(L.in_dims(i, 1), od.size());
    auto wmd = L.is_const(i, 1) && od.size() == 2 ? any_md(bd) : plain_md(bd);
    dn::matmul::primitive_desc pd(L.p.eng, plain_md(ad), wmd, plain_md(od), L.attr(n.params[spec::matmul_p::act]));
    tref a = L.plain(L.in(i, 0), ad, i);
    tref b = L.convert(L.plain(L.in(i, 1), bd, i), pd.weights_desc(), i);
    tref y = L.fresh(pd.dst_desc());
    L.add<dn::matmul>(i, pd, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, y}}, "matmul");
    L.set(i, 0, y);
}

}  // namespace tsopt::backend::dnnl_impl
