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
    unsigned max_instances = 0;
    bool mbqi = true;
    unsigned queries = 0;
    std::vector<spec::axiom> source;  // re-encoded for a fresh context (rlimit mode)
    bool with_shape_facts = false;
    bool reuse = false;                // reuse_solver: queries in push/pop scopes of `shared`
    std::optional<z3::solver> shared;  // the axioms asserted once

    void encode_axioms() {
        for (const auto& a : source) axioms.push_back(axiom_formula(a));
        if (with_shape_facts)
            for (auto& f : shape_facts()) axioms.push_back(f);
    }

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
                // any_value slots: the variable stays unguarded (axioms hold for every value).
                if (t.k == param_term::kind::variable && !d.params[std::size_t(s)].any_value)
                    env.note_domain(t.value, d.params[std::size_t(s)].domain);
                args.push_back(term(t, d.params[std::size_t(s)].fallback, i));
            }
            for (int j = 0; j < n.num_inputs; ++j) args.push_back(value(n.inputs[std::size_t(j)], i));
            slot = m.fn(n.op, n.num_inputs, out)(args);
            return *slot;
        }
    };

    // Extents the encoding compares (tensors have rank 4 at most; above a
    // tensor's rank `dim` is a free value the shape facts keep equal).
    static constexpr int typing_axes = 4;

    // What a rule's application guarantees about its instances, as facts on
    // the candidate's own terms (ground, so no axiom instance is constrained).
    // The library applies a rule only where every node it matches or creates
    // satisfies TASO's typing (rewrite/model.hpp: matmul of two matrices,
    // ewadd/ewmul operands of one shape unless one is a one-element constant;
    // asserted here only without a constant operand, whose size the encoding
    // does not know), and only where each replacement has the shape of the
    // value it replaces (rewrite/apply.hpp; prove_direct asserts that).
    // Without them Z3 does not know, say, that x is square in
    // ewmul(imatmul(dim(x, 0)), transpose(x)) => ewmul(imatmul(dim(x, 0)), x).
    z3::expr typing_facts(encoder& enc) {
        z3::expr f = ctx.bool_val(true);
        auto is_constant_op = [&](const value_ref& v) {
            return !v.is_var && spec::decl(enc.nodes[std::size_t(v.index)].op).cls == spec::op_class::constant;
        };
        for (std::size_t i = 0; i < enc.nodes.size(); ++i) {
            const pattern_node& n = enc.nodes[i];
            if (n.num_inputs != 2) continue;
            const int user = int(i);
            auto in = [&](int j) { return enc.value(n.inputs[std::size_t(j)], user); };
            if (n.op == op_kind::matmul) {
                f = f && dim(in(0), ctx.int_val(1)) == dim(in(1), ctx.int_val(0));
            } else if ((n.op == op_kind::ewadd || n.op == op_kind::ewmul) && !is_constant_op(n.inputs[0]) &&
                       !is_constant_op(n.inputs[1])) {
                for (int d = 0; d < typing_axes; ++d) f = f && dim(in(0), ctx.int_val(d)) == dim(in(1), ctx.int_val(d));
            }
        }
        return f;
    }

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

    // forall bound. body, with one E-matching trigger.
    z3::expr forall(std::vector<z3::expr> bound, const z3::expr& body, const z3::expr& trigger) {
        std::vector<Z3_app> apps;
        for (auto& b : bound) apps.push_back(Z3_to_app(ctx, b));
        Z3_ast t = trigger;
        Z3_pattern pat = Z3_mk_pattern(ctx, 1, &t);
        z3::ast keep(ctx, Z3_pattern_to_ast(ctx, pat));
        Z3_ast q = Z3_mk_forall_const(ctx, 0, unsigned(apps.size()), apps.data(), 1, &pat, body);
        ctx.check_error();
        return z3::expr(ctx, q);
    }

    // Shape facts: the extents of an operator's output in terms of its
    // inputs' extents and parameters, as the shape rules (spec/ops) give them
    // under TASO's typing (equal-shape element-wise operands, 2-D matmul).
    // Without them `dim` is opaque and lemmas whose constants take extents
    // from tensors (cpool(dim(x, 1)) over a concat of x) cannot be derived.
    // Each fact fires on a `dim` term of the operator's output.
    std::vector<z3::expr> shape_facts() {
        std::vector<z3::expr> f;
        z3::expr x = ctx.constant("sx", T), y = ctx.constant("sy", T), z = ctx.constant("sz", T);
        z3::expr d = ctx.int_const("sd"), a = ctx.int_const("sa");
        std::vector<z3::expr> pv;
        for (int i = 0; i < 6; ++i) pv.push_back(ctx.int_const(("sp" + std::to_string(i)).c_str()));
        auto params = [&](op_kind k) {
            z3::expr_vector v(ctx);
            for (int i = 0; i < encoded_params(k); ++i) v.push_back(pv[std::size_t(i)]);
            return v;
        };
        auto app = [&](op_kind k, std::vector<z3::expr> in, int out = 0) {
            z3::expr_vector args = params(k);
            for (auto& t : in) args.push_back(t);
            return fn(k, int(in.size()), out)(args);
        };
        auto bound = [&](op_kind k, std::vector<z3::expr> in, std::vector<z3::expr> more) {
            std::vector<z3::expr> b(pv.begin(), pv.begin() + encoded_params(k));
            b.insert(b.end(), in.begin(), in.end());
            b.insert(b.end(), more.begin(), more.end());
            return b;
        };
        auto D = [&](const z3::expr& t, const z3::expr& i) { return dim(t, i); };
        auto I = [&](int i) { return ctx.int_val(i); };
        // Same extents as the first input on every axis.
        for (op_kind k : {op_kind::relu, op_kind::sigmoid, op_kind::tanh}) {
            z3::expr o = app(k, {x});
            f.push_back(forall(bound(k, {x}, {d}), D(o, d) == D(x, d), D(o, d)));
        }
        for (op_kind k : {op_kind::ewadd, op_kind::ewmul}) {
            z3::expr o = app(k, {x, y});
            f.push_back(forall(bound(k, {x, y}, {d}), D(o, d) == D(x, d) && D(o, d) == D(y, d), D(o, d)));
        }
        {
            z3::expr o = app(op_kind::smul, {x, y});
            f.push_back(forall(bound(op_kind::smul, {x, y}, {d}), D(o, d) == D(x, d), D(o, d)));
            z3::expr b = app(op_kind::batchnorm, {x, y, z});
            f.push_back(forall(bound(op_kind::batchnorm, {x, y, z}, {d}), D(b, d) == D(x, d), D(b, d)));
        }
        // concat: the operands agree off the axis and add up along it.
        {
            z3::expr_vector args(ctx);
            args.push_back(a); args.push_back(x); args.push_back(y);
            z3::expr o = fn(op_kind::concat, 2, 0)(args);
            z3::expr body = z3::ite(d == a, D(o, d) == D(x, d) + D(y, d), D(o, d) == D(x, d) && D(o, d) == D(y, d));
            f.push_back(forall({a, x, y, d}, body, D(o, d)));
            // split: both parts keep the input's extents off the axis.
            for (int out = 0; out < 2; ++out) {
                z3::expr_vector sa(ctx);
                sa.push_back(a); sa.push_back(x);
                z3::expr s = fn(op_kind::split, 1, out)(sa);
                f.push_back(forall({a, x, d}, z3::implies(d != a, D(s, d) == D(x, d)), D(s, d)));
            }
        }
        // conv2d (NCHW x OIHW): batch from the input, channels from the kernel.
        {
            z3::expr o = app(op_kind::conv2d, {x, y});
            f.push_back(forall(bound(op_kind::conv2d, {x, y}, {}), D(o, I(0)) == D(x, I(0)) && D(o, I(1)) == D(y, I(0)),
                               o));
            for (op_kind k : {op_kind::avgpool, op_kind::maxpool}) {
                z3::expr p = app(k, {x});
                f.push_back(forall(bound(k, {x}, {}), D(p, I(0)) == D(x, I(0)) && D(p, I(1)) == D(x, I(1)), p));
            }
            z3::expr e = app(op_kind::enlarge, {x});
            f.push_back(forall(bound(op_kind::enlarge, {x}, {}),
                               D(e, I(0)) == D(x, I(0)) && D(e, I(1)) == D(x, I(1)) && D(e, I(2)) == pv[0] &&
                                   D(e, I(3)) == pv[1],
                               e));
        }
        // 2-D matmul, the square identity, and every transpose permutation of the domain.
        {
            z3::expr o = app(op_kind::matmul, {x, y});
            f.push_back(forall(bound(op_kind::matmul, {x, y}, {}), D(o, I(0)) == D(x, I(0)) && D(o, I(1)) == D(y, I(1)), o));
            z3::expr m = app(op_kind::imatmul, {});
            f.push_back(forall(bound(op_kind::imatmul, {}, {}), D(m, I(0)) == pv[0] && D(m, I(1)) == pv[0], m));
            for (std::int32_t perm : spec::decl(op_kind::transpose).params[spec::transpose_p::perm].domain) {
                z3::expr_vector ta(ctx);
                ta.push_back(ctx.int_val(perm)); ta.push_back(x);
                z3::expr t = fn(op_kind::transpose, 1, 0)(ta);
                z3::expr body = ctx.bool_val(true);
                for (int i = 0; i < spec::perm_rank(perm); ++i) body = body && D(t, I(i)) == D(x, I(spec::perm_axis(perm, i)));
                f.push_back(forall({x}, body, t));
            }
        }
        return f;
    }

    verify_result run(const z3::expr& goal_negation, const z3::expr& assumptions) {
        auto t0 = std::chrono::steady_clock::now();
        std::optional<z3::solver> own;
        auto& slot = reuse ? shared : own;
        if (!slot) {
            slot.emplace(ctx);
            configure(*slot);
            for (auto& ax : axioms) slot->add(ax);
        }
        z3::solver& s = *slot;
        struct scope {
            z3::solver* s;
            ~scope() { if (s) s->pop(); }
        } sc{reuse ? &s : nullptr};
        if (reuse) s.push();
        s.add(assumptions);
        s.add(goal_negation);
        // Counters are the solver's totals (a reused one's over all its
        // queries): the query's share is the difference.
        std::uint64_t r0 = rlimit_count(s), i0 = stat(s, "quant instantiations");
        z3::check_result r = s.check();
        double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::uint64_t used = rlimit_count(s) - r0;
        last_instances = stat(s, "quant instantiations") - i0;
        last_memory_mb = stat(s, "max memory");
        return classify(s, r, secs, used);
    }
    void configure(z3::solver& s) {
        z3::params p(ctx);
        p.set("timeout", timeout_ms);
        if (rlimit > 0) p.set("rlimit", rlimit);
        // Z3 4.8's rlimit barely counts E-matching: a query whose
        // instantiations explode spends minutes and gigabytes below its
        // rlimit, and ignores the timeout meanwhile. The instance cap bounds
        // that deterministically too.
        if (max_instances > 0) p.set("qi.max_instances", max_instances);
        if (!mbqi) p.set("mbqi", false);
        s.set(p);
    }
    verify_result classify(z3::solver& s, z3::check_result r, double secs, std::uint64_t used) {
        if (r == z3::unsat) return {verdict::proven, secs, "unsat: follows from the axioms", used, last_instances, last_memory_mb};
        if (r == z3::sat)
            return {verdict::unproven, secs, "sat: the axioms admit a model where the outputs differ", used, last_instances, last_memory_mb};
        std::string why = s.reason_unknown();
        // Which limit ended the query: with an rlimit the answer is reproducible
        // only when the rlimit did (the wall clock is the hang guard). Inside
        // a push scope Z3 gives "unknown" as the reason when the rlimit ends it.
        bool hit_rlimit = (rlimit > 0 && used >= rlimit) || (max_instances > 0 && last_instances >= max_instances);
        bool to = why.find("timeout") != std::string::npos || why.find("canceled") != std::string::npos ||
                  why.find("resource") != std::string::npos || secs * 1000.0 >= 0.95 * timeout_ms || hit_rlimit;
        verify_result res{to ? verdict::timeout : verdict::unproven, secs,
                          "unknown: " + why + (hit_rlimit ? " (rlimit)" : to ? " (wall-clock guard)" : ""), used,
                          last_instances, last_memory_mb};
        res.wall_clock = to && !hit_rlimit;
        return res;
    }

    // The context's cumulative resource count (Z3 reports it with every
    // solver's statistics; queries take differences).
    static std::uint64_t rlimit_count(z3::solver& s) { return stat(s, "rlimit count"); }
    static std::uint64_t stat(z3::solver& s, const char* key) {
        z3::stats st = s.statistics();
        for (unsigned i = 0; i < st.size(); ++i)
            if (st.key(i) == key) return st.is_uint(i) ? std::uint64_t(st.uint_value(i)) : std::uint64_t(st.double_value(i));
        return 0;
    }
    std::uint64_t last_instances = 0, last_memory_mb = 0;
};

