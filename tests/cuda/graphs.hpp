#pragma once
// Small graphs covering every operator of the specification, the layouts the
// cuDNN backend handles (col-major matmul operands and outputs, transposes
// that are views, NHWC conv/pool outputs), broadcasting, constants, an opaque
// node and branchy graphs that get several streams. Shared by the host-only
// plan test and the GPU tests.
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tsopt/core/graph.hpp"

namespace tsopt::test::cuda {

struct case_graph {
    std::string name;
    graph g;
};

// The opaque operator the cases use ("Negate": y = -x) and its implementation.
inline std::shared_ptr<const opaque_op> negate_op() {
    return std::make_shared<const opaque_op>(opaque_op{"Negate", "", "", 0});
}
inline std::vector<tensor<float>> negate_impl(const node&, std::span<const tensor<float>* const> in) {
    tensor<float> y = *in[0];
    for (auto& v : y.data) v = -v;
    return {y};
}

inline void set_layout(graph& g, value v, spec::layout l) { g.nodes[static_cast<std::size_t>(v.node)].out_layout = l; }

inline std::vector<case_graph> op_cases() {
    std::vector<case_graph> cs;
    std::mt19937_64 rng(1234);
    auto add = [&](std::string name, const std::function<void(graph&)>& build) {
        graph g;
        build(g);
        g.validate();
        cs.push_back({std::move(name), std::move(g)});
    };
    using spec::op_kind;
    // ---- convolution -------------------------------------------------------------
    struct conv_cfg { const char* name; int c, k, cin_w, kh, stride, dil; spec::pad_mode pad; spec::activation act; };
    for (conv_cfg c : {conv_cfg{"conv 3x3 same", 4, 8, 4, 3, 1, 1, same, no_activation},
                       conv_cfg{"conv 3x3 same relu", 4, 8, 4, 3, 1, 1, same, relu},
                       conv_cfg{"conv 1x1 stride 2 sigmoid", 6, 5, 6, 1, 2, 1, valid, spec::activation::sigmoid},
                       conv_cfg{"conv 5x5 valid tanh", 3, 4, 3, 5, 1, 1, valid, spec::activation::tanh},
                       conv_cfg{"conv 3x3 stride 2 same", 4, 6, 4, 3, 2, 1, same, relu},
                       conv_cfg{"conv 3x3 dilated 2", 4, 4, 4, 3, 1, 2, same, no_activation},
                       conv_cfg{"conv depthwise", 8, 8, 1, 3, 1, 1, same, relu},
                       conv_cfg{"conv grouped 4", 8, 12, 2, 3, 1, 1, same, no_activation}})
        add(c.name, [&](graph& g) {
            value x = g.input("x", {2, c.c, 11, 9});
            value w = g.weight("w", {c.k, c.cin_w, c.kh, c.kh}, rng);
            g.mark_output(g.conv2d(x, w, {.stride = c.stride, .pad = c.pad, .act = c.act, .dilation = c.dil}));
        });
    add("conv nhwc out -> relu -> conv -> batchnorm", [&](graph& g) {
        value x = g.input("x", {1, 4, 8, 8});
        value a = g.conv2d(x, g.weight("w1", {6, 4, 3, 3}, rng), {.act = relu});
        set_layout(g, a, spec::layout::nhwc);
        value r = g.relu(a);
        set_layout(g, r, spec::layout::nhwc);
        value b = g.conv2d(r, g.weight("w2", {6, 6, 1, 1}, rng));
        set_layout(g, b, spec::layout::nhwc);
        // batchnorm declares no NHWC kernel (spec::image_layouts), so it reads
        // the NHWC conv output through a conversion and writes NCHW.
        value bn = g.batchnorm(b, g.weight("s", {6}, rng), g.weight("t", {6}, rng));
        g.mark_output(g.maxpool(bn, {.kernel = 3, .stride = 2, .pad = same}));
        value ap = g.avgpool(bn, {.kernel = 3, .stride = 1, .pad = same, .act = relu});
        set_layout(g, ap, spec::layout::nhwc);
        g.mark_output(g.conv2d(ap, g.input("w3", {2, 6, 3, 3}), {.pad = valid}));  // NCHW conv of an NHWC value, runtime filter
    });
    add("explicit reorders (layout moves) to channels-last and back", [&](graph& g) {
        value x = g.input("x", {1, 4, 8, 8});
        value xr = g.add1(op_kind::reorder, {}, {x}, "x/to_nhwc");
        set_layout(g, xr, spec::layout::nhwc);
        value c = g.conv2d(xr, g.weight("w", {6, 4, 3, 3}, rng));
        set_layout(g, c, spec::layout::nhwc);
        value r = g.relu(c);
        set_layout(g, r, spec::layout::nhwc);
        value back = g.add1(op_kind::reorder, {}, {r}, "relu/to_nchw");
        g.mark_output(back);
        value same = g.add1(op_kind::reorder, {}, {r}, "relu/to_nhwc_again");  // already NHWC: a view
        set_layout(g, same, spec::layout::nhwc);
        g.mark_output(g.relu(same));
    });
    add("conv with runtime weight", [&](graph& g) {
        value x = g.input("x", {1, 3, 7, 7});
        value w = g.input("w", {4, 3, 3, 3});
        g.mark_output(g.conv2d(x, w, {.pad = valid}));
    });
    // ---- pooling -------------------------------------------------------------------
    add("avgpool 3x3 same (padding counted)", [&](graph& g) { g.mark_output(g.avgpool(g.input("x", {2, 3, 7, 6}), {.kernel = 3, .stride = 1, .pad = same})); });
    add("avgpool 2x2 stride 2 valid relu", [&](graph& g) {
        g.mark_output(g.avgpool(g.input("x", {1, 2, 8, 8}), {.kernel = 2, .stride = 2, .pad = valid, .act = relu}));
    });
    add("maxpool 3x3 stride 2 same", [&](graph& g) { g.mark_output(g.maxpool(g.input("x", {2, 3, 9, 9}), {.kernel = 3, .stride = 2, .pad = same})); });
    // ---- element-wise ------------------------------------------------------------------
    add("relu sigmoid tanh", [&](graph& g) {
        value x = g.input("x", {3, 5, 7});
        g.mark_output(g.relu(x));
        g.mark_output(g.sigmoid(x));
        g.mark_output(g.tanh(x));
    });
    add("ewadd ewmul same shape", [&](graph& g) {
        value a = g.input("a", {2, 3, 4}), b = g.input("b", {2, 3, 4});
        g.mark_output(g.ewadd(a, b));
        g.mark_output(g.ewmul(a, b));
    });
    add("ewadd ewmul broadcasting", [&](graph& g) {
        value a = g.input("a", {2, 3, 4, 5}), b = g.input("b", {3, 1, 5}), c = g.input("c", {4, 1});
        g.mark_output(g.ewadd(a, b));
        g.mark_output(g.ewmul(c, a));
        g.mark_output(g.ewadd(b, c));  // [3,4,5]
    });
    add("smul by weight and by input", [&](graph& g) {
        value x = g.input("x", {2, 3, 4});
        g.mark_output(g.smul(x, g.weight("s", tensor<float>(shape{1}, 0.75f))));
        g.mark_output(g.smul(x, g.input("t", {1})));
    });
    add("batchnorm rank 4 and rank 2", [&](graph& g) {
        value x = g.input("x", {2, 5, 3, 4}), y = g.input("y", {3, 5});
        g.mark_output(g.batchnorm(x, g.weight("s", {5}, rng), g.weight("t", {5}, rng)));
        g.mark_output(g.batchnorm(y, g.weight("s2", {5}, rng), g.weight("t2", {5}, rng)));
    });
    add("softmax axis 1 and last", [&](graph& g) {
        value x = g.input("x", {2, 6, 3, 4});
        g.mark_output(g.softmax(x, 1));
        g.mark_output(g.softmax(x, 3));
    });
    // ---- matmul ------------------------------------------------------------------------
    add("matmul 2d relu", [&](graph& g) {
        g.mark_output(g.matmul(g.input("a", {7, 5}), g.weight("b", {5, 9}, rng), {.act = relu}));
    });
    add("matmul batched, shared rank-2 operand", [&](graph& g) {
        g.mark_output(g.matmul(g.input("a", {2, 3, 4, 5}), g.input("b", {5, 6})));
        g.mark_output(g.matmul(g.input("c", {4, 5}), g.input("d", {3, 5, 2}), {.act = spec::activation::tanh}));
    });
    add("matmul broadcast batch axes", [&](graph& g) {
        g.mark_output(g.matmul(g.input("a", {2, 1, 4, 5}), g.input("b", {3, 5, 6})));
    });
    add("matmul col-major output, transpose view, col-major operands", [&](graph& g) {
        value a = g.input("a", {6, 5}), b = g.input("b", {5, 4});
        value c = g.matmul(a, b);
        set_layout(g, c, spec::layout::col_major);
        value ct = g.transpose(c, {1, 0});  // a view of c's buffer
        g.mark_output(ct);
        value d = g.matmul(c, g.input("e", {4, 3}));  // col-major first operand
        g.mark_output(d);
        value f = g.matmul(g.input("h", {2, 6}), c);  // col-major second operand
        set_layout(g, f, spec::layout::col_major);
        g.mark_output(f);
        g.mark_output(g.ewadd(c, g.input("k", {6, 4})));  // needs a conversion
    });
    add("batched matmul col-major chain", [&](graph& g) {
        value a = g.input("a", {3, 4, 5}), b = g.input("b", {3, 5, 6});
        value c = g.matmul(a, b);
        set_layout(g, c, spec::layout::col_major);
        value t = g.transpose(c, {0, 2, 1});
        set_layout(g, t, spec::layout::col_major);  // not a view: stored col-major of the transposed
        g.mark_output(g.matmul(t, g.input("d", {3, 4, 2})));
        g.mark_output(g.relu(c));
    });
    // ---- data movement -----------------------------------------------------------------
    add("transpose 3d and 4d", [&](graph& g) {
        value x = g.input("x", {2, 3, 4}), y = g.input("y", {2, 3, 4, 5});
        g.mark_output(g.transpose(x, {2, 0, 1}));
        g.mark_output(g.transpose(y, {0, 2, 3, 1}));
        value t = g.transpose(x, {0, 2, 1});
        set_layout(g, t, spec::layout::col_major);
        g.mark_output(t);
    });
    add("concat axis 1 and 0, split axis 1 and 2", [&](graph& g) {
        value a = g.input("a", {2, 3, 4}), b = g.input("b", {2, 5, 4}), c = g.input("c", {2, 1, 4});
        value k = g.concat(1, {a, b, c});
        g.mark_output(k);
        g.mark_output(g.concat(0, {a, a}));
        auto [s0, s1] = g.split(1, 2, k);
        g.mark_output(s0);
        g.mark_output(s1);
        auto [t0, t1] = g.split(2, 1, a);
        g.mark_output(t1);
        g.mark_output(t0);
    });
    add("pad, enlarge (runtime), reshape", [&](graph& g) {
        value x = g.input("x", {1, 2, 4, 5});
        g.mark_output(g.pad(x, 1, 2, 0, 3));
        spec::op_params p;
        p[spec::enlarge_p::kh] = 5;
        p[spec::enlarge_p::kw] = 3;
        g.mark_output(g.add1(op_kind::enlarge, p, {g.input("w", {3, 2, 1, 3})}));
        g.mark_output(g.reshape(x, {4, 10}));
        g.mark_output(g.relu(g.reshape(g.relu(x), {2, 2, 10})));
    });
    // ---- constants (folded on the host) and opaque nodes ---------------------------------
    add("constants: iconv, cpool, imatmul, iewmul, enlarge of a weight", [&](graph& g) {
        value x = g.input("x", {1, 4, 6, 6});
        spec::op_params ic;
        ic[spec::iconv_p::co] = 4; ic[spec::iconv_p::ci] = 4; ic[spec::iconv_p::k] = 3;
        g.mark_output(g.conv2d(x, g.add1(op_kind::iconv, ic, {})));
        spec::op_params cp;
        cp[spec::cpool_p::c] = 4; cp[spec::cpool_p::kh] = 3; cp[spec::cpool_p::kw] = 3;
        g.mark_output(g.conv2d(x, g.add1(op_kind::cpool, cp, {})));
        spec::op_params im;
        im[spec::imatmul_p::n] = 6;
        g.mark_output(g.matmul(x, g.add1(op_kind::imatmul, im, {})));
        spec::op_params ie;
        ie[spec::iewmul_p::rank] = 2; ie[spec::iewmul_p::d0] = 6; ie[spec::iewmul_p::d0 + 1] = 6;
        g.mark_output(g.ewmul(x, g.add1(op_kind::iewmul, ie, {})));
        spec::op_params en;
        en[spec::enlarge_p::kh] = 3; en[spec::enlarge_p::kw] = 3;
        g.mark_output(g.conv2d(x, g.add1(op_kind::enlarge, en, {g.weight("w1", {4, 4, 1, 1}, rng)})));
    });
    add("opaque node between GPU operators", [&](graph& g) {
        value x = g.input("x", {2, 3, 4});
        value n = g.opaque(negate_op(), {g.relu(x)}, {shape{2, 3, 4}}, "negate")[0];
        g.mark_output(g.ewadd(n, x));
    });
    return cs;
}

// Graphs with parallel branches (several streams, events, shared memory
// across streams).
inline std::vector<case_graph> parallel_cases() {
    std::vector<case_graph> cs;
    std::mt19937_64 rng(99);
    {
        graph g;  // an inception-like block
        value x = g.input("x", {1, 8, 12, 12});
        value a = g.conv2d(x, g.weight("wa", {4, 8, 1, 1}, rng), {.act = relu});
        value b = g.conv2d(g.conv2d(x, g.weight("wb1", {4, 8, 1, 1}, rng), {.act = relu}), g.weight("wb2", {6, 4, 3, 3}, rng), {.act = relu});
        value c = g.conv2d(g.conv2d(x, g.weight("wc1", {2, 8, 1, 1}, rng), {.act = relu}), g.weight("wc2", {4, 2, 5, 5}, rng), {.act = relu});
        value d = g.conv2d(g.maxpool(x, {.kernel = 3, .stride = 1, .pad = same}), g.weight("wd", {3, 8, 1, 1}, rng), {.act = relu});
        value k = g.concat(1, {a, b, c, d});
        value y = g.conv2d(k, g.weight("wy", {8, 17, 3, 3}, rng), {.stride = 2, .act = relu});
        g.mark_output(g.avgpool(y, {.kernel = 3, .stride = 1, .pad = same}));
        cs.push_back({"inception block", std::move(g)});
    }
    {
        graph g;  // attention-like: three projections in parallel
        value x = g.input("x", {8, 16});
        value q = g.matmul(x, g.weight("wq", {16, 16}, rng));
        value k = g.matmul(x, g.weight("wk", {16, 16}, rng));
        value v = g.matmul(x, g.weight("wv", {16, 16}, rng));
        value s = g.softmax(g.matmul(q, g.transpose(k, {1, 0})), 1);
        value o = g.matmul(s, v, {.act = relu});
        g.mark_output(g.ewadd(o, x));
        cs.push_back({"attention", std::move(g)});
    }
    {
        graph g;  // many independent chains joined at the end
        value x = g.input("x", {4, 32});
        std::vector<value> outs;
        for (int b = 0; b < 6; ++b) {
            value h = x;
            for (int l = 0; l < 3; ++l) h = g.matmul(h, g.weight("w" + std::to_string(b) + std::to_string(l), {32, 32}, rng), {.act = relu});
            outs.push_back(h);
        }
        value s = outs[0];
        for (std::size_t b = 1; b < outs.size(); ++b) s = g.ewadd(s, outs[b]);
        g.mark_output(s);
        g.mark_output(outs[2]);
        cs.push_back({"six chains", std::move(g)});
    }
    return cs;
}

}  // namespace tsopt::test::cuda
