// NCHW / NHWC joint layout optimization (TASO §5 beyond Figure 5): explicit
// reorder nodes, the reference backend's NHWC-held values, region moves chosen by
// the search under cost::analytical, ONNX export and DOT of laid-out graphs,
// and the oneDNN backend running explicit reorders.
#include <doctest/doctest.h>

#include "helpers.hpp"
#include "tsopt/backend/dnnl/executor.hpp"
#include "tsopt/cost/analytical.hpp"
#include "tsopt/io/dot.hpp"
#include "tsopt/onnx.hpp"
#include "tsopt/optimize.hpp"
#include "tsopt/search/backtracking.hpp"
#include "tsopt/zoo/resnet.hpp"

using namespace tsopt;
using namespace rewrite_test;
namespace sp = tsopt::spec;

namespace {

int count_reorders(const graph& g, sp::layout to) {
    int n = 0;
    for (const node& x : g.nodes) n += x.is_op(sp::op_kind::reorder) && x.out_layout == to;
    return n;
}
int nhwc_nodes(const graph& g, sp::op_kind k) {
    int n = 0;
    for (const node& x : g.nodes) n += x.is_op(k) && x.out_layout == sp::layout::nhwc;
    return n;
}
std::vector<std::size_t> image_ops(const graph& g) {
    std::vector<std::size_t> r;
    for (std::size_t i = 0; i < g.size(); ++i)
        if (rewrite::can_be_nhwc(g, i)) r.push_back(i);
    return r;
}

}  // namespace

TEST_CASE("reference backend: graphs with NHWC operators compute exactly what NCHW does") {
    std::mt19937_64 rng(11);
    graph g;
    auto x = g.input("x", {2, 8, 9, 9});
    auto a = g.conv2d(x, g.weight("w1", {12, 4, 3, 3}, rng), {.stride = 2, .pad = sp::pad_mode::same, .act = sp::activation::relu});
    auto b = g.conv2d(x, g.weight("w2", {6, 8, 3, 3}, rng), {.stride = 2, .pad = sp::pad_mode::same, .dilation = 2});
    auto c1 = g.maxpool(g.relu(g.conv2d(x, g.weight("w3", {6, 8, 1, 1}, rng))), {.kernel = 3, .stride = 2, .pad = sp::pad_mode::same});
    auto bias = g.weight("bias", {6, 1, 1}, rng);                                  // rank-3 broadcast operand
    auto gate = g.sigmoid(g.avgpool(b, {.kernel = 5, .stride = 5, .pad = sp::pad_mode::valid}));  // [2, 6, 1, 1]
    auto d = g.ewmul(g.ewadd(g.tanh(b), bias), gate);
    auto cat = g.concat(1, {a, g.ewadd(d, c1)});                                   // [2, 18, 5, 5]
    auto y = g.avgpool(cat, {.kernel = 3, .stride = 1, .pad = sp::pad_mode::same});
    g.mark_output(y);
    g.mark_output(g.reshape(cat, {2, 18 * 25}));  // an NCHW reader of an NHWC value
    g.validate();

    graph h = rewrite::with_layout(g, image_ops(g), sp::layout::nhwc);
    h.validate();
    CHECK(nhwc_nodes(h, sp::op_kind::conv2d) == 3);
    CHECK(nhwc_nodes(h, sp::op_kind::concat) == 1);
    CHECK(count_reorders(h, sp::layout::nhwc) == 1);  // x, shared by the three convolutions
    CHECK(count_reorders(h, sp::layout::nchw) == 2);  // the output and the reshape's input
    check_equivalent(g, h, 1e-5);

    // Every single operator in NHWC on its own (conversions around it) too.
    for (std::size_t i : image_ops(g)) {
        CAPTURE(g.nodes[i].describe());
        check_equivalent(g, rewrite::with_layout(g, {i}, sp::layout::nhwc), 1e-5);
    }
}

