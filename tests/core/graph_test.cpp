// The graph IR: builder errors name the node at fault, validate() and
// topological_order() catch hand-corrupted graphs, the structural hash is
// independent of node order but sensitive to parameters, compacted() drops
// dead nodes, constant_mask() marks what is known at optimization time.
#include <doctest/doctest.h>

#include "tsopt/core/graph.hpp"

using namespace tsopt;
using doctest::Contains;

namespace {
tensor<float> filled(shape s, float start = 1.f) {
    tensor<float> t(s);
    for (std::int64_t i = 0; i < t.size(); ++i) t[i] = start + static_cast<float>(i);
    return t;
}
}  // namespace

TEST_CASE("builder: shape rule violations name the node and the condition") {
    graph g;
    value x = g.input("x", shape{1, 3, 8, 8});
    value w = g.weight("w", filled(shape{4, 5, 3, 3}));
    CHECK_THROWS_WITH_AS(g.conv2d(x, w, {}, "stem"),
                         Contains("node 'stem' (conv2d): input channels 3 are not a multiple of the weight's input channels 5"),
                         tsopt::error);
    value a = g.input("a", shape{2, 3});
    value b = g.input("b", shape{4, 5});
    CHECK_THROWS_WITH_AS(g.matmul(a, b, {}, "proj"), Contains("node 'proj' (matmul): inner extents differ: [2,3] x [4,5]"),
                         tsopt::error);
    CHECK_THROWS_WITH_AS(g.ewadd(a, b, "sum"), Contains("node 'sum' (ewadd): shapes [2,3] and [4,5] do not broadcast"),
                         tsopt::error);
    CHECK_THROWS_WITH_AS(g.reshape(a, shape{4, 2}, "flat"), Contains("node 'flat' (reshape): cannot reshape [2,3]"),
                         tsopt::error);
    CHECK_THROWS_WITH_AS(g.concat(1, {x, a}, "cat"), Contains("node 'cat' (concat): input 1 has rank 2"), tsopt::error);
    // A failed add leaves the graph as it was.
    CHECK(g.size() == 4);
    // Unnamed nodes get a readable automatic name in the message.
    CHECK_THROWS_WITH_AS(g.matmul(a, b), Contains("node 'matmul_4' (matmul)"), tsopt::error);
}

TEST_CASE("builder: dangling references name the node and the missing value") {
    graph g;
    value x = g.input("x", shape{2, 2});
    CHECK_THROWS_WITH_AS(g.relu(value{7, 0}, "r"), Contains("node 'r' (relu): input refers to missing node 7"), tsopt::error);
    CHECK_THROWS_WITH_AS(g.relu(value{x.node, 1}, "r"),
                         Contains("node 'r' (relu): input refers to output 1 of node 'x' (input), which has 1"), tsopt::error);
    CHECK_THROWS_WITH_AS(g.mark_output(value{3, 0}), Contains("graph output: input refers to missing node 3"), tsopt::error);
    auto op = std::make_shared<const opaque_op>(opaque_op{"Foo", "", "", 0});
    CHECK_THROWS_WITH_AS(g.opaque(op, {value{-1, 0}}, {shape{1}}, "foo"),
                         Contains("node 'foo' (Foo): input refers to missing node -1"), tsopt::error);
}

