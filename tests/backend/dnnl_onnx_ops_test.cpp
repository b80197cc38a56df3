// The oneDNN lowerings of opaque ONNX operators (backend/dnnl/onnx_ops.hpp)
// equal their host implementations (io/onnx/reference_ops.hpp, themselves
// checked against ONNX Runtime in tests/io) on random inputs, and run
// natively (no host fallback) where they claim to; configurations they do
// not handle still run, on the host.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "tsopt/backend/dnnl/onnx_ops.hpp"
#include "tsopt/io/onnx/reference_ops.hpp"

using namespace tsopt;
namespace pb = tsopt::onnx::pb;

namespace {

struct blob {
    pb::NodeProto n;
    blob& i(const std::string& name, std::int64_t v) { return add(name, pb::AttributeProto::INT).set_i(v), *this; }
    blob& f(const std::string& name, float v) { return add(name, pb::AttributeProto::FLOAT).set_f(v), *this; }
    blob& s(const std::string& name, const std::string& v) { return add(name, pb::AttributeProto::STRING).set_s(v), *this; }
    blob& ints(const std::string& name, std::vector<std::int64_t> v) {
        auto& a = add(name, pb::AttributeProto::INTS);
        for (auto x : v) a.add_ints(x);
        return *this;
    }
    // A constant integer input the graph cannot carry (e.g. ReduceSum's axes),
    // as the importer stores it.
    blob& int_input(int slot, std::vector<std::int64_t> v) {
        auto& a = add(std::string(tsopt::onnx::detail::input_attr_prefix) + std::to_string(slot), pb::AttributeProto::TENSOR);
        tsopt::onnx::detail::fill_ints(*a.mutable_t(), "c", v);
        return *this;
    }
    pb::AttributeProto& add(const std::string& name, pb::AttributeProto::AttributeType t) {
        auto* a = n.add_attribute();
        a->set_name(name);
        a->set_type(t);
        return *a;
    }
};

value opaque(graph& g, const std::string& type, std::vector<value> in, shape out, const blob& b = {}) {
    auto op = std::make_shared<opaque_op>();
    op->type = type;
    op->attributes = b.n.SerializeAsString();
    op->attribute_count = b.n.attribute_size();
    return g.opaque(std::move(op), std::move(in), {out}, type)[0];
}

value scalar(graph& g, const std::string& name, float v) { return g.weight(name, tensor<float>(shape{1}, v)); }

// g on oneDNN (ONNX lowerings + host implementations) against the host
// implementations on the reference backend; `native`: opaque nodes that must
// not fall back to the host.
void check(const graph& g, std::size_t fallbacks = 0, double tol = 1e-5) {
    backend::reference ref;
    tsopt::onnx::install_reference_ops(ref);
    backend::dnnl b({.persist = false});
    for (const auto& [type, fn] : ref.opaque_impls) b.opaque_impls[type] = fn;
    tsopt::onnx::install_dnnl_lowerings(b);
    auto in = backend::random_inputs(g, 7);
    auto want = ref.execute(g, in);
    auto got = b.execute(g, in);
    REQUIRE(got.size() == want.size());
    for (std::size_t k = 0; k < got.size(); ++k) {
        REQUIRE(got[k].shape == want[k].shape);
        CHECK(relative_error(got[k], want[k]) <= tol);
    }
    CHECK(b.stats(g).fallbacks == fallbacks);
}

}  // namespace

