// An engine's own rule set beside the shipped one (tests/consumer): the
// consumer's build runs the installed tsopt-gen over the operators it cares
// about (relu, matmul), proving with Z3, into own_rules.hpp in namespace
// myengine::rules; this program includes both sets and optimizes with its own.
#include <tsopt/cost/analytical.hpp>
#include <tsopt/optimize.hpp>
#include <tsopt/rules/default.hpp>

#include <iostream>

#include "own_rules.hpp"

using namespace std::chrono_literals;

int main() {
    const auto shipped = tsopt::rules::default_rules();
    const auto own = myengine::rules::generated();
    tsopt::graph g;
    auto x = g.input("x", {8, 8});
    auto w = g.input("w", {8, 8});
    g.mark_output(g.relu(g.relu(g.matmul(x, w))));
    auto r = tsopt::optimize(g, own, tsopt::cost::analytical{}, {.budget = 2s});
    std::cout << "shipped rules: " << shipped.size() << ", own rules: " << own.size() << " (spec "
              << myengine::rules::generated_spec_hash << "); operators " << g.op_count() << " -> "
              << r.optimized.op_count() << "\n";
    // relu(relu(matmul)) is one matmul with a fused relu under relu/matmul rules.
    return !shipped.empty() && !own.empty() && r.optimized.op_count() == 1 ? 0 : 1;
}