TEST_CASE("validate and topological_order catch hand-corrupted graphs") {
    graph g;
    value x = g.input("x", shape{2, 2});
    value a = g.relu(x, "a");
    value b = g.tanh(a, "b");
    value c = g.sigmoid(b, "c");
    g.mark_output(c);
    g.validate();
    CHECK(g.topological_order() == std::vector<std::size_t>{0, 1, 2, 3});

    SUBCASE("a cycle") {
        g.nodes[static_cast<std::size_t>(a.node)].inputs[0] = c;  // a <- c <- b <- a
        CHECK_THROWS_WITH_AS(g.topological_order(), Contains("graph has a cycle through node 'a' (relu)"), tsopt::error);
        CHECK_THROWS_WITH_AS(g.validate(), Contains("cycle through node 'a'"), tsopt::error);
    }
    SUBCASE("a self loop") {
        g.nodes[static_cast<std::size_t>(b.node)].inputs[0] = b;
        CHECK_THROWS_WITH_AS(g.validate(), Contains("graph has a cycle through node 'b' (tanh)"), tsopt::error);
    }
    SUBCASE("a dangling input") {
        g.nodes[static_cast<std::size_t>(c.node)].inputs[0] = value{42, 0};
        CHECK_THROWS_WITH_AS(g.validate(), Contains("node 'c' (sigmoid): input refers to missing node 42"), tsopt::error);
    }
    SUBCASE("a dangling output") {
        g.outputs[0] = value{9, 0};
        CHECK_THROWS_WITH_AS(g.validate(), Contains("graph output: input refers to missing node 9"), tsopt::error);
    }
    SUBCASE("recorded shapes out of date") {
        g.nodes[static_cast<std::size_t>(b.node)].shapes[0] = shape{4};
        CHECK_THROWS_WITH_AS(g.validate(), Contains("node 'b' (tanh): recorded shapes disagree with the shape rule"),
                             tsopt::error);
    }
    SUBCASE("an input whose shape changed under its consumers") {
        g.nodes[static_cast<std::size_t>(x.node)].shapes[0] = shape{3, 3};
        CHECK_THROWS_WITH_AS(g.validate(), Contains("node 'a' (relu): recorded shapes disagree"), tsopt::error);
    }
    SUBCASE("weight data of the wrong shape") {
        value w = g.weight("w", filled(shape{2, 2}));
        g.nodes[static_cast<std::size_t>(w.node)].shapes[0] = shape{4};
        CHECK_THROWS_WITH_AS(g.validate(), Contains("node 'w' (weight): weight data missing or of the wrong shape"),
                             tsopt::error);
    }
    SUBCASE("no outputs") {
        g.outputs.clear();
        CHECK_THROWS_WITH_AS(g.validate(), Contains("graph has no outputs"), tsopt::error);
    }
}

