#pragma once
// Rule application: replace a match of a rule's source by its target.
//
//   if (auto g2 = rewrite::apply(g, rule, m, &why)) ...   // one result
//   auto gs = rewrite::apply_all(ix, rule, m, {.layouts = true});   // + layout variants
//
// Steps (TASO §4): create the target nodes (parameter terms evaluated:
// constants, variables bound by the match, dim_of extents of matched or newly
// created tensors); infer their shapes with the operators' shape rules and
// reject the application when a rule does not fit (the message names the
// node); require each replacement to have the shape of the value it replaces;
// point every consumer of src_out[i] (and graph outputs) at dst_out[i]; reject
// the result when it has a cycle (TASO Figure 6: a consumer of a source output
// that is also an ancestor of one of the target's inputs); drop dead nodes.
// A target node identical to an existing node outside the match (same
// operator, parameters and inputs) is reused instead of duplicated.
//
// prepare_apply / preview / make_applied split apply in two: the checks and
// a preview of the result's hash, then the graph, made only when wanted.
//
// Layouts (TASO §5): with `layouts` on, every new operator node whose
// layout changes how it computes (matmul row/column major, conv NCHW/NHWC)
// is tried in each layout its declaration supports for its output shape, one
// graph per combination (at most `max_layout_variants`). New layout-neutral
// nodes (activations, element-wise, pools, concat) follow the layout of their
// inputs, so a rewrite inside an NHWC region stays NHWC without a search
// step. Layouts are physical only: values never change, only what cost
// models see; rewrite::explicit_conversions (layout.hpp) then turns the
// mismatches a variant creates into reorder nodes.
#include <bit>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "tsopt/rewrite/match.hpp"
#include "tsopt/rewrite/model.hpp"

namespace tsopt::rewrite {

// The default limit on one constant an application creates (apply_options).
inline constexpr std::size_t default_max_constant_bytes = std::size_t(64) << 20;

struct apply_options {
    bool layouts = false;            // enumerate layouts of new nodes
    std::size_t max_layout_variants = 4;
    // A new node whose value is a constant (its inputs are all weights or
    // constants, so weight preprocessing materializes it) may hold at most
    // this many bytes; an application needing a larger one is refused, e.g.
    // (relu ?x) => (matmul{act=1} ?x (imatmul{n=dim(?x,1)})) on a [1, 32768]
    // tensor, whose identity would take 4 GiB. Refusals are counted in
    // *oversized_constants when it is given.
    std::size_t max_constant_bytes = default_max_constant_bytes;
    std::size_t* oversized_constants = nullptr;
};

// Layouts an operator supports, in enumeration order (the default first).
// Operators that declare `any_layout` do not care: only the default.
inline std::vector<spec::layout> supported_layouts(spec::op_kind k) {
    spec::layout_mask m = spec::decl(k).layouts;
    if (m == spec::any_layout) return {spec::layout::row_major};
    std::vector<spec::layout> r;
    for (int b = 0; b < 8; ++b)
        if (m & (1u << b)) r.push_back(static_cast<spec::layout>(b));
    return r;
}

// Whether layout l means anything for a value of shape s: NHWC is a layout of
// rank-4 (image) tensors, column-major of matrices (rank >= 2).
inline bool layout_fits(spec::layout l, const shape& s) {
    switch (l) {
        case spec::layout::nhwc: return s.rank == 4;
        case spec::layout::col_major: return s.rank >= 2;
        default: return true;
    }
}

// The layouts of supported_layouts(k) that fit an output of shape s.
inline std::vector<spec::layout> supported_layouts(spec::op_kind k, const shape& s) {
    std::vector<spec::layout> r;
    for (auto l : supported_layouts(k))
        if (layout_fits(l, s)) r.push_back(l);
    return r;
}

// Operators whose kernel differs with the layout (not just the addressing):
// the layouts of new ones are enumerated by apply_all.
inline bool layout_sensitive(spec::op_kind k) { return k == spec::op_kind::conv2d || k == spec::op_kind::matmul; }

namespace detail {

struct built {
    graph g;  // compacted
    // With apply_options::layouts, the new layout-sensitive nodes with more
    // than one layout: id in g (-1: compacting dropped it), the layouts,
    // the layout it was made with. In creation order, dropped ones kept, so
    // the variants enumerated do not depend on what compacting drops.
    struct choice {
        std::int32_t id;
        std::vector<spec::layout> layouts;
        spec::layout made;
    };
    std::vector<choice> choices;
};

// The graph an application makes, read before it exists: g's nodes, then
// the new ones. Most applications are refused (a target that does not fit
// the shapes, an oversized constant, typing), so build checks against this
// and copies g only for an application that passes: with a 16,000-rule set
// copying first made every refusal cost a copy of the whole graph.
struct extended_view {
    const graph& base;
    std::vector<node> added;