TEST_CASE("element-wise ONNX operators run as oneDNN eltwise") {
    const shape s{1, 8, 5, 5};
    auto unary = [&](const std::string& type, const blob& b = {}) {
        INFO(type);
        graph g;
        g.mark_output(opaque(g, type, {g.input("x", s)}, s, b));
        check(g);
    };
    unary("Exp");
    unary("Neg");
    unary("Erf");
    unary("HardSwish");
    unary("HardSigmoid", blob{}.f("alpha", 0.3f).f("beta", 0.4f));
    unary("LeakyRelu", blob{}.f("alpha", 0.1f));
    unary("Gelu");
    unary("Gelu", blob{}.s("approximate", "tanh"));
    {
        graph g;  // sqrt and log of |x|: the domain where both are defined
        auto a = opaque(g, "Abs", {g.input("x", s)}, s);
        g.mark_output(opaque(g, "Sqrt", {a}, s));
        g.mark_output(opaque(g, "Log", {opaque(g, "Exp", {a}, s)}, s));
        check(g);
    }
    SUBCASE("Clip: both bounds, one bound, the opset-6 attributes") {
        graph g;
        auto x = g.input("x", s);
        g.mark_output(opaque(g, "Clip", {x, scalar(g, "lo", -0.2f), scalar(g, "hi", 0.3f)}, s));
        g.mark_output(opaque(g, "Clip", {x, scalar(g, "lo2", 0.f)}, s));
        g.mark_output(opaque(g, "Clip", {x}, s, blob{}.f("min", -0.1f).f("max", 0.1f)));
        check(g);
    }
    SUBCASE("Pow by a constant natively (negative bases with an integer exponent too), by a run-time exponent on the host") {
        graph g;
        auto x = g.input("x", s);
        g.mark_output(opaque(g, "Pow", {x, scalar(g, "two", 2.f)}, s));
        g.mark_output(opaque(g, "Pow", {opaque(g, "Abs", {x}, s), scalar(g, "half", 0.5f)}, s));
        g.mark_output(opaque(g, "Pow", {x, scalar(g, "three", 3.f)}, s));
        g.mark_output(opaque(g, "Pow", {opaque(g, "Abs", {x}, s), g.input("e", {1})}, s));
        check(g, 1);
    }
    SUBCASE("Clip with a bound computed at run time runs on the host") {
        graph g;
        auto x = g.input("x", s);
        g.mark_output(opaque(g, "Clip", {x, g.input("lo", {1})}, s));
        check(g, 1);
    }
}

TEST_CASE("an operator of another domain reusing a standard name is never lowered with the standard semantics") {
    graph g;
    auto op = std::make_shared<opaque_op>();
    op->type = "Clip";
    op->domain = "com.example";
    g.mark_output(g.opaque(std::move(op), {g.input("x", {1, 4})}, {{1, 4}}, "custom")[0]);
    backend::dnnl b({.persist = false});
    tsopt::onnx::install_dnnl_lowerings(b);
    CHECK_THROWS_AS(b.execute(g, backend::random_inputs(g, 1)), tsopt::error);  // no implementation of com.example.Clip
}

TEST_CASE("Sub and Div run as oneDNN binary; a broadcast first operand on the host") {
    graph g;
    auto x = g.input("x", {1, 8, 5, 5});
    std::mt19937_64 rng(4);
    auto c = g.weight("c", tensor<float>(shape{8, 1, 1}, 2.5f));
    g.mark_output(opaque(g, "Sub", {x, g.weight("b", {8, 1, 1}, rng)}, {1, 8, 5, 5}));
    g.mark_output(opaque(g, "Div", {x, c}, {1, 8, 5, 5}));
    g.mark_output(opaque(g, "Sub", {c, x}, {1, 8, 5, 5}));
    check(g, 1);
}

