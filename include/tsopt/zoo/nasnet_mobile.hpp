#pragma once
// NASNet-A Mobile (4 @ 1056) (Zoph et al., CVPR 2018, Table 2 and Figure 4),
// laid out as the Keras / TF-slim reference: stem conv 3x3/2 valid (32) +
// bn, two stem reduction cells (11 and 22 filters), then three stages of
// four normal cells (44, 88, 176 filters) separated by reduction cells
// (88, 176), relu, global pool, fc -> [N,1000]. Input [N,3,224,224];
// the maps are 111 -> 56 -> 28 -> 14 -> 7.
//   normal cell:    (sep5(h)+sep3(p)) (sep5(p)+sep3(p)) (avg3(h)+p) (avg3(p)+avg3(p)) (sep3(h)+h),
//                   concatenated with p -> 6 x filters
//   reduction cell: (sep5/2(h)+sep7/2(p)) (max3/2(h)+sep7/2(p)) (avg3/2(h)+sep5/2(p))
//                   (avg3(x1)+x2) (sep3(x1)+max3/2(h)), concatenated -> 4 x filters
// A "sep" block is relu -> depthwise -> pointwise -> bn -> relu -> depthwise
// -> pointwise -> bn, as in the paper. h is the cell input after relu ->
// 1x1 conv -> bn; p is the previous cell's input, adjusted to h by a
// factorised reduction (two 1x1/2 average-pool + 1x1 conv paths, the second
// shifted by one pixel via pad + split, concatenated, bn) when its map is
// larger, or relu -> 1x1 conv -> bn when its width differs. Pools use same
// padding (Keras pads before valid pooling in the reduction cells; the
// output maps agree). Batchnorm is always present (opt.batchnorm is ignored).
#include "tsopt/zoo/common.hpp"

namespace tsopt::zoo {
namespace detail {

struct nasnet_mobile_cells {
    net& n;

    int width(value x) const { return static_cast<int>(n.g.shape_of(x)[1]); }
    int map(value x) const { return static_cast<int>(n.g.shape_of(x)[2]); }

    value relu_conv_bn(value x, const std::string& name, int c) {
        value r = n.g.relu(x, name + ".relu");
        return n.batchnorm(n.conv(r, name, c, 1, 1), name + ".bn");
    }
    value sep_block(value x, const std::string& name, int c, int k, int stride) {
        for (int i = 1; i <= 2; ++i) {
            std::string s = name + "." + std::to_string(i);
            x = n.g.relu(x, s + ".relu");
            int cin = width(x);
            x = n.conv(x, s + ".depthwise", cin, k, k, {.stride = i == 1 ? stride : 1}, cin);
            x = n.conv(x, s + ".pointwise", c, 1, 1);
            x = n.batchnorm(x, s + ".bn");
        }
        return x;
    }
    value factorized_reduction(value p, const std::string& name, int c) {
        auto& g = n.g;
        value r = g.relu(p, name + ".relu");
        int c1 = std::max(1, c / 2), c2 = std::max(1, c - c1);
        value a = g.avgpool(r, {.kernel = 1, .stride = 2, .pad = valid}, name + ".path1.avgpool");
        a = n.conv(a, name + ".path1.conv", c1, 1, 1);
        // shift by one pixel: pad bottom/right by one, drop the first row and column
        value s = g.pad(r, 0, 1, 0, 1, name + ".path2.pad");
        s = g.split(2, 1, s, name + ".path2.crop_h").second;
        s = g.split(3, 1, s, name + ".path2.crop_w").second;
        s = g.avgpool(s, {.kernel = 1, .stride = 2, .pad = valid}, name + ".path2.avgpool");
        s = n.conv(s, name + ".path2.conv", c2, 1, 1);
        return n.batchnorm(g.concat(1, {a, s}, name + ".concat"), name + ".bn");
    }
    value adjust(value p, value ip, const std::string& name, int c) {
        if (map(p) != map(ip)) return factorized_reduction(p, name, c);
        if (width(p) != c) return relu_conv_bn(p, name, c);
        return p;
    }
    value avg(value x, const std::string& name, int stride = 1) {
        return n.g.avgpool(x, {.kernel = 3, .stride = stride, .pad = same}, name);
    }
    value max(value x, const std::string& name) { return n.g.maxpool(x, {.kernel = 3, .stride = 2, .pad = same}, name); }

