// The examples' composed multi-output rules (examples/rules.hpp) follow from
// the axiom set: each is proven by the Z3 verifier (generator/verify), and
// each is well-formed as a rewrite rule.
#include <doctest/doctest.h>

#include "rules.hpp"
#include "tsopt/cost/analytical.hpp"
#include "tsopt/optimize.hpp"
#include "verifier.hpp"

#include "../tests/rewrite/helpers.hpp"

using namespace tsopt;

TEST_CASE("examples: every composed rule is proven from the axioms") {
    // TASO's model: the compositions fire under its typing (conv-fuse-shared: ungrouped).
    gen::verifier v(spec::taso_model_axioms, 20000);
    for (const auto& c : examples::composed_rules) {
        auto s = examples::rules_detail::roots_of(*c.src), d = examples::rules_detail::roots_of(*c.dst);
        gen::candidate cand{s.nodes, d.nodes, s.outs, d.outs};
        auto r = v.prove(cand);
        INFO(c.name, " (from ", c.from, "): ", gen::to_string(r.v), " after ", r.seconds, " s: ", r.detail);
        CHECK(r.v == gen::verdict::proven);
    }
}

TEST_CASE("examples: the rule set builds, with every composed rule") {
    examples::example_rules rs;
    int found = 0;
    for (const auto& r : rs.rules())
        for (const auto& c : examples::composed_rules) found += r.name == c.name;
    CHECK(found == static_cast<int>(std::size(examples::composed_rules)));
    CHECK_THROWS_AS(examples::parse_rule_source("axiom"), error);
}

TEST_CASE("examples: conv-concat-grouped is in the rule set, both ways, under its own conditions only") {
    examples::example_rules rs;
    const spec::axiom& a = *spec::find_axiom("conv-concat-grouped");
    int found = 0;
    for (const auto& r : rs.rules())
        if (r.name == "conv-concat-grouped" || r.name == "conv-concat-grouped-rev") {
            ++found;
            CHECK(r.needs == spec::full_semantics);
            CHECK(r.where.size() == static_cast<std::size_t>(a.num_where));
        }
    CHECK(found == 2);
}

TEST_CASE("examples: a ResNeXt block as parallel paths (split, 4 convs, concat) => one 4-group conv") {
    // Xie et al. Fig. 3(b): the 3x3 stage as 4 paths of 2 channels each.
    std::mt19937_64 rng(21);
    graph g;
    auto x = g.input("x", {1, 8, 8, 8});
    auto h = g.conv2d(x, g.weight("w1", {8, 8, 1, 1}, rng), {.act = relu});
    auto [l, r] = g.split(1, 4, h);
    auto [a, b] = g.split(1, 2, l);
    auto [c, d] = g.split(1, 2, r);
    std::vector<value> paths;
    for (value p : {a, b, c, d})
        paths.push_back(g.conv2d(p, g.weight("w3x3_" + std::to_string(paths.size()), {2, 2, 3, 3}, rng), {.act = relu}));
    auto m = g.concat(1, {g.concat(1, {paths[0], paths[1]}), g.concat(1, {paths[2], paths[3]})});
    g.mark_output(g.conv2d(m, g.weight("w2", {8, 8, 1, 1}, rng)));

    examples::example_rules rs;
    auto res = optimize(g, rs.rules(), cost::analytical{}, {.budget = std::chrono::seconds(20)});
    std::ostringstream os;
    res.report.print(os);
    INFO(rewrite_test::ops_of(res.optimized), "\n", os.str());
    CHECK(rewrite_test::count_ops(res.optimized, spec::op_kind::conv2d) == 3);
    CHECK(rewrite_test::count_ops(res.optimized, spec::op_kind::split) == 0);
    CHECK(rewrite_test::count_ops(res.optimized, spec::op_kind::concat) == 0);
    bool grouped = false;
    for (const auto& n : res.optimized.nodes)
        if (n.is_op(spec::op_kind::conv2d))
            grouped = grouped || (res.optimized.shape_of(n.inputs[0])[1] == 8 && res.optimized.shape_of(n.inputs[1])[1] == 2);
    CHECK(grouped);
    CHECK(res.report.rule_uses["conv-concat-grouped"] == 3);
    CHECK(res.report.cost_after < res.report.cost_before);
    rewrite_test::check_equivalent(g, res.optimized, 1e-4);
}