verifier::verifier(std::span<const spec::axiom> axioms, unsigned timeout_ms, unsigned rlimit, bool shape_facts)
    : p_(std::make_unique<impl>(timeout_ms, rlimit)) {
    p_->source.assign(axioms.begin(), axioms.end());
    p_->with_shape_facts = shape_facts;
    p_->encode_axioms();
}

verifier::impl& verifier::fresh() {
    // Under an rlimit every query starts from the same Z3 state, so its
    // outcome depends on the query alone, not on the thread's earlier queries.
    if (p_->rlimit > 0 && p_->queries > 0 && !p_->reuse) {
        auto n = std::make_unique<impl>(p_->timeout_ms, p_->rlimit);
        n->source = std::move(p_->source);
        n->with_shape_facts = p_->with_shape_facts;
        n->max_instances = p_->max_instances;
        n->mbqi = p_->mbqi;
        n->encode_axioms();
        p_ = std::move(n);
    }
    return *p_;
}
verifier::~verifier() = default;
verifier::verifier(verifier&&) noexcept = default;
verifier& verifier::operator=(verifier&&) noexcept = default;

std::size_t verifier::axiom_count() const { return p_->axioms.size(); }
void verifier::limit_instances(unsigned n) { p_->max_instances = n; }
void verifier::use_mbqi(bool on) { p_->mbqi = on; }
void verifier::reuse_solver(bool on) { p_->reuse = on; }

