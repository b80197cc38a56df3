// Every operator of the specification on oneDNN equals the reference backend
// on random inputs (relative error <= 1e-4), one parameter family at a time.
// Operands are graph inputs, so the oneDNN lowering (not the constant
// folding) is what runs; a few cases use weights to cover compile-time
// weight reorders.
#include "check.hpp"

using namespace tsopt;
using test::check_against_reference;

namespace {

graph conv_graph(shape x, shape w, conv_options o, bool weight_constant = false, spec::layout out = spec::layout::nchw) {
    graph g;
    auto a = g.input("x", x);
    std::mt19937_64 rng(3);
    auto k = weight_constant ? g.weight("w", w, rng) : g.input("w", w);
    auto y = g.conv2d(a, k, o);
    g.nodes[static_cast<std::size_t>(y.node)].out_layout = out;
    g.mark_output(y);
    return g;
}

// Fails when a node silently fell back to the reference implementation.
void check_no_fallback(const graph& g) {
    backend::dnnl b({.persist = false});
    CHECK(b.stats(g).fallbacks == 0);
}

}  // namespace

TEST_CASE("dnnl conv2d: stride, padding, groups, dilation, fused activation") {
    struct cfg { const char* what; shape x, w; conv_options o; };
    const cfg cases[] = {
        {"3x3 same", {1, 8, 10, 10}, {16, 8, 3, 3}, {.pad = same}},
        {"3x3 valid", {2, 5, 9, 7}, {6, 5, 3, 3}, {.pad = valid}},
        {"stride 2 same", {1, 8, 11, 11}, {8, 8, 3, 3}, {.stride = 2, .pad = same}},
        {"stride 2x1 valid", {1, 4, 9, 9}, {4, 4, 3, 3}, {.stride_h = 2, .stride_w = 1, .pad = valid}},
        {"1x1", {1, 32, 7, 7}, {16, 32, 1, 1}, {}},
        {"5x5 relu", {1, 3, 12, 12}, {8, 3, 5, 5}, {.act = relu}},
        {"sigmoid", {1, 4, 6, 6}, {4, 4, 3, 3}, {.act = spec::activation::sigmoid}},
        {"tanh", {1, 4, 6, 6}, {4, 4, 3, 3}, {.act = spec::activation::tanh}},
        {"groups 4", {1, 16, 8, 8}, {32, 4, 3, 3}, {.act = relu}},
        {"depthwise", {1, 16, 9, 9}, {16, 1, 3, 3}, {.stride = 2}},
        {"depthwise multiplier 2", {1, 8, 6, 6}, {16, 1, 3, 3}, {}},
        {"dilation 2 same", {1, 4, 12, 12}, {8, 4, 3, 3}, {.pad = same, .dilation = 2}},
        {"dilation 3 valid", {1, 4, 14, 14}, {4, 4, 3, 3}, {.pad = valid, .dilation = 3}},
        {"1x3 kernel", {1, 4, 8, 8}, {4, 4, 1, 3}, {}},
    };
    for (const cfg& c : cases) {
        INFO(c.what);
        auto g = conv_graph(c.x, c.w, c.o);
        check_against_reference(g);
        check_no_fallback(g);
        check_against_reference(conv_graph(c.x, c.w, c.o, /*weight_constant=*/true));
    }
    INFO("NHWC output requested by the node");
    auto nhwc = conv_graph({1, 8, 6, 6}, {16, 8, 3, 3}, {.act = relu}, true, spec::layout::nhwc);
    check_against_reference(nhwc);
}

TEST_CASE("dnnl pooling: avg counts padding, max, stride, valid, fused activation") {
    for (auto k : {spec::op_kind::avgpool, spec::op_kind::maxpool})
        for (pool_options o : {pool_options{.kernel = 3, .stride = 1, .pad = same},
                               pool_options{.kernel = 3, .stride = 2, .pad = same},
                               pool_options{.kernel = 2, .stride = 2, .pad = valid},
                               pool_options{.kernel = 3, .stride = 1, .pad = same, .act = relu},
                               pool_options{.kernel = 5, .stride = 2, .pad = valid, .act = spec::activation::tanh}}) {
            INFO(spec::name(k), " kernel ", o.kernel, " stride ", o.stride, " pad ", int(o.pad), " act ", int(o.act));
            graph g;
            auto x = g.input("x", {2, 3, 9, 9});
            g.mark_output(g.pool(k, x, o, "pool"));
            check_against_reference(g);
            check_no_fallback(g);
        }
}

