#pragma once
// Inception-v3 (Szegedy et al., "Rethinking the Inception Architecture for
// Computer Vision", CVPR 2016), laid out as torchvision's inception_v3
// without the auxiliary classifier: every conv is conv -> batchnorm -> relu.
// Input [N,3,299,299]: stem to 35x35x192, Mixed_5b..5d (InceptionA),
// Mixed_6a (reduction to 17x17x768), Mixed_6b..6e (InceptionC, factorised
// 1x7 / 7x1 convs), Mixed_7a (reduction to 8x8x1280), Mixed_7b..7c
// (InceptionE, expanded 1x3 / 3x1 branches), global pool, fc -> [N,1000].
// 94 convs. The smallest image that fits is 75.
#include "tsopt/zoo/common.hpp"

namespace tsopt::zoo {
namespace detail {

struct inception {
    net& n;
    value cbr(value x, const std::string& name, int cout, int kh, int kw, int stride = 1, spec::pad_mode pad = same) {
        return n.conv_bn(x, name, n.ch(cout), kh, kw, {.stride = stride, .pad = pad, .act = relu});
    }
    value avg3(value x, const std::string& name) { return n.g.avgpool(x, {.kernel = 3, .stride = 1, .pad = same}, name); }
    value max3s2(value x, const std::string& name) { return n.g.maxpool(x, {.kernel = 3, .stride = 2, .pad = valid}, name); }

    value a(value x, const std::string& m, int pool_features) {
        value b1 = cbr(x, m + ".branch1x1", 64, 1, 1);
        value b5 = cbr(cbr(x, m + ".branch5x5_1", 48, 1, 1), m + ".branch5x5_2", 64, 5, 5);
        value b3 = cbr(x, m + ".branch3x3dbl_1", 64, 1, 1);
        b3 = cbr(cbr(b3, m + ".branch3x3dbl_2", 96, 3, 3), m + ".branch3x3dbl_3", 96, 3, 3);
        value bp = cbr(avg3(x, m + ".branch_pool.avgpool"), m + ".branch_pool", pool_features, 1, 1);
        return n.g.concat(1, {b1, b5, b3, bp}, m);
    }
    value b(value x, const std::string& m) {
        value b3 = cbr(x, m + ".branch3x3", 384, 3, 3, 2, valid);
        value bd = cbr(cbr(x, m + ".branch3x3dbl_1", 64, 1, 1), m + ".branch3x3dbl_2", 96, 3, 3);
        bd = cbr(bd, m + ".branch3x3dbl_3", 96, 3, 3, 2, valid);
        value bp = max3s2(x, m + ".branch_pool");
        return n.g.concat(1, {b3, bd, bp}, m);
    }
    value c(value x, const std::string& m, int c7) {
        value b1 = cbr(x, m + ".branch1x1", 192, 1, 1);
        value b7 = cbr(x, m + ".branch7x7_1", c7, 1, 1);
        b7 = cbr(cbr(b7, m + ".branch7x7_2", c7, 1, 7), m + ".branch7x7_3", 192, 7, 1);
        value bd = cbr(x, m + ".branch7x7dbl_1", c7, 1, 1);
        bd = cbr(cbr(bd, m + ".branch7x7dbl_2", c7, 7, 1), m + ".branch7x7dbl_3", c7, 1, 7);
        bd = cbr(cbr(bd, m + ".branch7x7dbl_4", c7, 7, 1), m + ".branch7x7dbl_5", 192, 1, 7);
        value bp = cbr(avg3(x, m + ".branch_pool.avgpool"), m + ".branch_pool", 192, 1, 1);
        return n.g.concat(1, {b1, b7, bd, bp}, m);
    }
    value d(value x, const std::string& m) {
        value b3 = cbr(cbr(x, m + ".branch3x3_1", 192, 1, 1), m + ".branch3x3_2", 320, 3, 3, 2, valid);
        value b7 = cbr(x, m + ".branch7x7x3_1", 192, 1, 1);
        b7 = cbr(cbr(b7, m + ".branch7x7x3_2", 192, 1, 7), m + ".branch7x7x3_3", 192, 7, 1);
        b7 = cbr(b7, m + ".branch7x7x3_4", 192, 3, 3, 2, valid);
        value bp = max3s2(x, m + ".branch_pool");
        return n.g.concat(1, {b3, b7, bp}, m);
    }
    value e(value x, const std::string& m) {
        value b1 = cbr(x, m + ".branch1x1", 320, 1, 1);
        value b3 = cbr(x, m + ".branch3x3_1", 384, 1, 1);
        b3 = n.g.concat(1, {cbr(b3, m + ".branch3x3_2a", 384, 1, 3), cbr(b3, m + ".branch3x3_2b", 384, 3, 1)},
                        m + ".branch3x3");
        value bd = cbr(cbr(x, m + ".branch3x3dbl_1", 448, 1, 1), m + ".branch3x3dbl_2", 384, 3, 3);
        bd = n.g.concat(1, {cbr(bd, m + ".branch3x3dbl_3a", 384, 1, 3), cbr(bd, m + ".branch3x3dbl_3b", 384, 3, 1)},
                        m + ".branch3x3dbl");
        value bp = cbr(avg3(x, m + ".branch_pool.avgpool"), m + ".branch_pool", 192, 1, 1);
        return n.g.concat(1, {b1, b3, bd, bp}, m);
    }
};

}  // namespace detail

inline graph inception_v3(const options& o = {}) {
    net n(o, 299);
    detail::inception I{n};
    value x = n.g.input("data", shape{o.batch, 3, n.image, n.image});
    x = I.cbr(x, "Conv2d_1a_3x3", 32, 3, 3, 2, valid);
    x = I.cbr(x, "Conv2d_2a_3x3", 32, 3, 3, 1, valid);
    x = I.cbr(x, "Conv2d_2b_3x3", 64, 3, 3);
    x = I.max3s2(x, "maxpool1");
    x = I.cbr(x, "Conv2d_3b_1x1", 80, 1, 1, 1, valid);
    x = I.cbr(x, "Conv2d_4a_3x3", 192, 3, 3, 1, valid);
    x = I.max3s2(x, "maxpool2");
    x = I.a(x, "Mixed_5b", 32);
    x = I.a(x, "Mixed_5c", 64);
    x = I.a(x, "Mixed_5d", 64);
    x = I.b(x, "Mixed_6a");
    const int c7[4] = {128, 160, 160, 192};
    for (int i = 0; i < 4; ++i) x = I.c(x, std::string("Mixed_6") + char('b' + i), c7[i]);
    x = I.d(x, "Mixed_7a");
    x = I.e(x, "Mixed_7b");
    x = I.e(x, "Mixed_7c");
    return n.finish({n.classifier(x, 1000)});
}

}  // namespace tsopt::zoo
