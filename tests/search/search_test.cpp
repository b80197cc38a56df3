// The relaxed backtracking search and tsopt::optimize, as `start => goal`
// tests. Rules are built from the axiom set (spec/axioms.hpp) with
// rewrite::rule_set; the generator's rule tables are not used here.
#include <functional>
#include <map>
#include <queue>
#include <sstream>
#include <unordered_set>

#include "tsopt/cost/analytical.hpp"
#include "tsopt/optimize.hpp"
#include "tsopt/rewrite/from_axiom.hpp"
#include "tsopt/spec/axioms.hpp"

#include "../rewrite/helpers.hpp"

using namespace tsopt;
using namespace rewrite_test;
using namespace std::chrono_literals;
namespace sp = tsopt::spec;

namespace {

const sp::axiom& ax(std::string_view name) {
    const sp::axiom* a = sp::find_axiom(name);
    REQUIRE_MESSAGE(a != nullptr, "no axiom ", name);
    return *a;
}

constexpr sp::value_ref X = sp::var_ref(0), Y = sp::var_ref(1), Z = sp::var_ref(2), W = sp::var_ref(3);

// MetaFlow Figure 1's rules: enlarge a kernel to 3x3, fuse two convs of one
// input whose kernels have the same shape, fuse relu into a conv.
void metaflow_rules(rewrite::rule_set& rs) {
    using namespace sp::vars;
    constexpr auto enlarge3 = sp::make_axiom(
        "conv-enlarge3", sp::conv2d(p0, p1, sp::vars::same, p3, x, y) ==
                             sp::conv2d(p0, p1, sp::vars::same, p3, x, sp::enlarge(sp::pconst(3), sp::pconst(3), y)));
    rs.add_one_way(enlarge3);
    rs.add(ax("conv-distrib-ewadd-weight"), rewrite::same_shape(Y, Z));
    rs.add(ax("relu-conv"));
}

graph metaflow_start(std::mt19937_64& rng) {
    graph g;
    auto x = g.input("x", {1, 4, 8, 8});
    auto a = g.conv2d(x, g.weight("w1", {4, 4, 1, 1}, rng));
    auto b = g.conv2d(x, g.weight("w3", {4, 4, 3, 3}, rng));
    g.mark_output(g.relu(g.ewadd(a, b)));
    return g;
}

}  // namespace

TEST_CASE("MetaFlow Figure 1: conv1x1 + conv3x3 + add + relu => one conv3x3 with relu (alpha > 1 only)") {
    rewrite::rule_set rs;
    metaflow_rules(rs);
    std::mt19937_64 rng(11);
    graph g = metaflow_start(rng);
    // Small tensors: the launch overhead dominates, as MetaFlow measured.
    test_cost cost{.launch = 1e5};

    auto greedy = search::backtracking{}.rules(rs.rules()).alpha(1.0).max_expansions(200).run(g, cost);
    CHECK(greedy.rep.cost_after == greedy.rep.cost_before);
    CHECK(count_ops(greedy.best, sp::op_kind::conv2d) == 2);
    CHECK(greedy.rep.stopped == search::stop_reason::saturated);

    // Layout enumeration off: the derivation is then exactly MetaFlow's three steps.
    auto relaxed = search::backtracking{}.rules(rs.rules()).alpha(1.05).layouts(false).max_expansions(200).run(g, cost);
    INFO(ops_of(relaxed.best));
    CHECK(ops_of(relaxed.best) == "conv2d ");
    CHECK(relaxed.rep.cost_after < relaxed.rep.cost_before);
    CHECK(relaxed.rep.rule_uses["conv-enlarge3"] == 1);
    CHECK(relaxed.rep.rule_uses["conv-distrib-ewadd-weight-rev"] == 1);
    CHECK(relaxed.rep.rule_uses["relu-conv"] == 1);
    check_equivalent(g, relaxed.best);
    // The derivation with names: the three steps, where they applied, what each cost.
    REQUIRE(relaxed.steps.size() == 3);
    std::map<std::string, int> named;
    for (const auto& st : relaxed.steps) {
        ++named[st.rule];
        CHECK_FALSE(st.where.empty());
        for (const auto& w : st.where) CHECK_FALSE(w.empty());
    }
    CHECK(named == relaxed.rep.rule_uses);
    CHECK(relaxed.steps.front().cost_before == relaxed.rep.cost_before);
    CHECK(relaxed.steps.back().cost_after == relaxed.rep.cost_after);
    for (std::size_t i = 1; i < relaxed.steps.size(); ++i) CHECK(relaxed.steps[i].cost_before == relaxed.steps[i - 1].cost_after);
    auto with_layouts = search::backtracking{}.rules(rs.rules()).alpha(1.05).max_expansions(200).run(g, cost);
    CHECK(ops_of(with_layouts.best) == "conv2d ");
    check_equivalent(g, with_layouts.best);
}