TEST_CASE("dnnl pooling of a 1x1 window over a row-major source is one strided copy, the pad and crops before it folded in") {
    // NASNet's factorized reduction: pad (0,1,0,1), crop the first row and
    // column (splits whose first parts nobody reads), avgpool(1, stride 2),
    // 1x1 conv: one copy of the relu's output. Beside it the same pool
    // straight on a convolution's output (oneDNN's pooling in the layout the
    // convolution left, where that is not row-major), and a max pool of a 1x1
    // window with stride 3 on the graph's input.
    std::mt19937_64 rng(41);
    graph g;
    auto x = g.input("x", {1, 8, 11, 11});
    auto padded = g.pad(g.relu(x), 0, 1, 0, 1);
    auto [row, below] = g.split(2, 1, padded);
    auto [col, inner] = g.split(3, 1, below);
    auto path2 = g.conv2d(g.avgpool(inner, {.kernel = 1, .stride = 2, .pad = valid}), g.weight("w2", {8, 8, 1, 1}, rng));
    auto c = g.conv2d(x, g.weight("w1", {32, 8, 1, 1}, rng));
    auto path1 = g.avgpool(c, {.kernel = 1, .stride = 2, .pad = valid});
    g.mark_output(path2);
    g.mark_output(path1);
    g.mark_output(g.maxpool(x, {.kernel = 1, .stride = 3, .pad = same}));
    backend::dnnl b({.persist = false});
    check_against_reference(g, 1e-5, 1, &b);
    check_no_fallback(g);
    const auto plan = b.compile(g);
    std::size_t subsamples = 0, folded = 0, pools = 0, moves = 0;
    for (const auto& st : plan->steps) {
        subsamples += st.what == "subsample (1x1 window)";
        folded += st.what == "pad, crops and subsample (1x1 window) as one copy";
        pools += st.what.find("pooling") != std::string::npos;
        moves += st.what.starts_with("split") || st.what == "pad" || st.what == "zero";
    }
    const bool conv_row_major = backend::dnnl_impl::is_plain(test::step_arg(test::own_step(*plan, c.node), DNNL_ARG_DST).md);
    CHECK(folded == 1);
    CHECK(subsamples == (conv_row_major ? 2 : 1));
    CHECK(pools == (conv_row_major ? 0 : 1));
    CHECK(moves == 0);  // no padded or cropped copy
}

