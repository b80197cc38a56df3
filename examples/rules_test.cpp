// The examples' composed multi-output rules (examples/rules.hpp) follow from
// the axiom set: each is proven by the Z3 verifier (generator/verify), and
// each is well-formed as a rewrite rule.
#include <doctest/doctest.h>

#include "rules.hpp"
#include "verifier.hpp"

using namespace tsopt;

TEST_CASE("examples: every composed rule is proven from the axioms") {
    gen::verifier v(spec::all_axioms, 20000);
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
