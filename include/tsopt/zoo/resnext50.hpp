#pragma once
// ResNeXt-50 32x4d (Xie et al., "Aggregated Residual Transformations for
// Deep Neural Networks", CVPR 2017, Table 1): ResNet-50's bottlenecks with
// the 3x3 conv grouped into 32 groups of 4 channels (widths 128, 256, 512,
// 1024; outputs 256..2048). Input [N,3,224,224]; output [N,1000]; 53 convs,
// 16 of them grouped. width_div divides the cardinality too (32/width_div
// groups, 4 channels each), so small variants keep grouped convolutions.
#include "tsopt/zoo/resnet.hpp"

namespace tsopt::zoo {

inline graph resnext50(const options& o = {}) {
    net n(o, 224);
    const int groups = std::max(1, 32 / o.width_div);
    value x = n.g.input("data", shape{o.batch, 3, n.image, n.image});
    x = detail::resnet_stem(n, x);
    const int blocks[4] = {3, 4, 6, 3};
    for (int s = 0; s < 4; ++s)
        for (int b = 0; b < n.reps(blocks[s]); ++b)
            x = detail::bottleneck(n, x, idx("layer" + std::to_string(s + 1), b), groups * (4 << s), n.ch(256 << s),
                                   b == 0 && s > 0 ? 2 : 1, groups);
    return n.finish({n.classifier(x, 1000)});
}

}  // namespace tsopt::zoo
