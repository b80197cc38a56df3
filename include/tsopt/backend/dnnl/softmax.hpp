#pragma once
// softmax along one axis on oneDNN (row-major data).
#include "tsopt/backend/dnnl/plan.hpp"

namespace tsopt::backend::dnnl_impl {

inline void lower_softmax(lowering& L, std::size_t i) {
    const int ax = L.at(i).params[spec::softmax_p::axis];
    tref x = L.plain_in(i, 0);
    dn::softmax_forward::primitive_desc pd(L.p.eng, dn::prop_kind::forward_inference, dn::algorithm::softmax_accurate, x.md, x.md,
                                           ax, L.attr());
    tref y = L.fresh(pd.dst_desc());
    L.add<dn::softmax_forward>(i, pd, {{DNNL_ARG_SRC, x}, {DNNL_ARG_DST, y}}, "softmax");
    L.set(i, 0, y);
}

}  // namespace tsopt::backend::dnnl_impl