TEST_CASE("dnnl pad, crops and a 1x1 pool: every chain folded or not equals the reference") {
    SUBCASE("crop the end of the columns, the start of the rows, max pool stride 1") {
        graph g;
        auto padded = g.pad(g.input("x", {2, 3, 7, 6}), 1, 2, 2, 1);
        auto [left, rest] = g.split(3, 6, padded);
        auto [top_row, body] = g.split(2, 2, left);
        g.mark_output(g.maxpool(body, {.kernel = 1, .stride = 1, .pad = valid}));
        check_against_reference(g);
        check_no_fallback(g);
    }
    SUBCASE("NASNet's chain after a convolution: channels-last where oneDNN leaves it so") {
        std::mt19937_64 rng(43);
        graph g;
        auto c = g.relu(g.conv2d(g.input("x", {2, 3, 11, 9}), g.weight("w", {24, 3, 1, 1}, rng)));
        auto [row, below] = g.split(2, 1, g.pad(c, 0, 1, 0, 1));
        auto [col, inner] = g.split(3, 1, below);
        g.mark_output(g.conv2d(g.avgpool(inner, {.kernel = 1, .stride = 2, .pad = valid}), g.weight("v", {8, 24, 1, 1}, rng)));
        check_against_reference(g);
        check_no_fallback(g);
        backend::dnnl b({.persist = false});
        const auto plan = b.compile(g);
        CHECK(std::count_if(plan->steps.begin(), plan->steps.end(),
                            [](const auto& st) { return st.what == "pad, crops and subsample (1x1 window) as one copy"; }) == 1);
    }
    SUBCASE("pad straight into the pool, stride 2 by 3") {
        graph h;
        auto padded = h.pad(h.input("x", {1, 4, 9, 10}), 2, 0, 1, 3);
        h.mark_output(h.avgpool(padded, {.kernel = 1, .stride = 3, .pad = valid}));
        check_against_reference(h);
        check_no_fallback(h);
    }
    SUBCASE("not folded: the padded value read twice, a crop read by both parts") {
        graph g;
        auto x = g.input("x", {1, 4, 8, 8});
        auto padded = g.pad(x, 0, 1, 0, 1);
        auto [a, b2] = g.split(2, 1, padded);
        g.mark_output(g.avgpool(b2, {.kernel = 1, .stride = 2, .pad = valid}));
        g.mark_output(g.relu(padded));
        auto padded2 = g.pad(x, 1, 1, 1, 1);
        auto [c1, c2] = g.split(3, 4, padded2);
        g.mark_output(g.maxpool(c2, {.kernel = 1, .stride = 2, .pad = valid}));
        g.mark_output(c1);
        check_against_reference(g);
        check_no_fallback(g);
        backend::dnnl b({.persist = false});
        const auto plan = b.compile(g);
        CHECK(std::none_of(plan->steps.begin(), plan->steps.end(),
                           [](const auto& st) { return st.what == "pad, crops and subsample (1x1 window) as one copy"; }));
    }
}

TEST_CASE("dnnl pooling runs the adds after it as post-ops (NASNet's cells)") {
    // add3 = avg(prev) + avg(prev), add2 = avg(cur) + prev: the second pool
    // of each sum takes the add (its other operand is computed by then).
    std::mt19937_64 rng(8);
    graph g;
    auto prev = g.relu(g.conv2d(g.input("x", {1, 16, 12, 12}), g.weight("w", {16, 16, 1, 1}, rng)));
    auto cur = g.relu(g.conv2d(prev, g.weight("v", {16, 16, 1, 1}, rng)));
    g.mark_output(g.concat(1, {g.ewadd(g.avgpool(prev), g.avgpool(prev, {.kernel = 3, .stride = 1, .pad = same})),
                               g.ewadd(g.avgpool(cur), prev), g.ewadd(cur, g.maxpool(cur))}));
    backend::dnnl b({.persist = false});
    check_against_reference(g, 1e-5, 1, &b);
    check_no_fallback(g);
    const auto plan = b.compile(g);
    std::size_t pools = 0, fused = 0;
    for (const auto& st : plan->steps)
        if (st.what.find("pooling") != std::string::npos) ++pools, fused += st.what.ends_with("+ 1 fused");
    CHECK(pools == 4);
    CHECK(fused == 3);
    CHECK(std::none_of(plan->steps.begin(), plan->steps.end(), [](const auto& st) { return st.what == "add"; }));
}

TEST_CASE("dnnl matmul: plain, batched, broadcast rank-2 operand, fused activation") {
    struct cfg { shape a, b; spec::activation act; bool b_weight; };
    const cfg cases[] = {
        {{5, 7}, {7, 3}, no_activation, false},
        {{5, 7}, {7, 3}, relu, true},
        {{4, 5, 7}, {4, 7, 3}, no_activation, false},
        {{4, 5, 7}, {7, 3}, spec::activation::sigmoid, false},
        {{5, 7}, {4, 7, 3}, no_activation, false},
        {{2, 1, 5, 6}, {3, 6, 4}, spec::activation::tanh, false},
        {{4, 5, 7}, {7, 3}, relu, true},
    };
    for (const cfg& c : cases) {
        INFO("a ", c.a.str(), " b ", c.b.str(), " act ", int(c.act), " weight ", c.b_weight);
        graph g;
        std::mt19937_64 rng(5);
        auto a = g.input("a", c.a);
        auto b = c.b_weight ? g.weight("b", c.b, rng) : g.input("b", c.b);
        g.mark_output(g.matmul(a, b, {.act = c.act}));
        check_against_reference(g);
        check_no_fallback(g);
    }
    // A linear layer: [1, seq, hidden] x weight + per-column bias (either
    // operand order), then relu: the bias is the matmul's own, the relu its
    // post-op (matmul_chain), one primitive.
    for (bool bias_first : {false, true}) {
        graph g;
        std::mt19937_64 rng(6);
        auto x = g.input("x", {1, 6, 16});
        auto m = g.matmul(x, g.weight("w", {16, 8}, rng));
        auto bias = g.weight("bias", {8}, rng);
        g.mark_output(g.relu(bias_first ? g.ewadd(bias, m) : g.ewadd(m, bias)));
        backend::dnnl b({.persist = false});
        check_against_reference(g, 1e-4, 1, &b);
        CHECK(b.stats(g).fused_ops == 2);
        CHECK(b.stats(g).primitives == 1);
        check_no_fallback(g);
    }
}