TEST_CASE("reference backend: NHWC values are really held NHWC") {
    // A reorder into NHWC read by an operator computing in NCHW is converted
    // back; the same buffer handed to a reshape without that conversion would
    // be a different tensor. Check the physical order through a raw reorder
    // chain whose logical value is x.
    graph g;
    auto x = g.input("x", {1, 2, 2, 3});
    auto r = g.add1(sp::op_kind::reorder, {}, {x}, "r");
    g.nodes[static_cast<std::size_t>(r.node)].out_layout = sp::layout::nhwc;
    g.mark_output(r);
    tensor<float> in(shape{1, 2, 2, 3});
    for (std::int64_t k = 0; k < in.size(); ++k) in[k] = static_cast<float>(k);
    backend::reference ref;
    auto out = ref.execute(g, std::span<const tensor<float>>(&in, 1));
    CHECK(out[0] == in);  // outputs come back NCHW
    auto held = backend::ref_layout::to_nhwc(in);
    CHECK(held.shape == shape{1, 2, 3, 2});
    CHECK(held[1] == 6.f);  // (n=0, h=0, w=0, c=1) is NCHW element 6
    CHECK(backend::ref_layout::to_nchw(held) == in);
}

TEST_CASE("explicit conversions: one reorder per value and layout, pointless ones dropped") {
    std::mt19937_64 rng(12);
    graph g;
    auto x = g.input("x", {1, 16, 8, 8});
    auto c1 = g.conv2d(x, g.weight("w1", {16, 16, 1, 1}, rng));
    auto r = g.relu(c1);
    auto c2 = g.conv2d(r, g.weight("w2", {16, 16, 1, 1}, rng));
    g.mark_output(c2);
    g.mark_output(g.transpose(r, {0, 1, 3, 2}));

    // Only c1 in NHWC: a reorder in before it and one out after it.
    std::size_t c1i = static_cast<std::size_t>(c1.node);
    graph one = rewrite::with_layout(g, {c1i}, sp::layout::nhwc);
    CHECK(count_reorders(one, sp::layout::nhwc) == 1);
    CHECK(count_reorders(one, sp::layout::nchw) == 1);
    check_equivalent(g, one, 1e-5);

    // The region: c1, relu, c2 (the transpose reads NCHW, the output too).
    auto region = rewrite::layout_region(g, c1i, sp::layout::nchw, g.constant_mask());
    CHECK(region.size() == 3);
    graph all = rewrite::with_layout(g, region, sp::layout::nhwc);
    CHECK(count_reorders(all, sp::layout::nhwc) == 1);
    CHECK(count_reorders(all, sp::layout::nchw) == 2);  // relu -> transpose, c2 -> output
    check_equivalent(g, all, 1e-5);

    // And back: every reorder disappears again.
    std::vector<std::size_t> back;
    for (std::size_t i = 0; i < all.size(); ++i)
        if (all.nodes[i].out_layout == sp::layout::nhwc && !all.nodes[i].is_op(sp::op_kind::reorder)) back.push_back(i);
    graph undone = rewrite::with_layout(all, back, sp::layout::nchw);
    CHECK(count_reorders(undone, sp::layout::nhwc) + count_reorders(undone, sp::layout::nchw) == 0);
    CHECK(undone.structural_hash() == g.compacted().structural_hash());
}