TEST_CASE("structural hash: equal across node orders, different for different parameters or wiring") {
    // f(x, y) = relu(conv(x, w) + y) built in two orders, sharing the weight.
    graph g1;
    value x1 = g1.input("x", shape{1, 2, 4, 4});
    value y1 = g1.input("y", shape{1, 3, 4, 4});
    value w1 = g1.weight("w", filled(shape{3, 2, 3, 3}));
    value c1 = g1.conv2d(x1, w1, {}, "conv");
    g1.mark_output(g1.relu(g1.ewadd(c1, y1, "add"), "relu"));

    graph g2;
    g2.nodes.push_back(g1.at(w1));  // same weight data (hashing is by identity of the data)
    value w2{0, 0};
    value y2 = g2.input("y", shape{1, 3, 4, 4});
    value x2 = g2.input("x", shape{1, 2, 4, 4});
    value c2 = g2.conv2d(x2, w2, {}, "another name");
    g2.mark_output(g2.relu(g2.ewadd(c2, y2), "r"));
    g2.validate();
    CHECK(g1.structural_hash() == g2.structural_hash());
    CHECK(g1.compacted().structural_hash() == g1.structural_hash());

    auto variant = [&](conv_options o) {
        graph g;
        g.nodes.push_back(g1.at(w1));
        value x = g.input("x", shape{1, 2, 4, 4});
        value c = g.conv2d(x, value{0, 0}, o);
        value y = g.input("y", g.shape_of(c));
        g.mark_output(g.relu(g.ewadd(c, y)));
        return g.structural_hash();
    };
    CHECK(variant({}) == g1.structural_hash());
    CHECK(variant({.stride = 2}) != g1.structural_hash());
    CHECK(variant({.act = relu}) != g1.structural_hash());
    CHECK(variant({.pad = valid}) != g1.structural_hash());
    CHECK(variant({.dilation = 2}) != g1.structural_hash());

    // Same operators, operands of a non-commutative op swapped.
    graph m1, m2;
    for (graph* g : {&m1, &m2}) {
        value a = g->input("a", shape{2, 2});
        value b = g->input("b", shape{2, 2});
        g->mark_output(g == &m1 ? g->matmul(a, b) : g->matmul(b, a));
    }
    CHECK(m1.structural_hash() != m2.structural_hash());

    // A commutative operator's operands in either order: one graph (the
    // matcher binds both orders), and the hash is the same every time.
    graph s1, s2, s3;
    for (graph* g : {&s1, &s2, &s3}) {
        value a = g->input("a", shape{1, 3, 4, 4});
        value b = g->input("b", shape{1, 3, 4, 4});
        value r = g->relu(b);
        value sum = g == &s1 ? g->ewadd(a, r) : g->ewadd(r, a);
        g->mark_output(g == &s3 ? g->ewmul(sum, a) : g->ewmul(a, sum));
    }
    CHECK(s1.structural_hash() == s2.structural_hash());
    CHECK(s1.structural_hash() == s3.structural_hash());
    CHECK(s2.structural_hash() == s2.structural_hash());
    CHECK(s1.node_hashes(graph::weights_by::content) == s1.node_hashes(graph::weights_by::content));
    // ... while the operands themselves still count.
    graph t;
    value ta = t.input("a", shape{1, 3, 4, 4});
    t.mark_output(t.ewmul(ta, t.ewadd(ta, t.relu(ta))));
    CHECK(t.structural_hash() != s1.structural_hash());

    // Different weight data, same shapes: different.
    graph d;
    d.nodes.push_back(g1.at(w1));
    d.nodes[0].data = std::make_shared<const tensor<float>>(filled(shape{3, 2, 3, 3}, 2.f));
    value xd = d.input("x", shape{1, 2, 4, 4});
    value yd = d.input("y", shape{1, 3, 4, 4});
    value cd = d.conv2d(xd, value{0, 0});
    d.mark_output(d.relu(d.ewadd(cd, yd)));
    CHECK(d.structural_hash() != g1.structural_hash());

    // Input names are part of the interface.
    graph r1, r2;
    r1.mark_output(r1.relu(r1.input("x", shape{2})));
    r2.mark_output(r2.relu(r2.input("z", shape{2})));
    CHECK(r1.structural_hash() != r2.structural_hash());
}

TEST_CASE("compacted drops dead nodes, keeps inputs, renumbers in topological order") {
    graph g;
    value w = g.weight("w", filled(shape{2, 2}));
    value unused_w = g.weight("unused_w", filled(shape{3}));
    value x = g.input("x", shape{2, 2});
    value spare = g.input("spare", shape{5});  // unused input: kept, it is the interface
    value dead = g.relu(x, "dead");
    g.tanh(dead, "dead2");
    value m = g.matmul(x, w, {}, "mm");
    value s = g.sigmoid(m, "out");
    g.mark_output(s);
    g.mark_output(m);
    (void)unused_w;
    (void)spare;

    graph c = g.compacted();
    c.validate();
    std::vector<std::string> names;
    for (const node& n : c.nodes) names.push_back(n.name);
    CHECK(c.size() == 5);
    CHECK(std::find(names.begin(), names.end(), "dead") == names.end());
    CHECK(std::find(names.begin(), names.end(), "dead2") == names.end());
    CHECK(std::find(names.begin(), names.end(), "unused_w") == names.end());
    CHECK(std::find(names.begin(), names.end(), "spare") != names.end());
    REQUIRE(c.outputs.size() == 2);
    CHECK(c.at(c.outputs[0]).name == "out");
    CHECK(c.at(c.outputs[1]).name == "mm");
    CHECK(c.at(c.outputs[1]).data == nullptr);
    CHECK(c.structural_hash() == g.structural_hash());
    // Inputs of every node come before it.
    for (std::size_t i = 0; i < c.size(); ++i)
        for (value v : c.nodes[i].inputs) CHECK(static_cast<std::size_t>(v.node) < i);
    // Compacting again changes nothing.
    CHECK(c.compacted().size() == c.size());
}

