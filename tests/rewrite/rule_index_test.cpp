// rewrite::rule_index: the matches it finds are exactly those of matching
// every rule over the whole graph, in the same order, on every zoo model,
// with the axiom-derived rules and the generator's table; it offers a node
// only to rules whose root can match it, and holds a rule back only when
// another node of its source is nowhere in the graph.
#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "tsopt/io/rule_listing.hpp"
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

}  // namespace

TEST_CASE("rule_index finds the same matches as matching every rule, on every zoo model") {
    const rewrite_test::axiom_and_generated_rules set;
    const auto& rules = set.all;
    REQUIRE(rules.size() > 250);
    const rewrite::rule_index idx(rules);
    MESSAGE(rules.size(), " rules under ", idx.keys(), " index keys");
    std::size_t matches = 0;
    for (const auto& m : zoo::models()) {
        CAPTURE(m.name);
        graph g = rewrite_test::small_zoo_graph(m);
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

// What the index promises, written out plainly: graph node n agrees with
// pattern node `at` of rule r's source on operator, arity, constant
// parameters, and on the operator, output and constant parameters of every
// input that is a pattern node, the two operands of a commutative node taken
// in either order.
bool agrees(const graph& g, std::int32_t n, const rewrite::rule& r, std::size_t at) {
    const auto constants_agree = [](const spec::pattern_node& p, const node& gn) {
        for (int i = 0; i < spec::decl(p.op).num_params; ++i) {
            const auto& t = p.params[static_cast<std::size_t>(i)];
            if (t.k != spec::param_term::kind::constant) continue;
            if (p.op == spec::op_kind::split && i == spec::split_p::at && t.value == 0) continue;
            if (gn.params[i] != t.value) return false;
        }
        return true;
    };
    const spec::pattern_node& p = r.src[at];
    const node& gn = g.nodes[static_cast<std::size_t>(n)];
    if (gn.kind != node_kind::op || gn.op != p.op || gn.inputs.size() != p.num_inputs) return false;
    if (!constants_agree(p, gn)) return false;
    auto inputs_agree = [&](bool swap) {
        for (int i = 0; i < p.num_inputs; ++i) {
            const auto& in = p.inputs[static_cast<std::size_t>(i)];
            if (in.is_var) continue;
            const auto& child = r.src[static_cast<std::size_t>(in.index)];
            value v = gn.inputs[static_cast<std::size_t>(swap ? 1 - i : i)];
            const node& c = g.at(v);
            if (c.kind != node_kind::op || c.op != child.op || v.output != in.output || !constants_agree(child, c)) return false;
        }
        return true;
    };
    return inputs_agree(false) || (p.num_inputs == 2 && spec::decl(p.op).commutative && inputs_agree(true));
}

// Whether some node of g agrees with every pattern node of r's source.
bool every_node_found(const rewrite::graph_index& ix, const rewrite::rule& r) {
    for (std::size_t at = 0; at < r.src.size(); ++at) {
        const auto& of = ix.of_kind(r.src[at].op);
        if (std::none_of(of.begin(), of.end(), [&](std::int32_t n) { return agrees(ix.g(), n, r, at); })) return false;
    }
    return true;
}

using offers = std::set<std::pair<std::size_t, std::int32_t>>;
offers offered_by(const rewrite::rule_index& idx, const rewrite::graph_index& ix,
                  rewrite::rule_index::candidate_memo* memo = nullptr) {
    offers offered;
    idx.for_each_candidate(
        ix,
        [&](std::size_t ri, std::span<const std::int32_t> anchors) {
            for (std::int32_t n : anchors) offered.insert({ri, n});
            return true;
        },
        memo);
    return offered;
}

TEST_CASE("rule_index offers a node to a rule only when the rule's root agrees with it, and then whenever the rest of "
          "the source can be found") {
    auto rules = tsopt::rules::default_rules();
    const rewrite::rule_index idx(rules);
    std::size_t offered_total = 0, kind_pairs = 0, held_back = 0;
    // One memo over every model: what it remembers of one graph's nodes
    // must hold for the next's.
    rewrite::rule_index::candidate_memo memo;
    for (std::string name : {"resnet18", "inception_v3", "nasnet_a", "bert"}) {
        CAPTURE(name);
        graph g = rewrite_test::small_zoo_graph(zoo::find(name));
        rewrite::graph_index ix(g);
        const offers offered = offered_by(idx, ix);
        CHECK(offered_by(idx, ix, &memo) == offered);
        CHECK(offered_by(idx, ix, &memo) == offered);  // from the memo alone
        offered_total += offered.size();
        for (std::size_t ri = 0; ri < rules.size(); ++ri) {
            const bool found = every_node_found(ix, rules[ri]);
            for (std::int32_t n : ix.of_kind(rules[ri].src.back().op)) {
                ++kind_pairs;
                const bool root = agrees(g, n, rules[ri], rules[ri].src.size() - 1);
                const bool is_offered = offered.count({ri, n}) != 0;
                CHECK_MESSAGE((!is_offered || root), rules[ri].name, " offered node ", n);
                // A hash collision could only add an offer; none is expected here.
                CHECK_MESSAGE((!(root && found) || is_offered), rules[ri].name, " not offered node ", n);
                held_back += root && !is_offered;
            }
        }
    }
    MESSAGE(offered_total, " (rule, node) offers out of ", kind_pairs, " pairs of the same operator; ", held_back,
            " held back for another source node not found");
    CHECK(offered_total < kind_pairs);
}

TEST_CASE("rule_index holds back a multi-node source whose other node the graph lacks") {
    // (matmul x (smul y s)), (matmul x z) sharing x: the root, the last
    // output, is a bare matmul that every matmul agrees with.
    // (Both sides alike: the index reads only the source.)
    const io::listed_rule listed = io::parse_rule_line(
        "r1: (tuple (matmul{act=0} ?x (smul ?y ?s)) (matmul{act=0} ?x ?z)) => (tuple (matmul{act=0} ?x (smul ?y ?s)) "
        "(matmul{act=0} ?x ?z))",
        "test");
    std::vector<rewrite::rule> rules{listed.view()};
    const rewrite::rule_index idx(rules);
    std::mt19937_64 rng(3);

    graph without;
    value x = without.input("x", {4, 4});
    without.mark_output(without.matmul(x, without.weight("a", {4, 4}, rng)));
    without.mark_output(without.matmul(x, without.weight("b", {4, 4}, rng)));
    rewrite::graph_index ix_without(without);
    CHECK(offered_by(idx, ix_without).empty());
    CHECK(through_index(ix_without, idx).empty());

    graph with;
    value y = with.input("x", {4, 4});
    value s = with.weight("s", tensor<float>(shape{1}, std::vector<float>{2.f}));
    with.mark_output(with.matmul(y, with.smul(with.weight("a", {4, 4}, rng), s)));
    with.mark_output(with.matmul(y, with.weight("b", {4, 4}, rng)));
    rewrite::graph_index ix_with(with);
    CHECK(offered_by(idx, ix_with).size() == 2);  // both matmuls agree with the bare root
    CHECK(through_index(ix_with, idx) == every_rule_everywhere(ix_with, rules));
    CHECK(through_index(ix_with, idx).size() == 1);
}
