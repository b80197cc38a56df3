// An engine's axioms checked on random tensors before they join the proof
// base (cli.cpp): tsopt's own are validated by symbolic execution
// (verify/axiom_check, tests/verify), which needs each operator's semantics
// over Z3 terms; an engine's operator brings float and modp semantics only,
// so its axioms are sampled instead: random shapes, parameter values from
// the slots' domains and values in [-1, 1], both sides run through the
// reference semantics, and an instance where they differ is a false axiom.
#include <optional>
#include <random>

#include "gen.hpp"
#include "tsopt/spec/axioms.hpp"

namespace tsopt::gen {

namespace {

using spec::param_term;
using spec::value_ref;

// One side's values under an assignment: each node's outputs, or nothing
// when a shape rule refuses the instance.
struct side_values {
    std::vector<std::vector<tensor<float>>> out;
};

std::optional<std::int64_t> extent_of(const std::vector<tensor<float>>& vars, const side_values& s, value_ref v, int d) {
    const shape& sh = v.is_var ? vars[static_cast<std::size_t>(v.index)].shape
                               : s.out[static_cast<std::size_t>(v.index)][v.output].shape;
    if (d < 0 || d >= sh.rank) return std::nullopt;
    return sh[d];
}

std::optional<std::int32_t> term_value(const param_term& t, const spec::param_decl& slot, const std::vector<std::int32_t>& pv,
                                       const std::vector<tensor<float>>& vars, const side_values& s) {
    switch (t.k) {
        case param_term::kind::unused: return slot.fallback;
        case param_term::kind::constant: return t.value;
        case param_term::kind::variable: return pv[static_cast<std::size_t>(t.value)];
        case param_term::kind::dim_of:
            if (auto e = extent_of(vars, s, t.of, t.dim)) return static_cast<std::int32_t>(*e);
            return std::nullopt;
    }
    return std::nullopt;
}

std::optional<tensor<float>> run_side(const spec::expr& e, const std::vector<std::int32_t>& pv, const std::vector<tensor<float>>& vars) {
    side_values s;
    for (int i = 0; i < e.size; ++i) {
        const spec::pattern_node& n = e.nodes[static_cast<std::size_t>(i)];
        const spec::op_decl& d = spec::decl(n.op);
        spec::op_params p{};
        for (int k = 0; k < d.num_params; ++k) {
            auto v = term_value(n.params[static_cast<std::size_t>(k)], d.params[static_cast<std::size_t>(k)], pv, vars, s);
            if (!v) return std::nullopt;
            p[k] = *v;
        }
        std::vector<const tensor<float>*> in;
        for (int k = 0; k < n.num_inputs; ++k) {
            value_ref r = n.inputs[static_cast<std::size_t>(k)];
            in.push_back(r.is_var ? &vars[static_cast<std::size_t>(r.index)] : &s.out[static_cast<std::size_t>(r.index)][r.output]);
        }
        try {
            s.out.push_back(spec::evaluate<float>(n.op, p, in));
        } catch (const error&) {
            return std::nullopt;  // the shape rule refuses this instance
        }
    }
    if (e.root.is_var) return vars[static_cast<std::size_t>(e.root.index)];
    return s.out[static_cast<std::size_t>(e.root.index)][e.root.output];
}

// The domain a parameter variable ranges over: its first slot's.
std::span<const std::int32_t> domain_of(const spec::axiom& a, int var) {
    for (const spec::expr* e : {&a.eq.lhs, &a.eq.rhs})
        for (int i = 0; i < e->size; ++i) {
            const auto& n = e->nodes[static_cast<std::size_t>(i)];
            const auto& d = spec::decl(n.op);
            for (int k = 0; k < d.num_params; ++k)
                if (n.params[static_cast<std::size_t>(k)].k == param_term::kind::variable &&
                    n.params[static_cast<std::size_t>(k)].value == var)
                    return d.params[static_cast<std::size_t>(k)].domain;
        }
    return {};
}

}  // namespace

std::string sample_axiom(const spec::axiom& a, int samples, std::uint64_t seed) {
    for (const spec::expr* e : {&a.eq.lhs, &a.eq.rhs})
        for (int i = 0; i < e->size; ++i)
            if (e->nodes[static_cast<std::size_t>(i)].op == spec::op_kind::split)
                return "not sampled: its split points come from concat history";
    // Shapes tensors variables take: matrices, images and a scalar, with
    // equal extents often enough that operators needing them type-check.
    static const std::vector<shape> pool{{4, 4}, {4, 6}, {6, 4}, {1}, {1, 4, 6, 6}, {2, 3, 4, 5}, {4}};
    const int nt = std::max(spec::tensor_vars(a.eq.lhs), spec::tensor_vars(a.eq.rhs));
    const int np = std::max(spec::param_vars(a.eq.lhs), spec::param_vars(a.eq.rhs));
    std::mt19937_64 rng(seed);
    int checked = 0;
    for (int s = 0; s < samples; ++s) {
        std::vector<tensor<float>> vars;
        // Half the samples give every variable one shape (most axioms need it).
        const shape common = pool[rng() % pool.size()];
        for (int v = 0; v < nt; ++v) vars.push_back(random_float(s % 2 == 0 ? common : pool[rng() % pool.size()], rng));
        std::vector<std::int32_t> pv;
        bool ok = true;
        for (int v = 0; v < np; ++v) {
            auto dom = domain_of(a, v);
            if (dom.empty()) { ok = false; break; }
            pv.push_back(dom[rng() % dom.size()]);
        }
        if (!ok) return "not sampled: a parameter variable fills no slot with a domain";
        bool conditions = true;
        for (int c = 0; c < a.num_where; ++c) {
            const auto& w = a.where[static_cast<std::size_t>(c)];
            auto value = [&](const param_term& t) -> std::optional<std::int64_t> {
                if (t.k == param_term::kind::constant) return t.value;
                if (t.k == param_term::kind::variable) return pv[static_cast<std::size_t>(t.value)];
                if (t.k == param_term::kind::dim_of && t.of.is_var) return extent_of(vars, {}, t.of, t.dim);
                return std::nullopt;
            };
            auto x = value(w.a), y = value(w.b);
            if (!x || !y || (w.r == spec::condition::rel::eq) != (*x == *y)) conditions = false;
        }
        if (!conditions) continue;
        auto l = run_side(a.eq.lhs, pv, vars), r = run_side(a.eq.rhs, pv, vars);
        if (!l || !r) continue;
        ++checked;
        const double err = relative_error(*l, *r);
        if (!(err <= 1e-4)) {
            std::string shapes;
            for (auto& t : vars) shapes += (shapes.empty() ? "" : ", ") + t.shape.str();
            return "false: the two sides differ (relative error " + std::to_string(err) + ") with tensors of shapes " + shapes;
        }
    }
    if (checked == 0) return "not sampled: no instance of " + std::to_string(samples) + " type-checked on both sides";
    return {};
}

}  // namespace tsopt::gen
