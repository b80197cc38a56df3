#pragma once
// Rules looked up by what their source pattern's root must be, so matching a
// graph costs in proportion to the rules that can apply there, not to the size
// of the set (TASO instantiates rules per parameter value: a set of 30,000 has
// hundreds of conv2d rules that differ only in kernel size or stride).
//
//   rewrite::rule_index idx(rules);                       // once per rule set
//   rewrite::graph_index ix(g);                            // once per graph
//   idx.for_each_match(ix, [&](std::size_t rule, const rewrite::match& m) { ...; return true; });
//
// The key of a rule is its root's (the source pattern's last node, where the
// matcher anchors) operator, arity and constant parameters, and the operator,
// output and constant parameters of every root input that is a pattern node.
// A graph node is offered to a rule only when its own values agree on every
// position the rule fixes;
// the matcher then checks everything as before. The same matches come out, in
// the same order (rules in set order, anchors in node order), as matching
// every rule over the whole graph: the index only skips rules that cannot
// match at a node.
#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tsopt/rewrite/match.hpp"

namespace tsopt::rewrite {

namespace detail {
constexpr int index_input_bit(int slot) { return (1 + slot) * (spec::max_params + 1) - 1; }
// The last child parameter's bit must fit the 64-bit mask.
static_assert(index_input_bit(spec::max_inputs - 1) + spec::max_params < 64);
}  // namespace detail

class rule_index {
public:
    explicit rule_index(std::span<const rule> rules) : rules_(rules) {
        for (std::size_t i = 0; i < rules.size(); ++i) {
            const rule& r = rules[i];
            if (r.src.empty()) continue;
            const spec::pattern_node& root = r.src.back();
            auto& groups = by_kind_[static_cast<std::size_t>(root.op)];
            // A commutative root matches a node's operands in either order
            // (match.hpp): its rule is filed under both.
            const bool both = root.num_inputs == 2 && spec::decl(root.op).commutative;
            for (bool swap : {false, true}) {
                if (swap && !both) break;
                signature sig = of_pattern(r.src, swap);
                auto g = std::find_if(groups.begin(), groups.end(), [&](const group& x) { return x.mask == sig.mask; });
                if (g == groups.end()) g = groups.insert(groups.end(), group{sig.mask, {}});
                auto& filed = g->rules[sig.key];
                if (filed.empty() || filed.back() != static_cast<std::uint32_t>(i)) filed.push_back(static_cast<std::uint32_t>(i));
            }
        }
    }

    std::span<const rule> rules() const { return rules_; }

    // Per rule that may match in the indexed graph (in set order), the graph
    // nodes its root may be matched to (in node order): f(rule, anchors).
    template <class F>
    void for_each_candidate(const graph_index& ix, F&& f) const {
        std::vector<std::pair<std::uint32_t, std::int32_t>> hits;  // (rule, anchor)
        const graph& g = ix.g();
        for (std::size_t k = 0; k < by_kind_.size(); ++k) {
            if (by_kind_[k].empty()) continue;
            for (std::int32_t n : ix.of_kind(static_cast<spec::op_kind>(k)))
                for (const group& gr : by_kind_[k]) {
                    auto it = gr.rules.find(key_of(g, g.nodes[static_cast<std::size_t>(n)], gr.mask));
                    if (it == gr.rules.end()) continue;
                    for (std::uint32_t ri : it->second) hits.emplace_back(ri, n);
                }
        }
        std::sort(hits.begin(), hits.end());
        // A rule filed under both operand orders may be offered a node twice.
        hits.erase(std::unique(hits.begin(), hits.end()), hits.end());
        std::vector<std::int32_t> anchors;
        for (std::size_t i = 0; i < hits.size();) {
            std::size_t j = i;
            anchors.clear();
            for (; j < hits.size() && hits[j].first == hits[i].first; ++j) anchors.push_back(hits[j].second);
            if (!f(static_cast<std::size_t>(hits[i].first), std::span<const std::int32_t>(anchors))) return;
            i = j;
        }
    }

    // Every match of every rule: f(rule, match), false to stop. Returns the
    // number of matches reported.
    template <class F>
    std::size_t for_each_match(const graph_index& ix, F&& f) const {
        std::size_t count = 0;
        bool go_on = true;
        for_each_candidate(ix, [&](std::size_t ri, std::span<const std::int32_t> anchors) {
            count += rewrite::for_each_match(ix, rules_[ri], [&](const match& m) { return go_on = f(ri, m); }, anchors);
            return go_on;
        });
        return count;
    }