TEST_CASE("dnnl element-wise: relu, sigmoid, tanh, add/mul with broadcasting, smul") {
    for (auto k : {spec::op_kind::relu, spec::op_kind::sigmoid, spec::op_kind::tanh}) {
        INFO(spec::name(k));
        graph g;
        auto x = g.input("x", {2, 3, 5, 4});
        g.mark_output(g.add1(k, {}, {x}));
        check_against_reference(g);
        check_no_fallback(g);
    }
    struct cfg { shape a, b; bool fallback_ok; };
    const cfg cases[] = {
        {{2, 3, 4}, {2, 3, 4}, false}, {{2, 3, 4}, {4}, false},     {{2, 3, 4}, {3, 1}, false},
        {{1, 4}, {3, 2, 4}, false},    {{3, 1}, {1, 4}, true},       {{2, 8, 5, 5}, {1, 8, 1, 1}, false},
        {{1, 8, 1, 1}, {2, 8, 5, 5}, false},
    };
    for (auto k : {spec::op_kind::ewadd, spec::op_kind::ewmul})
        for (const cfg& c : cases) {
            INFO(spec::name(k), " ", c.a.str(), " with ", c.b.str());
            graph g;
            auto a = g.input("a", c.a);
            auto b = g.input("b", c.b);
            g.mark_output(g.add1(k, {}, {a, b}));
            check_against_reference(g);
            if (!c.fallback_ok) check_no_fallback(g);
        }
    SUBCASE("smul by a run-time scalar and by a constant scalar") {
        graph g;
        auto x = g.input("x", {2, 3, 4});
        auto s = g.input("s", {1});
        auto c = g.weight("c", tensor<float>({1}, {-2.5f}));
        g.mark_output(g.smul(x, s));
        g.mark_output(g.smul(x, c));
        check_against_reference(g);
        check_no_fallback(g);
    }
}

TEST_CASE("dnnl batchnorm equals x * scale[c] + shift[c]") {
    for (shape s : {shape{2, 6, 5, 5}, shape{3, 6}, shape{2, 6, 7}}) {
        INFO(s.str());
        graph g;
        std::mt19937_64 rng(9);
        auto x = g.input("x", s);
        auto sc = g.weight("scale", random_float({s[1]}, rng, -2, 2));
        auto sh = g.weight("shift", random_float({s[1]}, rng, -1, 1));
        g.mark_output(g.batchnorm(x, sc, sh));
        check_against_reference(g);
        check_no_fallback(g);
        graph h;  // run-time scale and shift
        auto hx = h.input("x", s);
        h.mark_output(h.batchnorm(hx, h.input("scale", {s[1]}), h.input("shift", {s[1]})));
        check_against_reference(h);
    }
}

// No step of g's plan on b runs one of oneDNN's reference kernels (ref:any,
// orders of magnitude slower than its jit ones).
static void check_no_reference_kernel(const backend::dnnl& b, const graph& g) {
    const auto plan = b.compile(g);  // held: the steps belong to it
    for (const auto& st : plan->steps) {
        INFO(st.what, " [", st.impl, "]");
        CHECK_FALSE(st.impl.starts_with("ref"));
    }
}

