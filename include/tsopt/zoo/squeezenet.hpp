#pragma once
// SqueezeNet v1.0 (Iandola et al., "SqueezeNet: AlexNet-level accuracy with
// 50x fewer parameters", 2016, Table 1): conv1 7x7/2 96, eight fire modules
// (squeeze 1x1 -> expand 1x1 and expand 3x3, concatenated), three 3x3/2 max
// pools, conv10 1x1 -> 1000, global average pool -> [N,1000]. 26 convs.
// Input 227x227 (as the original Caffe model), which gives the paper's
// 111/55/27/13 maps with floor-mode (valid) pooling. SqueezeNet has no batch
// normalisation, so every conv carries a fused relu whatever opt.batchnorm.
#include "tsopt/zoo/common.hpp"

namespace tsopt::zoo {
namespace detail {

inline value fire(net& n, value x, const std::string& name, int s, int e1, int e3) {
    value sq = n.conv(x, name + ".squeeze", n.ch(s), 1, 1, {.act = relu});
    value a = n.conv(sq, name + ".expand1x1", n.ch(e1), 1, 1, {.act = relu});
    value b = n.conv(sq, name + ".expand3x3", n.ch(e3), 3, 3, {.act = relu});
    return n.g.concat(1, {a, b}, name);
}

}  // namespace detail

inline graph squeezenet(const options& o = {}) {
    net n(o, 227);
    auto pool = [&](value x, const char* name) { return n.g.maxpool(x, {.kernel = 3, .stride = 2, .pad = valid}, name); };
    value x = n.g.input("data", shape{o.batch, 3, n.image, n.image});
    x = n.conv(x, "conv1", n.ch(96), 7, 7, {.stride = 2, .pad = valid, .act = relu});
    x = pool(x, "maxpool1");
    x = detail::fire(n, x, "fire2", 16, 64, 64);
    x = detail::fire(n, x, "fire3", 16, 64, 64);
    x = detail::fire(n, x, "fire4", 32, 128, 128);
    x = pool(x, "maxpool4");
    x = detail::fire(n, x, "fire5", 32, 128, 128);
    x = detail::fire(n, x, "fire6", 48, 192, 192);
    x = detail::fire(n, x, "fire7", 48, 192, 192);
    x = detail::fire(n, x, "fire8", 64, 256, 256);
    x = pool(x, "maxpool8");
    x = detail::fire(n, x, "fire9", 64, 256, 256);
    x = n.conv(x, "conv10", 1000, 1, 1, {.act = relu});
    shape s = n.g.shape_of(x);
    x = n.g.avgpool(x, {.kernel = static_cast<int>(s[2]), .stride = 1, .pad = valid}, "avgpool");
    return n.finish({n.g.reshape(x, shape{s[0], 1000}, "flatten")});
}

}  // namespace tsopt::zoo