    // Distinct keys over the set: how finely the index splits it.
    std::size_t keys() const {
        std::size_t n = 0;
        for (const auto& groups : by_kind_)
            for (const auto& gr : groups) n += gr.rules.size();
        return n;
    }

private:
    // Positions a rule fixes: bits [0, max_params) the root's parameters;
    // per input slot i, bit input_bit(i) when it is a pattern node (its
    // operator and output are fixed) and the next max_params bits that
    // node's parameters. The arity is always fixed.
    using mask_t = std::uint64_t;
    static constexpr int input_bit(int slot) { return detail::index_input_bit(slot); }
    static constexpr int child_param_bit(int slot, int param) { return input_bit(slot) + 1 + param; }

    struct signature {
        mask_t mask = 0;
        std::uint64_t key = 0;
    };
    struct group {
        mask_t mask;
        std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> rules;
    };

    // Keys are 64-bit hashes (hashing::combine) of the fixed values: a
    // collision only offers a node to a rule that then fails to match, never
    // hides a match.
    static std::uint64_t input_code(spec::op_kind producer, int output) {
        return 1 + (static_cast<std::uint64_t>(producer) << 8) + static_cast<std::uint64_t>(output);
    }
    static std::uint64_t param_code(std::int32_t v) { return static_cast<std::uint64_t>(static_cast<std::uint32_t>(v)); }

    // The constant parameters of pattern node p, at mask bits from `first`.
    static void fixed_params(const spec::pattern_node& p, int first, signature& s) {
        const spec::op_decl& d = spec::decl(p.op);
        for (int i = 0; i < d.num_params; ++i) {
            const auto& t = p.params[static_cast<std::size_t>(i)];
            if (t.k != spec::param_term::kind::constant) continue;
            // The axiom DSL's split point 0 matches any point (matcher::assign).
            if (p.op == spec::op_kind::split && i == spec::split_p::at && t.value == 0) continue;
            s.mask |= mask_t{1} << (first + i);
            s.key = hashing::combine(s.key, param_code(t.value));
        }
    }

    // `swap`: the root's two operands exchanged (a commutative root).
    static signature of_pattern(std::span<const spec::pattern_node> src, bool swap) {
        const spec::pattern_node& p = src.back();
        signature s;
        s.key = hashing::combine(0, p.num_inputs);
        fixed_params(p, 0, s);
        for (int i = 0; i < p.num_inputs; ++i) {
            const auto& in = p.inputs[static_cast<std::size_t>(swap ? 1 - i : i)];
            // A reference out of range is left to the matcher's check_pattern,
            // which names the rule.
            if (in.is_var || in.index < 0 || static_cast<std::size_t>(in.index) + 1 >= src.size()) continue;
            const spec::pattern_node& child = src[static_cast<std::size_t>(in.index)];
            s.mask |= mask_t{1} << input_bit(i);
            s.key = hashing::combine(s.key, input_code(child.op, in.output));
            fixed_params(child, child_param_bit(i, 0), s);
        }
        return s;
    }

    static std::uint64_t key_of(const graph& g, const node& n, mask_t mask) {
        std::uint64_t h = hashing::combine(0, n.inputs.size());
        const spec::op_decl& d = spec::decl(n.op);
        for (int i = 0; i < d.num_params; ++i)
            if (mask & (mask_t{1} << i)) h = hashing::combine(h, param_code(n.params[i]));
        for (int i = 0; i < spec::max_inputs && static_cast<std::size_t>(i) < n.inputs.size(); ++i) {
            if (!(mask & (mask_t{1} << input_bit(i)))) continue;
            value v = n.inputs[static_cast<std::size_t>(i)];
            const node& c = g.at(v);
            // Not an operator: no rule with an operator here can match.
            if (c.kind != node_kind::op) return hashing::combine(h, 0);
            h = hashing::combine(h, input_code(c.op, v.output));
            const int nparams = spec::decl(c.op).num_params;
            for (int k = 0; k < nparams; ++k)
                if (mask & (mask_t{1} << child_param_bit(i, k))) h = hashing::combine(h, param_code(c.params[k]));
        }
        return h;
    }

    std::span<const rule> rules_{};
    std::array<std::vector<group>, spec::op_count> by_kind_{};
};

}  // namespace tsopt::rewrite
