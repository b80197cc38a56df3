#pragma once
// Rule matching: every mapping of a rule's source pattern onto a graph.
//
//   rewrite::graph_index ix(g);                 // once per graph
//   rewrite::for_each_match(ix, r, [&](const rewrite::match& m) { ...; return true; });
//   auto all = rewrite::find_matches(g, r);
//
// A match maps each source pattern node to a distinct declared-operator node
// of the same kind and arity, the operands of a commutative operator (ewadd,
// ewmul) in either order, such that
//  - constant parameters are equal, parameter variables bind consistently
//    (across the whole pattern), dim_of parameters equal the extent of the
//    matched tensor, and the rule's side conditions hold;
//  - a tensor variable binds one graph value wherever it occurs (shared
//    inputs), and never a value computed inside the match;
//  - values computed inside the match are used outside it only when they are
//    source outputs (otherwise removing them would break their other users).
// Inputs, weights and opaque nodes never match an operator pattern node, but
// tensor variables bind to their values, so the graph around them is matched.
//
// Matching anchors on the pattern's last node (its root for single-output
// rules), drawn from a per-kind index, and walks inputs (fixed candidates) and
// consumers (of already-bound values) instead of scanning the graph.
#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "tsopt/core/graph.hpp"
#include "tsopt/rewrite/rule.hpp"

namespace tsopt::rewrite {

// What a match binds. `nodes[i]` is the graph node matched by source pattern
// node i; `tensors[v]` the graph value of tensor variable v ({-1, 0} when the
// source does not use v); `params[p]` the value of parameter variable p.
// `swapped` bit i: pattern node i, a commutative operator
// (spec::op_decl::commutative), matched with its two operands exchanged. Two
// matches of the same nodes differ only there (`?x + ?y` on a + b binds x = a
// or x = b), so a recorded step names its nodes and these bits.
struct match {
    std::vector<std::int32_t> nodes;
    std::vector<value> tensors;
    std::vector<std::int32_t> params;
    std::vector<bool> param_bound;
    std::uint32_t swapped = 0;
};

// Per-graph lookup tables the matcher and the applier share: nodes by operator
// kind, consumers per node, and the number of uses of every output (consumer
// slots, plus graph outputs counted separately).
class graph_index {
public:
    explicit graph_index(const graph& g) : g_(&g), cons_(g.consumers()), constant_(g.constant_mask()), out_uses_(g.size()) {
        for (std::size_t i = 0; i < g.size(); ++i) {
            const node& n = g.nodes[i];
            if (n.kind == node_kind::op) by_kind_[static_cast<std::size_t>(n.op)].push_back(static_cast<std::int32_t>(i));
            out_uses_[i].assign(static_cast<std::size_t>(std::max(n.num_outputs(), 1)), 0);
        }
        uses_ = out_uses_;
        for (std::size_t i = 0; i < g.size(); ++i)
            for (value v : g.nodes[i].inputs) ++uses_[static_cast<std::size_t>(v.node)][static_cast<std::size_t>(v.output)];
        for (value v : g.outputs) ++out_uses_[static_cast<std::size_t>(v.node)][static_cast<std::size_t>(v.output)];
    }
    const graph& g() const { return *g_; }
    const std::vector<std::int32_t>& of_kind(spec::op_kind k) const { return by_kind_[static_cast<std::size_t>(k)]; }
    const std::vector<std::pair<std::int32_t, std::int32_t>>& consumers(std::int32_t n) const {
        return cons_[static_cast<std::size_t>(n)];
    }
    // Consumer slots reading `v`.
    int uses(value v) const { return uses_[static_cast<std::size_t>(v.node)][static_cast<std::size_t>(v.output)]; }
    // Whether node n's value is fixed before inference (graph::constant_mask).
    bool constant(std::int32_t n) const { return constant_[static_cast<std::size_t>(n)]; }
    // Times `v` is a graph output.
    int output_uses(value v) const { return out_uses_[static_cast<std::size_t>(v.node)][static_cast<std::size_t>(v.output)]; }

private:
    const graph* g_;
    std::array<std::vector<std::int32_t>, spec::max_op_kinds> by_kind_{};
    std::vector<std::vector<std::pair<std::int32_t, std::int32_t>>> cons_;
    std::vector<bool> constant_;
    std::vector<std::vector<int>> uses_, out_uses_;
};

// Extent `d` of graph value `v`, or nullopt when `d` is beyond its rank.
// G: a graph, or anything with its shape_of (apply's view of a graph being built).
template <class G>
std::optional<std::int64_t> extent(const G& g, value v, int d) {
    const shape& s = g.shape_of(v);
    if (d < 0 || d >= s.rank) return std::nullopt;
    return s[d];
}

// Value of a source-side parameter term under a (complete) match; nullopt when
// it cannot be evaluated (unbound variable, dim beyond rank).
inline std::optional<std::int64_t> eval_src_term(const graph& g, const match& m, const spec::param_term& t) {
    using K = spec::param_term::kind;
    switch (t.k) {
        case K::constant: return t.value;
        case K::variable:
            if (t.value < 0 || static_cast<std::size_t>(t.value) >= m.params.size() || !m.param_bound[static_cast<std::size_t>(t.value)])
                return std::nullopt;
            return m.params[static_cast<std::size_t>(t.value)];
        case K::dim_of: {
            value v;
            if (t.of.is_var) {
                if (static_cast<std::size_t>(t.of.index) >= m.tensors.size()) return std::nullopt;
                v = m.tensors[static_cast<std::size_t>(t.of.index)];
            } else {
                if (static_cast<std::size_t>(t.of.index) >= m.nodes.size()) return std::nullopt;
                v = {m.nodes[static_cast<std::size_t>(t.of.index)], t.of.output};
            }
            if (v.node < 0) return std::nullopt;
            return extent(g, v, t.dim);
        }
        default: return std::nullopt;
    }
}

// True when every side condition of `r` holds under `m`.
inline bool conditions_hold(const graph& g, const rule& r, const match& m) {
    using K = spec::param_term::kind;
    for (const spec::condition& c : r.where) {
        auto a = eval_src_term(g, m, c.a), b = eval_src_term(g, m, c.b);
        // Two extents beyond the ranks of their tensors compare equal (both
        // absent), so equal(dim(a, d), dim(b, d)) for d < max_rank says "same shape".
        if (!a && !b && c.a.k == K::dim_of && c.b.k == K::dim_of) {
            if (c.r == spec::condition::rel::ne) return false;
            continue;
        }
        if (!a || !b) return false;
        if ((c.r == spec::condition::rel::eq) != (*a == *b)) return false;
    }
    return true;
}

}  // namespace tsopt::rewrite