namespace {

// The transposed mirror of a candidate over 2-D matrices: every matrix value
// t stands for t^T, so matmul(a, b) becomes matmul(b', a') (its operands
// swapped, transpose-matmul; a fused relu stays), smul, ewadd, ewmul and relu keep their order
// (smul's scalar stays as it is), concat swaps axes 0 and 1, transpose and
// imatmul stay. Transpose is a bijection on matrices, so the mirror holds
// exactly when the candidate does, yet Z3's E-matching, which never invents
// the transposes this needs, may prove one and not the other:
// smul(matmul(a, w), s) == matmul(smul(a, s), w) is, transposed,
// smul(matmul(w', a'), s) == matmul(w', smul(a', s)), the axiom smul-matmul.
struct transposed_candidate {
    candidate mirror;
    std::vector<int> matrices;  // tensor variables standing for matrices (the rest: scalars)
};
std::optional<transposed_candidate> transposed(const candidate& c) {
    const std::int32_t t10 = spec::pack_perm({1, 0});
    bool has_matmul = false;
    std::set<int> scalars, matrices;
    auto constant = [](const param_term& t, std::int32_t v) { return t.k == param_term::kind::constant && t.value == v; };
    auto mirror_side = [&](std::vector<pattern_node> ns) -> std::optional<std::vector<pattern_node>> {
        for (auto& n : ns) {
            for (const auto& t : n.params)
                if (t.k == param_term::kind::dim_of) return std::nullopt;  // extents would swap too: not handled
            auto matrix = [&](int k) {
                const value_ref& v = n.inputs[std::size_t(k)];
                if (v.is_var) matrices.insert(v.index);
            };
            switch (n.op) {
                case op_kind::matmul:
                    // none, or relu (relu-matmul, relu-transpose)
                    if (!constant(n.params[spec::matmul_p::act], 0) && !constant(n.params[spec::matmul_p::act], 1))
                        return std::nullopt;
                    has_matmul = true;
                    std::swap(n.inputs[0], n.inputs[1]);
                    matrix(0), matrix(1);
                    break;
                case op_kind::smul:
                    if (!n.inputs[1].is_var) return std::nullopt;
                    scalars.insert(n.inputs[1].index);
                    matrix(0);
                    break;
                case op_kind::ewadd:
                case op_kind::ewmul: matrix(0), matrix(1); break;
                case op_kind::relu: matrix(0); break;
                case op_kind::transpose:
                    if (!constant(n.params[spec::transpose_p::perm], t10)) return std::nullopt;
                    matrix(0);
                    break;
                case op_kind::concat: {
                    auto& axis = n.params[spec::concat_p::axis];
                    if (!constant(axis, 0) && !constant(axis, 1)) return std::nullopt;
                    axis.value = 1 - axis.value;
                    matrix(0), matrix(1);
                    break;
                }
                case op_kind::imatmul:
                    if (n.params[spec::imatmul_p::n].k != param_term::kind::constant) return std::nullopt;
                    break;
                default: return std::nullopt;
            }
        }
        return ns;
    };
    auto src = mirror_side(c.src), dst = mirror_side(c.dst);
    if (!src || !dst || !has_matmul) return std::nullopt;
    for (int v : scalars)
        if (matrices.count(v)) return std::nullopt;
    return transposed_candidate{{std::move(*src), std::move(*dst), c.src_out, c.dst_out},
                                std::vector<int>(matrices.begin(), matrices.end())};
}

// The mirror's proven equation at x' := transpose(x) for every matrix
// variable x, both sides wrapped in one more transpose: the two sides are
// equal (an instance of the proven mirror), and each is the candidate's side
// by the transpose axioms, whose triggers these terms now contain.
candidate back_from(const transposed_candidate& t) {
    const std::int32_t t10 = spec::pack_perm({1, 0});
    auto transpose_of = [&](value_ref v) {
        pattern_node n{};
        n.op = op_kind::transpose;
        n.num_inputs = 1;
        n.inputs[0] = v;
        n.params[spec::transpose_p::perm] = spec::pconst(t10);
        return n;
    };
    const auto k = static_cast<std::int16_t>(t.matrices.size());
    auto side = [&](const std::vector<pattern_node>& ns, const std::vector<value_ref>& outs, std::vector<value_ref>& new_outs) {
        std::vector<pattern_node> out;
        for (int v : t.matrices) out.push_back(transpose_of(spec::var_ref(v)));
        auto moved = [&](value_ref r) {
            if (!r.is_var) return value_ref{static_cast<std::int16_t>(r.index + k), r.output, false};
            auto it = std::find(t.matrices.begin(), t.matrices.end(), r.index);
            return it == t.matrices.end() ? r : spec::node_ref(int(it - t.matrices.begin()));
        };
        for (auto n : ns) {
            for (int j = 0; j < n.num_inputs; ++j) n.inputs[std::size_t(j)] = moved(n.inputs[std::size_t(j)]);
            out.push_back(n);
        }
        for (const auto& o : outs) {
            out.push_back(transpose_of(moved(o)));
            new_outs.push_back(spec::node_ref(int(out.size()) - 1));
        }
        return out;
    };
    candidate b;
    b.src = side(t.mirror.src, t.mirror.src_out, b.src_out);
    b.dst = side(t.mirror.dst, t.mirror.dst_out, b.dst_out);
    return b;
}

}  // namespace

