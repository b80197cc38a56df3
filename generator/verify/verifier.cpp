#include "verifier.hpp"

#include <z3++.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "tsopt/core/error.hpp"

namespace tsopt::gen {

using spec::op_kind;
using spec::param_term;
using spec::pattern_node;
using spec::value_ref;

const char* to_string(verdict v) {
    switch (v) {
        case verdict::proven: return "proven";
        case verdict::unproven: return "unproven";
        case verdict::timeout: return "timeout";
    }
    return "?";
}

candidate to_candidate(const spec::equation& eq) {
    candidate c;
    c.src.assign(eq.lhs.nodes.begin(), eq.lhs.nodes.begin() + eq.lhs.size);
    c.dst.assign(eq.rhs.nodes.begin(), eq.rhs.nodes.begin() + eq.rhs.size);
    c.src_out = {eq.lhs.root};
    c.dst_out = {eq.rhs.root};
    return c;
}

namespace {

// Parameters the encoding passes to an operator's function: all declared
// slots except split's `at`, which the tensor's concat history determines
// (TASO encodes split the same way).
int encoded_params(op_kind k) { return k == op_kind::split ? 1 : spec::decl(k).num_params; }

// Tensor and parameter variables of one query or one axiom.
struct var_env {
    z3::context& ctx;
    z3::sort tensor_sort;
    std::string prefix;
    std::map<int, z3::expr> tensors, params;
    std::set<int> touched_t, touched_p;  // variables met while encoding the current side
    // Domains of parameter variables: intersection of the domains of the slots they fill.
    std::map<int, std::set<std::int32_t>> domains;

    z3::expr tensor(int i) {
        touched_t.insert(i);
        auto it = tensors.find(i);
        if (it == tensors.end())
            it = tensors.emplace(i, ctx.constant((prefix + "x" + std::to_string(i)).c_str(), tensor_sort)).first;
        return it->second;
    }
    z3::expr param(int i) {
        touched_p.insert(i);
        auto it = params.find(i);
        if (it == params.end()) it = params.emplace(i, ctx.int_const((prefix + "p" + std::to_string(i)).c_str())).first;
        return it->second;
    }
    void note_domain(int var, std::span<const std::int32_t> dom) {
        if (dom.empty()) return;
        std::set<std::int32_t> s(dom.begin(), dom.end());
        auto it = domains.find(var);
        if (it == domains.end()) { domains.emplace(var, std::move(s)); return; }
        std::set<std::int32_t> r;
        std::set_intersection(it->second.begin(), it->second.end(), s.begin(), s.end(), std::inserter(r, r.begin()));
        it->second = std::move(r);
    }
    // Guards restricting every parameter variable to its domain.
    z3::expr guards() {
        z3::expr g = ctx.bool_val(true);
        for (auto& [var, dom] : domains) {
            z3::expr_vector alts(ctx);
            for (auto v : dom) alts.push_back(param(var) == ctx.int_val(v));
            g = g && (alts.empty() ? ctx.bool_val(false) : z3::mk_or(alts));
        }
        return g;
    }
};

}  // namespace

struct verifier::impl {
    z3::context ctx;
    z3::sort T;
    z3::func_decl dim;
    std::map<std::tuple<int, int, int>, z3::func_decl> funcs;
    std::vector<z3::expr> axioms;
    unsigned timeout_ms;
    unsigned rlimit;
    unsigned queries = 0;

    impl(unsigned t, unsigned r)
        : ctx(), T(ctx.uninterpreted_sort("T")), dim(ctx.function("dim", T, ctx.int_sort(), ctx.int_sort())),
          timeout_ms(t), rlimit(r) {}

    z3::func_decl fn(op_kind k, int nin, int out) {
        auto key = std::make_tuple(int(k), nin, out);
        auto it = funcs.find(key);
        if (it != funcs.end()) return it->second;
        z3::sort_vector dom(ctx);
        for (int i = 0; i < encoded_params(k); ++i) dom.push_back(ctx.int_sort());
        for (int i = 0; i < nin; ++i) dom.push_back(T);
        std::string n = std::string(spec::name(k)) + "_" + std::to_string(nin) + "_" + std::to_string(out);
        return funcs.emplace(key, ctx.function(n.c_str(), dom, T)).first->second;
    }