#include "tsopt/rewrite/detail/match_impl.hpp"

namespace tsopt::rewrite {

// A rule's matching prepared once (pattern checked, visiting order
// planned), for a caller that matches the same rule against many graphs.
using match_plan = detail::match_plan;

// Calls f(const match&) for every match of r in the indexed graph, in a
// deterministic order; f returns false to stop early. Returns the number of
// matches reported. `anchors`, when given, are the only graph nodes the
// pattern's last node is matched to (rule_index: the nodes whose operator,
// parameters and inputs agree with it), in the order to try them. `plan`:
// match_plan(r), made by the caller once (else made per call).
template <class F>
std::size_t for_each_match(const graph_index& ix, const rule& r, F&& f,
                           std::optional<std::span<const std::int32_t>> anchors = std::nullopt,
                           const match_plan* plan = nullptr) {
    detail::matcher<F> m(ix, r, f, anchors, plan);
    return m.run();
}

inline std::vector<match> find_matches(const graph_index& ix, const rule& r,
                                       std::size_t limit = std::numeric_limits<std::size_t>::max(),
                                       std::optional<std::span<const std::int32_t>> anchors = std::nullopt,
                                       const match_plan* plan = nullptr) {
    std::vector<match> out;
    if (limit == 0) return out;
    for_each_match(
        ix, r,
        [&](const match& m) {
            out.push_back(m);
            return out.size() < limit;
        },
        anchors, plan);
    return out;
}
inline std::vector<match> find_matches(const graph& g, const rule& r,
                                       std::size_t limit = std::numeric_limits<std::size_t>::max()) {
    graph_index ix(g);
    return find_matches(ix, r, limit);
}

}  // namespace tsopt::rewrite