TEST_CASE("dnnl pooling asked for channels-last over a source in another layout runs no reference kernel") {
    // A layout move marks a pooling NHWC after a convolution oneDNN left
    // blocked (SqueezeNet's first max pool, read back from a written model):
    // oneDNN 3.2 pools from blocked into channels-last only in its reference
    // kernel, 77 ms instead of 0.1. The pooling keeps its source's layout.
    for (auto k : {spec::op_kind::maxpool, spec::op_kind::avgpool})
        for (std::int64_t c : {16, 96}) {
            INFO(spec::name(k), ", ", c, " channels");
            graph g;
            std::mt19937_64 rng(12);
            auto x = g.input("x", {1, 3, 35, 35});  // a stem: oneDNN leaves it blocked
            auto y = g.conv2d(x, g.weight("w", {c, 3, 7, 7}, rng), {.stride = 2, .pad = valid, .act = relu});
            auto p = g.pool(k, y, {.kernel = 3, .stride = 2, .pad = valid}, "pool");
            g.nodes[static_cast<std::size_t>(p.node)].out_layout = spec::layout::nhwc;
            g.mark_output(g.conv2d(p, g.weight("v", {8, c, 1, 1}, rng), {.pad = same}));
            backend::dnnl b({.persist = false});
            check_against_reference(g, 1e-4, 3, &b);
            check_no_reference_kernel(b, g);
        }
}

TEST_CASE("dnnl batchnorm after a convolution, in the layout oneDNN chose for it, runs no reference kernel") {
    // A convolution's output is blocked or channels-last; a binary multiply by
    // a per-channel operand over a blocked tensor has only oneDNN's reference
    // kernel (two orders of magnitude slower), where the lowering takes
    // batch normalization instead (binary.hpp).
    for (std::int64_t k : {16, 32, 48}) {
        INFO(k, " output channels");
        graph g;
        std::mt19937_64 rng(10);
        auto x = g.input("x", {1, 16, 14, 14});
        auto y = g.relu(g.conv2d(x, g.weight("w", {k, 16, 3, 3}, rng), {.pad = same}));  // the relu keeps the bn unfolded
        g.mark_output(g.batchnorm(y, g.weight("scale", random_float({k}, rng, -2, 2)), g.weight("shift", random_float({k}, rng, -1, 1))));
        backend::dnnl b({.persist = false});
        check_against_reference(g, 1e-4, 2, &b);
        check_no_reference_kernel(b, g);
    }
    // On a row-major input the binary multiply has its vector kernel and is
    // taken: oneDNN's channels-last batch normalization (nspc_bnorm) took 6x
    // as long on NASNet-Mobile.
    graph g;
    std::mt19937_64 rng(11);
    auto x = g.input("x", {1, 16, 14, 14});
    auto y = g.batchnorm(x, g.weight("scale", random_float({16}, rng, -2, 2)), g.weight("shift", random_float({16}, rng, -1, 1)));
    g.mark_output(y);
    backend::dnnl b({.persist = false});
    check_against_reference(g, 1e-5, 3, &b);
    const auto plan = b.compile(g);
    const auto bn = std::find_if(plan->steps.begin(), plan->steps.end(), [&](const auto& st) { return st.node == y.node; });
    REQUIRE(bn != plan->steps.end());
    CHECK(bn->what == "batchnorm (binary mul + add)");
}

