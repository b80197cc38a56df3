#pragma once
// ewadd / ewmul with numpy broadcasting (own kernel, src/cuda/kernels.cu).
// Operands of the output's shape stored in the same layout are combined flat
// in that layout; anything else is read row-major through broadcast strides.
#include "tsopt/backend/cudnn/plan.hpp"

namespace tsopt::backend::cudnn_impl {

inline void lower_binary(lowering& L, std::size_t i) {
    const node& n = L.at(i);
    const shape& os = L.out_shape(i);
    tref a = L.in(i, 0), b = L.in(i, 1);
    binary_step s{};
    s.op = n.is_op(spec::op_kind::ewadd) ? 0 : 1;
    if (a.logical == os && b.logical == os && a.layout == b.layout) {
        s.flat = true;
    } else {
        a = L.row(a, i);
        b = L.row(b, i);
        s.flat = a.logical == os && b.logical == os;
        auto sa = strides_of(a.logical), sb = strides_of(b.logical);
        s.geom.rank = os.rank;
        for (int d = 0; d < os.rank; ++d) {
            int ia = d - (os.rank - a.logical.rank), ib = d - (os.rank - b.logical.rank);
            s.geom.dims[static_cast<std::size_t>(d)] = os[d];
            s.geom.a[static_cast<std::size_t>(d)] = ia >= 0 && a.logical[ia] != 1 ? sa[static_cast<std::size_t>(ia)] : 0;
            s.geom.b[static_cast<std::size_t>(d)] = ib >= 0 && b.logical[ib] != 1 ? sb[static_cast<std::size_t>(ib)] : 0;
        }
    }
    s.a = a;
    s.b = b;
    s.y = L.fresh(os, s.flat ? a.layout : phys::row);
    tref y = s.y;
    L.add(i, s, std::string(n.type_name()));
    L.finish(i, 0, y);
}

}  // namespace tsopt::backend::cudnn_impl
