// Flow-based partitioning: coverage, threshold, topological sequence, cuts
// that avoid rule matches, and extract + stitch round trips checked on the
// reference backend.
#include <doctest/doctest.h>

#include <chrono>
#include <random>

#include "tsopt/backend/reference/executor.hpp"
#include "tsopt/search/partition.hpp"

using namespace tsopt;

namespace {

// A residual network: blocks of conv -> relu -> conv -> add(skip) -> relu.
struct resnet_like {
    graph g;
    std::vector<std::vector<std::size_t>> matches;  // (conv, relu), (conv, add), (add, relu) pairs
    explicit resnet_like(int blocks, std::uint64_t seed = 11) {
        std::mt19937_64 rng(seed);
        auto x = g.input("x", {1, 8, 8, 8});
        auto id = [](value v) { return static_cast<std::size_t>(v.node); };
        for (int b = 0; b < blocks; ++b) {
            auto c1 = g.conv2d(x, g.weight("w1_" + std::to_string(b), {8, 8, 3, 3}, rng));
            auto r1 = g.relu(c1);
            auto c2 = g.conv2d(r1, g.weight("w2_" + std::to_string(b), {8, 8, 3, 3}, rng));
            auto a = g.ewadd(c2, x);
            auto r2 = g.relu(a);
            matches.push_back({id(c1), id(r1)});
            matches.push_back({id(c2), id(a)});
            matches.push_back({id(a), id(r2)});
            x = r2;
        }
        g.mark_output(x);
    }
};

void check_partition(const graph& g, const search::partition_result& r, std::size_t limit) {
    // Every node in exactly one part, and part_of agrees.
    std::vector<int> seen(g.size(), 0);
    for (std::size_t p = 0; p < r.parts.size(); ++p) {
        std::size_t ops = 0;
        for (std::size_t v : r.parts[p]) {
            ++seen[v];
            CHECK(r.part_of[v] == p);
            ops += g.nodes[v].kind == node_kind::op || g.nodes[v].kind == node_kind::opaque;
        }
        CHECK(ops <= limit);
        CHECK(ops > 0);
    }
    for (std::size_t v = 0; v < g.size(); ++v) CHECK(seen[v] == 1);
    // Topological sequence: edges never go back to an earlier part.
    for (std::size_t v = 0; v < g.size(); ++v)
        for (value u : g.nodes[v].inputs) CHECK(r.part_of[static_cast<std::size_t>(u.node)] <= r.part_of[v]);
}

// Fuses relu into a conv2d whose only reader it is (and which is not an output).
graph fuse_relu(const graph& in) {
    graph g = in;
    auto cons = g.consumers();
    std::vector<bool> is_output(g.size(), false);
    for (value v : g.outputs) is_output[static_cast<std::size_t>(v.node)] = true;
    for (std::size_t i = 0; i < g.size(); ++i) {
        if (!g.nodes[i].is_op(spec::op_kind::relu)) continue;
        value c = g.nodes[i].inputs[0];
        auto ci = static_cast<std::size_t>(c.node);
        node& conv = g.nodes[ci];
        if (!conv.is_op(spec::op_kind::conv2d) || conv.params[spec::conv2d_p::act] != 0 || cons[ci].size() != 1 ||
            is_output[ci])
            continue;
        conv.params[spec::conv2d_p::act] = static_cast<std::int32_t>(spec::activation::relu);
        for (node& n : g.nodes)
            for (value& v : n.inputs)
                if (v.node == static_cast<std::int32_t>(i)) v = c;
        for (value& v : g.outputs)
            if (v.node == static_cast<std::int32_t>(i)) v = c;
    }
    return g.compacted();
}

}  // namespace

TEST_CASE("partition: the cut avoids nodes that rule matches span when a cheaper cut exists") {
    // A chain of 16 operators; every node is spanned by matches except the
    // one at position 10, off the balanced middle (7).
    graph g;
    auto x = g.input("x", {1, 64});
    std::vector<std::size_t> chain;
    for (int k = 0; k < 16; ++k) {
        x = k % 2 ? g.relu(x) : g.sigmoid(x);
        chain.push_back(static_cast<std::size_t>(x.node));
    }
    g.mark_output(x);
    std::vector<double> capacity(g.size(), 5);
    capacity[chain[10]] = 1;
    auto r = search::partition(g, capacity, {.max_part_ops = 12});
    check_partition(g, r, 12);
    REQUIRE(r.parts.size() == 2);
    REQUIRE(r.cut_nodes.size() == 1);
    CHECK(r.cut_nodes[0] == chain[10]);
    CHECK(r.cut_capacity == doctest::Approx(1));
    // The cheap node moves: the cut follows it.
    capacity[chain[10]] = 5;
    capacity[chain[5]] = 2;
    r = search::partition(g, capacity, {.max_part_ops = 12});
    REQUIRE(r.cut_nodes.size() == 1);
    CHECK(r.cut_nodes[0] == chain[5]);
    // Outside the window the cut cannot go there: forced ends keep parts balanced.
    capacity[chain[5]] = 5;
    capacity[chain[1]] = 0;
    r = search::partition(g, capacity, {.max_part_ops = 12});
    check_partition(g, r, 12);
    CHECK(std::find(r.cut_nodes.begin(), r.cut_nodes.end(), chain[1]) == r.cut_nodes.end());
}

