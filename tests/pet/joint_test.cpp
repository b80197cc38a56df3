// tsopt::optimize with `pet` on: one search mixes verified rules and PET's
// corrected mutants (PET's joint optimization).
#include <doctest/doctest.h>

#include "tsopt/backend/reference/executor.hpp"
#include "tsopt/cost/analytical.hpp"
#include "tsopt/cost/sum.hpp"
#include "tsopt/optimize.hpp"
#include "tsopt/rewrite/from_axiom.hpp"
#include "tsopt/rules/default.hpp"
#include "tsopt/zoo/zoo.hpp"

using namespace tsopt;
using namespace std::chrono_literals;

namespace {
int count_convs(const graph& g) {
    int n = 0;
    for (auto& nd : g.nodes) n += nd.is_op(spec::op_kind::conv2d);
    return n;
}
}  // namespace

TEST_CASE("joint optimization: PET merges convs the rules cannot, the rules fuse the relus") {
    // Figure 10's shape: a 1x1 and a 3x3 conv on one input, each followed by
    // relu. Merging them needs PET (no rule enlarges a kernel in reverse);
    // fusing relu into conv is a rule (relu-conv).
    std::mt19937_64 rng(5);
    graph g;
    value x = g.input("x", shape{1, 4, 8, 8});
    g.mark_output(g.relu(g.conv2d(x, g.weight("w1", shape{6, 4, 1, 1}, rng))));
    g.mark_output(g.relu(g.conv2d(x, g.weight("w2", shape{10, 4, 3, 3}, rng))));

    rewrite::rule_set rs;
    for (auto name : {"relu-conv", "relu-split0", "relu-split1"}) rs.add(*spec::find_axiom(name));
    // A backend where kernels cost a launch each and split is a view (as on
    // oneDNN and cuDNN for channel splits): one conv beats two.
    auto per_op = [](const graph& h, std::size_t i) {
        const node& n = h.nodes[i];
        if (n.kind != node_kind::op || h.constant_mask()[i]) return 0.0;
        if (n.is_op(spec::op_kind::split) || n.is_op(spec::op_kind::enlarge)) return 0.0;
        return n.is_op(spec::op_kind::conv2d) ? 1.0 : 0.5;
    };
    cost::sum model{per_op};

    auto rules_only = optimize(g, rs.rules(), model, {.budget = 5s});
    auto joint = optimize(g, rs.rules(), model, {.budget = 10s, .pet = true});
    INFO("rules only: ", rules_only.report.cost_after, ", joint: ", joint.report.cost_after);
    CHECK(count_convs(rules_only.optimized) == 2);
    CHECK(joint.report.pet_candidates > 0);
    CHECK(!joint.report.pet_uses.empty());
    CHECK(count_convs(joint.optimized) == 1);
    CHECK(joint.report.cost_after < rules_only.report.cost_after);

    // The derivation names the mutant kept (which of pet::mutants' candidates
    // of the graph so far, and its hash): replay rebuilds the result from the
    // input with PET's generator and the same PET options.
    const auto& stages = joint.report.derivation.stages;
    const auto pet_stage = std::find_if(stages.begin(), stages.end(),
                                        [](const search::derivation_stage& st) { return st.k == search::derivation_stage::kind::pet; });
    REQUIRE(pet_stage != stages.end());
    REQUIRE(pet_stage->pet_index.has_value());
    CHECK_FALSE(joint.report.derivation.replayable());  // not from the rules alone
    const auto content = [](const graph& h) { return h.hash_of_outputs(graph::weights_by::content); };
    {
        search::derivation d = joint.report.derivation;
        const graph again = search::replay(g, d, rs.rules(), model, {}, pet_mutants({}));
        CHECK(content(again) == content(joint.optimized));
    }
    const auto at = static_cast<std::size_t>(pet_stage - stages.begin());
    {
        search::derivation d = joint.report.derivation;
        CHECK_THROWS_WITH_AS(search::replay(g, d, rs.rules(), model), doctest::Contains("needs PET's mutant generator"), error);
    }
    {
        // Another candidate than the one recorded, or none at that index.
        search::derivation d = joint.report.derivation;
        d.stages[at].pet_index = *pet_stage->pet_index + 1;
        CHECK_THROWS_AS(search::replay(g, d, rs.rules(), model, {}, pet_mutants({})), error);
        d.stages[at].pet_index = 100000;
        CHECK_THROWS_WITH_AS(search::replay(g, d, rs.rules(), model, {}, pet_mutants({})), doctest::Contains("corrected mutants"), error);
    }
    {
        search::derivation d = joint.report.derivation;
        d.stages[at].pet_hash ^= 1;
        CHECK_THROWS_WITH_AS(search::replay(g, d, rs.rules(), model, {}, pet_mutants({})), doctest::Contains("not the recorded one"), error);
    }

    backend::reference ref;
    auto in = backend::random_inputs(g, 9);
    auto a = ref.execute(g, in), b = ref.execute(joint.optimized, in);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(relative_error(b[i], a[i]) <= 1e-4);
}

TEST_CASE("joint optimization on zoo models: the PET stages of the derivation replay to the graph it describes") {
    // SqueezeNet, small (two PET stages, each followed by a rule search):
    // tsopt::optimize replays every derivation it hands out itself
    // (replay_derivations), so an unreplayable PET stage throws there; the
    // replay here checks the result against the graph once more.
    for (const char* name : {"squeezenet"}) {
        INFO(std::string(name));
        const graph g = zoo::build(name, {.image = 64, .width_div = 8});
        const auto rules = rules::default_rules();
        auto r = optimize(g, rules, cost::analytical{}, {.budget = 60s, .max_expansions = 400, .pet = true});
        int pet_stages = 0;
        for (const auto& st : r.report.derivation.stages) pet_stages += st.k == search::derivation_stage::kind::pet;
        INFO("cost ", r.report.cost_before, " -> ", r.report.cost_after, ", PET candidates ", r.report.pet_candidates);
        CHECK(pet_stages > 0);
        search::derivation d = r.report.derivation;
        const graph again = search::replay(g, d, rules, cost::analytical{}, {}, pet_mutants({}));
        CHECK(again.hash_of_outputs(graph::weights_by::content) == r.optimized.hash_of_outputs(graph::weights_by::content));
        backend::reference ref;
        auto in = backend::random_inputs(g, 3);
        auto a = ref.execute(g, in), b = ref.execute(again, in);
        REQUIRE(a.size() == b.size());
        for (std::size_t i = 0; i < a.size(); ++i) CHECK(relative_error(b[i], a[i]) <= 1e-4);
    }
}
