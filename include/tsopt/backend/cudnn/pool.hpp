#pragma once
// avgpool / maxpool on cuDNN (cudnnPoolingForward): average pooling counts the
// padding (CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, the spec's
// semantics), max pooling ignores it; NCHW or NHWC in and out; the fused
// activation runs in place afterwards. Device side: runtime.hpp.
#include "tsopt/backend/cudnn/plan.hpp"

namespace tsopt::backend::cudnn_impl {

inline void lower_pool(lowering& L, std::size_t i) {
    using namespace spec::pool_p;
    const node& n = L.at(i);
    const phys fmt = wanted(n.out_layout, 4) == phys::nhwc ? phys::nhwc : phys::row;  // input and output alike
    tref x = L.as(L.in(i, 0), fmt, i);
    tref y = L.fresh(L.out_shape(i), fmt);
    if (L.in_shape(i, 0).elements() > INT_MAX) throw refused("tensor too large for cuDNN's 32-bit descriptors");
    auto pm = static_cast<spec::pad_mode>(n.params[pad]);
    pool_step s{x, y, n.is_op(spec::op_kind::maxpool), n.params[kh], n.params[kw], n.params[stride_h], n.params[stride_w],
                int(spec::detail::window_pad(n.params[kh], 1, pm)), int(spec::detail::window_pad(n.params[kw], 1, pm)),
                n.params[act]};
    L.add(i, s, std::string(n.type_name()));
    L.finish(i, 0, y);
}

}  // namespace tsopt::backend::cudnn_impl
