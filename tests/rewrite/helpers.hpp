#pragma once
// Shared by the rewrite and search tests: a small cost model for tests, the
// equivalence check on the reference backend, and graph queries that read
// like the goals of `start => goal` tests.
#include <doctest/doctest.h>

#include <map>
#include <sstream>
#include <string>

#include "tsopt/backend/reference/executor.hpp"
#include "tsopt/cost/cost_model.hpp"
#include "tsopt/rewrite/apply.hpp"
#include "tsopt/rewrite/from_axiom.hpp"
#include "tsopt/rewrite/layout.hpp"
#include "tsopt/rewrite/match.hpp"
#include "tsopt/rules/default.hpp"
#include "tsopt/spec/axioms.hpp"
#include "tsopt/zoo/zoo.hpp"

namespace rewrite_test {

using namespace tsopt;

// Every axiom as rules (both directions), then the generator's default
// table: the rule set the matching tests walk. Holds the axioms' rule_set,
// whose storage the rules view.
struct axiom_and_generated_rules {
    rewrite::rule_set axioms;
    std::vector<rewrite::rule> all;
    axiom_and_generated_rules() {
        for (const auto& a : spec::all_axioms) axioms.add(a);
        all.assign(axioms.rules().begin(), axioms.rules().end());
        auto gen = tsopt::rules::default_rules();
        all.insert(all.end(), gen.begin(), gen.end());
    }
};

// A zoo model at the smallest image size it builds at (matching tests walk
// every model, and only the structure matters to them).
inline graph small_zoo_graph(const zoo::model& m) {
    for (int image : {32, 80, 128, 227}) {
        try {
            return m.build({.batch = 1, .image = image, .width_div = 16, .depth_div = 8, .length = 2});
        } catch (const error&) {
        }
    }
    FAIL("zoo model ", m.name, " builds at no small size");
    return {};
}

// FLOPs plus a per-launch overhead, the shape of a measured cost on small
// tensors: every operator that runs at inference pays `launch`; weight-only
// operators are free (folded); data movement pays its elements; a transpose
// that only reinterprets a swapped layout (rewrite::is_layout_view) is free.
// `pool_factor` scales pooling (cuDNN-style measurements price pooling above
// the equivalent depthwise convolution).
struct test_cost {
    static constexpr bool additive = true;
    double launch = 1000;
    double pool_factor = 1;
    double operator_cost(const graph& g, std::size_t i) const {
        const node& n = g.nodes[i];
        if (!cost::runs_at_inference(g, i)) return 0;
        if (n.kind == node_kind::opaque) return launch;
        if (rewrite::is_layout_view(g, i)) return 0;
        std::vector<shape> in;
        for (value v : n.inputs) in.push_back(g.shape_of(v));
        double f = static_cast<double>(spec::decl(n.op).flops(n.params, in, n.shapes));
        if (spec::decl(n.op).cls == spec::op_class::data_movement) f = static_cast<double>(n.shapes[0].elements());
        if (n.is_op(spec::op_kind::avgpool) || n.is_op(spec::op_kind::maxpool)) f *= pool_factor;
        return launch + f;
    }
    double graph_cost(const graph& g) const {
        double t = 0;
        for (std::size_t i = 0; i < g.size(); ++i) t += operator_cost(g, i);
        return t;
    }
};
static_assert(cost::cost_model<test_cost>);

// Random inputs by name, so graphs whose input order differs still compare.
inline std::vector<tensor<float>> inputs_for(const graph& g, const std::map<std::string, tensor<float>>& by_name) {
    std::vector<tensor<float>> r;
    for (value v : g.inputs()) {
        auto it = by_name.find(g.at(v).name);
        REQUIRE_MESSAGE(it != by_name.end(), "input '", g.at(v).name, "' missing");
        r.push_back(it->second);
    }
    return r;
}

// The optimized graph computes what the original does on random inputs
// (relative error <= tol per output).
inline void check_equivalent(const graph& original, const graph& optimized, double tol = 1e-4,
                             const backend::reference& ref = {}) {
    optimized.validate();
    std::map<std::string, tensor<float>> by_name;
    std::mt19937_64 rng(1234);
    for (value v : original.inputs()) by_name[original.at(v).name] = random_float(original.shape_of(v), rng);
    auto a = ref.execute(original, inputs_for(original, by_name));
    auto b = ref.execute(optimized, inputs_for(optimized, by_name));
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        double e = relative_error(b[i], a[i]);
        CHECK_MESSAGE(e <= tol, "output ", i, ": relative error ", e, " (shapes ", a[i].shape.str(), " vs ",
                      b[i].shape.str(), ")");
    }
}

// r matches g exactly once, and the graph it rewrites g into computes what g does.
inline graph rewritten_once(const graph& g, const rewrite::rule& r) {
    auto ms = rewrite::find_matches(g, r);
    REQUIRE(ms.size() == 1);
    auto out = rewrite::apply(g, r, ms[0]);
    REQUIRE(out);
    check_equivalent(g, *out);
    return *out;
}

// Operators of a kind that run at inference.
inline int count_ops(const graph& g, spec::op_kind k) {
    auto constant = g.constant_mask();
    int n = 0;
    for (std::size_t i = 0; i < g.size(); ++i) n += g.nodes[i].is_op(k) && !constant[i];
    return n;
}
inline int running_ops(const graph& g) {
    auto constant = g.constant_mask();
    int n = 0;
    for (std::size_t i = 0; i < g.size(); ++i)
        n += (g.nodes[i].kind == node_kind::op && !constant[i]) || g.nodes[i].kind == node_kind::opaque;
    return n;
}
inline std::string ops_of(const graph& g) {
    std::ostringstream os;
    for (std::size_t i : g.topological_order())
        if (g.nodes[i].kind == node_kind::op || g.nodes[i].kind == node_kind::opaque) os << g.nodes[i].type_name() << " ";
    return os.str();
}

}  // namespace rewrite_test