TEST_CASE("SRU: four element-wise operators => three (distributivity)") {
    rewrite::rule_set rs;
    rs.add(ax("ewmul-comm"));
    rs.add(ax("ewmul-distrib-ewadd"), rewrite::same_shape(X, Y));
    graph g;
    auto f = g.input("f", {4, 8}), c = g.input("c", {4, 8}), x = g.input("x", {4, 8}), b = g.input("b", {4, 8});
    // f*c + f*x + b, with f on the left of both products (the comm rule must turn them)
    g.mark_output(g.ewadd(g.ewadd(g.ewmul(f, c), g.ewmul(f, x)), b));
    REQUIRE(running_ops(g) == 4);
    auto r = search::backtracking{}.rules(rs.rules()).max_expansions(500).run(g, test_cost{});
    CHECK(running_ops(r.best) == 3);
    CHECK(count_ops(r.best, sp::op_kind::ewmul) == 1);
    CHECK(r.rep.rule_uses["ewmul-distrib-ewadd-rev"] == 1);
    check_equivalent(g, r.best);
}

TEST_CASE("NasNet: two avg-pools + add => one depthwise conv over the sum") {
    rewrite::rule_set rs;
    rs.add(ax("conv-cpool-avgpool"));
    rs.add(ax("conv-distrib-ewadd-input"), rewrite::same_shape(X, Y));
    graph g;
    auto x = g.input("x", {1, 4, 8, 8}), y = g.input("y", {1, 4, 8, 8});
    g.mark_output(g.ewadd(g.avgpool(x), g.avgpool(y)));
    // A backend where pooling is slower than the equivalent depthwise conv.
    auto r = search::backtracking{}.rules(rs.rules()).max_expansions(300).run(g, test_cost{.pool_factor = 3});
    INFO(ops_of(r.best));
    CHECK(ops_of(r.best) == "ewadd conv2d ");
    for (const auto& n : r.best.nodes)
        if (n.is_op(sp::op_kind::conv2d)) CHECK(r.best.shape_of(n.inputs[1]) == shape{4, 1, 3, 3});  // depthwise
    check_equivalent(g, r.best);
}

TEST_CASE("ResNeXt: four parallel convs concatenated => one grouped conv") {
    rewrite::rule_set rs;
    rs.add(ax("conv-concat-grouped"));
    CHECK(rs.find("conv-concat-grouped").needs == sp::full_semantics);  // its conditions keep it sound
    std::mt19937_64 rng(12);
    graph g;
    std::vector<value> b;
    for (int i = 0; i < 4; ++i) {
        auto xi = g.input("x" + std::to_string(i), {1, 4, 6, 6});
        b.push_back(g.conv2d(xi, g.weight("w" + std::to_string(i), {4, 4, 3, 3}, rng), {.act = relu}));
    }
    g.mark_output(g.concat(1, {g.concat(1, {b[0], b[1]}), g.concat(1, {b[2], b[3]})}));
    auto r = search::backtracking{}.rules(rs.rules()).max_expansions(300).run(g, test_cost{});
    INFO(ops_of(r.best));
    REQUIRE(count_ops(r.best, sp::op_kind::conv2d) == 1);
    for (const auto& n : r.best.nodes)
        if (n.is_op(sp::op_kind::conv2d)) CHECK(r.best.shape_of(n.inputs[1]) == shape{16, 4, 3, 3});  // 4 groups
    CHECK(r.rep.rule_uses["conv-concat-grouped"] == 3);
    check_equivalent(g, r.best);
}

TEST_CASE("ResNeXt: parallel convs with different group sizes stay apart") {
    rewrite::rule_set rs;
    rs.add(ax("conv-concat-grouped"));
    std::mt19937_64 rng(14);
    graph g;
    auto x0 = g.input("x0", {1, 4, 6, 6}), x1 = g.input("x1", {1, 4, 6, 6});
    // 4 and 8 output channels: one 2-group conv would give each group 6.
    auto a = g.conv2d(x0, g.weight("w0", {4, 4, 3, 3}, rng));
    auto c = g.conv2d(x1, g.weight("w1", {8, 4, 3, 3}, rng));
    g.mark_output(g.concat(1, {a, c}));
    auto r = search::backtracking{}.rules(rs.rules()).max_expansions(100).run(g, test_cost{});
    CHECK(count_ops(r.best, sp::op_kind::conv2d) == 2);
    CHECK(r.rep.rule_uses["conv-concat-grouped"] == 0);
    CHECK(r.rep.stopped == search::stop_reason::saturated);
}