TEST_CASE("partition: residual network — coverage, threshold, sequence, match-free cuts") {
    resnet_like m(12);  // 60 operators
    auto capacity = search::spanning_capacity(m.g, m.matches);
    for (std::size_t limit : {5, 8, 13, 30, 100}) {
        CAPTURE(limit);
        auto r = search::partition(m.g, capacity, {.max_part_ops = limit});
        check_partition(m.g, r, limit);
        CHECK(r.cut_capacity == 0);  // cuts at block outputs break no match
        for (std::size_t v : r.cut_nodes) CHECK(capacity[v] == 0);
        if (limit >= 60) CHECK(r.parts.size() == 1);
        auto unmerged = search::partition(m.g, capacity, {.max_part_ops = limit, .merge = false});
        check_partition(m.g, unmerged, limit);
        CHECK(r.parts.size() <= unmerged.parts.size());
    }
}

TEST_CASE("partition: past its deadline, a set too large is cut into runs of its topological order") {
    resnet_like m(12);  // 60 operators
    auto capacity = search::spanning_capacity(m.g, m.matches);
    const auto past = std::chrono::steady_clock::now() - std::chrono::seconds(1);
    for (std::size_t limit : {5, 8, 13}) {
        CAPTURE(limit);
        auto r = search::partition(m.g, capacity, {.max_part_ops = limit, .merge = false, .deadline = past});
        check_partition(m.g, r, limit);
        // Runs, not minimum cuts: every part but the last is full.
        for (std::size_t p = 0; p + 1 < r.parts.size(); ++p) {
            std::size_t ops = 0;
            for (std::size_t v : r.parts[p]) ops += m.g.nodes[v].kind == node_kind::op;
            CHECK(ops == limit);
        }
        // Merged as usual afterwards.
        check_partition(m.g, search::partition(m.g, capacity, {.max_part_ops = limit, .deadline = past}), limit);
    }
}

TEST_CASE("partition: random DAGs with random capacities keep a topological sequence") {
    std::mt19937_64 rng(2024);
    for (int trial = 0; trial < 40; ++trial) {
        graph g;
        std::vector<value> vals{g.input("x", {1, 16}), g.input("y", {1, 16})};
        const int n = 20 + static_cast<int>(rng() % 60);
        for (int k = 0; k < n; ++k) {
            // Mostly local edges with some long skips, as in real networks.
            auto pick = [&] {
                std::size_t back = rng() % 4 == 0 ? rng() % vals.size() : rng() % std::min<std::size_t>(3, vals.size());
                return vals[vals.size() - 1 - back];
            };
            vals.push_back(rng() % 2 ? g.ewadd(pick(), pick()) : g.relu(pick()));
        }
        g.mark_output(vals.back());
        g.mark_output(vals[vals.size() / 2]);
        std::vector<double> capacity(g.size());
        const double levels[] = {0, 1, 2, 5};
        for (double& c : capacity) c = levels[rng() % 4];
        const std::size_t limit = 3 + rng() % 10;
        CAPTURE(trial);
        CAPTURE(limit);
        auto r = search::partition(g, capacity, {.max_part_ops = limit, .merge = trial % 2 == 0});
        check_partition(g, r, limit);
        double cut = 0;
        for (std::size_t v : r.cut_nodes) cut += capacity[v];
        CHECK(cut == doctest::Approx(r.cut_capacity));
        // Stitching every part back unchanged gives the same graph.
        std::vector<search::subgraph> subs;
        for (auto& p : r.parts) subs.push_back(search::extract(g, p));
        std::vector<search::replacement> reps;
        for (auto& sg : subs) reps.push_back({&sg, &sg.g});
        CHECK(search::stitch(g, reps).structural_hash() == g.compacted().structural_hash());
    }
}

