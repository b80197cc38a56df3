#include "axiom_check.hpp"

#include <z3++.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <functional>
#include <optional>
#include <random>
#include <set>
#include <unordered_set>

#include "symbolic.hpp"
#include "tsopt/spec/registry.hpp"

namespace tsopt::gen {

namespace {

// e with its free real constants renamed c0, c1, ... in order of first
// appearance: elements of a tensor that differ only in which inputs they read
// (a max-pool's interior windows) become one expression (Z3 hash-conses
// terms, so equal renamings are the same term), decided once.
z3::expr renamed_canonically(const z3::expr& e) {
    z3::context& ctx = e.ctx();
    z3::expr_vector from(ctx), to(ctx);
    std::unordered_set<unsigned> seen;
    std::vector<z3::expr> stack{e};
    while (!stack.empty()) {
        z3::expr t = stack.back();
        stack.pop_back();
        if (!seen.insert(t.id()).second || !t.is_app()) continue;
        if (t.is_const() && t.decl().decl_kind() == Z3_OP_UNINTERPRETED) {
            to.push_back(ctx.real_const(("c" + std::to_string(from.size())).c_str()));
            from.push_back(t);
            continue;
        }
        for (unsigned i = t.num_args(); i-- > 0;) stack.push_back(t.arg(i));
    }
    return from.empty() ? e : z3::expr(e).substitute(from, to);
}

using spec::op_kind;
using spec::param_term;
using spec::pattern_node;
using spec::value_ref;

struct instance {
    std::vector<std::int32_t> pvals;  // per parameter variable
    std::int32_t split_point = 0;     // for splits whose point no concat in the axiom records
    std::vector<std::optional<shape>> vshapes;
};

struct side_shapes {
    std::vector<std::array<shape, spec::max_outputs>> out;
    std::vector<char> known;
};

bool is_constant_op(const spec::expr& e, value_ref v) {
    return !v.is_var && spec::decl(e.nodes[std::size_t(v.index)].op).cls == spec::op_class::constant;
}

class checker {
public:
    checker(const spec::axiom& a, const check_options& o) : ax_(a), opt_(o) {
        sides_[0] = &a.eq.lhs;
        sides_[1] = &a.eq.rhs;
        ntv_ = std::max(spec::tensor_vars(a.eq.lhs), spec::tensor_vars(a.eq.rhs));
        for (const auto* e : sides_)
            for (int i = 0; i < e->size; ++i)
                for (const auto& p : e->nodes[std::size_t(i)].params)
                    if (p.k == param_term::kind::dim_of && p.of.is_var) ntv_ = std::max(ntv_, p.of.index + 1);
        npv_ = std::max(spec::param_vars(a.eq.lhs), spec::param_vars(a.eq.rhs));
        for (int i = 0; i < a.num_where; ++i)
            for (auto t : {a.where[std::size_t(i)].a, a.where[std::size_t(i)].b})
                if (t.k == param_term::kind::variable) npv_ = std::max(npv_, t.value + 1);
        build_domains();
        build_candidates();
    }

