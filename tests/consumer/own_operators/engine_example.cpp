// The engine of tests/consumer/own_operators built outside tsopt's tree
// against an installed tsopt (consumers_test.py): its operators registered,
// the rules its own generator proved at its build time (myengine_rules.hpp)
// used beside the shipped set; exit 0 when the optimized graph has lost its
// negations and computes what the original computes.
#include <tsopt/backend/reference/executor.hpp>
#include <tsopt/cost/analytical.hpp>
#include <tsopt/optimize.hpp>
#include <tsopt/rules/default.hpp>

#include <iostream>
#include <map>
#include <random>
#include <vector>

#include "myengine_ops.hpp"
#include "myengine_rules.hpp"

int main() {
    using namespace std::chrono_literals;
    myengine::register_spec();
    std::vector<tsopt::rewrite::rule> rules(tsopt::rules::default_rules().begin(), tsopt::rules::default_rules().end());
    rules.insert(rules.end(), myengine::rules::generated().begin(), myengine::rules::generated().end());
    const tsopt::graph g = myengine::negated_product();
    const auto neg = myengine::neg_decl.kind;
    std::mt19937_64 rng(4);
    auto r = tsopt::optimize(g, rules, tsopt::cost::analytical{}, {.budget = 10s});
    int negs = 0;
    for (const auto& n : r.optimized.nodes) negs += n.is_op(neg);
    std::map<std::string, tsopt::tensor<float>> by_name{{"x", tsopt::random_float({16, 32}, rng)},
                                                         {"b", tsopt::random_float({16, 24}, rng)}};
    auto inputs_of = [&](const tsopt::graph& h) {  // in h's order of inputs
        std::vector<tsopt::tensor<float>> in;
        for (auto v : h.inputs()) in.push_back(by_name.at(h.at(v).name));
        return in;
    };
    tsopt::backend::reference ref;
    const double e = tsopt::relative_error(ref.execute(r.optimized, inputs_of(r.optimized))[0], ref.execute(g, inputs_of(g))[0]);
    std::cout << "own rules: " << myengine::rules::generated().size() << "; operators " << g.op_count() << " -> "
              << r.optimized.op_count() << ", neg left " << negs << ", relative error " << e << "\n";
    return negs == 0 && r.optimized.op_count() <= 2 && e <= 1e-4 ? 0 : 1;
}