TEST_CASE("partition: merging joins small consecutive parts up to merge_ops") {
    resnet_like m(8);  // 40 operators
    auto capacity = search::spanning_capacity(m.g, m.matches);
    auto fine = search::partition(m.g, capacity, {.max_part_ops = 5, .merge = false});
    auto merged = search::partition(m.g, capacity, {.max_part_ops = 5, .merge_ops = 20});
    check_partition(m.g, merged, 20);
    CHECK(merged.parts.size() < fine.parts.size());
    CHECK(merged.parts.size() >= 2);
    CHECK(merged.cut_capacity <= fine.cut_capacity);
}

TEST_CASE("partition: bad arguments are rejected with a reason") {
    resnet_like m(2);
    CHECK_THROWS_WITH_AS(search::partition(m.g, {1.0, 2.0}), doctest::Contains("capacity has 2 entries"), error);
    std::vector<double> cap(m.g.size(), 0);
    cap[3] = -1;
    CHECK_THROWS_WITH_AS(search::partition(m.g, cap), doctest::Contains("finite and non-negative"), error);
    cap[3] = 0;
    CHECK_THROWS_WITH_AS(search::partition(m.g, cap, {.max_part_ops = 0}), doctest::Contains("at least 1"), error);
    CHECK_THROWS_WITH_AS(search::partition(m.g, cap, {.max_part_ops = 8, .merge_ops = 4}), doctest::Contains("merge_ops"), error);
}

TEST_CASE("extract + stitch: the unchanged parts give back the same graph") {
    resnet_like m(10);
    auto capacity = search::spanning_capacity(m.g, m.matches);
    auto r = search::partition(m.g, capacity, {.max_part_ops = 7});
    REQUIRE(r.parts.size() > 3);
    std::vector<search::subgraph> subs;
    for (auto& p : r.parts) subs.push_back(search::extract(m.g, p));
    std::size_t ops = 0;
    for (auto& s : subs) {
        s.g.validate();
        CHECK(s.g.op_count() <= 7);
        CHECK(s.g.inputs().size() == s.inputs_from.size());
        CHECK(s.g.outputs.size() == s.outputs_to.size());
        ops += s.g.op_count();
    }
    CHECK(ops == m.g.op_count());
    std::vector<search::replacement> reps;
    for (auto& s : subs) reps.push_back({&s, &s.g});
    graph back = search::stitch(m.g, reps);
    CHECK(back.structural_hash() == m.g.structural_hash());
    CHECK(back.op_count() == m.g.op_count());
    // One part at a time too.
    graph one = search::stitch(m.g, subs[1], subs[1].g);
    CHECK(one.structural_hash() == m.g.structural_hash());
}

TEST_CASE("extract + stitch: optimized parts stitched back compute the same function (reference backend)") {
    resnet_like m(10);
    auto capacity = search::spanning_capacity(m.g, m.matches);
    auto r = search::partition(m.g, capacity, {.max_part_ops = 9});
    std::vector<search::subgraph> subs;
    std::vector<graph> optimized;
    for (auto& p : r.parts) subs.push_back(search::extract(m.g, p));
    for (auto& s : subs) optimized.push_back(fuse_relu(s.g));
    std::vector<search::replacement> reps;
    for (std::size_t k = 0; k < subs.size(); ++k) reps.push_back({&subs[k], &optimized[k]});
    graph result = search::stitch(m.g, reps);
    result.validate();
    CHECK(result.op_count() == m.g.op_count() - 10);  // one relu fused per block
    backend::reference ref;
    auto in = backend::random_inputs(m.g, 42);
    auto want = ref.execute(m.g, in);
    auto got = ref.execute(result, in);
    REQUIRE(got.size() == want.size());
    CHECK(relative_error(got[0], want[0]) < 1e-5);
}