    axiom_report run() {
        auto t0 = std::chrono::steady_clock::now();
        report_.name = std::string(ax_.name);
        z3::context ctx;
        ctx_ = &ctx;
        symbolic_scope scope(ctx);
        std::vector<std::vector<std::int32_t>> combos{{}};
        for (const auto& dom : domains_) {
            std::vector<std::vector<std::int32_t>> next;
            for (const auto& c : combos)
                for (auto v : dom) {
                    next.push_back(c);
                    next.back().push_back(v);
                }
            combos = std::move(next);
        }
        // A probe (a value beyond the generation domain) is tried with every
        // other variable at its domain values, not with other probes: each
        // probe is checked, and the combinations grow by the probes' count
        // instead of their product.
        std::erase_if(combos, [&](const std::vector<std::int32_t>& c) {
            int n = 0;
            for (std::size_t v = 0; v < probes_.size(); ++v) n += probes_[v].count(c[v]) > 0;
            return n > 1;
        });
        bool failed = false;
        std::set<std::string> seen;
        for (std::size_t ci = 0; ci < combos.size() && !failed; ++ci) {
            instance in;
            in.pvals.assign(combos[ci].begin(), combos[ci].begin() + npv_);
            if (needs_split_point_) in.split_point = combos[ci].back();
            if (!static_conditions_hold(in)) continue;
            ++report_.param_combinations;
            in.vshapes.assign(std::size_t(ntv_), std::nullopt);
            auto leaf = [&](const instance& full) {
                if (opt_.exhaustive || seen.insert(key(full)).second) {
                    if (!check_instance(full)) { failed = true; return true; }
                    ++report_.instances;
                    if (opt_.exhaustive && opt_.max_instances > 0 && report_.instances >= opt_.max_instances) return true;
                }
                return !opt_.exhaustive;  // sampled: one instance per search
            };
            if (opt_.exhaustive) {
                dfs(0, in, nullptr, leaf, nullptr);
                if (opt_.max_instances > 0 && report_.instances >= opt_.max_instances) break;
            } else {
                for (int s = 0; s < opt_.samples && !failed; ++s) {
                    std::mt19937_64 rng(opt_.seed * 1000003u + ci * 7919u + std::uint64_t(s));
                    // Two bounds per sample: search steps, and shapes tried
                    // (each costs a shape inference of both sides). The
                    // second matters where every partial assignment
                    // type-checks and only the last variable fails (a
                    // condition no shape meets): steps alone let that run to
                    // 20,000 x 336 tries. Instances are found within 131,208
                    // tries at most (matmul-concat-rows), so 250,000 cuts off
                    // only searches that have nothing to find.
                    search_budget budget{20000, 250000};
                    dfs(0, in, &rng, leaf, &budget);
                }
            }
        }
        if (!failed && report_.instances == 0) report_.failure = "no instance type-checks on both sides";
        report_.ok = !failed && report_.instances > 0;
        report_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return report_;
    }

private:
    const spec::axiom& ax_;
    const check_options& opt_;
    const spec::expr* sides_[2];
    int ntv_ = 0, npv_ = 0;
    bool needs_split_point_ = false;
    std::vector<std::vector<std::int32_t>> domains_;  // per parameter variable (+ split point)
    std::vector<std::set<std::int32_t>> probes_;       // per parameter variable: its values beyond the domains
    std::vector<std::vector<shape>> cands_;           // per tensor variable
    axiom_report report_;
    bool per_element_ = false;  // check_instance: the all-elements query was too big for this axiom
    z3::context* ctx_ = nullptr;

    static bool is_history_split(const pattern_node& n, const param_term& t, int slot) {
        return n.op == op_kind::split && slot == spec::split_p::at && t == spec::pconst(0);
    }

    void build_domains() {
        std::vector<std::optional<std::set<std::int32_t>>> dom(static_cast<std::size_t>(npv_));
        std::vector<std::optional<std::set<std::int32_t>>> plain(static_cast<std::size_t>(npv_));  // without probes
        for (const auto* e : sides_)
            for (int i = 0; i < e->size; ++i) {
                const pattern_node& n = e->nodes[std::size_t(i)];
                const spec::op_decl& d = spec::decl(n.op);
                for (int s = 0; s < d.num_params; ++s) {
                    const param_term& t = n.params[std::size_t(s)];
                    if (is_history_split(n, t, s)) {
                        const value_ref in = n.inputs[0];
                        bool from_concat = !in.is_var && e->nodes[std::size_t(in.index)].op == op_kind::concat &&
                                           e->nodes[std::size_t(in.index)].params[0] == n.params[0];
                        if (!from_concat) needs_split_point_ = true;
                    }
                    const spec::param_decl& pd = d.params[std::size_t(s)];
                    if (t.k != param_term::kind::variable || pd.domain.empty()) continue;
                    // An any_value slot's axioms are claimed for every value: try the probes too.
                    std::set<std::int32_t> d0(pd.domain.begin(), pd.domain.end()), s2 = d0;
                    if (pd.any_value) s2.insert(pd.probe.begin(), pd.probe.end());
                    auto narrow = [](std::optional<std::set<std::int32_t>>& cur, const std::set<std::int32_t>& with) {
                        if (!cur) { cur = with; return; }
                        std::set<std::int32_t> r;
                        std::set_intersection(cur->begin(), cur->end(), with.begin(), with.end(), std::inserter(r, r.begin()));
                        cur = r;
                    };
                    narrow(dom[std::size_t(t.value)], s2);
                    narrow(plain[std::size_t(t.value)], d0);
                }
            }
        std::vector<std::int32_t> extents;
        for (int v = 1; v <= opt_.max_extent; ++v) extents.push_back(v);
        for (std::size_t v = 0; v < dom.size(); ++v) {
            domains_.push_back(dom[v] ? std::vector<std::int32_t>(dom[v]->begin(), dom[v]->end()) : extents);
            std::set<std::int32_t> probes;
            if (dom[v]) std::set_difference(dom[v]->begin(), dom[v]->end(), plain[v]->begin(), plain[v]->end(),
                                            std::inserter(probes, probes.begin()));
            probes_.push_back(std::move(probes));
        }
        if (needs_split_point_) domains_.push_back(extents);
    }

