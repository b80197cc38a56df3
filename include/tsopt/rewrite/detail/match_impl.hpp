#pragma once
// The backtracking matcher behind rewrite::for_each_match (see match.hpp).
// Kept out of the public header so the interface stays readable.
//
// Plan: the source pattern nodes are visited in an order computed once per
// call. Each step gets its candidates one of three ways:
//   fixed      - the node is an input of an already-matched pattern node: the
//                candidate is the graph node at that input slot (one choice);
//   consumers  - one of its inputs is already bound (a matched node or a
//                bound tensor variable): candidates are that value's consumers
//                at the right slot;
//   scan       - otherwise every graph node of the operator kind (index).
// The first step is always the pattern's last node (its root).
// A pattern node of a commutative operator is tried with the graph node's
// operands in their order and, when they differ, exchanged (match::swapped);
// every slot lookup goes through graph_slot().
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace tsopt::rewrite::detail {

// Throws tsopt::error when a rule's source pattern is malformed (references
// out of range or not topological): a bug in the rule table, not in the graph.
inline void check_pattern(const rule& r, std::span<const spec::pattern_node> pat, const char* side) {
    for (std::size_t i = 0; i < pat.size(); ++i) {
        const auto& p = pat[i];
        if (p.num_inputs > spec::max_inputs)
            throw error("rule '" + std::string(r.name) + "': " + side + " node " + std::to_string(i) + " has too many inputs");
        for (int s = 0; s < p.num_inputs; ++s) {
            const auto& in = p.inputs[static_cast<std::size_t>(s)];
            if (in.index < 0 || (!in.is_var && static_cast<std::size_t>(in.index) >= i))
                throw error("rule '" + std::string(r.name) + "': " + side + " node " + std::to_string(i) + " (" +
                            std::string(spec::name(p.op)) + ") input " + std::to_string(s) +
                            " refers to a later node or nothing: patterns must be topological");
        }
    }
}

inline int tensor_var_count(const rule& r) {
    int m = r.num_tensor_vars;
    auto scan = [&](std::span<const spec::pattern_node> pat) {
        for (const auto& p : pat) {
            for (int s = 0; s < p.num_inputs; ++s)
                if (p.inputs[static_cast<std::size_t>(s)].is_var) m = std::max(m, p.inputs[static_cast<std::size_t>(s)].index + 1);
            for (const auto& t : p.params)
                if (t.k == spec::param_term::kind::dim_of && t.of.is_var) m = std::max(m, t.of.index + 1);
        }
    };
    scan(r.src);
    scan(r.dst);
    for (auto v : r.dst_out)
        if (v.is_var) m = std::max(m, v.index + 1);
    return m;
}
inline int param_var_count(const rule& r) {
    int m = r.num_param_vars;
    auto scan_term = [&](const spec::param_term& t) {
        if (t.k == spec::param_term::kind::variable) m = std::max(m, t.value + 1);
    };
    for (const auto& p : r.src)
        for (const auto& t : p.params) scan_term(t);
    for (const auto& p : r.dst)
        for (const auto& t : p.params) scan_term(t);
    for (const auto& c : r.where) { scan_term(c.a); scan_term(c.b); }
    return m;
}

// What matching a rule needs that does not depend on the graph: its
// pattern checked, its variables counted, the order its nodes are visited
// in. Made once per rule by whoever matches a rule many times (tsopt-gen's
// derivation matches each of 150,000 rules against hundreds of graphs per
// candidate, and making this per call was most of a failed match's cost).
struct match_plan {
    struct pcons { int c, slot, output; };  // a consumer of a pattern node: which node, slot, output
    enum class mode : std::uint8_t { fixed, consumers, scan };
    struct plan_step {
        int node;
        mode how;
        int c = -1, slot = -1, output = 0;  // fixed: consumer pattern node and slot; consumers: own slot
    };
    std::size_t tensor_vars = 0, param_vars = 0;
    std::vector<std::vector<pcons>> consumers;  // per pattern node
    std::vector<plan_step> steps;

    match_plan() = default;
    explicit match_plan(const rule& r) {
        const std::size_t P = r.src.size();
        if (P == 0) return;
        check_pattern(r, r.src, "source");
        tensor_vars = static_cast<std::size_t>(tensor_var_count(r));
        param_vars = static_cast<std::size_t>(param_var_count(r));
        consumers.assign(P, {});
        for (std::size_t c = 0; c < P; ++c)
            for (int s = 0; s < r.src[c].num_inputs; ++s) {
                const auto& in = r.src[c].inputs[static_cast<std::size_t>(s)];
                if (!in.is_var) consumers[static_cast<std::size_t>(in.index)].push_back({static_cast<int>(c), s, in.output});
            }
        plan(r);
    }

private:
    void plan(const rule& r) {
        const int P = static_cast<int>(r.src.size());
        std::vector<char> planned(static_cast<std::size_t>(P), 0), bound(tensor_vars, 0);
        auto mark = [&](int k) {
            planned[static_cast<std::size_t>(k)] = 1;
            const auto& p = r.src[static_cast<std::size_t>(k)];
            for (int s = 0; s < p.num_inputs; ++s)
                if (p.inputs[static_cast<std::size_t>(s)].is_var) bound[static_cast<std::size_t>(p.inputs[static_cast<std::size_t>(s)].index)] = 1;
        };
        while (static_cast<int>(steps.size()) < P) {
            plan_step st{-1, mode::scan};
            for (int k = P - 1; k >= 0 && st.node < 0; --k) {
                if (planned[static_cast<std::size_t>(k)]) continue;
                for (const auto& pc : consumers[static_cast<std::size_t>(k)])
                    if (planned[static_cast<std::size_t>(pc.c)]) { st = {k, mode::fixed, pc.c, pc.slot, pc.output}; break; }
            }
            for (int k = P - 1; k >= 0 && st.node < 0; --k) {
                if (planned[static_cast<std::size_t>(k)]) continue;
                const auto& p = r.src[static_cast<std::size_t>(k)];
                for (int s = 0; s < p.num_inputs; ++s) {
                    const auto& in = p.inputs[static_cast<std::size_t>(s)];
                    if (in.is_var ? bound[static_cast<std::size_t>(in.index)] != 0 : planned[static_cast<std::size_t>(in.index)] != 0) {
                        st = {k, mode::consumers, -1, s, 0};
                        break;
                    }
                }
            }
            if (st.node < 0)
                for (int k = P - 1; k >= 0; --k)
                    if (!planned[static_cast<std::size_t>(k)]) { st = {k, mode::scan}; break; }
            mark(st.node);
            steps.push_back(st);
        }
    }
};

template <class F>
class matcher {
public:
    // `plan`: one made before for this rule (else made here, per call).
    matcher(const graph_index& ix, const rule& r, F& f, std::optional<std::span<const std::int32_t>> anchors = std::nullopt,
            const match_plan* plan = nullptr)
        : ix_(ix), g_(ix.g()), r_(r), f_(f), anchors_(anchors), plan_(plan) {}

    std::size_t run() {
        const std::size_t P = r_.src.size();
        if (P == 0) return 0;
        if (!plan_) {
            own_plan_ = match_plan(r_);
            plan_ = &own_plan_;
        }
        m_.nodes.assign(P, -1);
        m_.tensors.assign(plan_->tensor_vars, value{-1, 0});
        m_.params.assign(plan_->param_vars, 0);
        m_.param_bound.assign(plan_->param_vars, false);
        used_.assign(g_.size(), 0);
        step(0);
        return count_;
    }

private:
    using mode = match_plan::mode;
    using plan_step = match_plan::plan_step;

    // Pattern nodes past the mask's width are matched in their order only.
    static constexpr int max_swappable = 32;
    bool commutes(int k) const {
        const auto& p = r_.src[static_cast<std::size_t>(k)];
        return k < max_swappable && p.num_inputs == 2 && spec::decl(p.op).commutative;
    }
    bool is_swapped(int k) const { return k < max_swappable && ((m_.swapped >> k) & 1u) != 0; }
    // The graph input slot pattern node k's input `slot` is bound to.
    int graph_slot(int k, int slot) const { return is_swapped(k) ? 1 - slot : slot; }

    value bound_input(const spec::pattern_node& p, int slot) const {
        const auto& in = p.inputs[static_cast<std::size_t>(slot)];
        if (in.is_var) return m_.tensors[static_cast<std::size_t>(in.index)];
        return {m_.nodes[static_cast<std::size_t>(in.index)], in.output};
    }

    // Returns false when the caller asked to stop.
    bool step(std::size_t i) {
        if (i == plan_->steps.size()) return finish();
        const plan_step& st = plan_->steps[i];
        const auto& p = r_.src[static_cast<std::size_t>(st.node)];
        const bool commutative = commutes(st.node);
        const std::uint32_t bit = commutative ? 1u << st.node : 0u;
        auto attempt = [&](std::int32_t cand, bool swap) {
            std::size_t mark = trail_.size();
            if (swap) m_.swapped |= bit;
            bool go_on = true;
            if (assign(st.node, cand)) {
                go_on = step(i + 1);
                m_.nodes[static_cast<std::size_t>(st.node)] = -1;
                used_[static_cast<std::size_t>(cand)] = 0;
            }
            m_.swapped &= ~bit;
            undo(mark);
            return go_on;
        };
        // The exchanged order only where it binds something else.
        auto distinct_operands = [&](std::int32_t cand) {
            const node& gn = g_.nodes[static_cast<std::size_t>(cand)];
            return commutative && gn.inputs.size() == 2 && !(gn.inputs[0] == gn.inputs[1]);
        };
        auto both_orders = [&](std::int32_t cand) {
            if (!attempt(cand, false)) return false;
            return !distinct_operands(cand) || attempt(cand, true);
        };
        switch (st.how) {
            case mode::fixed: {
                const node& c = g_.nodes[static_cast<std::size_t>(m_.nodes[static_cast<std::size_t>(st.c)])];
                value v = c.inputs[static_cast<std::size_t>(graph_slot(st.c, st.slot))];
                if (v.output != st.output) return true;
                return both_orders(v.node);
            }
            case mode::consumers: {
                value v = bound_input(p, st.slot);
                for (auto [cn, slot] : ix_.consumers(v.node)) {
                    if (!(g_.nodes[static_cast<std::size_t>(cn)].inputs[static_cast<std::size_t>(slot)] == v)) continue;
                    if (slot == st.slot) {
                        if (!attempt(cn, false)) return false;
                    } else if (slot == 1 - st.slot && distinct_operands(cn)) {
                        if (!attempt(cn, true)) return false;
                    }
                }
                return true;
            }
            case mode::scan: {
                // The first step is the pattern's last node (plan()), the one
                // a rule_index picks candidates for.
                auto cands = i == 0 && anchors_ ? *anchors_ : std::span<const std::int32_t>(ix_.of_kind(p.op));
                for (std::int32_t cn : cands)
                    if (!both_orders(cn)) return false;
                return true;
            }
        }
        return true;
    }

    // Binds pattern node k to graph node n in the operand order m_.swapped
    // says for k.
    bool assign(int k, std::int32_t n) {
        const auto& p = r_.src[static_cast<std::size_t>(k)];
        const node& gn = g_.nodes[static_cast<std::size_t>(n)];
        if (gn.kind != node_kind::op || gn.op != p.op || used_[static_cast<std::size_t>(n)] ||
            gn.inputs.size() != static_cast<std::size_t>(p.num_inputs))
            return false;
        const spec::op_decl& d = spec::decl(p.op);
        for (int s = 0; s < d.num_params; ++s) {
            const auto& t = p.params[static_cast<std::size_t>(s)];
            using K = spec::param_term::kind;
            if (t.k == K::constant) {
                // split's point carries no term in the axiom DSL (fallback 0,
                // never a valid split): it matches any point.
                if (p.op == spec::op_kind::split && s == spec::split_p::at && t.value == 0) continue;
                if (gn.params[s] != t.value) return false;
            } else if (t.k == K::variable) {
                auto vi = static_cast<std::size_t>(t.value);
                if (m_.param_bound[vi]) {
                    if (m_.params[vi] != gn.params[s]) return false;
                } else {
                    m_.param_bound[vi] = true;
                    m_.params[vi] = gn.params[s];
                    trail_.push_back({true, static_cast<int>(vi)});
                }
            }
        }
        for (int s = 0; s < p.num_inputs; ++s) {
            const auto& in = p.inputs[static_cast<std::size_t>(s)];
            value gv = gn.inputs[static_cast<std::size_t>(graph_slot(k, s))];
            if (in.is_var) {
                value& b = m_.tensors[static_cast<std::size_t>(in.index)];
                if (b.node >= 0) {
                    if (!(b == gv)) return false;
                } else {
                    b = gv;
                    trail_.push_back({false, in.index});
                }
            } else if (std::int32_t mn = m_.nodes[static_cast<std::size_t>(in.index)]; mn >= 0) {
                if (!(gv == value{mn, in.output})) return false;
            }
        }
        for (const auto& pc : plan_->consumers[static_cast<std::size_t>(k)]) {
            std::int32_t cn = m_.nodes[static_cast<std::size_t>(pc.c)];
            if (cn >= 0 && !(g_.nodes[static_cast<std::size_t>(cn)].inputs[static_cast<std::size_t>(graph_slot(pc.c, pc.slot))] ==
                             value{n, pc.output}))
                return false;
        }
        m_.nodes[static_cast<std::size_t>(k)] = n;
        used_[static_cast<std::size_t>(n)] = 1;
        return true;
    }

    void undo(std::size_t mark) {
        while (trail_.size() > mark) {
            auto [is_param, idx] = trail_.back();
            trail_.pop_back();
            if (is_param) m_.param_bound[static_cast<std::size_t>(idx)] = false;
            else m_.tensors[static_cast<std::size_t>(idx)] = {-1, 0};
        }
    }

    bool finish() {
        // A tensor variable must stand for a value computed outside the match.
        for (value v : m_.tensors)
            if (v.node >= 0 && used_[static_cast<std::size_t>(v.node)]) return true;
        // Values computed inside the match may also be read outside it (e.g.
        // the other half of a split): apply() leaves such nodes in place,
        // computing what they always did, and drops only what becomes dead.
        // dim_of parameters must equal the extent of the tensor they measure.
        for (std::size_t k = 0; k < r_.src.size(); ++k) {
            const node& gn = g_.nodes[static_cast<std::size_t>(m_.nodes[k])];
            const auto& p = r_.src[k];
            for (int s = 0; s < spec::decl(p.op).num_params; ++s) {
                const auto& t = p.params[static_cast<std::size_t>(s)];
                if (t.k != spec::param_term::kind::dim_of) continue;
                auto e = eval_src_term(g_, m_, t);
                if (!e || *e != gn.params[s]) return true;
            }
        }
        if (!conditions_hold(g_, r_, m_)) return true;
        ++count_;
        return static_cast<bool>(f_(static_cast<const match&>(m_)));
    }

    const graph_index& ix_;
    const graph& g_;
    const rule& r_;
    F& f_;
    std::optional<std::span<const std::int32_t>> anchors_;
    const match_plan* plan_;
    match_plan own_plan_;
    match m_;
    std::vector<char> used_;
    std::vector<std::pair<bool, int>> trail_;
    std::size_t count_ = 0;
};

}  // namespace tsopt::rewrite::detail