TEST_CASE("constant_mask: weights and operators over weights only") {
    graph g;
    value x = g.input("x", shape{2, 2});
    value w = g.weight("w", filled(shape{2, 2}));
    value wt = g.transpose(w, {1, 0}, "wt");       // weights only: constant
    value ww = g.matmul(wt, w, {}, "ww");          // still constant
    value xw = g.matmul(x, ww, {}, "xw");          // depends on the input
    auto op = std::make_shared<const opaque_op>(opaque_op{"Mystery", "", "", 0});
    value o = g.opaque(op, {w}, {shape{2, 2}}, "mystery")[0];  // opaque: never folded
    value k = g.add1(spec::op_kind::imatmul, [] { spec::op_params p; p[spec::imatmul_p::n] = 2; return p; }(), {}, "eye");
    g.mark_output(g.ewadd(g.ewadd(xw, o, "a"), k, "b"));
    auto mask = g.constant_mask();
    CHECK_FALSE(mask[static_cast<std::size_t>(x.node)]);
    CHECK(mask[static_cast<std::size_t>(w.node)]);
    CHECK(mask[static_cast<std::size_t>(wt.node)]);
    CHECK(mask[static_cast<std::size_t>(ww.node)]);
    CHECK_FALSE(mask[static_cast<std::size_t>(xw.node)]);
    CHECK_FALSE(mask[static_cast<std::size_t>(o.node)]);
    CHECK(mask[static_cast<std::size_t>(k.node)]);  // constant operator with no inputs
    CHECK_FALSE(mask.back());
}

TEST_CASE("inputs, consumers and op_count") {
    graph g;
    value a = g.input("a", shape{2});
    value w = g.weight("w", filled(shape{2}));
    value b = g.input("b", shape{2});
    value s = g.ewadd(a, w, "s");
    value t = g.ewmul(s, s, "t");
    g.mark_output(g.ewadd(t, b, "u"));
    CHECK(g.inputs() == std::vector<value>{a, b});
    CHECK(g.op_count() == 3);
    auto c = g.consumers();
    using P = std::pair<std::int32_t, std::int32_t>;
    CHECK(c[static_cast<std::size_t>(s.node)] == std::vector<P>{{t.node, 0}, {t.node, 1}});
    CHECK(c[static_cast<std::size_t>(b.node)] == std::vector<P>{{5, 1}});
    CHECK(c[5].empty());
}