TEST_CASE("dnnl data movement: concat, split, transpose, enlarge, pad, reshape, softmax") {
    SUBCASE("concat of three along each axis") {
        for (int ax = 0; ax < 4; ++ax) {
            INFO("axis ", ax);
            graph g;
            shape a{2, 3, 4, 5}, b = a, c = a;
            b[ax] = 1;
            c[ax] = 3;
            g.mark_output(g.concat(ax, {g.input("a", a), g.input("b", b), g.input("c", c)}));
            check_against_reference(g);
            check_no_fallback(g);
        }
    }
    SUBCASE("split along each axis") {
        for (int ax = 0; ax < 4; ++ax) {
            INFO("axis ", ax);
            graph g;
            auto [p, q] = g.split(ax, 1, g.input("x", {2, 3, 4, 5}));
            g.mark_output(p);
            g.mark_output(q);
            check_against_reference(g);
            check_no_fallback(g);
        }
    }
    SUBCASE("transpose permutations") {
        graph g;
        auto x2 = g.input("x2", {5, 7});
        auto x4 = g.input("x4", {2, 3, 4, 5});
        g.mark_output(g.transpose(x2, {1, 0}));
        g.mark_output(g.transpose(x4, {0, 2, 3, 1}));
        g.mark_output(g.transpose(x4, {3, 1, 0, 2}));
        g.mark_output(g.transpose(g.reshape(x4, {6, 4, 5}), {0, 2, 1}));
        check_against_reference(g);
        check_no_fallback(g);
    }
    SUBCASE("enlarge of a run-time kernel, and of a weight feeding a conv") {
        graph g;
        spec::op_params p;
        p[spec::enlarge_p::kh] = 5;
        p[spec::enlarge_p::kw] = 3;
        g.mark_output(g.add1(spec::op_kind::enlarge, p, {g.input("w", {4, 2, 1, 3})}));
        check_against_reference(g);
        check_no_fallback(g);
        graph h;
        std::mt19937_64 rng(1);
        p[spec::enlarge_p::kw] = 5;
        auto w = h.add1(spec::op_kind::enlarge, p, {h.weight("w", {4, 2, 3, 3}, rng)});
        h.mark_output(h.conv2d(h.input("x", {1, 2, 8, 8}), w));
        check_against_reference(h);
    }
    SUBCASE("pad, also of a blocked conv output") {
        graph g;
        std::mt19937_64 rng(2);
        auto x = g.input("x", {2, 3, 5, 6});
        g.mark_output(g.pad(x, 1, 2, 0, 3));
        auto c = g.conv2d(g.input("y", {1, 16, 6, 6}), g.weight("w", {16, 16, 3, 3}, rng));
        g.mark_output(g.pad(c, 2, 0, 1, 1));
        check_against_reference(g);
        check_no_fallback(g);
    }
    SUBCASE("reshape is a view, also of a blocked conv output") {
        graph g;
        std::mt19937_64 rng(2);
        auto c = g.conv2d(g.input("y", {1, 16, 4, 4}), g.weight("w", {16, 16, 3, 3}, rng), {.act = relu});
        auto r = g.reshape(c, {16, 16});
        g.mark_output(g.matmul(r, g.input("m", {16, 3})));
        g.mark_output(g.reshape(g.input("x", {2, 3, 4}), {4, 6}));
        check_against_reference(g);
        check_no_fallback(g);
    }
    SUBCASE("slice and overwrite (PET's correction kernels), also of a blocked conv output") {
        graph g;
        std::mt19937_64 rng(4);
        auto x = g.input("x", {2, 3, 5, 6});
        spec::op_params sp;  // x[0:2, 1:3, 2:5, 0:4]
        sp[spec::slice_p::b1] = 1, sp[spec::slice_p::e1] = 3, sp[spec::slice_p::b2] = 2, sp[spec::slice_p::e3] = 4;
        g.mark_output(g.add1(spec::op_kind::slice, sp, {x}));
        spec::op_params sm;  // a matrix's rows 1..2 (end 0: to the extent)
        sm[spec::slice_p::b0] = 1, sm[spec::slice_p::e0] = 3;
        g.mark_output(g.add1(spec::op_kind::slice, sm, {g.input("m", {4, 7})}));
        auto c = g.conv2d(g.input("y", {1, 16, 6, 6}), g.weight("w", {16, 16, 3, 3}, rng), {.act = relu});
        g.mark_output(g.add1(spec::op_kind::slice, sp, {c}));
        spec::op_params ch;  // channels 4..11 of a batch-1 tensor: a view, read by a relu and as an output
        ch[spec::slice_p::b1] = 4, ch[spec::slice_p::e1] = 12;
        auto part = g.add1(spec::op_kind::slice, ch, {c});
        g.mark_output(part);
        g.mark_output(g.relu(part));
        spec::op_params rows;  // rows 2..4 of each channel: not contiguous, a reorder
        rows[spec::slice_p::b2] = 2, rows[spec::slice_p::e2] = 5;
        g.mark_output(g.add1(spec::op_kind::slice, rows, {c}));
        spec::op_params op;  // patch [1, 2, 3, 4] at (1, 0, 2, 1)
        op[spec::overwrite_p::o0] = 1, op[spec::overwrite_p::o2] = 2, op[spec::overwrite_p::o3] = 1;
        g.mark_output(g.add1(spec::op_kind::overwrite, op, {x, g.input("p", {1, 2, 3, 4})}));
        spec::op_params oc;  // into the conv output: patch [1, 4, 2, 2] at (0, 8, 3, 4)
        oc[spec::overwrite_p::o1] = 8, oc[spec::overwrite_p::o2] = 3, oc[spec::overwrite_p::o3] = 4;
        g.mark_output(g.add1(spec::op_kind::overwrite, oc, {c, g.input("q", {1, 4, 2, 2})}));
        check_against_reference(g);
        check_no_fallback(g);
    }
    SUBCASE("softmax along each axis") {
        for (int ax = 0; ax < 3; ++ax) {
            INFO("axis ", ax);
            graph g;
            g.mark_output(g.softmax(g.input("x", {3, 4, 5}), ax));
            check_against_reference(g);
            check_no_fallback(g);
        }
    }
}