    // Encodes the values of one topologically ordered pattern.
    struct encoder {
        impl& m;
        var_env& env;
        std::span<const pattern_node> nodes;
        std::vector<std::array<std::optional<z3::expr>, spec::max_outputs>> memo;

        encoder(impl& mm, var_env& e, std::span<const pattern_node> n) : m(mm), env(e), nodes(n), memo(n.size()) {}

        z3::expr value(value_ref v, int user) {
            if (v.is_var) return env.tensor(v.index);
            if (v.index < 0 || (user >= 0 && v.index >= user) || v.index >= int(nodes.size()))
                throw error("verifier: pattern is not topologically ordered (node " + std::to_string(user) +
                            " uses node " + std::to_string(v.index) + ")");
            return node(v.index, v.output);
        }
        z3::expr term(const param_term& t, std::int32_t fallback, int user) {
            switch (t.k) {
                case param_term::kind::constant: return m.ctx.int_val(t.value);
                case param_term::kind::variable: return env.param(t.value);
                case param_term::kind::dim_of: return m.dim(value(t.of, user), m.ctx.int_val(int(t.dim)));
                case param_term::kind::unused: break;
            }
            return m.ctx.int_val(fallback);
        }
        z3::expr node(int i, int out) {
            auto& slot = memo[std::size_t(i)][std::size_t(out)];
            if (slot) return *slot;
            const pattern_node& n = nodes[std::size_t(i)];
            const spec::op_decl& d = spec::decl(n.op);
            if (out >= d.num_outputs) throw error("verifier: output index beyond the operator's outputs");
            z3::expr_vector args(m.ctx);
            for (int s = 0; s < encoded_params(n.op); ++s) {
                const param_term& t = n.params[std::size_t(s)];
                if (t.k == param_term::kind::variable) env.note_domain(t.value, d.params[std::size_t(s)].domain);
                args.push_back(term(t, d.params[std::size_t(s)].fallback, i));
            }
            for (int j = 0; j < n.num_inputs; ++j) args.push_back(value(n.inputs[std::size_t(j)], i));
            slot = m.fn(n.op, n.num_inputs, out)(args);
            return *slot;
        }
    };

    z3::expr encode_condition(encoder& enc, const spec::condition& c) {
        z3::expr a = enc.term(c.a, 0, -1), b = enc.term(c.b, 0, -1);
        return c.r == spec::condition::rel::eq ? a == b : a != b;
    }

    z3::expr axiom_formula(const spec::axiom& a) {
        var_env env{ctx, T, "", {}, {}, {}, {}, {}};
        std::span<const pattern_node> ln(a.eq.lhs.nodes.data(), std::size_t(a.eq.lhs.size));
        std::span<const pattern_node> rn(a.eq.rhs.nodes.data(), std::size_t(a.eq.rhs.size));
        encoder le(*this, env, ln), re(*this, env, rn);
        z3::expr lhs = le.value(a.eq.lhs.root, -1);
        auto lt = env.touched_t, lp = env.touched_p;
        env.touched_t.clear(); env.touched_p.clear();
        z3::expr rhs = re.value(a.eq.rhs.root, -1);
        auto rt = env.touched_t, rp = env.touched_p;
        z3::expr pre = ctx.bool_val(true);
        for (int i = 0; i < a.num_where; ++i) pre = pre && encode_condition(le, a.where[std::size_t(i)]);
        pre = pre && env.guards();
        z3::expr body = z3::implies(pre, lhs == rhs).simplify();

        std::vector<Z3_app> bound;
        for (auto& [i, e] : env.tensors) bound.push_back(Z3_to_app(ctx, e));
        for (auto& [i, e] : env.params) bound.push_back(Z3_to_app(ctx, e));
        if (bound.empty()) return body;
        // Triggers: each side that is an operator application mentioning every bound variable.
        std::vector<Z3_pattern> pats;
        std::vector<z3::ast> keep;  // the C API does not reference-count patterns for us
        auto covers = [&](const std::set<int>& t, const std::set<int>& p) {
            return t.size() == env.tensors.size() && p.size() == env.params.size();
        };
        if (!a.eq.lhs.root.is_var && covers(lt, lp)) {
            Z3_ast x = lhs;
            pats.push_back(Z3_mk_pattern(ctx, 1, &x));
            keep.emplace_back(ctx, Z3_pattern_to_ast(ctx, pats.back()));
        }
        if (!a.eq.rhs.root.is_var && covers(rt, rp)) {
            Z3_ast x = rhs;
            pats.push_back(Z3_mk_pattern(ctx, 1, &x));
            keep.emplace_back(ctx, Z3_pattern_to_ast(ctx, pats.back()));
        }
        Z3_ast q = Z3_mk_forall_const(ctx, 0, unsigned(bound.size()), bound.data(), unsigned(pats.size()),
                                      pats.empty() ? nullptr : pats.data(), body);
        ctx.check_error();
        return z3::expr(ctx, q);
    }