TEST_CASE("analytical: NHWC pays where channels-last kernels win, not elsewhere") {
    std::mt19937_64 rng(13);
    cost::analytical a;
    auto conv_cost = [&](shape xs, shape ws, sp::layout l) {
        graph g;
        auto x = g.input("x", xs);
        auto y = g.conv2d(x, g.weight("w", ws, rng));
        g.nodes[static_cast<std::size_t>(y.node)].out_layout = l;
        g.mark_output(y);
        return a.operator_cost(g, static_cast<std::size_t>(y.node)) - a.reorder_cost(g, static_cast<std::size_t>(y.node));
    };
    const auto nchw = sp::layout::nchw, nhwc = sp::layout::nhwc;
    const double pw = conv_cost({1, 64, 28, 28}, {64, 64, 1, 1}, nhwc) / conv_cost({1, 64, 28, 28}, {64, 64, 1, 1}, nchw);
    const double dense = conv_cost({1, 64, 28, 28}, {64, 64, 3, 3}, nhwc) / conv_cost({1, 64, 28, 28}, {64, 64, 3, 3}, nchw);
    const double dw = conv_cost({1, 64, 28, 28}, {64, 1, 3, 3}, nhwc) / conv_cost({1, 64, 28, 28}, {64, 1, 3, 3}, nchw);
    const double stem = conv_cost({1, 3, 56, 56}, {32, 3, 3, 3}, nhwc) / conv_cost({1, 3, 56, 56}, {32, 3, 3, 3}, nchw);
    CHECK(pw < dense);
    CHECK(dw < dense);
    CHECK(dense < 1.0);
    CHECK(stem == doctest::Approx(1.0));

    // Channel concat interleaves in NHWC; a reorder node costs what the
    // implicit conversion charged to its reader does.
    graph g;
    auto x = g.input("x", {1, 32, 16, 16});
    auto r1 = g.relu(x), r2 = g.sigmoid(x);
    auto c = g.concat(1, {r1, r2});
    g.mark_output(c);
    const auto ci = static_cast<std::size_t>(c.node);
    const double nchw_cat = a.operator_cost(g, ci);
    for (value v : {r1, r2, c}) g.nodes[static_cast<std::size_t>(v.node)].out_layout = nhwc;
    CHECK(a.operator_cost(g, ci) > nchw_cat);
    graph implicit;
    auto xi = implicit.input("x", {1, 32, 16, 16});
    auto ri = implicit.relu(xi);
    implicit.nodes[static_cast<std::size_t>(ri.node)].out_layout = nhwc;
    implicit.mark_output(ri);
    graph expl = rewrite::explicit_conversions(implicit);
    CHECK(count_reorders(expl, nhwc) == 1);
    CHECK(count_reorders(expl, nchw) == 1);
    CHECK(a.graph_cost(expl) == doctest::Approx(a.graph_cost(implicit) + a.reorder_cost(expl, expl.size() - 1) +
                                                a.operator_cost(expl, expl.size() - 1)));
}

namespace {
// A chain of 1x1 convolutions (the shape of MobileNet/ResNet bottleneck
// interiors) with a pool and a two-branch concat in the middle.
graph pointwise_chain(std::mt19937_64& rng) {
    graph g;
    auto x = g.input("x", {1, 128, 14, 14});
    auto y = g.relu(g.conv2d(x, g.weight("w1", {128, 128, 1, 1}, rng)));
    y = g.conv2d(y, g.weight("w2", {128, 128, 1, 1}, rng), {.act = sp::activation::relu});
    y = g.maxpool(y, {.kernel = 3, .stride = 1, .pad = sp::pad_mode::same});
    auto l = g.conv2d(y, g.weight("w3", {64, 128, 1, 1}, rng), {.act = sp::activation::relu});
    auto r = g.conv2d(y, g.weight("w4", {64, 128, 1, 1}, rng), {.act = sp::activation::relu});
    y = g.concat(1, {l, r});
    y = g.conv2d(y, g.weight("w5", {128, 128, 1, 1}, rng));
    g.mark_output(g.ewadd(y, x));
    return g;
}
}  // namespace

TEST_CASE("search: a 1x1 conv chain goes NHWC with reorders at its boundary, and computes the same") {
    std::mt19937_64 rng(14);
    graph g = pointwise_chain(rng);
    cost::analytical a;
    auto res = search::backtracking{}.rules({}).alpha(1.05).max_expansions(50).run(g, a);
    const graph& best = res.best;
    MESSAGE("cost ", a.graph_cost(g), " ms -> ", a.graph_cost(best), " ms");
    CHECK(a.graph_cost(best) < a.graph_cost(g));
    CHECK(nhwc_nodes(best, sp::op_kind::conv2d) == 5);
    CHECK(nhwc_nodes(best, sp::op_kind::concat) == 1);
    CHECK(nhwc_nodes(best, sp::op_kind::maxpool) == 1);
    // Conversions only where the region meets NCHW: x in (shared by the first
    // conv and the residual add), the result out.
    CHECK(count_reorders(best, sp::layout::nhwc) == 1);
    CHECK(count_reorders(best, sp::layout::nchw) == 1);
    CHECK(res.rep.rule_uses["layout move"] >= 1);
    check_equivalent(g, best, 1e-4);

    // Cheaper conversions than the default machine's would not change the
    // choice; dearer layouts (no channels-last gain) keep NCHW.
    cost::machine flat;
    flat.nhwc_conv_factor = flat.nhwc_pointwise_factor = 1.0;
    auto kept = search::backtracking{}.rules({}).alpha(1.05).max_expansions(50).run(g, cost::analytical{flat});
    CHECK(count_reorders(kept.best, sp::layout::nhwc) + count_reorders(kept.best, sp::layout::nchw) == 0);
}

