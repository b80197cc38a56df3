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

TEST_CASE("examples: the rule set builds, with both composed rules") {
    examples::example_rules rs;
    int found = 0;
    for (const auto& r : rs.rules()) found += r.name == "matmul-fuse-shared" || r.name == "conv-fuse-shared";
    CHECK(found == 2);
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