// A graph whose nodes are stored out of order (a rewrite appends new nodes
// that earlier ones then read) against the same graph with inputs first:
// the passes that skip sorting when inputs precede give the same answers.
TEST_CASE("constant_mask, hashes, compacted and acyclic agree whether or not inputs precede each node") {
    graph g;
    value x = g.input("x", shape{2, 2});
    value w = g.weight("w", filled(shape{2, 2}));
    value wt = g.transpose(w, {1, 0}, "wt");
    value m = g.matmul(x, wt, {}, "mm");
    value r = g.relu(m, "r");
    g.relu(x, "dead");
    g.mark_output(g.ewadd(r, x, "out"));
    REQUIRE(g.inputs_precede());
    REQUIRE(g.acyclic());

    // The same graph with its nodes in reverse order.
    graph rev;
    const std::size_t n = g.size();
    auto flip = [&](value v) { return value{static_cast<std::int32_t>(n - 1 - static_cast<std::size_t>(v.node)), v.output}; };
    for (std::size_t i = n; i-- > 0;) {
        node nd = g.nodes[i];
        for (value& v : nd.inputs) v = flip(v);
        rev.nodes.push_back(std::move(nd));
    }
    for (value v : g.outputs) rev.outputs.push_back(flip(v));
    rev.validate();
    CHECK_FALSE(rev.inputs_precede());
    CHECK(rev.acyclic());

    const auto mask = g.constant_mask(), rev_mask = rev.constant_mask();
    const auto h = g.node_hashes(graph::weights_by::content), rev_h = rev.node_hashes(graph::weights_by::content);
    for (std::size_t i = 0; i < n; ++i) {
        CAPTURE(g.nodes[i].name);
        CHECK(mask[i] == rev_mask[n - 1 - i]);
        CHECK(h[i] == rev_h[n - 1 - i]);
    }
    CHECK(g.structural_hash() == rev.structural_hash());

    // Moving out compacts to what copying does, and says where each node went.
    graph copied = rev.compacted();
    std::vector<std::int32_t> new_id;
    graph moved = graph(rev).compacted(new_id);
    REQUIRE(moved.size() == copied.size());
    for (std::size_t i = 0; i < moved.size(); ++i) CHECK(moved.nodes[i].name == copied.nodes[i].name);
    CHECK(moved.outputs == copied.outputs);
    REQUIRE(new_id.size() == rev.size());
    for (std::size_t i = 0; i < rev.size(); ++i) {
        CAPTURE(rev.nodes[i].name);
        if (rev.nodes[i].name == "dead") CHECK(new_id[i] == -1);
        else REQUIRE((new_id[i] >= 0 && moved.nodes[static_cast<std::size_t>(new_id[i])].name == rev.nodes[i].name));
    }
    CHECK(moved.inputs_precede());
    // compacted_if_acyclic: the same graph and ids from one sort.
    std::vector<std::int32_t> checked_id;
    auto checked = graph(rev).compacted_if_acyclic(&checked_id);
    REQUIRE(checked);
    REQUIRE(checked->size() == moved.size());
    for (std::size_t i = 0; i < moved.size(); ++i) CHECK(checked->nodes[i].name == moved.nodes[i].name);
    CHECK(checked->outputs == moved.outputs);
    CHECK(checked_id == new_id);

    // A cycle: acyclic() says so without throwing; topological_order names
    // it; compacted_if_acyclic gives nothing and leaves the graph whole.
    rev.nodes[static_cast<std::size_t>(flip(m).node)].inputs[0] = flip(r);
    CHECK_FALSE(rev.acyclic());
    CHECK_THROWS_WITH_AS(rev.topological_order(), Contains("graph has a cycle through"), tsopt::error);
    graph cyclic = rev;
    CHECK_FALSE(std::move(cyclic).compacted_if_acyclic());
    CHECK(cyclic.size() == rev.size());
    CHECK(cyclic.nodes[static_cast<std::size_t>(flip(m).node)].name == "mm");
}