    static void shapes_of_rank(int r, int b, std::vector<shape>& out) {
        shape s;
        s.rank = r;
        for (int i = 0; i < r; ++i) s.dims[std::size_t(i)] = 1;
        while (true) {
            out.push_back(s);
            int i = r - 1;
            while (i >= 0 && s.dims[std::size_t(i)] == b) s.dims[std::size_t(i--)] = 1;
            if (i < 0) break;
            ++s.dims[std::size_t(i)];
        }
    }

    void build_candidates() {
        for (int v = 0; v < ntv_; ++v) {
            bool scalar = false, vector = false;
            for (const auto* e : sides_)
                for (int i = 0; i < e->size; ++i) {
                    const pattern_node& n = e->nodes[std::size_t(i)];
                    for (int j = 0; j < n.num_inputs; ++j) {
                        value_ref r = n.inputs[std::size_t(j)];
                        if (!r.is_var || r.index != v) continue;
                        if (n.op == op_kind::smul && j == 1) scalar = true;
                        if (n.op == op_kind::batchnorm && j >= 1) vector = true;
                    }
                }
            std::vector<shape> c;
            if (scalar) c.push_back(shape{});
            else if (vector) shapes_of_rank(1, opt_.max_extent, c);
            else
                for (int r = opt_.min_rank; r <= opt_.max_rank; ++r) shapes_of_rank(r, opt_.max_extent, c);
            cands_.push_back(std::move(c));
        }
    }

    std::optional<shape> shape_of(const spec::expr& e, value_ref v, const instance& in, const side_shapes& ss) const {
        if (v.is_var) return in.vshapes[std::size_t(v.index)];
        if (!ss.known[std::size_t(v.index)]) return std::nullopt;
        (void)e;
        return ss.out[std::size_t(v.index)][v.output];
    }

    // Value of a parameter term; nullopt while a measured tensor is unknown.
    std::optional<std::int32_t> term_value(const spec::expr& e, const param_term& t, std::int32_t fallback,
                                           const instance& in, const side_shapes* ss) const {
        switch (t.k) {
            case param_term::kind::constant: return t.value;
            case param_term::kind::variable: return in.pvals[std::size_t(t.value)];
            case param_term::kind::dim_of: {
                if (!ss) return std::nullopt;
                auto s = shape_of(e, t.of, in, *ss);
                if (!s) return std::nullopt;
                return t.dim < s->rank ? std::int32_t(s->dims[std::size_t(t.dim)]) : -1;
            }
            case param_term::kind::unused: break;
        }
        return fallback;
    }