TEST_CASE("without_nhwc undoes the layout choices and their reorders, and keeps the rewrites") {
    std::mt19937_64 rng(16);
    graph g = pointwise_chain(rng);
    graph h = rewrite::with_layout(g, image_ops(g), sp::layout::nhwc);
    REQUIRE(count_reorders(h, sp::layout::nhwc) + count_reorders(h, sp::layout::nchw) > 0);
    graph back = rewrite::without_nhwc(h);
    back.validate();
    CHECK(count_reorders(back, sp::layout::nhwc) + count_reorders(back, sp::layout::nchw) == 0);
    CHECK(nhwc_nodes(back, sp::op_kind::conv2d) == 0);
    CHECK(back.structural_hash() == g.structural_hash());
    check_equivalent(g, back, 1e-5);
    // Only part of the graph NHWC: the same.
    graph part = rewrite::with_layout(g, {image_ops(g).front()}, sp::layout::nhwc);
    CHECK(rewrite::without_nhwc(part).structural_hash() == g.structural_hash());
    // Nothing NHWC: unchanged.
    CHECK(rewrite::without_nhwc(g).structural_hash() == g.structural_hash());
}

TEST_CASE("optimize offers the result without its NHWC choices, and the preprocessed input, for on-board timing") {
    std::mt19937_64 rng(17);
    graph g = pointwise_chain(rng);
    auto r = optimize(g, {}, cost::analytical{}, {.max_expansions = 50, .top_k = 4});
    REQUIRE(r.report.improved);
    REQUIRE(nhwc_nodes(r.optimized, sp::op_kind::conv2d) > 0);
    REQUIRE(r.top_k.size() >= 2);
    CHECK(r.top_k[0].structural_hash() == r.optimized.structural_hash());
    CHECK(r.top_k[1].structural_hash() == rewrite::without_nhwc(r.optimized).structural_hash());
    std::vector<std::uint64_t> hashes;
    for (const graph& c : r.top_k) {
        CHECK(std::find(hashes.begin(), hashes.end(), c.structural_hash()) == hashes.end());  // distinct
        hashes.push_back(c.structural_hash());
        check_equivalent(g, c, 1e-4);
        CHECK(r.derivation_of(c) != nullptr);
    }
    // Each candidate with its own derivation: the result's, the same rules
    // without the layout moves, the preprocessed input's (none).
    REQUIRE(r.top_k_derivations.size() == r.top_k.size());
    CHECK(r.top_k_derivations[0].uses() == r.report.rule_uses);
    CHECK(r.report.rule_uses.count("layout move") == 1);
    auto without_moves = r.report.rule_uses;
    without_moves.erase("layout move");
    CHECK(r.top_k_derivations[1].uses() == without_moves);
    if (r.top_k.size() > 2 && r.top_k[2].structural_hash() == rewrite::preprocess(g).structural_hash())
        CHECK(r.top_k_derivations[2].uses().empty());
}

TEST_CASE("search: conversions that cost more than NHWC saves keep NCHW") {
    std::mt19937_64 rng(15);
    graph g;
    auto x = g.input("x", {1, 16, 56, 56});
    g.mark_output(g.relu(g.conv2d(x, g.weight("w", {16, 16, 3, 3}, rng))));
    cost::analytical a;
    // The move exists and was priced: every layout variant is dearer.
    auto moves = rewrite::layout_moves(g);
    REQUIRE(moves.size() == 2);  // the conv alone, and conv + relu
    for (const auto& m : moves) {
        CHECK(count_reorders(m, sp::layout::nhwc) == 1);
        CHECK(a.graph_cost(m) > a.graph_cost(g));
        check_equivalent(g, m, 1e-5);
    }
    auto res = search::backtracking{}.rules({}).alpha(1.05).max_expansions(20).run(g, a);
    CHECK(nhwc_nodes(res.best, sp::op_kind::conv2d) == 0);
    CHECK(count_reorders(res.best, sp::layout::nhwc) + count_reorders(res.best, sp::layout::nchw) == 0);
    CHECK(res.best.structural_hash() == g.structural_hash());
}

