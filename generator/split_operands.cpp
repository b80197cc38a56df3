// Rules over separate operands (docs/generator.md, "Shared operands
// split"): an enumerated graph is built from a handful of inputs, so its
// source often reads one tensor in several places (two convolutions of ?x,
// a matmul and a transpose of ?a) where the equation would hold for
// different tensors too, and the rule then matches only where a model
// happens to reuse a tensor that way. Each such rule is tried with every
// read on its source given its own variable and each target read bound to
// one of them; variants that differ on random inputs are dropped before
// Z3, and the first variant Z3 proves replaces the rule (every match of the
// rule is a match of the variant, with the copies bound to one tensor).
#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "gen.hpp"

namespace tsopt::gen {

namespace {

using spec::param_term;
using spec::pattern_node;
using spec::value_ref;

// One tensor's shape for a variable, another node's output otherwise.
const shape* shape_of(value_ref v, const std::vector<std::optional<shape>>& vars,
                      const std::vector<std::vector<shape>>& outs) {
    if (v.is_var) {
        const auto& s = vars[static_cast<std::size_t>(v.index)];
        return s ? &*s : nullptr;
    }
    return &outs[static_cast<std::size_t>(v.index)][v.output];
}

// A node's parameters, concrete: nullopt where one is a parameter variable
// (the split runs on the enumerated rules, before generalize_params) or an
// extent the shapes do not have. `shape_at(v)`: the shape of value v, or
// null where it has none yet.
template <class ShapeAt>
std::optional<spec::op_params> concrete_params(const pattern_node& n, ShapeAt&& shape_at) {
    const spec::op_decl& d = spec::decl(n.op);
    spec::op_params p{};
    for (int k = 0; k < d.num_params; ++k) {
        const param_term& t = n.params[static_cast<std::size_t>(k)];
        switch (t.k) {
            case param_term::kind::unused: p[k] = d.params[static_cast<std::size_t>(k)].fallback; break;
            case param_term::kind::constant: p[k] = t.value; break;
            case param_term::kind::variable: return std::nullopt;
            case param_term::kind::dim_of: {
                const shape* s = shape_at(t.of);
                if (!s || t.dim < 0 || t.dim >= s->rank) return std::nullopt;
                p[k] = static_cast<std::int32_t>((*s)[t.dim]);
                break;
            }
        }
    }
    return p;
}

// Each node's output shapes, or nullopt where a shape rule refuses.
std::optional<std::vector<std::vector<shape>>> infer_side(const std::vector<pattern_node>& nodes,
                                                          const std::vector<std::optional<shape>>& vars) {
    std::vector<std::vector<shape>> outs;
    for (const auto& n : nodes) {
        auto p = concrete_params(n, [&](value_ref v) { return shape_of(v, vars, outs); });
        if (!p) return std::nullopt;
        std::vector<shape> in;
        for (int k = 0; k < n.num_inputs; ++k) {
            const shape* s = shape_of(n.inputs[static_cast<std::size_t>(k)], vars, outs);
            if (!s) return std::nullopt;
            in.push_back(*s);
        }
        std::vector<shape> out(static_cast<std::size_t>(spec::decl(n.op).num_outputs));
        if (!spec::infer_shapes(n.op, *p, in, out).empty()) return std::nullopt;
        outs.push_back(std::move(out));
    }
    return outs;
}

// A variable of the source not yet given a shape, read by node `n` (as an
// input or through an extent), or -1.
int unshaped_var(const pattern_node& n, const std::vector<std::optional<shape>>& vars) {
    for (int k = 0; k < n.num_inputs; ++k) {
        value_ref v = n.inputs[static_cast<std::size_t>(k)];
        if (v.is_var && !vars[static_cast<std::size_t>(v.index)]) return v.index;
    }
    for (const auto& t : n.params)
        if (t.k == param_term::kind::dim_of && t.of.is_var && !vars[static_cast<std::size_t>(t.of.index)]) return t.of.index;
    return -1;
}

// Gives the variables shapes from `choices`, node by node in the source's
// order, backtracking where a shape rule refuses, until both sides
// type-check with equal output shapes: the first such assignment.
bool assign_shapes(const io::listed_rule& r, std::size_t at, std::vector<std::optional<shape>>& vars,
                   std::span<const shape> choices) {
    // The nodes before `at` have all their variables shaped: check them once
    // a node's are, by inferring the prefix (rules have at most a few nodes).
    if (at == r.src.size()) {
        auto src = infer_side(r.src, vars), dst = infer_side(r.dst, vars);
        if (!src || !dst) return false;
        for (std::size_t i = 0; i < r.src_out.size(); ++i) {
            const shape* a = shape_of(r.src_out[i], vars, *src);
            const shape* b = shape_of(r.dst_out[i], vars, *dst);
            if (!a || !b || *a != *b) return false;
        }
        return true;
    }
    const int v = unshaped_var(r.src[at], vars);
    if (v < 0) {
        std::vector<pattern_node> prefix(r.src.begin(), r.src.begin() + static_cast<std::ptrdiff_t>(at) + 1);
        return infer_side(prefix, vars) && assign_shapes(r, at + 1, vars, choices);
    }
    for (const shape& s : choices) {
        vars[static_cast<std::size_t>(v)] = s;
        if (assign_shapes(r, at, vars, choices)) return true;
    }
    vars[static_cast<std::size_t>(v)].reset();
    return false;
}

// Whether both sides agree on random inputs of these shapes (two draws).
bool holds_on_random_inputs(const io::listed_rule& r, const std::vector<shape>& shapes, const options& o) {
    std::mt19937_64 rng(o.seed ^ 0x5b11u);
    for (int draw = 0; draw < 2; ++draw) {
        std::vector<tensor<float>> vars;
        for (const auto& s : shapes) vars.push_back(random_float(s, rng));
        using side_values = std::vector<std::vector<tensor<float>>>;
        auto value = [&](value_ref v, const side_values& outs) -> const tensor<float>& {
            return v.is_var ? vars[static_cast<std::size_t>(v.index)] : outs[static_cast<std::size_t>(v.index)][v.output];
        };
        auto run = [&](const std::vector<pattern_node>& nodes) -> std::optional<side_values> {
            side_values outs;
            for (const auto& n : nodes) {
                auto p = concrete_params(n, [&](value_ref v) { return &value(v, outs).shape; });
                if (!p) return std::nullopt;
                std::vector<const tensor<float>*> in;
                for (int k = 0; k < n.num_inputs; ++k) in.push_back(&value(n.inputs[static_cast<std::size_t>(k)], outs));
                try {
                    outs.push_back(spec::evaluate<float>(n.op, *p, in));
                } catch (const error&) {
                    return std::nullopt;
                }
            }
            return outs;
        };
        auto src = run(r.src), dst = run(r.dst);
        if (!src || !dst) return false;
        for (std::size_t i = 0; i < r.src_out.size(); ++i) {
            const auto& a = value(r.src_out[i], *src);
            const auto& b = value(r.dst_out[i], *dst);
            if (a.shape != b.shape || !(relative_error(a, b) <= o.tolerance)) return false;
        }
    }
    return true;
}

struct read_site {
    bool target;        // on the target side (else the source)
    int node, input;    // node index and input slot; input -1: output `node` of the side
};

// Where each variable is read: inputs of either side and the target's outputs.
std::vector<std::vector<read_site>> reads_of(const io::listed_rule& r, bool target) {
    std::vector<std::vector<read_site>> reads(static_cast<std::size_t>(r.num_tensor_vars));
    const auto& nodes = target ? r.dst : r.src;
    for (std::size_t i = 0; i < nodes.size(); ++i)
        for (int k = 0; k < nodes[i].num_inputs; ++k)
            if (value_ref v = nodes[i].inputs[static_cast<std::size_t>(k)]; v.is_var)
                reads[static_cast<std::size_t>(v.index)].push_back({target, static_cast<int>(i), k});
    if (target)
        for (std::size_t i = 0; i < r.dst_out.size(); ++i)
            if (r.dst_out[i].is_var) reads[static_cast<std::size_t>(r.dst_out[i].index)].push_back({true, static_cast<int>(i), -1});
    return reads;
}

value_ref& site_ref(io::listed_rule& r, const read_site& s) {
    if (s.input < 0) return r.dst_out[static_cast<std::size_t>(s.node)];
    auto& nodes = s.target ? r.dst : r.src;
    return nodes[static_cast<std::size_t>(s.node)].inputs[static_cast<std::size_t>(s.input)];
}

// The rule with every node read once on each side: a node the canonical
// form shares between two readers (transpose(?x) feeding both of matmul's
// operands) is copied per reader, so each read of a variable under it is a
// read of its own.
// An extent measured on a node (a constant's size from a convolution's
// output) would measure one copy of it only: such rules keep their nodes.
io::listed_rule as_trees(const io::listed_rule& r) {
    io::listed_rule t = r;
    for (const auto* side : {&r.src, &r.dst})
        for (const auto& n : *side)
            for (const auto& p : n.params)
                if (p.k == param_term::kind::dim_of && !p.of.is_var) return t;
    auto expand = [](const std::vector<pattern_node>& nodes, std::vector<value_ref>& outputs) {
        std::vector<pattern_node> tree;
        // A node of two outputs (split) read at both stays one node: two
        // splits of copies would be another pattern, not a wider one.
        std::map<int, int> single;
        auto copy = [&](auto& self, value_ref v) -> value_ref {
            if (v.is_var) return v;
            const bool multi = spec::decl(nodes[static_cast<std::size_t>(v.index)].op).num_outputs > 1;
            if (auto it = single.find(v.index); multi && it != single.end()) return spec::node_ref(it->second, v.output);
            pattern_node n = nodes[static_cast<std::size_t>(v.index)];
            for (int k = 0; k < n.num_inputs; ++k)
                n.inputs[static_cast<std::size_t>(k)] = self(self, n.inputs[static_cast<std::size_t>(k)]);
            tree.push_back(n);
            if (multi) single[v.index] = static_cast<int>(tree.size()) - 1;
            return spec::node_ref(static_cast<int>(tree.size()) - 1, v.output);
        };
        for (auto& o : outputs) o = copy(copy, o);
        return tree;
    };
    t.src = expand(r.src, t.src_out);
    t.dst = expand(r.dst, t.dst_out);
    return t;
}

}  // namespace

std::vector<operand_split> split_shared_operands(const io::listed_rule& rule, std::span<const input_decl> inputs,
                                                 const options& o, std::size_t max_variants, std::uint64_t* refuted) {
    const io::listed_rule r = as_trees(rule);
    for (const auto& v : r.src_out)
        if (v.is_var) return {};
    const auto left = reads_of(r, false), right = reads_of(r, true);
    // A variable an extent refers to (split points, enlarge sizes) stays
    // whole: which copy the extent measures would be another choice.
    std::vector<char> measured(static_cast<std::size_t>(r.num_tensor_vars), 0);
    for (const auto* side : {&r.src, &r.dst})
        for (const auto& n : *side)
            for (const auto& t : n.params)
                if (t.k == param_term::kind::dim_of && t.of.is_var) measured[static_cast<std::size_t>(t.of.index)] = 1;
    std::vector<int> shared;
    for (int v = 0; v < r.num_tensor_vars; ++v)
        if (left[static_cast<std::size_t>(v)].size() >= 2 && !measured[static_cast<std::size_t>(v)]) shared.push_back(v);
    if (shared.empty()) return {};

    std::vector<shape> choices;
    for (const auto& in : inputs)
        if (std::find(choices.begin(), choices.end(), in.s) == choices.end()) choices.push_back(in.s);
    std::vector<std::optional<shape>> var_shapes(static_cast<std::size_t>(r.num_tensor_vars));
    if (!assign_shapes(r, 0, var_shapes, choices)) return {};
    std::vector<shape> shapes;
    for (const auto& s : var_shapes) {
        if (!s) return {};  // a variable no node reads
        shapes.push_back(*s);
    }
    // The rule itself must hold where its variants are screened.
    if (!holds_on_random_inputs(r, shapes, o)) return {};

    // Every shared variable split at once first, then each alone (where
    // only some reads are independent).
    std::vector<std::vector<int>> subsets{shared};
    if (shared.size() > 1)
        for (int v : shared) subsets.push_back({v});
    std::vector<operand_split> out;
    std::set<std::string> seen{rule.text};
    std::size_t tried = 0;
    for (const auto& subset : subsets) {
        io::listed_rule base = r;
        std::vector<shape> base_shapes = shapes;
        // copies[v]: the variable of each source read of v, the first being v.
        std::map<int, std::vector<int>> copies;
        std::string what;
        for (int v : subset) {
            auto& c = copies[v];
            for (std::size_t k = 0; k < left[static_cast<std::size_t>(v)].size(); ++k) {
                const int copy = k == 0 ? v : base.num_tensor_vars++;
                if (k > 0) base_shapes.push_back(shapes[static_cast<std::size_t>(v)]);
                c.push_back(copy);
                site_ref(base, left[static_cast<std::size_t>(v)][k]) = spec::var_ref(copy);
            }
            what += (what.empty() ? "?" : ", ?") + io::listing_detail::var_name(v) + " (" + std::to_string(c.size()) + " reads)";
        }
        // The target's reads of the split variables, each bound to one copy:
        // a mixed-radix counter over them, the first copy first.
        std::vector<std::pair<read_site, int>> sites;
        for (int v : subset)
            for (const auto& s : right[static_cast<std::size_t>(v)]) sites.emplace_back(s, v);
        std::vector<std::size_t> digit(sites.size(), 0);
        for (bool more = true; more && tried < max_variants;) {
            io::listed_rule variant = base;
            for (std::size_t k = 0; k < sites.size(); ++k)
                site_ref(variant, sites[k].first) = spec::var_ref(copies[sites[k].second][digit[k]]);
            ++tried;
            if (holds_on_random_inputs(variant, base_shapes, o)) {
                auto canonical = canonical_rule(io::format_rule_text(variant.src, variant.src_out, variant.dst, variant.dst_out));
                if (seen.insert(canonical.text).second) out.push_back({std::move(canonical), what});
            } else if (refuted) {
                ++*refuted;
            }
            more = false;
            for (std::size_t k = 0; k < digit.size() && !more; ++k) {
                if (++digit[k] < copies[sites[k].second].size()) more = true;
                else digit[k] = 0;
            }
        }
    }
    return out;
}

operand_split_plan plan_operand_splits(std::span<const emitted_rule> rules, const options& o, std::size_t max_variants) {
    operand_split_plan plan;
    plan.tries.resize(rules.size());
    std::map<std::string, std::size_t> by_text;
    for (std::size_t i = 0; i < rules.size(); ++i) {
        if (!rules[i].proven) continue;
        for (auto& s : split_shared_operands(rules[i].r, o.inputs, o, max_variants, &plan.refuted)) {
            auto [it, fresh] = by_text.try_emplace(s.rule.text, plan.groups.size());
            if (fresh) plan.groups.push_back({std::move(s.rule), std::move(s.split), {}});
            plan.groups[it->second].members.push_back(i);
            plan.tries[i].push_back(it->second);
        }
    }
    return plan;
}

}  // namespace tsopt::gen
