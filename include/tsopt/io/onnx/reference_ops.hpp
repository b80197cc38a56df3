#pragma once
// Reference implementations of ONNX operators the importer keeps opaque
// because they have no exact declared counterpart (Div by a non-power-of-two,
// 2-D pooling with count_include_pad=0, ceil_mode or dilations), so imported
// models run on the reference backend:
//   tsopt::backend::reference ref;
//   tsopt::onnx::install_reference_ops(ref);
#include <limits>

#include "tsopt/backend/reference/executor.hpp"
#include "tsopt/io/onnx/proto.hpp"

namespace tsopt::onnx {

namespace detail {

inline std::vector<tensor<float>> div_impl(const node& n, std::span<const tensor<float>* const> in) {
    if (in.size() != 2) throw error(n.describe() + ": Div takes 2 inputs");
    tensor<float> out(n.shapes[0]);
    spec::detail::for_each_broadcast(out.shape, in[0]->shape, in[1]->shape,
                                     [&](std::int64_t o, std::int64_t a, std::int64_t b) { out[o] = (*in[0])[a] / (*in[1])[b]; });
    return {std::move(out)};
}

// ONNX 2-D pooling in full generality (pads, strides, dilations, ceil_mode,
// count_include_pad); the output extents come from the node's shape.
template <bool Max>
std::vector<tensor<float>> pool_impl(const node& n, std::span<const tensor<float>* const> in) {
    pb::NodeProto a = opaque_attributes(*n.opaque);
    attributes at(a, n.describe());
    const tensor<float>& x = *in[0];
    if (x.shape.rank != 4 || n.shapes[0].rank != 4) throw error(n.describe() + ": reference pooling handles NCHW only");
    auto k = at.get_ints("kernel_shape", {}, 2);
    auto st = at.get_ints("strides", {1, 1}, 2);
    auto dil = at.get_ints("dilations", {1, 1}, 2);
    std::string ap = at.get_string("auto_pad", "NOTSET");
    std::array<std::int64_t, 4> p{};
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
        for (int d = 0; d < 2; ++d) {
            std::int64_t i = x.shape[2 + d], s = st[static_cast<std::size_t>(d)];
            std::int64_t total = std::max<std::int64_t>(((i + s - 1) / s - 1) * s + (k[static_cast<std::size_t>(d)] - 1) * dil[static_cast<std::size_t>(d)] + 1 - i, 0);
            p[static_cast<std::size_t>(d)] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
        }
    } else if (ap == "NOTSET") {
        auto v = at.get_ints("pads", {0, 0, 0, 0}, 4);
        p = {v[0], v[1], v[2], v[3]};
    }
    bool include_pad = at.get_int("count_include_pad", 0) != 0;
    const std::int64_t H = x.shape[2], W = x.shape[3], OH = n.shapes[0][2], OW = n.shapes[0][3];
    tensor<float> out(n.shapes[0]);
    for (std::int64_t c = 0; c < x.shape[0] * x.shape[1]; ++c)
        for (std::int64_t oy = 0; oy < OH; ++oy)
            for (std::int64_t ox = 0; ox < OW; ++ox) {
                float acc = Max ? -std::numeric_limits<float>::infinity() : 0.f;
                std::int64_t count = 0;
                for (std::int64_t ky = 0; ky < k[0]; ++ky)
                    for (std::int64_t kx = 0; kx < k[1]; ++kx) {
                        std::int64_t iy = oy * st[0] - p[0] + ky * dil[0], ix = ox * st[1] - p[1] + kx * dil[1];
                        // Windows of ceil_mode may run past the padded input: never counted.
                        bool in_padded = iy < H + p[2] && ix < W + p[3];
                        if (iy < 0 || ix < 0 || iy >= H || ix >= W) {
                            count += include_pad && in_padded;
                            continue;
                        }
                        float v = x[(c * H + iy) * W + ix];
                        acc = Max ? std::max(acc, v) : acc + v;
                        ++count;
                    }
                out[(c * OH + oy) * OW + ox] = Max ? acc : acc / static_cast<float>(std::max<std::int64_t>(count, 1));
            }
    return {std::move(out)};
}

}  // namespace detail

inline void install_reference_ops(backend::reference& r) {
    r.opaque_impls["Div"] = detail::div_impl;
    r.opaque_impls["AveragePool"] = detail::pool_impl<false>;
    r.opaque_impls["MaxPool"] = detail::pool_impl<true>;
}

}  // namespace tsopt::onnx