namespace {

// h_t = tanh(x_t.W + h_{t-1}.U), t = 0..steps-1: W is read by one matmul per
// step, each in its own time step.
graph toy_rnn(int steps, std::int64_t hidden, std::mt19937_64& rng) {
    graph g;
    std::vector<value> xs;
    for (int t = 0; t < steps; ++t) xs.push_back(g.input("x" + std::to_string(t), {1, hidden}));
    value h = g.input("h0", {1, hidden});
    auto W = g.weight("W", {hidden, hidden}, rng), U = g.weight("U", {hidden, hidden}, rng);
    for (int t = 0; t < steps; ++t) h = g.tanh(g.ewadd(g.matmul(xs[static_cast<std::size_t>(t)], W), g.matmul(h, U)));
    g.mark_output(h);
    return g;
}

// Weight traffic: every operator at inference reads its inputs and writes
// its output (elements), plus a launch; batch-1 matmuls are all weight.
struct traffic_cost {
    static constexpr bool additive = true;
    double operator_cost(const graph& g, std::size_t i) const {
        if (!cost::runs_at_inference(g, i)) return 0;
        const node& n = g.nodes[i];
        double e = 10;
        for (value v : n.inputs) e += static_cast<double>(g.shape_of(v).elements());
        for (const auto& s : n.shapes) e += static_cast<double>(s.elements());
        return e;
    }
    double graph_cost(const graph& g) const {
        double t = 0;
        for (std::size_t i = 0; i < g.size(); ++i) t += operator_cost(g, i);
        return t;
    }
};

// Matmuls whose left operand has more than one row (batched across steps).
int batched_matmuls(const graph& g) {
    int k = 0;
    for (const auto& n : g.nodes) k += n.is_op(spec::op_kind::matmul) && g.shape_of(n.inputs[0])[0] > 1;
    return k;
}

std::string describe(const graph& g) {
    std::ostringstream os;
    for (std::size_t i : g.topological_order()) {
        const auto& n = g.nodes[i];
        if (n.kind != node_kind::op) continue;
        os << n.type_name() << "(";
        for (value v : n.inputs) os << g.shape_of(v).str() << " ";
        os << ") ";
    }
    return os.str();
}

}  // namespace

TEST_CASE("examples: matmul-batch-shared batches the input matmuls of two RNN steps into one") {
    std::mt19937_64 rng(31);
    graph g = toy_rnn(2, 8, rng);
    examples::example_rules rs;
    const rewrite::rule* r = nullptr;
    for (const auto& x : rs.rules())
        if (x.name == "matmul-batch-shared") r = &x;
    REQUIRE(r != nullptr);
    rewrite::graph_index ix(g);
    int applied = 0;
    for (const auto& m : rewrite::find_matches(ix, *r)) {
        std::string why;
        auto out = rewrite::apply(ix, *r, m, &why);
        if (!out) continue;  // h0.U with h1.U: h1 needs h0.U (a cycle)
        ++applied;
        INFO(rewrite_test::ops_of(*out));
        CHECK(rewrite_test::count_ops(*out, spec::op_kind::matmul) == 3);
        CHECK(batched_matmuls(*out) == 1);
        rewrite_test::check_equivalent(g, *out, 1e-5);
    }
    CHECK(applied == 2);  // (x0, x1) and (x1, x0)
}

TEST_CASE("examples: optimize batches an RNN's input matmuls across the time steps the partition separates") {
    std::mt19937_64 rng(32);
    graph g = toy_rnn(6, 32, rng);
    examples::example_rules rs;
    // Parts of at most 6 operators: about one step each; no whole-graph
    // search after stitching, so only the step before partitioning sees
    // matmuls of different steps together.
    optimize_options o{.budget = std::chrono::seconds(20), .max_expansions = 400, .partition_threshold = 6,
                       .cut_expansions = 0};
    auto r = optimize(g, rs.rules(), traffic_cost{}, o);
    std::ostringstream os;
    r.report.print(os);
    INFO(describe(r.optimized), "\n", os.str());
    CHECK(r.report.parts > 1);
    CHECK(r.report.leaf_matches >= 5);
    CHECK(r.report.rule_uses["matmul-batch-shared"] >= 5);
    // The six x_t.W read W once: one matmul over the six stacked rows.
    bool six_rows = false;
    for (const auto& n : r.optimized.nodes)
        six_rows = six_rows || (n.is_op(spec::op_kind::matmul) && r.optimized.shape_of(n.inputs[0])[0] == 6);
    CHECK(six_rows);
    rewrite_test::check_equivalent(g, r.optimized, 1e-5);

    // Without the step before partitioning each part's search sees one or two steps.
    o.leaf_matches = false;
    auto without = optimize(g, rs.rules(), traffic_cost{}, o);
    CHECK(without.report.leaf_matches == 0);
    for (const auto& n : without.optimized.nodes)
        CHECK_FALSE((n.is_op(spec::op_kind::matmul) && without.optimized.shape_of(n.inputs[0])[0] > 2));
    CHECK(r.report.cost_after < without.report.cost_after);
}