    std::optional<spec::op_params> node_params(const spec::expr& e, int i, const instance& in, const side_shapes& ss) const {
        const pattern_node& n = e.nodes[std::size_t(i)];
        const spec::op_decl& d = spec::decl(n.op);
        spec::op_params p;
        for (int s = 0; s < d.num_params; ++s) {
            const param_term& t = n.params[std::size_t(s)];
            if (is_history_split(n, t, s)) {
                const value_ref src = n.inputs[0];
                auto axis = term_value(e, n.params[0], 0, in, &ss);
                if (!axis) return std::nullopt;
                if (!src.is_var && e.nodes[std::size_t(src.index)].op == op_kind::concat &&
                    e.nodes[std::size_t(src.index)].params[0] == n.params[0]) {
                    auto first = shape_of(e, e.nodes[std::size_t(src.index)].inputs[0], in, ss);
                    if (!first) return std::nullopt;
                    p[s] = *axis >= 0 && *axis < first->rank ? std::int32_t(first->dims[std::size_t(*axis)]) : -1;
                } else {
                    p[s] = in.split_point;
                }
                continue;
            }
            auto v = term_value(e, t, d.params[std::size_t(s)].fallback, in, &ss);
            if (!v) return std::nullopt;
            p[s] = *v;
        }
        return p;
    }

    enum class status { partial, complete, failed };

    status infer(const spec::expr& e, const instance& in, side_shapes& ss) const {
        ss.out.assign(std::size_t(e.size), {});
        ss.known.assign(std::size_t(e.size), 0);
        for (int i = 0; i < e.size; ++i) {
            const pattern_node& n = e.nodes[std::size_t(i)];
            // A fixed array: the shape search runs this millions of times.
            std::array<shape, spec::max_inputs> ins_buf;
            bool ready = true;
            for (int j = 0; j < n.num_inputs && ready; ++j) {
                auto s = shape_of(e, n.inputs[std::size_t(j)], in, ss);
                if (!s) ready = false;
                else ins_buf[std::size_t(j)] = *s;
            }
            if (!ready) continue;
            const std::span<const shape> ins(ins_buf.data(), std::size_t(n.num_inputs));
            auto p = node_params(e, i, in, ss);
            if (!p) continue;
            const spec::op_decl& d = spec::decl(n.op);
            auto outs = std::span<shape>(ss.out[std::size_t(i)].data(), std::size_t(d.num_outputs));
            if (!spec::infer_shapes(n.op, *p, ins, outs).empty()) return status::failed;
            {
                const auto t = opt_.typing;
                bool konst0 = n.num_inputs > 0 && is_constant_op(e, n.inputs[0]);
                bool konst1 = n.num_inputs > 1 && is_constant_op(e, n.inputs[1]);
                // As rewrite/model.hpp: only a one-element constant broadcasts.
                bool scalar0 = konst0 && ins[0].elements() == 1, scalar1 = konst1 && ins[1].elements() == 1;
                if ((t & spec::no_broadcast) && (n.op == op_kind::ewadd || n.op == op_kind::ewmul) && !(ins[0] == ins[1]) &&
                    !scalar0 && !scalar1)
                    return status::failed;
                if ((t & spec::ungrouped_conv) && n.op == op_kind::conv2d && ins[1][1] != ins[0][1] && !konst1)
                    return status::failed;
                if ((t & spec::matmul_2d) && n.op == op_kind::matmul && (ins[0].rank != 2 || ins[1].rank != 2))
                    return status::failed;
            }
            ss.known[std::size_t(i)] = 1;
        }
        if (e.root.is_var) return in.vshapes[std::size_t(e.root.index)] ? status::complete : status::partial;
        return ss.known[std::size_t(e.root.index)] ? status::complete : status::partial;
    }

    bool static_conditions_hold(const instance& in) const {
        for (int i = 0; i < ax_.num_where; ++i) {
            const auto& c = ax_.where[std::size_t(i)];
            auto a = term_value(ax_.eq.lhs, c.a, 0, in, nullptr), b = term_value(ax_.eq.lhs, c.b, 0, in, nullptr);
            if (!a || !b) continue;  // measured at the leaves
            if ((c.r == spec::condition::rel::eq) != (*a == *b)) return false;
        }
        return true;
    }

    bool conditions_hold(const instance& in, const side_shapes& ls) const {
        for (int i = 0; i < ax_.num_where; ++i) {
            const auto& c = ax_.where[std::size_t(i)];
            auto a = term_value(ax_.eq.lhs, c.a, 0, in, &ls), b = term_value(ax_.eq.lhs, c.b, 0, in, &ls);
            if (!a || !b) return false;
            if ((c.r == spec::condition::rel::eq) != (*a == *b)) return false;
        }
        return true;
    }

