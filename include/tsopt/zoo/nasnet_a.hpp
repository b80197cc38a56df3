#pragma once
// NasNet-A as TASO evaluates it (Jia et al., SOSP 2019; TASO's
// examples/nasnet_a.py, after Zoph et al., "Learning Transferable
// Architectures for Scalable Image Recognition", CVPR 2018): input
// [N,128,56,56] (the output of a stem), three stages of five normal cells
// and one reduction cell, channels 128 -> 256 -> 512 -> 1024; each cell
// concatenates five pairwise sums of separable convs (depthwise kxk +
// pointwise 1x1), 3x3 average / max pools and identities. The output is the
// last reduction cell, [N,5120,7,7] (TASO has no classifier head).
// With opt.batchnorm (default), the squeeze conv is conv -> bn -> relu and
// each separable conv ends in a batchnorm, as the real NASNet; with
// opt.batchnorm = false the graph is exactly TASO's (216 convs, no BN).
#include "tsopt/zoo/common.hpp"

namespace tsopt::zoo {
namespace detail {

struct nasnet_a_cells {
    net& n;
    int id = 0;  // running separable-conv counter within a cell

    value squeeze(value x, const std::string& name, int c) { return n.conv_bn(x, name, c, 1, {.act = relu}); }
    value fit(value cur, value prev, const std::string& name) {
        int c = static_cast<int>(n.g.shape_of(cur)[1]);
        if (n.g.shape_of(prev)[2] == n.g.shape_of(cur)[2]) return squeeze(prev, name, c);
        return n.conv_bn(prev, name, c, 3, {.stride = 2, .act = relu});
    }
    // depthwise-style kxk conv (groups = out) then pointwise 1x1 [+ bn]
    value sep(value x, const std::string& cell, int c, int k, int stride) {
        std::string name = cell + ".sep" + std::to_string(id++);
        int cin = static_cast<int>(n.g.shape_of(x)[1]);
        value t = n.conv(x, name + ".depthwise", c, k, k, {.stride = stride}, c <= cin && cin % c == 0 ? c : 1);
        value y = n.conv(t, name + ".pointwise", c, 1, 1);
        return n.opt.batchnorm ? n.batchnorm(y, name + ".bn") : y;
    }
    value avg(value x, const std::string& name, int stride = 1) {
        return n.g.avgpool(x, {.kernel = 3, .stride = stride, .pad = same}, name);
    }
    value max(value x, const std::string& name) { return n.g.maxpool(x, {.kernel = 3, .stride = 2, .pad = same}, name); }

    value normal(value prev, value cur, const std::string& m, int c) {
        id = 0;
        cur = squeeze(cur, m + ".squeeze", c);
        prev = fit(cur, prev, m + ".fit");
        auto& g = n.g;
        // Operands are created in TASO's order (function arguments have none).
        value s0 = sep(cur, m, c, 3, 1), s1 = sep(prev, m, c, 3, 1), s2 = sep(cur, m, c, 3, 1);
        value a0 = avg(cur, m + ".avgpool0"), a1 = avg(prev, m + ".avgpool1"), a2 = avg(prev, m + ".avgpool2");
        value s3 = sep(prev, m, c, 3, 1), s4 = sep(prev, m, c, 3, 1);
        std::vector<value> out{g.ewadd(s0, cur, m + ".add0"), g.ewadd(s1, s2, m + ".add1"), g.ewadd(a0, prev, m + ".add2"),
                               g.ewadd(a1, a2, m + ".add3"), g.ewadd(s3, s4, m + ".add4")};
        return g.concat(1, out, m + ".concat");
    }
    value reduction(value prev, value cur, const std::string& m, int c) {
        id = 0;
        cur = squeeze(cur, m + ".squeeze", c);
        prev = fit(cur, prev, m + ".fit");
        auto& g = n.g;
        std::vector<value> out;
        value s0 = sep(prev, m, c, 7, 2), s1 = sep(cur, m, c, 5, 2);
        out.push_back(g.ewadd(s0, s1, m + ".add0"));
        value p0 = max(cur, m + ".maxpool0"), s2 = sep(prev, m, c, 7, 2);
        out.push_back(g.ewadd(p0, s2, m + ".add1"));
        value p1 = avg(cur, m + ".avgpool0", 2), s3 = sep(prev, m, c, 5, 2);
        out.push_back(g.ewadd(p1, s3, m + ".add2"));
        value p2 = max(cur, m + ".maxpool1"), s4 = sep(out[0], m, c, 3, 1);
        out.push_back(g.ewadd(p2, s4, m + ".add3"));
        value p3 = avg(out[0], m + ".avgpool1");
        out.push_back(g.ewadd(p3, out[1], m + ".add4"));
        return g.concat(1, out, m + ".concat");
    }
};

}  // namespace detail

inline graph nasnet_a(const options& o = {}) {
    net n(o, 56);
    detail::nasnet_a_cells cells{n};
    value x = n.g.input("data", shape{o.batch, n.ch(128), n.image, n.image});
    int c = n.ch(128);
    for (int s = 0; s < 3; ++s) {
        value prev = x, cur = x;
        for (int j = 0; j < n.reps(5); ++j) {
            value t = cells.normal(prev, cur, "stage" + std::to_string(s) + ".normal" + std::to_string(j), c);
            prev = cur;
            cur = t;
        }
        c *= 2;
        x = cells.reduction(prev, cur, "stage" + std::to_string(s) + ".reduction", c);
    }
    return n.finish({x});
}

}  // namespace tsopt::zoo