    verify_result run(const z3::expr& goal_negation, const z3::expr& assumptions) {
        auto t0 = std::chrono::steady_clock::now();
        z3::solver s(ctx);
        z3::params p(ctx);
        p.set("timeout", timeout_ms);
        if (rlimit > 0) p.set("rlimit", rlimit);
        s.set(p);
        for (auto& ax : axioms) s.add(ax);
        s.add(assumptions);
        s.add(goal_negation);
        z3::check_result r = s.check();
        double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (r == z3::unsat) return {verdict::proven, secs, "unsat: follows from the axioms"};
        if (r == z3::sat) return {verdict::unproven, secs, "sat: the axioms admit a model where the outputs differ"};
        std::string why = s.reason_unknown();
        bool to = why.find("timeout") != std::string::npos || why.find("canceled") != std::string::npos ||
                  why.find("resource") != std::string::npos || secs * 1000.0 >= 0.95 * timeout_ms;
        return {to ? verdict::timeout : verdict::unproven, secs, "unknown: " + why};
    }
};

verifier::verifier(std::span<const spec::axiom> axioms, unsigned timeout_ms, unsigned rlimit)
    : p_(std::make_unique<impl>(timeout_ms, rlimit)) {
    for (const auto& a : axioms) p_->axioms.push_back(p_->axiom_formula(a));
}
verifier::~verifier() = default;
verifier::verifier(verifier&&) noexcept = default;
verifier& verifier::operator=(verifier&&) noexcept = default;

std::size_t verifier::axiom_count() const { return p_->axioms.size(); }

verify_result verifier::prove(const candidate& c) {
    if (c.src_out.size() != c.dst_out.size() || c.src_out.empty())
        return {verdict::unproven, 0.0, "candidate needs as many source as target outputs (at least one)"};
    auto& m = *p_;
    var_env env{m.ctx, m.T, "q" + std::to_string(m.queries++) + "_", {}, {}, {}, {}, {}};
    impl::encoder se(m, env, c.src), de(m, env, c.dst);
    z3::expr_vector differ(m.ctx);
    for (std::size_t i = 0; i < c.src_out.size(); ++i)
        differ.push_back(se.value(c.src_out[i], -1) != de.value(c.dst_out[i], -1));
    return m.run(z3::mk_or(differ), env.guards());
}

verify_result verifier::prove(const spec::axiom& a) {
    auto& m = *p_;
    var_env env{m.ctx, m.T, "q" + std::to_string(m.queries++) + "_", {}, {}, {}, {}, {}};
    candidate c = to_candidate(a.eq);
    impl::encoder se(m, env, c.src), de(m, env, c.dst);
    z3::expr goal = se.value(c.src_out[0], -1) != de.value(c.dst_out[0], -1);
    z3::expr pre = env.guards();
    for (int i = 0; i < a.num_where; ++i) pre = pre && m.encode_condition(se, a.where[std::size_t(i)]);
    return m.run(goal, pre);
}

}  // namespace tsopt::gen
