#pragma once
// ResNet-18 and ResNet-50 (He et al., "Deep Residual Learning for Image
// Recognition", CVPR 2016, Table 1), as torchvision builds them (v1.5: the
// stride of a downsampling bottleneck sits in its 3x3 conv). Input
// [N,3,224,224]; output [N,1000] logits.
//   ResNet-18: basic blocks [2,2,2,2], widths 64..512      (20 convs)
//   ResNet-50: bottlenecks [3,4,6,3], widths 64..512 x4    (53 convs)
#include "tsopt/zoo/common.hpp"

namespace tsopt::zoo {
namespace detail {

// conv7x7/2 -> bn -> relu -> maxpool3x3/2
inline value resnet_stem(net& n, value x) {
    x = n.conv_bn(x, "conv1", n.ch(64), 7, {.stride = 2, .act = relu});
    return n.g.maxpool(x, {.kernel = 3, .stride = 2, .pad = same}, "maxpool");
}

// Shortcut: identity, or conv1x1/stride + bn when the shape changes.
inline value resnet_shortcut(net& n, value x, const std::string& name, int cout, int stride) {
    if (stride == 1 && n.g.shape_of(x)[1] == cout) return x;
    return n.conv_bn(x, name + ".downsample", cout, 1, {.stride = stride});
}

inline value basic_block(net& n, value x, const std::string& name, int width, int stride) {
    value sc = resnet_shortcut(n, x, name, width, stride);
    value y = n.conv_bn(x, name + ".conv1", width, 3, {.stride = stride, .act = relu});
    y = n.conv_bn(y, name + ".conv2", width, 3);
    return n.g.relu(n.g.ewadd(y, sc, name + ".add"), name + ".relu");
}

// 1x1 (width) -> 3x3/stride (width, `groups`) -> 1x1 (out), + shortcut, relu.
inline value bottleneck(net& n, value x, const std::string& name, int width, int out, int stride, int groups = 1) {
    value sc = resnet_shortcut(n, x, name, out, stride);
    value y = n.conv_bn(x, name + ".conv1", width, 1, {.act = relu});
    y = n.conv_bn(y, name + ".conv2", width, 3, {.stride = stride, .act = relu}, groups);
    y = n.conv_bn(y, name + ".conv3", out, 1);
    return n.g.relu(n.g.ewadd(y, sc, name + ".add"), name + ".relu");
}

}  // namespace detail

inline graph resnet18(const options& o = {}) {
    net n(o, 224);
    value x = n.g.input("data", shape{o.batch, 3, n.image, n.image});
    x = detail::resnet_stem(n, x);
    const int blocks[4] = {2, 2, 2, 2};
    for (int s = 0; s < 4; ++s)
        for (int b = 0; b < n.reps(blocks[s]); ++b)
            x = detail::basic_block(n, x, idx("layer" + std::to_string(s + 1), b), n.ch(64 << s), b == 0 && s > 0 ? 2 : 1);
    return n.finish({n.classifier(x, 1000)});
}

inline graph resnet50(const options& o = {}) {
    net n(o, 224);
    value x = n.g.input("data", shape{o.batch, 3, n.image, n.image});
    x = detail::resnet_stem(n, x);
    const int blocks[4] = {3, 4, 6, 3};
    for (int s = 0; s < 4; ++s)
        for (int b = 0; b < n.reps(blocks[s]); ++b)
            x = detail::bottleneck(n, x, idx("layer" + std::to_string(s + 1), b), n.ch(64 << s), n.ch(256 << s),
                                   b == 0 && s > 0 ? 2 : 1);
    return n.finish({n.classifier(x, 1000)});
}

}  // namespace tsopt::zoo