TEST_CASE("GELU as exporters write it (x / sqrt 2, Erf, +1, *x, *0.5) runs as one oneDNN eltwise") {
    for (bool half_first : {false, true}) {
        INFO("0.5 first: ", half_first);
        graph g;
        const shape s{1, 6, 32};
        auto x = g.input("x", s);
        auto e = opaque(g, "Erf", {opaque(g, "Div", {x, scalar(g, "sqrt2", std::sqrt(2.f))}, s)}, s);
        auto p = g.ewadd(e, scalar(g, "one", 1.f));
        auto h = scalar(g, "half", 0.5f);
        g.mark_output(half_first ? g.ewmul(x, g.ewmul(h, p)) : g.ewmul(g.ewmul(x, p), h));
        check(g);
        backend::dnnl b({.persist = false});
        tsopt::onnx::install_dnnl_lowerings(b);
        CHECK(b.stats(g).fused_ops == 4);
        CHECK(b.stats(g).primitives == 1);
    }
    // A divisor other than sqrt(2), or an intermediate read elsewhere: not one
    // GELU eltwise (the adds and multiplies after Erf may still run as its
    // post-ops: post_chain.hpp, fused_elementwise), still exact.
    graph g;
    const shape s{1, 6, 32};
    auto x = g.input("x", s);
    auto e = opaque(g, "Erf", {opaque(g, "Div", {x, scalar(g, "three", 3.f)}, s)}, s);
    g.mark_output(g.ewmul(g.ewmul(x, g.ewadd(e, scalar(g, "one", 1.f))), scalar(g, "half", 0.5f)));
    auto x2 = g.input("x2", s);
    auto e2 = opaque(g, "Erf", {opaque(g, "Div", {x2, scalar(g, "sqrt2", std::sqrt(2.f))}, s)}, s);
    g.mark_output(e2);
    g.mark_output(g.ewmul(g.ewmul(x2, g.ewadd(e2, scalar(g, "one2", 1.f))), scalar(g, "half2", 0.5f)));
    check(g);
    backend::dnnl b({.persist = false});
    tsopt::onnx::install_dnnl_lowerings(b);
    const auto plan = b.compile(g);
    CHECK(std::none_of(plan->steps.begin(), plan->steps.end(), [](const auto& st) { return st.what.starts_with("gelu"); }));
}

TEST_CASE("a linear layer's GELU and a residual add run as post-ops of the products (matmul_chain)") {
    // BERT's feed-forward block as exported: x W1 + b1 -> GELU (five nodes)
    // -> W2 + b2 -> + x. Rows 16 (an inner product on AVX2) and 160 (a
    // matmul there); a matmul on AVX-512 either way.
    for (std::int64_t rows : {16, 160}) {
        INFO("rows: ", rows);
        std::mt19937_64 rng(3);
        graph g;
        const shape s{1, rows, 64}, wide{1, rows, 128};
        auto x = g.input("x", s);
        auto h = g.ewadd(g.matmul(x, g.weight("w1", {64, 128}, rng)), g.weight("b1", {128}, rng));
        auto e = opaque(g, "Erf", {opaque(g, "Div", {h, scalar(g, "sqrt2", std::sqrt(2.f))}, wide)}, wide);
        auto gelu = g.ewmul(g.ewmul(h, g.ewadd(e, scalar(g, "one", 1.f))), scalar(g, "half", 0.5f));
        auto y = g.ewadd(g.ewadd(g.matmul(gelu, g.weight("w2", {128, 64}, rng)), g.weight("b2", {64}, rng)), x);
        g.mark_output(y);
        check(g, 0, 1e-4);
        backend::dnnl b({.persist = false});
        tsopt::onnx::install_dnnl_lowerings(b);
        const auto plan = b.compile(g);
        // Two products, each with its bias; the first runs GELU, the second
        // the residual add: nothing else.
        CHECK(plan->stats.primitives == 2);
        CHECK(plan->stats.fused_ops == 8);
        for (const auto& st : plan->steps) CHECK(st.what.ends_with("+ bias + 1 fused"));
    }
    // The GELU's x also read by a third node: GELU stays a step of its own,
    // after the product.
    graph g;
    std::mt19937_64 rng(4);
    const shape s{1, 16, 64};
    auto h = g.matmul(g.input("x", {1, 16, 32}), g.weight("w", {32, 64}, rng));
    auto e = opaque(g, "Erf", {opaque(g, "Div", {h, scalar(g, "sqrt2", std::sqrt(2.f))}, s)}, s);
    g.mark_output(g.ewmul(g.ewmul(h, g.ewadd(e, scalar(g, "one", 1.f))), scalar(g, "half", 0.5f)));
    g.mark_output(g.relu(h));
    check(g, 0, 1e-4);
    backend::dnnl b({.persist = false});
    tsopt::onnx::install_dnnl_lowerings(b);
    const auto plan = b.compile(g);
    CHECK(std::any_of(plan->steps.begin(), plan->steps.end(), [](const auto& st) { return st.what.starts_with("gelu"); }));
}