    value normal(value ip, value p, const std::string& m, int c) {
        auto& g = n.g;
        p = adjust(p, ip, m + ".adjust", c);
        value h = relu_conv_bn(ip, m + ".input", c);
        value l1 = sep_block(h, m + ".left1", c, 5, 1), r1 = sep_block(p, m + ".right1", c, 3, 1);
        value x1 = g.ewadd(l1, r1, m + ".add1");
        value l2 = sep_block(p, m + ".left2", c, 5, 1), r2 = sep_block(p, m + ".right2", c, 3, 1);
        value x2 = g.ewadd(l2, r2, m + ".add2");
        value x3 = g.ewadd(avg(h, m + ".left3"), p, m + ".add3");
        value l4 = avg(p, m + ".left4"), r4 = avg(p, m + ".right4");
        value x4 = g.ewadd(l4, r4, m + ".add4");
        value x5 = g.ewadd(sep_block(h, m + ".left5", c, 3, 1), h, m + ".add5");
        return g.concat(1, {p, x1, x2, x3, x4, x5}, m + ".concat");
    }
    value reduction(value ip, value p, const std::string& m, int c) {
        auto& g = n.g;
        p = adjust(p, ip, m + ".adjust", c);
        value h = relu_conv_bn(ip, m + ".input", c);
        value l1 = sep_block(h, m + ".left1", c, 5, 2), r1 = sep_block(p, m + ".right1", c, 7, 2);
        value x1 = g.ewadd(l1, r1, m + ".add1");
        value l2 = max(h, m + ".left2"), r2 = sep_block(p, m + ".right2", c, 7, 2);
        value x2 = g.ewadd(l2, r2, m + ".add2");
        value l3 = avg(h, m + ".left3", 2), r3 = sep_block(p, m + ".right3", c, 5, 2);
        value x3 = g.ewadd(l3, r3, m + ".add3");
        value x4 = g.ewadd(avg(x1, m + ".left4"), x2, m + ".add4");
        value l5 = sep_block(x1, m + ".left5", c, 3, 1), r5 = max(h, m + ".right5");
        value x5 = g.ewadd(l5, r5, m + ".add5");
        return g.concat(1, {x2, x3, x4, x5}, m + ".concat");
    }
};

}  // namespace detail

inline graph nasnet_mobile(const options& o = {}) {
    net n(o, 224);
    detail::nasnet_mobile_cells cells{n};
    value x = n.g.input("data", shape{o.batch, 3, n.image, n.image});
    x = n.batchnorm(n.conv(x, "stem.conv", n.ch(32), 3, 3, {.stride = 2, .pad = valid}), "stem.bn");
    const int f = n.ch(44);
    value p = x;
    value t = cells.reduction(x, p, "cell_stem_0", std::max(1, f / 4));
    p = x;
    x = t;
    t = cells.reduction(x, p, "cell_stem_1", std::max(1, f / 2));
    p = x;
    x = t;
    for (int s = 0; s < 3; ++s) {
        if (s > 0) {
            t = cells.reduction(x, p, "reduction_cell_" + std::to_string(s - 1), f << s);
            p = x;
            x = t;
        }
        for (int j = 0; j < n.reps(4); ++j) {
            t = cells.normal(x, p, "cell_" + std::to_string(s * 4 + j), f << s);
            p = x;
            x = t;
        }
    }
    x = n.g.relu(x, "final.relu");
    return n.finish({n.classifier(x, 1000)});
}

}  // namespace tsopt::zoo