    // Depth-first search over the shapes of the tensor variables, pruning as
    // soon as a side fails shape inference. `leaf` returns true to stop.
    struct search_budget {
        long steps, tries;
    };

    bool dfs(int v, instance& in, std::mt19937_64* rng, const std::function<bool(const instance&)>& leaf,
             search_budget* budget) {
        if (budget && --budget->steps < 0) return true;
        if (v == ntv_) {
            side_shapes ls, rs;
            if (infer(*sides_[0], in, ls) != status::complete || infer(*sides_[1], in, rs) != status::complete) {
                ++report_.shape_rejected;
                return false;
            }
            if (!conditions_hold(in, ls)) return false;
            return leaf(in);
        }
        std::vector<std::size_t> order(cands_[std::size_t(v)].size());
        for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
        if (rng) std::shuffle(order.begin(), order.end(), *rng);
        side_shapes ls, rs;  // reused: infer() refills them
        for (std::size_t i : order) {
            if (budget && --budget->tries < 0) {
                in.vshapes[std::size_t(v)].reset();
                return true;
            }
            in.vshapes[std::size_t(v)] = cands_[std::size_t(v)][i];
            if (infer(*sides_[0], in, ls) == status::failed || infer(*sides_[1], in, rs) == status::failed) {
                ++report_.shape_rejected;
                continue;
            }
            if (dfs(v + 1, in, rng, leaf, budget)) {
                in.vshapes[std::size_t(v)].reset();
                return true;
            }
        }
        in.vshapes[std::size_t(v)].reset();
        return false;
    }

    std::string key(const instance& in) const {
        std::string k;
        for (auto p : in.pvals) k += std::to_string(p) + ",";
        k += "s" + std::to_string(in.split_point) + ";";
        for (const auto& s : in.vshapes) k += s->str();
        return k;
    }

    std::string describe(const instance& in) const {
        std::string d = "params (";
        for (std::size_t i = 0; i < in.pvals.size(); ++i) d += (i ? ", p" : "p") + std::to_string(i) + "=" + std::to_string(in.pvals[i]);
        d += ")";
        if (needs_split_point_) d += " split point " + std::to_string(in.split_point);
        d += ", shapes";
        const char* names = "xyzwuv";
        for (std::size_t i = 0; i < in.vshapes.size(); ++i)
            d += std::string(" ") + (i < 6 ? std::string(1, names[i]) : "t" + std::to_string(i)) + "=" + in.vshapes[i]->str();
        return d;
    }

    tensor<zs> evaluate(const spec::expr& e, const instance& in, const std::vector<tensor<zs>>& vars) const {
        side_shapes ss;
        infer(e, in, ss);
        std::vector<std::vector<tensor<zs>>> outs(std::size_t(e.size));
        auto value = [&](value_ref r) -> const tensor<zs>* {
            return r.is_var ? &vars[std::size_t(r.index)] : &outs[std::size_t(r.index)][r.output];
        };
        for (int i = 0; i < e.size; ++i) {
            const pattern_node& n = e.nodes[std::size_t(i)];
            const spec::op_decl& d = spec::decl(n.op);
            std::vector<const tensor<zs>*> ins;
            for (int j = 0; j < n.num_inputs; ++j) ins.push_back(value(n.inputs[std::size_t(j)]));
            auto& o = outs[std::size_t(i)];
            for (int k = 0; k < d.num_outputs; ++k) o.emplace_back(ss.out[std::size_t(i)][std::size_t(k)]);
            eval_symbolic(n.op, *node_params(e, i, in, ss), ins, o);
        }
        return *value(e.root);
    }