TEST_CASE("attention scores: the scaling and the mask after a batched product run as its post-ops") {
    graph g;
    auto scores = g.matmul(g.input("q", {1, 2, 16, 8}), g.input("k", {1, 2, 8, 16}));
    auto scaled = g.ewmul(scores, scalar(g, "scale", 0.35f));
    g.mark_output(g.ewadd(scaled, g.input("mask", {1, 1, 1, 16})));
    check(g, 0, 1e-4);
    backend::dnnl b({.persist = false});
    const auto plan = b.compile(g);
    CHECK(plan->stats.primitives == 1);
    CHECK(plan->stats.fused_ops == 2);
}

TEST_CASE("ReduceMean / ReduceSum run as oneDNN reduction") {
    const shape s{2, 6, 16};
    SUBCASE("axes attribute, keepdims") {
        graph g;
        g.mark_output(opaque(g, "ReduceMean", {g.input("x", s)}, {2, 6, 1}, blob{}.ints("axes", {-1})));
        check(g);
    }
    SUBCASE("keepdims=0 drops the axis") {
        graph g;
        g.mark_output(opaque(g, "ReduceMean", {g.input("x", s)}, {2, 16}, blob{}.ints("axes", {1}).i("keepdims", 0)));
        check(g);
    }
    SUBCASE("axes as a constant input (opset 13 ReduceSum)") {
        graph g;
        g.mark_output(opaque(g, "ReduceSum", {g.input("x", s)}, {1, 6, 1}, blob{}.int_input(1, {0, 2})));
        check(g);
    }
}

TEST_CASE("LayerNormalization over the last axis runs as oneDNN layer normalization") {
    graph g;
    std::mt19937_64 rng(5);
    auto x = g.input("x", {1, 6, 32});
    g.mark_output(opaque(g, "LayerNormalization", {x, g.weight("gamma", {32}, rng), g.weight("beta", {32}, rng)}, {1, 6, 32},
                         blob{}.f("epsilon", 1e-5f)));
    g.mark_output(opaque(g, "LayerNormalization", {x, g.weight("gamma2", {32}, rng)}, {1, 6, 32}));
    // Over the last two axes: not oneDNN's, so on the host.
    g.mark_output(opaque(g, "LayerNormalization", {x, g.weight("gamma3", {6, 32}, rng)}, {1, 6, 32}, blob{}.i("axis", 1)));
    check(g, 1, 1e-4);
}

TEST_CASE("ONNX pooling with ceil_mode, explicit pads and count_include_pad runs as oneDNN pooling") {
    const shape s{1, 4, 14, 14};
    SUBCASE("MaxPool ceil_mode (GoogLeNet's): the overhang is right padding") {
        graph g;
        g.mark_output(opaque(g, "MaxPool", {g.input("x", s)}, {1, 4, 7, 7},
                             blob{}.ints("kernel_shape", {3, 3}).ints("strides", {2, 2}).i("ceil_mode", 1)));
        check(g);
    }
    SUBCASE("MaxPool with asymmetric pads and dilations") {
        graph g;
        g.mark_output(opaque(g, "MaxPool", {g.input("x", s)}, {1, 4, 11, 12},
                             blob{}.ints("kernel_shape", {3, 3}).ints("pads", {0, 1, 1, 1}).ints("dilations", {2, 2})));
        check(g);
    }
    SUBCASE("AveragePool, padding excluded, ceil_mode") {
        graph g;
        g.mark_output(opaque(g, "AveragePool", {g.input("x", s)}, {1, 4, 8, 8},
                             blob{}.ints("kernel_shape", {3, 3}).ints("strides", {2, 2}).ints("pads", {1, 1, 1, 1}).i("ceil_mode", 1)));
        check(g);
    }
    SUBCASE("AveragePool counting the explicit pads") {
        graph g;
        g.mark_output(opaque(g, "AveragePool", {g.input("x", s)}, {1, 4, 14, 14},
                             blob{}.ints("kernel_shape", {3, 3}).ints("pads", {1, 1, 1, 1}).i("count_include_pad", 1)));
        check(g);
    }
    SUBCASE("AveragePool counting pads with a ceil_mode overhang: on the host") {
        graph g;
        g.mark_output(opaque(g, "AveragePool", {g.input("x", s)}, {1, 4, 7, 7},
                             blob{}.ints("kernel_shape", {3, 3}).ints("strides", {2, 2}).i("ceil_mode", 1).i("count_include_pad", 1)));
        check(g, 1);
    }
}

