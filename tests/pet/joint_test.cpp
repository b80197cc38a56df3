// tsopt::optimize with `pet` on: one search mixes verified rules and PET's
// corrected mutants (PET's joint optimization).
#include <doctest/doctest.h>

#include "tsopt/backend/reference/executor.hpp"
#include "tsopt/cost/sum.hpp"
#include "tsopt/optimize.hpp"
#include "tsopt/rewrite/from_axiom.hpp"

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

    backend::reference ref;
    auto in = backend::random_inputs(g, 9);
    auto a = ref.execute(g, in), b = ref.execute(joint.optimized, in);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(relative_error(b[i], a[i]) <= 1e-4);
}