TEST_CASE("layouts survive ONNX export as Transpose pairs, and DOT shows them") {
    std::mt19937_64 rng(16);
    graph g = pointwise_chain(rng);
    graph best = search::backtracking{}.rules({}).alpha(1.05).max_expansions(50).run(g, cost::analytical{}).best;
    REQUIRE(nhwc_nodes(best, sp::op_kind::conv2d) > 0);
    auto proto = tsopt::onnx::to_proto(best);
    int to_nhwc = 0, to_nchw = 0, identities = 0;
    for (const auto& nd : proto.graph().node()) {
        if (nd.op_type() == "Identity") ++identities;
        if (nd.op_type() != "Transpose") continue;
        std::vector<std::int64_t> perm(nd.attribute(0).ints().begin(), nd.attribute(0).ints().end());
        to_nhwc += perm == std::vector<std::int64_t>{0, 2, 3, 1};
        to_nchw += perm == std::vector<std::int64_t>{0, 3, 1, 2};
    }
    int stored_nhwc = 0;
    for (const node& n : best.nodes) stored_nhwc += n.kind == node_kind::op && n.out_layout == sp::layout::nhwc;
    CHECK(to_nhwc == stored_nhwc);  // one physical tensor per NHWC-stored value
    CHECK(to_nchw == stored_nhwc);
    CHECK(identities == count_reorders(best, sp::layout::nhwc) + count_reorders(best, sp::layout::nchw));
    // The exported model computes what the original graph does.
    auto back = tsopt::onnx::import_model(tsopt::onnx::to_bytes(best));
    check_equivalent(g, back.graph, 1e-4);
    // Re-imported, each pair cancels: no transpose is left to run.
    int transposes = 0;
    for (std::size_t i : back.graph.topological_order()) transposes += back.graph.nodes[i].is_op(sp::op_kind::transpose);
    CHECK(transposes == 0);

    auto dot = io::to_dot(best);
    CHECK(dot.find("NHWC") != std::string::npos);
    CHECK(io::to_dot(g).find("NHWC") == std::string::npos);
}

TEST_CASE("oneDNN runs explicit reorders and NHWC regions without falling back") {
    std::mt19937_64 rng(17);
    graph g = pointwise_chain(rng);
    graph h = rewrite::with_layout(g, image_ops(g), sp::layout::nhwc);
    REQUIRE(count_reorders(h, sp::layout::nhwc) == 1);
    backend::dnnl b({.persist = false});
    auto in = backend::random_inputs(g, 3);
    auto want = backend::reference{}.execute(g, in);
    auto got = b.execute(h, in);
    REQUIRE(got.size() == want.size());
    CHECK(relative_error(got[0], want[0]) <= 1e-4);
    CHECK(b.stats(h).fallbacks == 0);
}