TEST_CASE("dnnl constants are folded once and give the reference values") {
    graph g;
    spec::op_params cp;
    cp[spec::cpool_p::c] = 4;
    cp[spec::cpool_p::kh] = cp[spec::cpool_p::kw] = 3;
    auto k = g.add1(spec::op_kind::cpool, cp, {});
    auto x = g.input("x", {1, 4, 6, 6});
    g.mark_output(g.conv2d(x, k));                           // conv with cpool == avgpool
    spec::op_params ip;
    ip[spec::imatmul_p::n] = 6;
    g.mark_output(g.matmul(g.reshape(x, {24, 6}), g.add1(spec::op_kind::imatmul, ip, {})));
    spec::op_params ic;
    ic[spec::iconv_p::co] = ic[spec::iconv_p::ci] = 4;
    ic[spec::iconv_p::k] = 3;
    g.mark_output(g.conv2d(x, g.add1(spec::op_kind::iconv, ic, {})));
    spec::op_params ie;
    ie[spec::iewmul_p::rank] = 4;
    ie[spec::iewmul_p::d0] = 1; ie[spec::iewmul_p::d0 + 1] = 4; ie[spec::iewmul_p::d0 + 2] = 6; ie[spec::iewmul_p::d0 + 3] = 6;
    g.mark_output(g.ewmul(x, g.add1(spec::op_kind::iewmul, ie, {})));
    check_against_reference(g);
    backend::dnnl b({.persist = false});
    auto st = b.stats(g);
    CHECK(st.fallbacks == 0);
}

TEST_CASE("dnnl falls back to the reference for opaque nodes and refused configurations, never wrong") {
    graph g;
    auto x = g.input("x", {2, 3});
    auto op = std::make_shared<const opaque_op>(opaque_op{"Negate", "", "", 0});
    auto y = g.opaque(op, {x}, {shape{2, 3}}, "neg")[0];
    g.mark_output(g.relu(y));
    backend::dnnl b({.persist = false});
    auto in = backend::random_inputs(g, 3);
    SUBCASE("no implementation: an error naming the node") {
        CHECK_THROWS_WITH_AS(b.execute(g, in), doctest::Contains("'neg'"), tsopt::error);
    }
    SUBCASE("registered implementation") {
        auto neg = [](const node&, std::span<const tensor<float>* const> a) {
            tensor<float> t = *a[0];
            for (auto& v : t.data) v = -v;
            return std::vector<tensor<float>>{t};
        };
        b.opaque_impls["Negate"] = neg;
        backend::reference r;
        r.opaque_impls["Negate"] = neg;
        auto got = b.execute(g, in);
        CHECK(relative_error(got[0], r.execute(g, in)[0]) == 0);
        CHECK(b.stats(g).fallbacks == 1);
    }
    SUBCASE("both binary operands broadcast: reference fallback, right result") {
        graph h;
        h.mark_output(h.ewadd(h.input("a", {3, 1}), h.input("b", {1, 4})));
        check_against_reference(h);
    }
}