TEST_CASE("stitch: nodes the parts made are named apart from the graph's and from each other's") {
    // Two parts reading one value each put a node before their operator and
    // name it `<value>/to_nhwc`, as rewrite::explicit_conversions names a
    // conversion, and one names its operator as a node the graph keeps.
    // Stitched, every name is one node's (the ONNX written from such a
    // result had two nodes of one name, which ONNX Runtime refuses).
    graph g;
    auto x = g.input("x", {1, 4, 6, 6});
    auto r = g.relu(x, "r");
    auto a = g.sigmoid(r, "a");
    auto b = g.tanh(r, "b");
    auto c = g.relu(b, "c");
    g.mark_output(a);
    g.mark_output(c);
    const std::vector<std::size_t> only_a{static_cast<std::size_t>(a.node)}, only_b{static_cast<std::size_t>(b.node)};
    auto pa = search::extract(g, only_a), pb = search::extract(g, only_b);
    // relu(r) == r, as r is a relu's output: the parts compute what they replace.
    graph oa, ob;
    oa.mark_output(oa.sigmoid(oa.relu(oa.input("r", {1, 4, 6, 6}), "r/to_nhwc"), "a"));
    ob.mark_output(ob.tanh(ob.relu(ob.input("r", {1, 4, 6, 6}), "r/to_nhwc"), "c"));
    std::vector<search::replacement> reps;
    reps.push_back({&pa, &oa});
    reps.push_back({&pb, &ob});
    graph back = search::stitch(g, reps);
    std::set<std::string> names;
    for (const node& n : back.nodes) CHECK_MESSAGE(names.insert(n.name).second, "two nodes named " << n.name);
    CHECK(names.count("r/to_nhwc") == 1);
    CHECK(names.count("r/to_nhwc#2") == 1);
    CHECK(names.count("c#2") == 1);
    backend::reference ref;
    auto in = backend::random_inputs(g, 7);
    auto want = ref.execute(g, in), got = ref.execute(back, in);
    CHECK(relative_error(got[0], want[0]) < 1e-6);
    CHECK(relative_error(got[1], want[1]) < 1e-6);
}

TEST_CASE("extract + stitch: boundary values, multiple outputs and mismatches") {
    std::mt19937_64 rng(3);
    graph g;
    auto x = g.input("x", {1, 4, 6, 6});
    auto w = g.weight("w", {8, 4, 3, 3}, rng);
    auto c = g.conv2d(x, w, {}, "c");
    auto [s0, s1] = g.split(1, 4, c, "s");
    auto a = g.relu(s0, "a");
    auto b = g.sigmoid(s1, "b");
    auto y = g.ewadd(a, b, "y");
    g.mark_output(y);
    g.mark_output(c);
    // Part {s, a, b}: reads c from outside, y reads both a and b.
    std::vector<std::size_t> part{static_cast<std::size_t>(s0.node), static_cast<std::size_t>(a.node),
                                  static_cast<std::size_t>(b.node)};
    auto sg = search::extract(g, part);
    REQUIRE(sg.inputs_from.size() == 1);
    CHECK(sg.inputs_from[0] == c);
    CHECK(sg.g.at(sg.g.inputs()[0]).name == "c");
    REQUIRE(sg.outputs_to.size() == 2);
    CHECK(sg.outputs_to[0] == a);
    CHECK(sg.outputs_to[1] == b);
    // An equivalent rewrite: relu/sigmoid on a split == split of ... keep it simple: rebuild by hand.
    graph opt;
    auto oc = opt.input("c", {1, 8, 6, 6});
    auto [o0, o1] = opt.split(1, 4, oc);
    opt.mark_output(opt.relu(o0));
    opt.mark_output(opt.sigmoid(o1));
    graph back = search::stitch(g, sg, opt);
    backend::reference ref;
    auto in = backend::random_inputs(g, 5);
    auto want = ref.execute(g, in), got = ref.execute(back, in);
    CHECK(relative_error(got[0], want[0]) < 1e-6);
    CHECK(relative_error(got[1], want[1]) < 1e-6);

    graph wrong_name;
    auto q = wrong_name.input("q", {1, 8, 6, 6});
    auto [q0, q1] = wrong_name.split(1, 4, q);
    wrong_name.mark_output(q0);
    wrong_name.mark_output(q1);
    CHECK_THROWS_WITH_AS(search::stitch(g, sg, wrong_name), doctest::Contains("input 'q' is not an input of the part"), error);
    graph too_few;
    auto t = too_few.input("c", {1, 8, 6, 6});
    too_few.mark_output(too_few.split(1, 4, t).first);
    CHECK_THROWS_WITH_AS(search::stitch(g, sg, too_few), doctest::Contains("1 outputs, the part 2"), error);
    graph wrong_shape;
    auto u = wrong_shape.input("c", {1, 8, 6, 6});
    auto [u0, u1] = wrong_shape.split(1, 2, u);
    wrong_shape.mark_output(u0);
    wrong_shape.mark_output(u1);
    CHECK_THROWS_WITH_AS(search::stitch(g, sg, wrong_shape), doctest::Contains("has shape"), error);
    search::replacement twice[2] = {{&sg, &sg.g}, {&sg, &sg.g}};
    CHECK_THROWS_WITH_AS(search::stitch(g, twice), doctest::Contains("overlaps"), error);
    CHECK_THROWS_WITH_AS(search::extract(g, std::vector<std::size_t>{0, 1}), doctest::Contains("no operators"), error);
}