TEST_CASE("an ONNX operator that is one eltwise runs as the post-op of the convolution before it") {
    std::mt19937_64 rng(11);
    // MobileNetV2's conv -> Clip(0, 6), with its bias; HardSwish; LeakyRelu
    // after an activation-free conv; and a Clip whose bound is computed at run
    // time, which is no eltwise and stays a step of its own.
    auto conv_then = [&](const std::string& type, std::vector<float> bounds, const blob& b = {}) {
        INFO(type);
        graph g;
        auto x = g.input("x", {1, 8, 6, 6});
        auto c = g.ewadd(g.conv2d(x, g.weight("w", {16, 8, 3, 3}, rng)), g.weight("bias", {16, 1, 1}, rng));
        std::vector<value> in{c};
        for (std::size_t k = 0; k < bounds.size(); ++k) in.push_back(scalar(g, "bound" + std::to_string(k), bounds[k]));
        g.mark_output(opaque(g, type, in, g.shape_of(c), b));
        check(g, 0, 1e-4);
        backend::dnnl d({.persist = false});
        tsopt::onnx::install_dnnl_lowerings(d);
        return d.stats(g);
    };
    for (auto [type, bounds] : std::vector<std::pair<std::string, std::vector<float>>>{{"Clip", {0.f, 6.f}}, {"HardSwish", {}}}) {
        auto st = conv_then(type, bounds);
        CHECK(st.primitives == 1);
        CHECK(st.fused_ops == 2);  // the bias and the eltwise
    }
    CHECK(conv_then("LeakyRelu", {}, blob{}.f("alpha", 0.3f)).primitives == 1);

    graph g;
    auto x = g.input("x", {1, 8, 6, 6});
    auto hi = g.input("hi", {1});
    auto c = g.conv2d(x, g.weight("w", {16, 8, 3, 3}, rng));
    g.mark_output(opaque(g, "Clip", {c, scalar(g, "lo", 0.f), hi}, g.shape_of(c)));
    check(g, 1);  // the run-time bound: on the host
}

TEST_CASE("a zero Pad read only by an average pool is the pool's padding (PyTorch's avg_pool2d(padding=1) export)") {
    std::mt19937_64 rng(12);
    for (bool blocked : {false, true}) {
        INFO((blocked ? "after a convolution (blocked layout)" : "on a graph input"));
        graph g;
        auto x = g.input("x", {1, 16, 9, 9});
        value in = blocked ? g.relu(g.conv2d(x, g.weight("w", {16, 16, 1, 1}, rng))) : x;
        auto padded = g.pad(in, 1, 2, 1, 0);  // top, bottom, left, right
        g.mark_output(g.add1(spec::op_kind::avgpool, spec::op_params{3, 3, 1, 1, 0, 0}, {padded}, "pool"));
        check(g, 0, 1e-5);
        backend::dnnl d({.persist = false});
        auto st = d.stats(g);
        CHECK(st.primitives == (blocked ? 2u : 1u));  // no pad step, no zero fill
    }
    // The pad read twice is made once, and both readers run as before.
    graph g;
    auto x = g.input("x", {1, 16, 9, 9});
    auto padded = g.pad(x, 1, 1, 1, 1);
    g.mark_output(g.add1(spec::op_kind::avgpool, spec::op_params{3, 3, 1, 1, 0, 0}, {padded}, "pool"));
    g.mark_output(g.relu(padded));
    check(g, 0, 1e-5);
}
