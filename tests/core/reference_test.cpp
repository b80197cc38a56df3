// The reference executor against results worked out by hand, its input
// checks, and opaque operators with and without an implementation.
#include <doctest/doctest.h>

#include "tsopt/backend/reference/executor.hpp"

using namespace tsopt;
using doctest::Contains;

namespace {
tensor<float> make(shape s, std::vector<float> v) { return tensor<float>(s, std::move(v)); }
}  // namespace

TEST_CASE("reference executor: dense layer with bias and relu, by hand") {
    // x = [1, -2], W = [[1, 2], [3, 4]]: xW = [1 - 6, 2 - 8] = [-5, -6];
    // + b [10, 1] = [5, -5]; relu = [5, 0]; the pre-activation is output 2.
    graph g;
    value x = g.input("x", shape{1, 2});
    value w = g.weight("W", make(shape{2, 2}, {1, 2, 3, 4}));
    value b = g.weight("b", make(shape{2}, {10, 1}));
    value pre = g.ewadd(g.matmul(x, w, {}, "xW"), b, "pre");
    g.mark_output(g.relu(pre, "y"));
    g.mark_output(pre);
    g.mark_output(x);  // an input can be an output too
    std::vector<tensor<float>> in{make(shape{1, 2}, {1, -2})};
    auto out = backend::reference{}.execute(g, in);
    REQUIRE(out.size() == 3);
    CHECK(out[0] == make(shape{1, 2}, {5, 0}));
    CHECK(out[1] == make(shape{1, 2}, {5, -5}));
    CHECK(out[2] == in[0]);
}

TEST_CASE("reference executor: conv, max pool, split and concat, by hand") {
    // x = 1..9 as 3x3; kernel [[1, 0], [0, -1]] (valid): y[i][j] = x[i][j] - x[i+1][j+1] = -4
    // for all four outputs; the second kernel [[0, 1], [0, 0]] picks x[i][j+1]: [[2, 3], [5, 6]].
    graph g;
    value x = g.input("x", shape{1, 1, 3, 3});
    value w = g.weight("w", make(shape{2, 1, 2, 2}, {1, 0, 0, -1, 0, 1, 0, 0}));
    value y = g.conv2d(x, w, {.pad = valid}, "conv");
    auto [d, p] = g.split(1, 1, y, "split");                             // [1,1,2,2] each
    value m = g.maxpool(p, {.kernel = 2, .stride = 1, .pad = valid}, "pool");  // max(2,3,5,6) = 6
    value cat = g.concat(1, {p, d}, "cat");                               // channels swapped
    g.mark_output(cat);
    g.mark_output(m);
    auto out = backend::reference{}.execute(g, std::vector<tensor<float>>{make(shape{1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9})});
    CHECK(out[0] == make(shape{1, 2, 2, 2}, {2, 3, 5, 6, -4, -4, -4, -4}));
    CHECK(out[1] == make(shape{1, 1, 1, 1}, {6}));
}

TEST_CASE("reference executor: batched attention-style matmul, transpose and softmax, by hand") {
    // q = [[1, 0], [0, 1]] (one head), k^T = identity: scores = q; softmax rows of
    // [[1, 0], [0, 1]] = [[e/(e+1), 1/(e+1)], [1/(e+1), e/(e+1)]].
    graph g;
    value q = g.input("q", shape{1, 2, 2});
    value k = g.input("k", shape{1, 2, 2});
    value s = g.softmax(g.matmul(q, g.transpose(k, {0, 2, 1}, "kT"), {}, "scores"), 2, "probs");
    g.mark_output(s);
    auto eye = make(shape{1, 2, 2}, {1, 0, 0, 1});
    auto out = backend::reference{}.execute(g, std::vector<tensor<float>>{eye, eye});
    const float e = std::exp(1.f), hi = e / (e + 1), lo = 1 / (e + 1);
    CHECK(out[0].at(0, 0, 0) == doctest::Approx(hi));
    CHECK(out[0].at(0, 0, 1) == doctest::Approx(lo));
    CHECK(out[0].at(0, 1, 0) == doctest::Approx(lo));
    CHECK(out[0].at(0, 1, 1) == doctest::Approx(hi));
}

TEST_CASE("reference executor: wrong input count or shape is refused, naming the input") {
    graph g;
    value a = g.input("a", shape{2, 3});
    value b = g.input("b", shape{2, 3});
    g.mark_output(g.ewadd(a, b, "sum"));
    backend::reference ref;
    std::vector<tensor<float>> one{tensor<float>(shape{2, 3})};
    CHECK_THROWS_WITH_AS(ref.execute(g, one), Contains("graph takes 2 inputs, 1 given"), tsopt::error);
    std::vector<tensor<float>> bad{tensor<float>(shape{2, 3}), tensor<float>(shape{3, 2})};
    CHECK_THROWS_WITH_AS(ref.execute(g, bad), Contains("input 'b' expects shape [2,3], got [3,2]"), tsopt::error);
    // random_inputs produces what execute wants, in order.
    auto r = backend::random_inputs(g, 5);
    REQUIRE(r.size() == 2);
    auto out = ref.execute(g, r);
    CHECK(out[0][4] == r[0][4] + r[1][4]);
}

TEST_CASE("reference executor: opaque operators need a registered implementation") {
    graph g;
    value x = g.input("x", shape{1, 4});
    auto ln = std::make_shared<const opaque_op>(opaque_op{"LayerNormalization", "", "epsilon=1e-5", 1});
    value y = g.opaque(ln, {x}, {shape{1, 4}}, "ln")[0];
    g.mark_output(g.relu(y, "r"));
    std::vector<tensor<float>> in{tensor<float>(shape{1, 4}, {1, 2, 3, 6})};
    backend::reference ref;
    CHECK_THROWS_WITH_AS(ref.execute(g, in),
                         Contains("node 'ln' (LayerNormalization): the reference backend has no implementation for opaque "
                                  "operator 'LayerNormalization'"),
                         tsopt::error);

    // Subtract the mean (3): [-2, -1, 0, 3]; relu: [0, 0, 0, 3].
    std::string seen_attributes;
    ref.opaque_impls["LayerNormalization"] = [&](const node& n, std::span<const tensor<float>* const> args) {
        seen_attributes = n.opaque->attributes;
        tensor<float> t = *args[0];
        float mean = 0;
        for (float v : t.data) mean += v / static_cast<float>(t.size());
        for (float& v : t.data) v -= mean;
        return std::vector<tensor<float>>{t};
    };
    auto out = ref.execute(g, in);
    CHECK(out[0] == tensor<float>(shape{1, 4}, {0, 0, 0, 3}));
    CHECK(seen_attributes == "epsilon=1e-5");
}

TEST_CASE("reference executor: a graph whose structure is corrupted is refused, not run") {
    graph g;
    value x = g.input("x", shape{2});
    value a = g.relu(x, "a");
    value b = g.relu(a, "b");
    g.mark_output(b);
    g.nodes[static_cast<std::size_t>(a.node)].inputs[0] = b;
    std::vector<tensor<float>> in{tensor<float>(shape{2})};
    CHECK_THROWS_WITH_AS(backend::reference{}.execute(g, in), Contains("cycle through node 'a'"), tsopt::error);
}