// Three branches x -> d_k -> p_k whose p_k weights a rewrite replaced with
// weights appended after every operator (as batch-norm folding does): Kahn's
// order over the node list waits for each new weight where it lies and runs
// d_1, d_2, d_3 before any p_k; the run order takes each p_k right after its
// d_k, with the settled nodes (input, weights, a constant operator) first.
TEST_CASE("run_order: an operator follows what it reads wherever its weights lie") {
    graph g;
    value x = g.input("x", shape{2, 2});
    std::vector<value> d, p;
    for (int k = 1; k <= 3; ++k) {
        const std::string s = std::to_string(k);
        value de = g.weight("we" + s, filled(shape{2, 2}, static_cast<float>(k)));
        d.push_back(g.matmul(x, de, {}, "d" + s));
        p.push_back(g.matmul(d.back(), g.weight("wl" + s, filled(shape{2, 2})), {}, "p" + s));
    }
    value wt = g.transpose(g.weight("wc", filled(shape{2, 2})), {1, 0}, "wt");
    g.mark_output(g.ewadd(g.ewadd(g.ewadd(p[0], p[1], "s12"), p[2], "s123"), wt, "out"));
    for (int k = 0; k < 3; ++k) {
        value late = g.weight("late" + std::to_string(k + 1), filled(shape{2, 2}, 3.f));
        g.nodes[static_cast<std::size_t>(p[static_cast<std::size_t>(k)].node)].inputs[1] = late;
    }
    g.validate();

    std::vector<bool> settled = g.constant_mask();
    settled[static_cast<std::size_t>(x.node)] = true;
    const auto order = g.run_order(settled);
    REQUIRE(order.size() == g.size());
    std::vector<std::size_t> at(g.size());
    for (std::size_t k = 0; k < order.size(); ++k) at[order[k]] = k;
    for (std::size_t i = 0; i < g.size(); ++i)
        for (value v : g.nodes[i].inputs) CHECK(at[static_cast<std::size_t>(v.node)] < at[i]);
    std::size_t settled_count = 0;
    for (std::size_t i = 0; i < g.size(); ++i) settled_count += settled[i];
    for (std::size_t k = 0; k < order.size(); ++k) CHECK(settled[order[k]] == (k < settled_count));
    for (std::size_t k = 0; k < 3; ++k) {
        CAPTURE(k);
        CHECK(at[static_cast<std::size_t>(p[k].node)] == at[static_cast<std::size_t>(d[k].node)] + 1);
    }
    // The order over the node list, for contrast: every d_k before p_1.
    const auto kahn = g.topological_order();
    std::vector<std::size_t> kat(g.size());
    for (std::size_t k = 0; k < kahn.size(); ++k) kat[kahn[k]] = k;
    CHECK(kat[static_cast<std::size_t>(d[2].node)] < kat[static_cast<std::size_t>(p[0].node)]);

    CHECK_THROWS_WITH_AS(g.run_order(std::vector<bool>(2)), Contains("settled mask has the wrong size"), tsopt::error);
    g.nodes[static_cast<std::size_t>(d[0].node)].inputs[0] = p[0];
    CHECK_THROWS_WITH_AS(g.run_order(settled), Contains("graph has a cycle through"), tsopt::error);
}

TEST_CASE("run_order: an operator waits for the node it asks to follow, unless that node needs it") {
    graph g;
    value x = g.input("x", shape{2, 2});
    value a = g.relu(x, "a");
    value b2 = g.relu(g.relu(x, "b1"), "b2");
    value out = g.ewadd(a, b2, "out");
    g.mark_output(out);
    std::vector<bool> settled(g.size(), false);
    settled[static_cast<std::size_t>(x.node)] = true;
    auto positions = [&](const std::vector<std::size_t>& order) {
        REQUIRE(order.size() == g.size());
        std::vector<std::size_t> at(g.size());
        for (std::size_t k = 0; k < order.size(); ++k) at[order[k]] = k;
        for (std::size_t i = 0; i < g.size(); ++i)
            for (value v : g.nodes[i].inputs) CHECK(at[static_cast<std::size_t>(v.node)] < at[i]);
        return at;
    };
    auto node = [](value v) { return static_cast<std::size_t>(v.node); };
    // Without a rule a (the first reader of x) comes first.
    CHECK(positions(g.run_order(settled))[node(a)] == 1);
    // a asks to follow b2: put aside, then right after it.
    std::size_t asked = 0;
    auto after_b2 = g.run_order(settled, [&](std::size_t i, const std::vector<bool>& placed) -> std::optional<std::size_t> {
        if (i != node(a)) return std::nullopt;
        ++asked;
        CHECK(placed[node(x)]);
        return node(b2);
    });
    auto at = positions(after_b2);
    CHECK(at[node(a)] == at[node(b2)] + 1);
    CHECK(asked == 2);  // once put aside, once when b2 was placed
    // a asks to follow what reads it: released once nothing else is ready.
    at = positions(g.run_order(settled, [&](std::size_t i, const std::vector<bool>&) -> std::optional<std::size_t> {
        return i == node(a) ? std::optional(node(out)) : std::nullopt;
    }));
    CHECK(at[node(a)] == at[node(b2)] + 1);
}