TEST_CASE("dnnl execute checks its inputs") {
    graph g;
    g.mark_output(g.relu(g.input("x", {2, 3})));
    backend::dnnl b({.persist = false});
    std::vector<tensor<float>> wrong{tensor<float>(shape{3, 2})};
    CHECK_THROWS_WITH_AS(b.execute(g, wrong), doctest::Contains("'x'"), tsopt::error);
}

TEST_CASE("dnnl x + x and x * x after a pooling or a convolution run as its post-ops") {
    // NASNet's cells add a pool to itself once rewrite::merge_duplicates has
    // merged its twin; 2x and x^2 are exact as eltwise post-ops.
    std::mt19937_64 rng(10);
    graph g;
    auto x = g.input("x", {1, 16, 12, 12});
    auto c = g.conv2d(x, g.weight("w", {16, 16, 1, 1}, rng));
    auto p = g.avgpool(g.relu(c));
    auto q = g.conv2d(x, g.weight("v", {16, 16, 1, 1}, rng));
    g.mark_output(g.concat(1, {g.ewadd(p, p), g.ewmul(q, q)}));
    backend::dnnl b({.persist = false});
    check_against_reference(g, 1e-5, 1, &b);
    check_no_fallback(g);
    const auto plan = b.compile(g);
    CHECK(b.stats(g).fused_ops >= 2);
    CHECK(std::none_of(plan->steps.begin(), plan->steps.end(), [](const auto& st) { return st.what == "add" || st.what == "mul"; }));
}

TEST_CASE("dnnl pooling post-ops in every layout: full-size and per-channel operands") {
    // oneDNN 3.2's pooling adds a full-size post-op operand wrongly when it
    // reads row-major NCHW, or when the operand's layout is not the output's
    // (pool.hpp, post_chain.hpp): a NASNet candidate whose three 1x1
    // convolutions were merged reached its pools and adds through a split,
    // row-major, and computed 1.3 % off. Pooling sources: a graph input
    // (row-major), a convolution's result (oneDNN's layout: blocked or
    // channels-last), one forced channels-last. Other operands: another pool
    // of the source, the source itself, a per-channel input, then computed
    // elsewhere: row-major, a convolution's result, a split's part.
    std::mt19937_64 rng(9);
    for (int source = 0; source < 3; ++source)
        for (int C : {8, 17, 64})
            for (int other = 0; other < 6; ++other) {
                INFO("source ", source, ", channels ", C, ", other operand ", other);
                graph g;
                // Operands computed elsewhere come first, so that they are
                // computed before the pooling (the lowering's topological
                // order is depth-first from the first input).
                const auto y = g.input("y", {1, C, 14, 14});
                value o = other == 3   ? g.relu(y)
                          : other == 4 ? g.conv2d(y, g.weight("v", {C, C, 1, 1}, rng))
                                       : g.relu(g.split(1, C, g.input("z", {1, 2 * C, 14, 14})).first);
                auto x = g.input("x", {1, C, 14, 14});
                value r = g.relu(x);
                if (source > 0) {
                    r = g.conv2d(x, g.weight("w", {C, C, 1, 1}, rng), {.act = spec::activation::relu});
                    if (source == 2) g.nodes[static_cast<std::size_t>(r.node)].out_layout = spec::layout::nhwc;
                }
                if (other == 0) o = g.avgpool(r);
                if (other == 1) o = r;
                if (other == 2) o = g.input("b", {C, 1, 1});
                g.mark_output(g.ewadd(o, g.maxpool(r)));
                backend::dnnl b({.persist = false});
                check_against_reference(g, 1e-5, 1, &b);
                check_no_fallback(g);
                const auto plan = b.compile(g);
                const bool fused = std::any_of(plan->steps.begin(), plan->steps.end(),
                                               [](const auto& st) { return st.what == "max pooling + 1 fused"; });
                if (source == 0 || other == 3 || other == 5) CHECK_FALSE(fused);  // the add is a step of its own
                else if (other < 3) CHECK(fused);
            }
}
