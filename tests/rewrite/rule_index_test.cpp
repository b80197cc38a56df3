// rewrite::rule_index: the matches it finds are exactly those of matching
// every rule over the whole graph, in the same order, on every zoo model,
// with the axiom-derived rules and the generator's table; and it offers a
// node only to rules whose root can match it.
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "tsopt/rewrite/from_axiom.hpp"
#include "tsopt/rewrite/rule_index.hpp"
#include "tsopt/rules/default.hpp"
#include "tsopt/spec/axioms.hpp"
#include "tsopt/zoo/zoo.hpp"

#include "helpers.hpp"

using namespace tsopt;

namespace {

// (rule, nodes, tensors, params) of every match, by brute force or through the index.
using found = std::vector<std::tuple<std::size_t, std::vector<std::int32_t>, std::vector<value>, std::vector<std::int32_t>>>;

found every_rule_everywhere(const rewrite::graph_index& ix, std::span<const rewrite::rule> rules) {
    found out;
    for (std::size_t ri = 0; ri < rules.size(); ++ri)
        for (const auto& m : rewrite::find_matches(ix, rules[ri])) out.emplace_back(ri, m.nodes, m.tensors, m.params);
    return out;
}

found through_index(const rewrite::graph_index& ix, const rewrite::rule_index& idx) {
    found out;
    idx.for_each_match(ix, [&](std::size_t ri, const rewrite::match& m) {
        out.emplace_back(ri, m.nodes, m.tensors, m.params);
        return true;
    });
    return out;
}

graph small(const zoo::model& m) {
    for (int image : {32, 80, 128, 227}) {
        try {
            return m.build({.batch = 1, .image = image, .width_div = 16, .depth_div = 8, .length = 2});
        } catch (const error&) {
        }
    }
    FAIL("zoo model ", m.name, " builds at no small size");
    return {};
}

}  // namespace

TEST_CASE("rule_index finds the same matches as matching every rule, on every zoo model") {
    rewrite::rule_set axioms;
    for (const auto& a : spec::all_axioms) axioms.add(a);
    std::vector<rewrite::rule> rules(axioms.rules().begin(), axioms.rules().end());
    auto gen = tsopt::rules::default_rules();
    rules.insert(rules.end(), gen.begin(), gen.end());
    REQUIRE(rules.size() > 250);
    const rewrite::rule_index idx(rules);
    MESSAGE(rules.size(), " rules under ", idx.keys(), " index keys");
    std::size_t matches = 0;
    for (const auto& m : zoo::models()) {
        CAPTURE(m.name);
        graph g = small(m);
        rewrite::graph_index ix(g);
        found all = every_rule_everywhere(ix, rules);
        found indexed = through_index(ix, idx);
        CHECK(indexed.size() == all.size());
        CHECK(indexed == all);
        matches += all.size();
    }
    MESSAGE(matches, " matches over the zoo");
    CHECK(matches > 100);
}

// What the index promises, written out plainly: node n agrees with rule r's
// root on operator, arity, constant parameters, and on the operator, output
// and constant parameters of every root input that is a pattern node, the
// two operands of a commutative root taken in either order.
bool agrees(const graph& g, std::int32_t n, const rewrite::rule& r) {
    const auto constants_agree = [](const spec::pattern_node& p, const node& gn) {
        for (int i = 0; i < spec::decl(p.op).num_params; ++i) {
            const auto& t = p.params[static_cast<std::size_t>(i)];
            if (t.k != spec::param_term::kind::constant) continue;
            if (p.op == spec::op_kind::split && i == spec::split_p::at && t.value == 0) continue;
            if (gn.params[i] != t.value) return false;
        }
        return true;
    };
    const spec::pattern_node& root = r.src.back();
    const node& gn = g.nodes[static_cast<std::size_t>(n)];
    if (gn.kind != node_kind::op || gn.op != root.op || gn.inputs.size() != root.num_inputs) return false;
    if (!constants_agree(root, gn)) return false;
    auto inputs_agree = [&](bool swap) {
        for (int i = 0; i < root.num_inputs; ++i) {
            const auto& in = root.inputs[static_cast<std::size_t>(i)];
            if (in.is_var) continue;
            const auto& child = r.src[static_cast<std::size_t>(in.index)];
            value v = gn.inputs[static_cast<std::size_t>(swap ? 1 - i : i)];
            const node& c = g.at(v);
            if (c.kind != node_kind::op || c.op != child.op || v.output != in.output || !constants_agree(child, c)) return false;
        }
        return true;
    };
    return inputs_agree(false) || (root.num_inputs == 2 && spec::decl(root.op).commutative && inputs_agree(true));
}

TEST_CASE("rule_index offers a node to a rule exactly when the rule's root agrees with it") {
    auto rules = tsopt::rules::default_rules();
    const rewrite::rule_index idx(rules);
    std::size_t offered_total = 0, kind_pairs = 0;
    for (std::string name : {"resnet18", "inception_v3", "nasnet_a", "bert"}) {
        CAPTURE(name);
        graph g = small(zoo::find(name));
        rewrite::graph_index ix(g);
        std::set<std::pair<std::size_t, std::int32_t>> offered;
        idx.for_each_candidate(ix, [&](std::size_t ri, std::span<const std::int32_t> anchors) {
            for (std::int32_t n : anchors) offered.insert({ri, n});
            return true;
        });
        offered_total += offered.size();
        for (std::size_t ri = 0; ri < rules.size(); ++ri)
            for (std::int32_t n : ix.of_kind(rules[ri].src.back().op)) {
                ++kind_pairs;
                // A hash collision could only add an offer; none is expected here.
                CHECK_MESSAGE(offered.count({ri, n}) == agrees(g, n, rules[ri]), rules[ri].name, " at node ", n);
            }
    }
    MESSAGE(offered_total, " (rule, node) offers out of ", kind_pairs, " pairs of the same operator");
    CHECK(offered_total < kind_pairs);
}