// Random layout assignments over residual networks (ResNet-50's bottlenecks,
// batch norm folded into conv + bias as optimize preprocesses them): the
// oneDNN plan fuses bias, ReLU and the residual add (a sum post-op that
// accumulates into the other operand's buffer) across NCHW/NHWC boundaries,
// and must compute what the reference does for every mix. A search once
// found a ResNet-50 candidate whose dnnl result was wrong (rel. error 0.65)
// at a block's fused residual add.
TEST_CASE("oneDNN computes random NCHW/NHWC mixes of residual networks as the reference does") {
    zoo::options zo;
    zo.width_div = 16;
    zo.image = 32;
    zo.depth_div = 2;
    const graph g = rewrite::preprocess(zoo::resnet50(zo));
    const auto ids = image_ops(g);
    REQUIRE(ids.size() > 20);
    auto in = backend::random_inputs(g, 5);
    auto want = backend::reference{}.execute(g, in);
    std::mt19937_64 rng(2026);
    for (int trial = 0; trial < 24; ++trial) {
        std::vector<std::size_t> pick;
        const double p = 0.2 + 0.6 * static_cast<double>(trial % 4) / 3.0;
        for (std::size_t i : ids)
            if (std::uniform_real_distribution<double>(0, 1)(rng) < p) pick.push_back(i);
        graph h = rewrite::with_layout(g, pick, sp::layout::nhwc);
        h.validate();
        backend::dnnl b({.persist = false});
        auto got = b.execute(h, in);
        REQUIRE(got.size() == want.size());
        INFO("trial ", trial, ": ", pick.size(), " of ", ids.size(), " image operators NHWC");
        CHECK(relative_error(got[0], want[0]) <= 1e-4);
    }
}

TEST_CASE("replay locates a layout move by the operators it changes, not by its index") {
    // Two convolutions: a move for each alone and one for the region they
    // share (both, their relus and the add). A part extracted again by names may list its nodes in another
    // order than the search's part, so the move's index can point at another
    // move (NASNet-Mobile's replay failed so); the names decide.
    std::mt19937_64 rng(21);
    graph g;
    auto x = g.input("x", {1, 16, 28, 28});
    auto a = g.relu(g.conv2d(x, g.weight("wa", {16, 16, 3, 3}, rng)));
    auto b = g.relu(g.conv2d(x, g.weight("wb", {16, 16, 3, 3}, rng)));
    g.mark_output(g.ewadd(a, b));
    const auto moves = rewrite::layout_moves(g);
    REQUIRE(moves.size() == 3);
    search::derivation d;
    d.fold_weights = false;
    search::rewrite_step st;
    st.rule = std::string(search::layout_move_name);
    st.where = search::layout_changes(g, moves[2]);
    REQUIRE_FALSE(st.where.empty());
    REQUIRE(st.where != search::layout_changes(g, moves[0]));
    st.variant = 0;  // the index of another move
    search::derivation_stage stage;
    stage.k = search::derivation_stage::kind::search;
    stage.steps = {st};
    d.stages.push_back(stage);
    const graph again = search::replay(g, d, {}, cost::analytical{});
    CHECK(again.hash_of_outputs(graph::weights_by::content) == moves[2].hash_of_outputs(graph::weights_by::content));

    // Operators no move changes together: refused, naming the step.
    d.stages.front().steps.front().where = {"no-such-operator"};
    CHECK_THROWS_WITH_AS(search::replay(g, d, {}, cost::analytical{}),
                         doctest::Contains("none of the graph's 3 layout moves changes exactly those operators"), error);
}

TEST_CASE("moves that change the same operators are one graph: the index does not decide between them") {
    // Two transposes of one product: each is a move storing the product
    // column-major, and both give the same graph, so a step locates it
    // whatever index it recorded (the search records the move it took; a
    // part extracted again may list the transposes the other way round).
    std::mt19937_64 rng(5);
    graph g;
    auto a = g.input("a", {8, 12});
    auto m = g.matmul(a, g.weight("w", {12, 6}, rng));
    g.mark_output(g.relu(g.transpose(m, {1, 0})));
    g.mark_output(g.transpose(m, {1, 0}));
    const auto moves = rewrite::layout_moves(g);
    REQUIRE(moves.size() == 2);
    const auto where = search::layout_changes(g, moves[0]);
    REQUIRE(where == search::layout_changes(g, moves[1]));
    for (std::size_t index : {std::size_t{0}, std::size_t{1}, std::size_t{7}}) {
        auto located = search::locate_layout_move(g, where, index, nullptr);
        REQUIRE(located);
        CHECK(located->hash_of_outputs(graph::weights_by::address) == moves[1].hash_of_outputs(graph::weights_by::address));
    }
    std::string why;
    CHECK_FALSE(search::locate_layout_move(g, std::vector<std::string>{"a"}, 0, &why));
    CHECK(why.find("none of the graph's 2 layout moves") != std::string::npos);
}