    std::size_t size() const { return base.size() + added.size(); }
    const node& at(value v) const { return at(static_cast<std::size_t>(v.node)); }
    const node& at(std::size_t i) const { return i < base.size() ? base.nodes[i] : added[i - base.size()]; }
    const shape& shape_of(value v) const { return at(v).shapes[static_cast<std::size_t>(v.output)]; }
    node& fresh(std::int32_t id) { return added[static_cast<std::size_t>(id) - base.size()]; }
    // graph::infer's shapes and message, over the view.
    std::string infer(node& n) const {
        std::vector<shape> in;
        for (value v : n.inputs) {
            if (v.node < 0 || static_cast<std::size_t>(v.node) >= size() || v.output < 0 || v.output >= at(v).num_outputs())
                return n.describe() + ": input refers to a missing value";
            in.push_back(shape_of(v));
        }
        n.shapes.assign(static_cast<std::size_t>(spec::decl(n.op).num_outputs), shape{});
        if (auto e = spec::infer_shapes(n.op, n.params, in, n.shapes); !e.empty()) return n.describe() + ": " + e;
        return {};
    }
};

// An application that passed every check but the cycle test, not yet made:
// g's nodes and the new ones through the view; every node outside the match
// (new ones too) reads repl's replacement wherever it read a replaced value.
struct prepared {
    extended_view ng;
    const rule* r;
    std::vector<char> matched;         // per node of g
    std::vector<std::int32_t> fresh;   // ids of the new nodes
    std::vector<std::pair<value, value>> repl;
    value replaced;                    // src_out[0]'s value, named by the cycle message