verify_result verifier::prove_direct(const candidate& c, const candidate* known) {
    auto& m = fresh();
    var_env env{m.ctx, m.T, "q" + std::to_string(m.queries++) + "_", {}, {}, {}, {}, {}};
    impl::encoder se(m, env, c.src), de(m, env, c.dst);
    z3::expr_vector differ(m.ctx);
    z3::expr assumed = m.ctx.bool_val(true);
    for (std::size_t i = 0; i < c.src_out.size(); ++i) {
        z3::expr a = se.value(c.src_out[i], -1), b = de.value(c.dst_out[i], -1);
        differ.push_back(a != b);
        for (int d = 0; d < impl::typing_axes; ++d) assumed = assumed && m.dim(a, m.ctx.int_val(d)) == m.dim(b, m.ctx.int_val(d));
    }
    assumed = assumed && m.typing_facts(se) && m.typing_facts(de);
    if (known) {
        impl::encoder ks(m, env, known->src), kd(m, env, known->dst);
        for (std::size_t i = 0; i < known->src_out.size(); ++i)
            assumed = assumed && ks.value(known->src_out[i], -1) == kd.value(known->dst_out[i], -1);
    }
    return m.run(z3::mk_or(differ), env.guards() && assumed);
}

verify_result verifier::prove(const candidate& c) {
    if (c.src_out.size() != c.dst_out.size() || c.src_out.empty())
        return {verdict::unproven, 0.0, "candidate needs as many source as target outputs (at least one)"};
    auto r = prove_direct(c, nullptr);
    if (r.v == verdict::proven || r.wall_clock || !transposed_) return r;
    // Before giving up: the transposed obligation, then the step back from it.
    auto t = transposed(c);
    if (!t) return r;
    auto failed = [&](const verify_result& why, const char* what) {
        if (why.wall_clock) return why;  // aborts the run (the caller's concern)
        r.seconds += why.seconds;
        r.detail += std::string("; ") + what + ": " + why.detail;
        return r;
    };
    auto mirrored = prove_direct(t->mirror, nullptr);
    if (mirrored.v != verdict::proven) return failed(mirrored, "transposed obligation");
    auto back = back_from(*t);
    auto r2 = prove_direct(c, &back);
    if (r2.v != verdict::proven) return failed(r2, "transposed obligation proven, step back");
    r2.transposed_rlimit_used = mirrored.rlimit_used;
    r2.seconds += r.seconds + mirrored.seconds;
    r2.instances = std::max(r2.instances, mirrored.instances);
    r2.memory_mb = std::max(r2.memory_mb, mirrored.memory_mb);
    r2.detail = "unsat via the transposed obligation: its proof spent rlimit " + std::to_string(mirrored.rlimit_used) +
                ", the step back " + std::to_string(r2.rlimit_used);
    return r2;
}

void verifier::try_transposed(bool on) { transposed_ = on; }

verify_result verifier::prove(const spec::axiom& a) {
    auto& m = fresh();
    var_env env{m.ctx, m.T, "q" + std::to_string(m.queries++) + "_", {}, {}, {}, {}, {}};
    candidate c = to_candidate(a.eq);
    impl::encoder se(m, env, c.src), de(m, env, c.dst);
    z3::expr goal = se.value(c.src_out[0], -1) != de.value(c.dst_out[0], -1);
    z3::expr pre = env.guards();
    for (int i = 0; i < a.num_where; ++i) pre = pre && m.encode_condition(se, a.where[std::size_t(i)]);
    return m.run(goal, pre);
}

}  // namespace tsopt::gen