    bool check_instance(const instance& in) {
        z3::context& ctx = *ctx_;
        side_shapes ls, rs;
        infer(*sides_[0], in, ls);
        infer(*sides_[1], in, rs);
        auto lshape = shape_of(*sides_[0], sides_[0]->root, in, ls), rshape = shape_of(*sides_[1], sides_[1]->root, in, rs);
        if (!(*lshape == *rshape)) {
            report_.failure = "shape mismatch " + lshape->str() + " vs " + rshape->str() + " at " + describe(in);
            return false;
        }
        std::vector<tensor<zs>> vars;
        for (int v = 0; v < ntv_; ++v) {
            tensor<zs> t(*in.vshapes[std::size_t(v)]);
            for (std::int64_t i = 0; i < t.size(); ++i)
                t[i] = zs(ctx.real_const(("v" + std::to_string(v) + "_" + std::to_string(i)).c_str()));
            vars.push_back(std::move(t));
        }
        tensor<zs> l = evaluate(*sides_[0], in, vars), r = evaluate(*sides_[1], in, vars);
        z3::params sp(ctx);
        sp.set("som", true);
        z3::expr_vector diffs(ctx);
        std::vector<std::int64_t> element;  // of each diff
        std::int64_t first = -1;
        for (std::int64_t i = 0; i < l.size(); ++i) {
            if (z3::eq(l[i].e, r[i].e)) continue;
            z3::expr d = (l[i].e - r[i].e).simplify(sp);
            if (d.is_numeral() && std::string(Z3_get_numeral_string(ctx, d)) == "0") continue;
            if (first < 0) first = i;
            diffs.push_back(d != ctx.real_val(0));
            element.push_back(i);
        }
        if (diffs.empty()) return true;
        // Every element in one query first, briefly: most axioms settle so.
        // That can be too much for Z3 where each element alone is small (a
        // max-pool window of nested maxima and relus: 2^9 cases, times 192
        // elements, in one disjunction); then the elements are checked one
        // at a time, each with the full timeout, and so are the axiom's
        // further instances.
        const bool several = diffs.size() > 1;
        z3::solver s(ctx);
        z3::params p(ctx), first_try(ctx);
        p.set("timeout", opt_.timeout_ms);
        first_try.set("timeout", std::min(opt_.timeout_ms, 200u));
        s.set(several ? first_try : p);
        s.add(z3::mk_or(diffs));
        auto res = several && per_element_ ? z3::unknown : s.check();
        if (res == z3::unsat) return true;
        if (res == z3::unknown && several) {
            per_element_ = true;
            res = z3::unsat;
            std::unordered_set<unsigned> decided;  // canonical forms found unsat
            for (unsigned i = 0; i < diffs.size() && res == z3::unsat; ++i) {
                z3::expr canon = renamed_canonically(diffs[i]);
                if (decided.count(canon.id())) continue;
                z3::solver one(ctx);
                one.set(p);
                one.add(canon);
                res = one.check();
                if (res == z3::unsat) {
                    decided.insert(canon.id());
                } else {
                    s = one;
                    first = element[i];
                }
            }
            if (res == z3::unsat) return true;
        }
        report_.failure = std::string(res == z3::sat ? "counterexample" : "unknown (" + s.reason_unknown() + ")") +
                          " at " + describe(in) + ": element " + std::to_string(first) + ": " +
                          l[first].e.to_string() + " vs " + r[first].e.to_string();
        if (report_.failure.size() > 600) report_.failure.resize(600);
        return false;
    }
};

}  // namespace

axiom_report check_axiom(const spec::axiom& a, const check_options& opt) { return checker(a, opt).run(); }

std::vector<axiom_report> check_axioms(std::span<const spec::axiom> axioms, const check_options& opt) {
    std::vector<axiom_report> r;
    for (const auto& a : axioms) r.push_back(check_axiom(a, opt));
    return r;
}

std::vector<redundancy_report> find_redundant(std::span<const spec::axiom> axioms, unsigned timeout_ms,
                                              const std::function<void(const redundancy_report&)>& progress) {
    std::vector<redundancy_report> r;
    for (std::size_t i = 0; i < axioms.size(); ++i) {
        std::vector<spec::axiom> others;
        for (std::size_t j = 0; j < axioms.size(); ++j)
            if (j != i) others.push_back(axioms[j]);
        // With the shape facts: lemmas over constants whose extents come from
        // tensors (cpool(dim(x, 1))) need them (docs/verification.md).
        verifier v(others, timeout_ms, 0, true);
        r.push_back({std::string(axioms[i].name), v.prove(axioms[i])});
        if (progress) progress(r.back());
    }
    return r;
}

}  // namespace tsopt::gen
