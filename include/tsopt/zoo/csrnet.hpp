#pragma once
// CSRNet (Li, Zhang & Chen, "CSRNet: Dilated Convolutional Neural Networks
// for Understanding the Highly Congested Scenes", CVPR 2018, configuration
// B): the first ten 3x3 convs of VGG-16 with three 2x2/2 max pools as the
// front end, six 3x3 convs with dilation 2 (512, 512, 512, 256, 128, 64) as
// the back end, and a 1x1 conv to a one-channel density map [N,1,H/8,W/8].
// 17 convs, each with a fused relu (except the last); CSRNet has no batch
// normalisation. CSRNet takes images of any size; we use 224x224 by default.
#include "tsopt/zoo/common.hpp"

namespace tsopt::zoo {

inline graph csrnet(const options& o = {}) {
    net n(o, 224);
    auto& g = n.g;
    value x = g.input("data", shape{o.batch, 3, n.image, n.image});
    const int front[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512};
    int conv = 0, pool = 0;
    for (int c : front) {
        if (c == 0) x = g.maxpool(x, {.kernel = 2, .stride = 2, .pad = valid}, idx("frontend.pool", pool++));
        else x = n.conv(x, idx("frontend.conv", conv++), n.ch(c), 3, 3, {.act = relu});
    }
    const int back[] = {512, 512, 512, 256, 128, 64};
    for (int i = 0; i < 6; ++i) x = n.conv(x, idx("backend.conv", i), n.ch(back[i]), 3, 3, {.act = relu, .dilation = 2});
    return n.finish({n.conv(x, "output_layer", 1, 1, 1)});
}

}  // namespace tsopt::zoo
