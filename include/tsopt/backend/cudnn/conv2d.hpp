#pragma once
// conv2d on cuDNN: grouped, strided, dilated, same/valid padding; NCHW, or
// NHWC when node.out_layout asks for it (input and filter then NHWC too; a
// constant filter is converted once on the host), weight [K, C/groups, kh, kw]. The fused activation runs through
// cudnnConvolutionBiasActivationForward (relu, zero bias) or as a separate
// cudnnActivationForward; the algorithm comes from cuDNN's heuristics or is
// measured (options::find_conv_algorithms). Device side: runtime.hpp.
#include "tsopt/backend/cudnn/plan.hpp"

namespace tsopt::backend::cudnn_impl {

inline void lower_conv2d(lowering& L, std::size_t i) {
    using namespace spec::conv2d_p;
    const node& n = L.at(i);
    const shape &xs = L.in_shape(i, 0), &ws = L.in_shape(i, 1), &ys = L.out_shape(i);
    // Input, filter and output share one format (NCHW or NHWC, chosen by the
    // output's layout): every cuDNN algorithm supports that, mixed formats not.
    const phys fmt = wanted(n.out_layout, 4) == phys::nhwc ? phys::nhwc : phys::row;
    tref x = L.as(L.in(i, 0), fmt, i);
    tref w = L.as(L.in(i, 1), fmt, i);
    tref y = L.fresh(ys, fmt);
    auto pm = static_cast<spec::pad_mode>(n.params[pad]);
    conv_step s{x, w, y,
                int(xs[0]), int(xs[1]), int(xs[2]), int(xs[3]), int(ws[0]), int(ws[2]), int(ws[3]), int(ys[2]), int(ys[3]),
                int(spec::detail::window_pad(ws[2], n.params[dil_h], pm)), int(spec::detail::window_pad(ws[3], n.params[dil_w], pm)),
                n.params[stride_h], n.params[stride_w], n.params[dil_h], n.params[dil_w], int(xs[1] / ws[1]), n.params[act]};
    for (std::int64_t e : {xs.elements(), ws.elements(), ys.elements()})
        if (e > INT_MAX) throw refused("tensor too large for cuDNN's 32-bit descriptors");
    L.add(i, s, "conv2d");
    L.finish(i, 0, y);
}

}  // namespace tsopt::backend::cudnn_impl