TEST_CASE("opaque nodes survive and the rest of the graph is optimized") {
    rewrite::rule_set rs;
    rs.add(ax("relu-conv"));
    std::mt19937_64 rng(13);
    graph g;
    auto x = g.input("x", {1, 2, 5, 5});
    auto a = g.relu(g.conv2d(x, g.weight("w1", {2, 2, 3, 3}, rng)));
    auto op = std::make_shared<opaque_op>(opaque_op{"Double", "custom", "", 0});
    auto o = g.opaque(op, {a}, {g.shape_of(a)})[0];
    g.mark_output(g.relu(g.conv2d(o, g.weight("w2", {2, 2, 3, 3}, rng))));
    auto r = search::backtracking{}.rules(rs.rules()).run(g, test_cost{});
    CHECK(ops_of(r.best) == "conv2d Double conv2d ");
    backend::reference ref;
    ref.opaque_impls["Double"] = [](const node&, std::span<const tensor<float>* const> in) {
        tensor<float> t = *in[0];
        for (auto& v : t.data) v *= 2;
        return std::vector<tensor<float>>{t};
    };
    check_equivalent(g, r.best, 1e-4, ref);
}

TEST_CASE("search is deterministic for a seed and an expansion budget") {
    rewrite::rule_set rs;
    for (const auto& a : sp::all_axioms)
        if (a.name.starts_with("ewadd") || a.name.starts_with("ewmul")) rs.add(a, rewrite::same_shape(X, Y));
    graph g;
    auto f = g.input("f", {4, 8}), c = g.input("c", {4, 8}), x = g.input("x", {4, 8}), b = g.input("b", {4, 8});
    g.mark_output(g.ewadd(g.ewadd(g.ewmul(f, c), g.ewmul(f, x)), b));
    auto run = [&](std::uint64_t seed) {
        return search::backtracking{}.rules(rs.rules()).alpha(1.2).seed(seed).max_expansions(60).top_k(4).run(g, test_cost{});
    };
    auto a = run(7), a2 = run(7);
    CHECK(a.best.structural_hash() == a2.best.structural_hash());
    CHECK(a.rep.generated == a2.rep.generated);
    CHECK(a.rep.dedup_hits == a2.rep.dedup_hits);
    CHECK(a.rep.rule_uses == a2.rep.rule_uses);
    CHECK(a.rep.stopped == a2.rep.stopped);
    CHECK(a.rep.expansions == a2.rep.expansions);
    // Four distinct graphs (operand orders of + and * do not count).
    REQUIRE(a.top_k.size() == 4);
    std::unordered_set<std::uint64_t> distinct;
    for (const auto& t : a.top_k) distinct.insert(t.structural_hash());
    CHECK(distinct.size() == 4);
    CHECK(a.top_k[0].structural_hash() == a.best.structural_hash());
    for (std::size_t i = 1; i < a.top_k.size(); ++i)
        CHECK(test_cost{}.graph_cost(a.top_k[i - 1]) <= test_cost{}.graph_cost(a.top_k[i]));
    // Each runner-up with its own derivation: none for the start graph, some
    // rule for every other.
    REQUIRE(a.top_k_steps.size() == a.top_k.size());
    CHECK(search::uses_of(a.top_k_steps[0]) == a.rep.rule_uses);
    for (std::size_t i = 0; i < a.top_k.size(); ++i)
        CHECK(a.top_k_steps[i].empty() == (a.top_k[i].structural_hash() == g.structural_hash()));
}