    value redirected(value v) const {
        for (auto& [from, to] : repl)
            if (v == from) return to;
        return v;
    }
    // Whether node i's inputs are redirected (it stays, or is new).
    bool rewired(std::size_t i) const { return i >= matched.size() || !matched[i]; }
};

inline std::optional<prepared> prepare(const graph_index& ix, const rule& r, const match& m, const apply_options& o,
                                       std::string* why) {
    const graph& g = ix.g();
    auto fail = [&](std::string msg) -> std::optional<prepared> {
        if (why) *why = "rule '" + std::string(r.name) + "': " + std::move(msg);
        return std::nullopt;
    };
    if (r.src_out.size() != r.dst_out.size() || r.src_out.empty())
        throw error("rule '" + std::string(r.name) + "': " + std::to_string(r.src_out.size()) + " source outputs but " +
                    std::to_string(r.dst_out.size()) + " target outputs");
    check_pattern(r, r.dst, "target");
    std::vector<char> matched(g.size(), 0);
    for (auto n : m.nodes) matched[static_cast<std::size_t>(n)] = 1;

    extended_view ng{g, {}};
    std::vector<std::int32_t> fresh;   // ids of the new nodes
    std::vector<char> fresh_constant;  // per new node, at its id - g.size()
    auto is_constant = [&](value v) {
        auto id = static_cast<std::size_t>(v.node);
        return id < g.size() ? ix.constant(v.node) : fresh_constant[id - g.size()] != 0;
    };
    std::vector<value> made(r.dst.size(), value{-1, 0});
    auto resolve = [&](const spec::value_ref& ref) -> value {
        if (ref.is_var) return static_cast<std::size_t>(ref.index) < m.tensors.size() ? m.tensors[static_cast<std::size_t>(ref.index)] : value{-1, 0};
        return {made[static_cast<std::size_t>(ref.index)].node, ref.output};
    };
    auto src_value = [&](const spec::value_ref& ref) -> value {
        if (ref.is_var) return m.tensors[static_cast<std::size_t>(ref.index)];
        return {m.nodes[static_cast<std::size_t>(ref.index)], ref.output};
    };
    const std::string base = g.at(src_value(r.src_out[0])).name;

    for (std::size_t i = 0; i < r.dst.size(); ++i) {
        const spec::pattern_node& p = r.dst[i];
        const spec::op_decl& d = spec::decl(p.op);
        node n;
        n.kind = node_kind::op;
        n.op = p.op;
        for (int s = 0; s < p.num_inputs; ++s) {
            value v = resolve(p.inputs[static_cast<std::size_t>(s)]);
            if (v.node < 0) return fail("target node " + std::to_string(i) + " (" + std::string(d.name) + ") reads an unbound tensor variable");
            n.inputs.push_back(v);
        }
        for (int s = 0; s < d.num_params; ++s) {
            const auto& t = p.params[static_cast<std::size_t>(s)];
            using K = spec::param_term::kind;
            std::optional<std::int64_t> val;
            switch (t.k) {
                case K::unused: val = d.params[static_cast<std::size_t>(s)].fallback; break;
                case K::constant: val = t.value; break;
                case K::variable:
                    if (static_cast<std::size_t>(t.value) < m.params.size() && m.param_bound[static_cast<std::size_t>(t.value)])
                        val = m.params[static_cast<std::size_t>(t.value)];
                    break;
                case K::dim_of: {
                    value v = resolve(t.of);
                    if (v.node >= 0) val = extent(ng, v, t.dim);
                    break;
                }
            }
            if (!val) return fail("target node " + std::to_string(i) + " (" + std::string(d.name) + ") parameter '" +
                                  std::string(d.params[static_cast<std::size_t>(s)].name) + "' cannot be evaluated");
            if (*val < std::numeric_limits<std::int32_t>::min() || *val > std::numeric_limits<std::int32_t>::max())
                return fail("target node " + std::to_string(i) + " (" + std::string(d.name) + ") parameter '" +
                            std::string(d.params[static_cast<std::size_t>(s)].name) + "' would be " +
                            std::to_string(*val) + ", beyond a 32-bit parameter");
            n.params[s] = static_cast<std::int32_t>(*val);
        }
        // A split without a point (axiom DSL) splits where the matching concat joined.
        if (p.op == spec::op_kind::split && n.params[spec::split_p::at] == 0) {
            int ax = n.params[spec::split_p::axis];
            std::optional<std::int64_t> at;
            const node& src = ng.at(n.inputs[0]);
            if (src.is_op(spec::op_kind::concat) && src.params[spec::concat_p::axis] == ax) at = extent(ng, src.inputs[0], ax);
            // Otherwise a matched split along the same axis: of the same tensor,
            // or of one the rule maps to it through shape-preserving operators
            // (e.g. split0(relu(x)) == relu(split0(x))), where the extents agree.
            for (int pass = 0; pass < 2 && !at; ++pass)
                for (std::size_t k = 0; !at && k < r.src.size(); ++k) {
                    const node& sn = g.nodes[static_cast<std::size_t>(m.nodes[k])];
                    if (!sn.is_op(spec::op_kind::split) || sn.params[spec::split_p::axis] != ax) continue;
                    bool same_input = sn.inputs[0] == n.inputs[0];
                    bool same_extent = ax < ng.shape_of(n.inputs[0]).rank && ng.shape_of(sn.inputs[0]) == ng.shape_of(n.inputs[0]);
                    if (pass == 0 ? same_input : same_extent) at = sn.params[spec::split_p::at];
                }
            if (!at) return fail("target node " + std::to_string(i) + " (split): no concat or split records the split point");
            n.params[spec::split_p::at] = static_cast<std::int32_t>(*at);
        }
        // Reuse an identical node outside the match (common subexpressions).
        auto same = [&](std::int32_t c) {
            const node& o = ng.at(static_cast<std::size_t>(c));
            return o.kind == node_kind::op && o.op == n.op && o.params == n.params && o.inputs == n.inputs &&
                   (static_cast<std::size_t>(c) >= g.size() || !matched[static_cast<std::size_t>(c)]);
        };
        std::int32_t reuse = -1;
        if (!n.inputs.empty() && static_cast<std::size_t>(n.inputs[0].node) < g.size()) {
            for (auto [c, slot] : ix.consumers(n.inputs[0].node))
                if (slot == 0 && same(c)) { reuse = c; break; }
        } else if (n.inputs.empty()) {
            for (auto c : ix.of_kind(n.op))
                if (same(c)) { reuse = c; break; }
        }
        for (std::size_t k = 0; reuse < 0 && k < fresh.size(); ++k)
            if (same(fresh[k])) reuse = fresh[k];
        if (reuse >= 0) {
            made[i] = {reuse, 0};
            continue;
        }
        n.name = base + "." + std::string(d.name) + std::to_string(i);
        if (auto e = ng.infer(n); !e.empty()) return fail("target does not fit: " + e);
        if (!layout_sensitive(n.op) && spec::decl(n.op).layouts == spec::image_layouts && n.shapes[0].rank == 4)
            for (value v : n.inputs)
                if (ng.at(v).out_layout == spec::layout::nhwc && ng.shape_of(v).rank == 4) n.out_layout = spec::layout::nhwc;
        bool constant = true;
        for (value v : n.inputs) constant = constant && is_constant(v);
        if (constant) {
            double bytes = 0;
            for (const auto& s : n.shapes) bytes += static_cast<double>(s.elements()) * sizeof(float);
            if (bytes > static_cast<double>(o.max_constant_bytes)) {
                if (o.oversized_constants) ++*o.oversized_constants;
                return fail("target node " + std::to_string(i) + " (" + std::string(d.name) + ") would be a constant of " +
                            std::to_string(static_cast<std::uint64_t>(bytes)) + " bytes (" + n.shapes[0].str() +
                            "), above the limit of " + std::to_string(o.max_constant_bytes) + " bytes");
            }
        }
        made[i] = {static_cast<std::int32_t>(ng.size()), 0};
        fresh.push_back(made[i].node);
        fresh_constant.push_back(constant ? 1 : 0);
        ng.added.push_back(std::move(n));
    }

    // A rule proven under typing restrictions holds only where every node it
    // reads or writes satisfies them.
    if (r.needs != spec::full_semantics) {
        for (auto id : m.nodes)
            if (auto e = violates_typing(g, g.nodes[static_cast<std::size_t>(id)], r.needs); !e.empty())
                return fail("proven under TASO's typing, but " + e);
        for (value v : made)
            if (auto e = violates_typing(ng, ng.at(v), r.needs); !e.empty()) return fail("proven under TASO's typing, but " + e);
    }

    // Replacements: src_out[i] -> dst_out[i], shapes must agree.
    std::vector<std::pair<value, value>> repl;
    for (std::size_t i = 0; i < r.src_out.size(); ++i) {
        value from = src_value(r.src_out[i]), to = resolve(r.dst_out[i]);
        if (to.node < 0) return fail("target output " + std::to_string(i) + " is unbound");
        if (!(ng.shape_of(from) == ng.shape_of(to)))
            return fail("target output " + std::to_string(i) + " has shape " + ng.shape_of(to).str() + " but replaces " +
                        ng.at(from).describe() + " of shape " + ng.shape_of(from).str());
        repl.push_back({from, to});
        // The replacement of an output keeps its name and, where the new
        // operator supports it, its layout.
        if (static_cast<std::size_t>(to.node) >= g.size() && !r.dst_out[i].is_var) {
            node& tn = ng.fresh(to.node);
            tn.name = ng.at(from).name;
            spec::layout l = ng.at(from).out_layout;
            for (auto s : supported_layouts(tn.op, tn.shapes[0]))
                if (s == l) tn.out_layout = l;
        }
    }
    return prepared{std::move(ng), &r, std::move(matched), std::move(fresh), std::move(repl), src_value(r.src_out[0])};
}

// What a prepared application would make, found without making it: the
// structural hash and operator count of the compacted graph (dead nodes
// dropped), or nullopt when it would have a cycle. A derivation makes only
// the few graphs it keeps of the many it reaches (most are ones it reached
// before).
struct preview_of {
    std::uint64_t structural_hash;
    std::size_t operators;
};
inline std::optional<preview_of> preview(const prepared& p) {
    const extended_view& ng = p.ng;
    const std::size_t n = ng.size();
    auto input = [&](std::size_t i, value v) { return p.rewired(i) ? p.redirected(v) : v; };
    // Kahn's algorithm over every node, dead or not, as the made graph's
    // compaction checks (graph::compacted_if_acyclic).
    std::vector<std::int32_t> first(n + 1, 0), cons, waits(n, 0), order;
    for (std::size_t i = 0; i < n; ++i)
        for (value v : ng.at(i).inputs) ++first[static_cast<std::size_t>(input(i, v).node) + 1];
    for (std::size_t i = 0; i < n; ++i) first[i + 1] += first[i];
    cons.resize(static_cast<std::size_t>(first[n]));
    {
        std::vector<std::int32_t> fill(first.begin(), first.end() - 1);
        for (std::size_t i = 0; i < n; ++i)
            for (value v : ng.at(i).inputs) {
                cons[static_cast<std::size_t>(fill[static_cast<std::size_t>(input(i, v).node)]++)] = static_cast<std::int32_t>(i);
                ++waits[i];
            }
    }
    order.reserve(n);
    for (std::size_t i = 0; i < n; ++i)
        if (waits[i] == 0) order.push_back(static_cast<std::int32_t>(i));
    for (std::size_t k = 0; k < order.size(); ++k) {
        const auto i = static_cast<std::size_t>(order[k]);
        for (auto c = first[i]; c < first[i + 1]; ++c)
            if (--waits[static_cast<std::size_t>(cons[static_cast<std::size_t>(c)])] == 0) order.push_back(cons[static_cast<std::size_t>(c)]);
    }
    if (order.size() != n) return std::nullopt;
    // Live: what reaches an output.
    std::vector<value> outs;
    for (value v : ng.base.outputs) outs.push_back(p.redirected(v));
    std::vector<char> live(n, 0);
    std::vector<std::size_t> stack;
    for (value v : outs) stack.push_back(static_cast<std::size_t>(v.node));
    while (!stack.empty()) {
        const std::size_t i = stack.back();
        stack.pop_back();
        if (live[i]) continue;
        live[i] = 1;
        for (value v : ng.at(i).inputs) stack.push_back(static_cast<std::size_t>(input(i, v).node));
    }
    std::vector<std::uint64_t> h(n, 0);
    std::vector<value> ins;
    std::size_t operators = 0;
    auto hash_of = [&](value v) { return h[static_cast<std::size_t>(v.node)]; };
    for (auto id : order) {
        const auto i = static_cast<std::size_t>(id);
        if (!live[i]) continue;
        const node& nd = ng.at(i);
        ins.clear();
        for (value v : nd.inputs) ins.push_back(input(i, v));
        h[i] = graph::node_hash(nd, ins, graph::weights_by::address, hash_of);
        if (nd.kind == node_kind::op) ++operators;
    }
    return preview_of{graph::outputs_hash(outs, hash_of), operators};
}

// The graph a prepared application makes (compacted), or nullopt with the
// reason when it would have a cycle.
inline std::optional<built> make(prepared&& p, const apply_options& o, std::string* why) {
    extended_view& ng = p.ng;
    const graph& g = ng.base;
    // A new operator gets a name no operator that stays keeps.
    for (auto id : p.fresh) {
        node& fn = ng.fresh(id);
        fn.name = unused_name(fn.name, [&](const std::string& name) {
            for (std::size_t j = 0; j < ng.size(); ++j)
                if (j != static_cast<std::size_t>(id) && p.rewired(j) && ng.at(j).name == name) return true;
            return false;
        });
    }
    built b;
    if (o.layouts)
        for (auto id : p.fresh) {
            const node& fn = ng.at(static_cast<std::size_t>(id));
            if (!layout_sensitive(fn.op)) continue;
            auto ls = supported_layouts(fn.op, fn.shapes[0]);
            if (ls.size() > 1) b.choices.push_back({id, std::move(ls), fn.out_layout});
        }
    graph whole;
    whole.nodes.reserve(ng.size());
    whole.nodes.assign(g.nodes.begin(), g.nodes.end());
    for (node& n : ng.added) whole.nodes.push_back(std::move(n));
    whole.outputs = g.outputs;
    for (std::size_t i = 0; i < whole.size(); ++i)
        if (p.rewired(i))
            for (value& v : whole.nodes[i].inputs) v = p.redirected(v);
    for (value& v : whole.outputs) v = p.redirected(v);
    std::vector<std::int32_t> new_id;
    auto compact = std::move(whole).compacted_if_acyclic(b.choices.empty() ? nullptr : &new_id);
    if (!compact) {
        if (why) *why = "rule '" + std::string(p.r->name) + "': applying it at " + g.at(p.replaced).describe() + " would create a cycle";
        return std::nullopt;
    }
    b.g = std::move(*compact);
    for (auto& c : b.choices) c.id = new_id[static_cast<std::size_t>(c.id)];
    return b;
}

inline std::optional<built> build(const graph_index& ix, const rule& r, const match& m, const apply_options& o,
                                  std::string* why) {
    auto p = prepare(ix, r, m, o, why);
    if (!p) return std::nullopt;
    return make(std::move(*p), o, why);
}

}  // namespace detail

// Every graph the application yields: one, or one per layout combination of
// the new nodes when `o.layouts`. Empty when the rule cannot be applied
// (`why` says why).
inline std::vector<graph> apply_all(const graph_index& ix, const rule& r, const match& m, const apply_options& o = {},
                                    std::string* why = nullptr) {
    auto b = detail::build(ix, r, m, o, why);
    if (!b) return {};
    std::vector<graph> out;
    out.push_back(std::move(b->g));
    // A variant differs from the first only in the layouts of new nodes:
    // the first graph with those nodes' layouts changed. Mixed-radix
    // enumeration of the combinations after the first.
    const auto& choices = b->choices;
    std::vector<std::size_t> digit(choices.size(), 0);
    while (!choices.empty() && out.size() < std::max<std::size_t>(o.max_layout_variants, 1)) {
        std::size_t k = 0;
        while (k < digit.size() && ++digit[k] == choices[k].layouts.size()) digit[k++] = 0;
        if (k == digit.size()) break;
        graph v = out.front();
        bool differs = false;
        for (std::size_t c = 0; c < choices.size(); ++c) {
            spec::layout l = choices[c].layouts[digit[c]];
            if (choices[c].id >= 0) v.nodes[static_cast<std::size_t>(choices[c].id)].out_layout = l;
            differs = differs || l != choices[c].made;
        }
        if (differs) out.push_back(std::move(v));
    }
    return out;
}

// An application checked, previewed, and made only when wanted: a
// derivation (generator/derive.cpp) reaches most graphs more than once and
// tells them apart by the preview's hash, without copying the graph.
//   if (auto p = rewrite::prepare_apply(ix, r, m))
//       if (auto v = rewrite::preview(*p); v && !seen.contains(v->structural_hash))
//           auto g2 = rewrite::make_applied(std::move(*p));   // v's graph
// preview gives make_applied's structural_hash() and operator count;
// make_applied's graph is apply's.
using prepared_apply = detail::prepared;
using detail::preview;
using detail::preview_of;
inline std::optional<prepared_apply> prepare_apply(const graph_index& ix, const rule& r, const match& m,
                                                   const apply_options& o = {}, std::string* why = nullptr) {
    return detail::prepare(ix, r, m, o, why);
}
inline std::optional<graph> make_applied(prepared_apply&& p, std::string* why = nullptr) {
    auto b = detail::make(std::move(p), apply_options{}, why);
    if (!b) return std::nullopt;
    return std::move(b->g);
}

// The rewritten graph (compacted, default layouts for new nodes), or nullopt
// with the reason in `why`.
inline std::optional<graph> apply(const graph_index& ix, const rule& r, const match& m, const apply_options& o,
                                  std::string* why = nullptr) {
    auto b = detail::build(ix, r, m, o, why);
    if (!b) return std::nullopt;
    return std::move(b->g);
}
inline std::optional<graph> apply(const graph_index& ix, const rule& r, const match& m, std::string* why = nullptr) {
    return apply(ix, r, m, apply_options{}, why);
}
inline std::optional<graph> apply(const graph& g, const rule& r, const match& m, std::string* why = nullptr) {
    graph_index ix(g);
    return apply(ix, r, m, why);
}

}  // namespace tsopt::rewrite
