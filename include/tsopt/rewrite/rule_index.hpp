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
// position the rule fixes. A source of several nodes is filed a second time,
// under the key of its most specific other node, and is offered nothing in a
// graph where no node agrees with that one (a multi-output source's root is
// often a bare operator over variables, offered every node of its kind).
// The matcher then checks everything as before. The same matches come out, in
// the same order (rules in set order, anchors in node order), as matching
// every rule over the whole graph: the index only skips rules that cannot
// match at a node.
#include <algorithm>
#include <array>
#include <bit>
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
    explicit rule_index(std::span<const rule> rules) : rules_(rules), needs_node_(rules.size(), 0), planned_(rules.size(), 0) {
        plans_.resize(rules.size());
        for (std::size_t i = 0; i < rules.size(); ++i) {
            const rule& r = rules[i];
            if (r.src.empty()) continue;
            // A malformed pattern keeps failing where it is matched, with
            // the matcher's message naming the rule.
            try {
                plans_[i] = match_plan(r);
                planned_[i] = 1;
            } catch (const error&) {
            }
            file(by_kind_, r.src, r.src.size() - 1, static_cast<std::uint32_t>(i));
            // A source of several nodes also needs its most specific other
            // node somewhere in the graph: a multi-output source's root is
            // often bare (`(tuple (matmul ?x (smul ?x ?y)) (matmul ?x ?z))`
            // is offered every matmul), and the matcher then looked for the
            // other output at every candidate.
            std::size_t best = r.src.size();
            int best_bits = -1;
            for (std::size_t j = 0; j + 1 < r.src.size(); ++j)
                if (int bits = std::popcount(of_pattern(r.src, j, false).mask); bits > best_bits) {
                    best = j;
                    best_bits = bits;
                }
            if (best < r.src.size()) {
                file(needs_kind_, r.src, best, static_cast<std::uint32_t>(i));
                needs_node_[i] = 1;
            }
        }
    }

    std::span<const rule> rules() const { return rules_; }
    // Rule i's matching, prepared once (for_each_match's `plan`); null for
    // a malformed pattern.
    const match_plan* plan(std::size_t i) const { return planned_[i] ? &plans_[i] : nullptr; }

    // The rules offered to nodes seen before, by what decides them (the
    // node's operator, arity and parameters; per input, its producer's
    // operator, output and parameters): a search asks about graphs that
    // differ from each other in a few nodes, and with tens of thousands of
    // rules looking a node up group by group was a quarter of its time. One
    // per search (not shared between threads); it forgets everything past
    // `max_entries` and when used with another index.
    class candidate_memo {
    public:
        static constexpr std::size_t max_entries = std::size_t{1} << 16;

    private:
        friend class rule_index;
        static constexpr std::size_t words_per_input = 3 + spec::max_params;
        static constexpr std::size_t max_words = 2 + spec::max_params + spec::max_inputs * words_per_input;
        struct local_view {
            std::array<std::int32_t, max_words> w{};
            friend bool operator==(const local_view&, const local_view&) = default;
        };
        struct view_hash {
            std::size_t operator()(const local_view& v) const {
                std::uint64_t h = 0;
                for (auto x : v.w) h = hashing::combine(h, static_cast<std::uint32_t>(x));
                return static_cast<std::size_t>(h);
            }
        };
        struct offered {
            std::vector<std::uint32_t> roots;  // rules whose root the node may be
            std::vector<std::uint32_t> needs;  // rules whose needed other node it may be
        };
        const rule_index* owner_ = nullptr;
        std::unordered_map<local_view, offered, view_hash> offered_;
    };

    // Per rule that may match in the indexed graph (in set order), the graph
    // nodes its root may be matched to (in node order): f(rule, anchors).
    // `memo` (optional) remembers the rules offered per kind of node.
    template <class F>
    void for_each_candidate(const graph_index& ix, F&& f, candidate_memo* memo = nullptr) const {
        std::vector<std::pair<std::uint32_t, std::int32_t>> hits;  // (rule, anchor)
        const graph& g = ix.g();
        if (memo && (memo->owner_ != this || memo->offered_.size() > candidate_memo::max_entries)) {
            memo->offered_.clear();
            memo->owner_ = this;
        }
        typename candidate_memo::offered own;
        std::vector<char> need_met(rules_.size(), 0);
        for (std::size_t k = 0; k < by_kind_.size(); ++k) {
            if (by_kind_[k].empty() && needs_kind_[k].empty()) continue;
            for (std::int32_t n : ix.of_kind(static_cast<spec::op_kind>(k))) {
                const node& nd = g.nodes[static_cast<std::size_t>(n)];
                const typename candidate_memo::offered* o = &own;
                if (memo) {
                    auto [it, fresh] = memo->offered_.try_emplace(local_view_of(g, nd));
                    if (fresh) it->second = {offered_to(g, nd, by_kind_[k]), offered_to(g, nd, needs_kind_[k])};
                    o = &it->second;
                } else {
                    own = {offered_to(g, nd, by_kind_[k]), offered_to(g, nd, needs_kind_[k])};
                }
                for (std::uint32_t ri : o->roots) hits.emplace_back(ri, n);
                for (std::uint32_t ri : o->needs) need_met[ri] = 1;
            }
        }
        std::erase_if(hits, [&](const auto& h) { return needs_node_[h.first] && !need_met[h.first]; });
        std::sort(hits.begin(), hits.end());
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
            count += rewrite::for_each_match(ix, rules_[ri], [&](const match& m) { return go_on = f(ri, m); }, anchors, plan(ri));
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

    // Files rule i under the signature of pattern node `at` of src in
    // `table`; a commutative node matches a graph node's operands in either
    // order (match.hpp), so its rule is filed under both.
    using table = std::array<std::vector<group>, spec::max_op_kinds>;
    static void file(table& t, std::span<const spec::pattern_node> src, std::size_t at, std::uint32_t i) {
        const spec::pattern_node& p = src[at];
        auto& groups = t[static_cast<std::size_t>(p.op)];
        const bool both = p.num_inputs == 2 && spec::decl(p.op).commutative;
        for (bool swap : {false, true}) {
            if (swap && !both) break;
            signature sig = of_pattern(src, at, swap);
            auto g = std::find_if(groups.begin(), groups.end(), [&](const group& x) { return x.mask == sig.mask; });
            if (g == groups.end()) g = groups.insert(groups.end(), group{sig.mask, {}});
            auto& filed = g->rules[sig.key];
            if (filed.empty() || filed.back() != i) filed.push_back(i);
        }
    }

    // Of pattern node `at` of src (its root: the last); `swap`: its two
    // operands exchanged (a commutative node).
    static signature of_pattern(std::span<const spec::pattern_node> src, std::size_t at, bool swap) {
        const spec::pattern_node& p = src[at];
        signature s;
        s.key = hashing::combine(0, p.num_inputs);
        fixed_params(p, 0, s);
        for (int i = 0; i < p.num_inputs; ++i) {
            const auto& in = p.inputs[static_cast<std::size_t>(swap ? 1 - i : i)];
            // A reference out of range is left to the matcher's check_pattern,
            // which names the rule.
            if (in.is_var || in.index < 0 || static_cast<std::size_t>(in.index) >= at) continue;
            const spec::pattern_node& child = src[static_cast<std::size_t>(in.index)];
            s.mask |= mask_t{1} << input_bit(i);
            s.key = hashing::combine(s.key, input_code(child.op, in.output));
            fixed_params(child, child_param_bit(i, 0), s);
        }
        return s;
    }

    // The rules of `groups` (one operator's) whose fixed positions node n
    // agrees with, each once, in set order.
    static std::vector<std::uint32_t> offered_to(const graph& g, const node& n, const std::vector<group>& groups) {
        std::vector<std::uint32_t> r;
        for (const group& gr : groups) {
            auto it = gr.rules.find(key_of(g, n, gr.mask));
            if (it != gr.rules.end()) r.insert(r.end(), it->second.begin(), it->second.end());
        }
        // A rule filed under both operand orders may be offered a node twice.
        std::sort(r.begin(), r.end());
        r.erase(std::unique(r.begin(), r.end()), r.end());
        return r;
    }

    // Everything key_of may read of node n, for any mask.
    static candidate_memo::local_view local_view_of(const graph& g, const node& n) {
        candidate_memo::local_view v;
        std::size_t at = 0;
        v.w[at++] = static_cast<std::int32_t>(n.op);
        v.w[at++] = static_cast<std::int32_t>(n.inputs.size());
        for (int i = 0; i < spec::max_params; ++i) v.w[at++] = n.params[i];
        for (std::size_t i = 0; i < n.inputs.size() && i < static_cast<std::size_t>(spec::max_inputs); ++i) {
            const node& c = g.at(n.inputs[i]);
            const bool op = c.kind == node_kind::op;
            v.w[at++] = op ? 1 : 2;
            v.w[at++] = op ? static_cast<std::int32_t>(c.op) : 0;
            v.w[at++] = op ? n.inputs[i].output : 0;
            for (int k = 0; k < spec::max_params; ++k) v.w[at++] = op ? c.params[k] : 0;
        }
        return v;
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
    table by_kind_{};       // by the root's signature
    table needs_kind_{};    // by the signature of the other node a rule needs
    std::vector<char> needs_node_;  // per rule: filed in needs_kind_
    std::vector<match_plan> plans_;
    std::vector<char> planned_;
};

}  // namespace tsopt::rewrite