TEST_CASE("tiny case: the search finds what exhaustive enumeration finds") {
    rewrite::rule_set rs;
    rs.add(ax("ewmul-comm"));
    rs.add(ax("ewadd-comm"));
    rs.add(ax("ewmul-distrib-ewadd"), rewrite::same_shape(X, Y));
    graph g;
    auto f = g.input("f", {3, 3}), c = g.input("c", {3, 3}), x = g.input("x", {3, 3});
    g.mark_output(g.ewadd(g.ewmul(c, f), g.ewmul(f, x)));
    test_cost cost;
    // Exhaustive: every graph reachable by any sequence of rule applications.
    std::unordered_set<std::uint64_t> seen{g.structural_hash()};
    std::queue<graph> todo;
    todo.push(g);
    double best = cost.graph_cost(g);
    while (!todo.empty()) {
        graph cur = std::move(todo.front());
        todo.pop();
        rewrite::graph_index ix(cur);
        for (const auto& r : rs.rules())
            for (const auto& m : rewrite::find_matches(ix, r))
                if (auto n = rewrite::apply(ix, r, m))
                    if (seen.insert(n->structural_hash()).second) {
                        best = std::min(best, cost.graph_cost(*n));
                        todo.push(std::move(*n));
                    }
        REQUIRE(seen.size() < 5000);  // the space is finite and small
    }
    auto r = search::backtracking{}.rules(rs.rules()).run(g, cost);
    CHECK(r.rep.stopped == search::stop_reason::saturated);
    CHECK(r.rep.cost_after == doctest::Approx(best));
    CHECK(running_ops(r.best) == 2);
    check_equivalent(g, r.best);
}

TEST_CASE("search builder rejects impossible limits with a message") {
    CHECK_THROWS_WITH_AS(search::backtracking{}.alpha(0.5), doctest::Contains("alpha"), error);
    CHECK_THROWS_WITH_AS(search::backtracking{}.max_queue(0), doctest::Contains("max_queue"), error);
    CHECK_THROWS_WITH_AS(search::backtracking{}.max_memory(0), doctest::Contains("max_memory"), error);
}

TEST_CASE("search memory budget: queued graphs stay within max_memory bytes, the worst are pruned") {
    rewrite::rule_set rs;
    rs.add(ax("ewadd-comm"));
    rs.add(ax("ewadd-assoc"));
    rs.add(ax("ewmul-distrib-ewadd"), rewrite::same_shape(X, Y));
    graph g;
    auto a = g.input("a", {3, 3}), b = g.input("b", {3, 3}), c = g.input("c", {3, 3}), d = g.input("d", {3, 3});
    g.mark_output(g.ewadd(g.ewadd(g.ewmul(a, b), g.ewmul(a, c)), g.ewadd(d, g.ewmul(d, b))));
    test_cost cost;
    // Relaxed enough that many candidates wait in the queue without a limit.
    auto free = search::backtracking{}.rules(rs.rules()).alpha(1.5).layouts(false).max_expansions(400).run(g, cost);
    REQUIRE(free.rep.max_queue_seen > 8);
    CHECK(free.rep.pruned == 0);
    // A budget of about three graphs: the queue is cut down to it, the run
    // goes on and its result is still equivalent and no worse than the start.
    const std::size_t budget = 3 * g.footprint();
    auto tight = search::backtracking{}.rules(rs.rules()).alpha(1.5).layouts(false).max_expansions(400)
                     .max_memory(budget).run(g, cost);
    CHECK(tight.rep.pruned > 0);
    CHECK(tight.rep.max_queue_seen < free.rep.max_queue_seen);
    // The peak is measured just before pruning: at most one graph over.
    CHECK(tight.rep.max_queue_bytes <= budget + 2 * g.footprint());
    CHECK(tight.rep.cost_after <= tight.rep.cost_before);
    check_equivalent(g, tight.best);
    std::ostringstream os;
    tight.rep.print(os);
    CHECK(os.str().find("KiB") != std::string::npos);
}

TEST_CASE("search memory budget counts the constants queued graphs hold that the start graph does not") {
    rewrite::rule_set rs;
    metaflow_rules(rs);
    std::mt19937_64 rng(12);
    graph g;
    auto v = g.input("x", {1, 64, 8, 8});
    for (int i = 0; i < 2; ++i) {
        auto a = g.conv2d(v, g.weight("w1_" + std::to_string(i), {64, 64, 1, 1}, rng));
        auto b = g.conv2d(v, g.weight("w3_" + std::to_string(i), {64, 64, 3, 3}, rng));
        v = g.relu(g.ewadd(a, b));
    }
    g.mark_output(v);
    // Enlarging a 1x1 kernel to 3x3 folds a new 64x64x3x3 kernel (147 KB),
    // far more than a queued graph's nodes take; each block gives its own.
    const std::size_t kernel = 64 * 64 * 9 * sizeof(float);
    REQUIRE(g.footprint() < kernel / 8);
    auto search = [&] { return search::backtracking{}.rules(rs.rules()).alpha(1.5).layouts(false).max_expansions(200); };
    // Launches dominate, so the enlarged and fused graphs are cheaper.
    const test_cost cost{.launch = 1e9};
    auto free = search().run(g, cost);
    CHECK(free.rep.max_queue_bytes >= 2 * kernel);
    CHECK(free.rep.pruned == 0);
    // A budget below one folded kernel: graphs holding one are pruned (the
    // first one queued stays), and the result is still equivalent.
    auto tight = search().max_memory(kernel / 2).run(g, cost);
    CHECK(tight.rep.pruned > 0);
    CHECK(tight.rep.cost_after <= tight.rep.cost_before);
    check_equivalent(g, tight.best);
}

