#pragma once
// Element-wise and normalisation operators:
//   relu / sigmoid / tanh  cudnnActivationForward, in any layout
//   smul                   own kernel, the scalar read on the device
//   batchnorm              own kernel (x * scale[c] + shift[c]), NCHW or NHWC
//   softmax                cudnnSoftmaxForward (accurate, channel mode over
//                          [outer, n, inner, 1])
// Device side: runtime.hpp, kernels in src/cuda/kernels.cu.
#include "tsopt/backend/cudnn/plan.hpp"

namespace tsopt::backend::cudnn_impl {

inline void lower_unary(lowering& L, std::size_t i, std::int32_t act) {
    tref x = L.in(i, 0);
    tref y = L.fresh(L.out_shape(i), x.layout);
    L.add(i, act_step{x, y, act}, std::string(L.at(i).type_name()));
    L.finish(i, 0, y);
}

inline void lower_smul(lowering& L, std::size_t i) {
    tref x = L.in(i, 0);
    tref s = L.row_in(i, 1);
    tref y = L.fresh(L.out_shape(i), x.layout);
    L.add(i, smul_step{x, s, y}, "smul");
    L.finish(i, 0, y);
}

inline void lower_batchnorm(lowering& L, std::size_t i) {
    const shape& xs = L.in_shape(i, 0);
    tref x = L.in(i, 0);
    if (x.layout != phys::nhwc) x = L.row(x, i);
    std::int64_t inner = 1;
    if (x.layout == phys::row)
        for (int d = 2; d < xs.rank; ++d) inner *= xs[d];
    tref y = L.fresh(xs, x.layout);
    L.add(i, batchnorm_step{x, L.row_in(i, 1), L.row_in(i, 2), y, xs[1], inner}, "batchnorm");
    L.finish(i, 0, y);
}

inline void lower_softmax(lowering& L, std::size_t i) {
    const shape& xs = L.in_shape(i, 0);
    const int ax = L.at(i).params[spec::softmax_p::axis];
    std::int64_t outer = 1, inner = 1;
    for (int d = 0; d < ax; ++d) outer *= xs[d];
    for (int d = ax + 1; d < xs.rank; ++d) inner *= xs[d];
    if (outer > INT_MAX || xs[ax] > INT_MAX || inner > INT_MAX || xs.elements() > INT_MAX)
        throw refused("tensor too large for cuDNN's 32-bit descriptors");
    tref y = L.fresh(xs);
    L.add(i, softmax_step{L.row_in(i, 0), y, outer, xs[ax], inner}, "softmax");
    L.finish(i, 0, y);
}

}  // namespace tsopt::backend::cudnn_impl