TEST_CASE("optimize: a graph beyond the partition threshold is optimized part by part, rules spanning cuts too") {
    rewrite::rule_set rs;
    rs.add(ax("relu-conv"));
    std::mt19937_64 rng(14);
    graph g;
    auto v = g.input("x", {1, 2, 4, 4});
    for (int i = 0; i < 24; ++i) v = g.relu(g.conv2d(v, g.weight("w" + std::to_string(i), {2, 2, 1, 1}, rng)));
    g.mark_output(v);
    REQUIRE(g.op_count() == 48);
    auto r = optimize(g, rs.rules(), test_cost{}, {.max_expansions = 2000, .partition_threshold = 10});
    CHECK(r.report.parts > 1);
    CHECK(r.report.improved);
    CHECK(count_ops(r.optimized, sp::op_kind::relu) == 0);
    CHECK(count_ops(r.optimized, sp::op_kind::conv2d) == 24);
    CHECK(r.report.rule_uses["relu-conv"] == 24);
    check_equivalent(g, r.optimized);
    std::ostringstream os;
    r.report.print(os);
    CHECK(os.str().find("relu-conv") != std::string::npos);

    // The derivation: the parts' steps, each a relu fused into the conv it
    // reads, located by the operators' names; replay rebuilds the result.
    auto d = r.report.derivation;
    CHECK(d.uses() == r.report.rule_uses);
    bool parts_stage = false;
    for (const auto& st : d.stages) parts_stage = parts_stage || (st.k == search::derivation_stage::kind::parts && !st.parts.empty());
    CHECK(parts_stage);
    for (const search::rewrite_step* st : d.steps()) {
        REQUIRE(st->where.size() == 2);
        CHECK(st->cost_after < st->cost_before);
    }
    const graph again = search::replay(g, d, rs.rules(), test_cost{});
    CHECK(again.hash_of_outputs(graph::weights_by::content) == r.optimized.hash_of_outputs(graph::weights_by::content));

    // A derivation that does not fit the graph is refused, naming the step.
    auto lie = d;
    lie.steps().front()->rule = "no-such-rule";
    try {
        (void)search::replay(g, lie, rs.rules(), test_cost{});
        FAIL("replayed an unknown rule");
    } catch (const error& e) {
        CHECK(std::string(e.what()).find("step 1 (no-such-rule") != std::string::npos);
    }
    auto elsewhere = d;
    auto* first = elsewhere.steps().front();
    std::swap(first->where[0], first->where[1]);
    try {
        (void)search::replay(g, elsewhere, rs.rules(), test_cost{});
        FAIL("replayed a rule where it does not match");
    } catch (const error& e) {
        CHECK(std::string(e.what()).find("does not match there") != std::string::npos);
    }
}

TEST_CASE("replay tells apart two matches of the same operators by their exchanged operands") {
    // ewadd-assoc, x + (y + z) => (x + y) + z, on a + (b + c): the inner sum
    // binds (y, z) = (b, c) or (c, b), the same two operators both times.
    rewrite::rule_set rs;
    rs.add(*sp::find_axiom("ewadd-assoc"));
    graph g;
    auto a = g.input("a", {4}), b = g.input("b", {4}), c = g.input("c", {4});
    auto inner = g.ewadd(b, c, "inner");
    g.mark_output(g.relu(g.ewadd(a, inner, "outer")));
    search::derivation d;
    d.layouts = false;
    d.fold_weights = false;
    d.stages.push_back({.k = search::derivation_stage::kind::leaf_merges,
                        .steps = {{.rule = "ewadd-assoc", .where = {"inner", "outer"}}}});
    auto replayed = [&](std::uint32_t swapped) {
        auto e = d;
        e.steps().front()->swapped = swapped;
        return search::replay(g, e, rs.rules(), test_cost{});
    };
    const graph plain = replayed(0), exchanged = replayed(1);
    check_equivalent(g, plain);
    check_equivalent(g, exchanged);
    // (a + b) + c and (a + c) + b: different graphs, each what its step says.
    CHECK(plain.structural_hash() != exchanged.structural_hash());
    auto first_sum_reads = [](const graph& h, const char* name) {
        for (const node& n : h.nodes)
            if (n.is_op(sp::op_kind::ewadd))
                for (value v : n.inputs)
                    if (h.at(v).name == name) {
                        const node& other = h.at(n.inputs[0] == v ? n.inputs[1] : n.inputs[0]);
                        if (other.kind == node_kind::input) return true;
                    }
        return false;
    };
    CHECK(first_sum_reads(plain, "b"));
    CHECK_FALSE(first_sum_reads(plain, "c"));
    CHECK(first_sum_reads(exchanged, "c"));
    CHECK_FALSE(first_sum_reads(exchanged, "b"));
    // Bits no match has: refused, naming the step.
    try {
        (void)replayed(2);
        FAIL("replayed a step with operands exchanged where the rule does not exchange them");
    } catch (const error& e) {
        CHECK(std::string(e.what()).find("does not match there") != std::string::npos);
    }
}

TEST_CASE("replay keeps apart the equal constants that different parts create, as optimize does") {
    // Every part turns its avg-pools into depthwise convs over a cpool
    // kernel; the kernels are equal. optimize folds each part's through that
    // part's own cache, so the parts hold separate weights; a replay that
    // folded every part through one cache would share one weight among them
    // and write another model (the file differs, the outputs do not).
    rewrite::rule_set rs;
    rs.add(ax("conv-cpool-avgpool"));
    graph g;
    auto v = g.input("x", {1, 4, 8, 8});
    for (int i = 0; i < 12; ++i) v = g.relu(g.avgpool(v));
    g.mark_output(v);
    const test_cost pools_dear{.pool_factor = 100};
    auto r = optimize(g, rs.rules(), pools_dear, {.max_expansions = 2000, .partition_threshold = 10});
    REQUIRE(r.report.parts > 1);
    REQUIRE(count_ops(r.optimized, sp::op_kind::avgpool) == 0);
    auto distinct_weights = [](const graph& h) {
        std::unordered_set<const void*> data;
        for (const node& n : h.nodes)
            if (n.kind == node_kind::weight) data.insert(n.data.get());
        return data.size();
    };
    const std::size_t written = distinct_weights(r.optimized);
    CHECK(written > 1);
    auto d = r.report.derivation;
    const graph again = search::replay(g, d, rs.rules(), pools_dear);
    CHECK(distinct_weights(again) == written);
    CHECK(again.hash_of_outputs(graph::weights_by::content) == r.optimized.hash_of_outputs(graph::weights_by::content));
    check_equivalent(g, again);
}

TEST_CASE("optimize: nothing to improve => the original graph, unchanged") {
    rewrite::rule_set rs;
    rs.add(ax("relu-conv"));
    graph g;
    auto x = g.input("x", {4});
    g.mark_output(g.tanh(x));
    auto r = optimize(g, rs.rules(), test_cost{}, {.top_k = 3});
    CHECK_FALSE(r.report.improved);
    CHECK(r.optimized.structural_hash() == g.structural_hash());
    CHECK(r.report.cost_after == r.report.cost_before);
    CHECK(r.top_k.size() == 1);
}

TEST_CASE("optimize with cost::analytical: TASO Figure 2a matmul sharing + relu fusion") {
    rewrite::rule_set rs;
    rs.add(ax("relu-conv"));
    rs.add(ax("conv-concat-weight"), {sp::condition{sp::pdim(Y, 1), sp::pdim(X, 1), sp::condition::rel::eq}});
    rs.add(ax("split0-concat"));
    rs.add(ax("split1-concat"));
    std::mt19937_64 rng(15);
    graph g;
    auto x = g.input("x", {1, 8, 16, 16});
    auto a = g.relu(g.conv2d(x, g.weight("w1", {8, 8, 3, 3}, rng)));
    auto b = g.relu(g.conv2d(x, g.weight("w2", {8, 8, 3, 3}, rng)));
    g.mark_output(g.concat(1, {a, b}));
    auto r = optimize(g, rs.rules(), cost::analytical{}, {.max_expansions = 300});
    INFO(ops_of(r.optimized));
    CHECK(r.report.improved);
    CHECK(count_ops(r.optimized, sp::op_kind::conv2d) == 1);
    check_equivalent(g, r.optimized);
}
