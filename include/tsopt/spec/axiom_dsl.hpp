#pragma once
// Constexpr expressions over declared operators, used to write axioms that
// read like the math:
//
//   axiom("ewadd-assoc", ewadd(x, ewadd(y, z)) == ewadd(ewadd(x, y), z))
//
// An expression is plain data (a small pattern), so the same value feeds the
// Z3 verifier, the axiom validator and the generator's coverage checks.
// Mistakes — wrong arity, too many parameters, an oversized axiom — stop the
// build with a sentence (consteval throw) instead of failing at run time.
#include <initializer_list>

#include "tsopt/spec/registry.hpp"

namespace tsopt::spec {

inline constexpr int max_expr_nodes = 12;

struct expr {
    std::array<pattern_node, max_expr_nodes> nodes{};
    int size = 0;
    value_ref root{};
};

// Tensor variable ?i.
constexpr expr tvar(int i) {
    expr e;
    e.root = var_ref(i);
    return e;
}

// op(args...) with explicit parameter terms (missing trailing slots take the
// declaration's fallback value). `output` selects among several outputs.
// The declaration form serves an engine's own operators (registered at run
// time, so not in the constexpr table the op_kind form reads).
consteval expr apply(const op_decl& d, std::initializer_list<param_term> params, std::initializer_list<expr> args,
                     int output = 0) {
    const op_kind k = d.kind;
    if (static_cast<int>(args.size()) < d.min_inputs || static_cast<int>(args.size()) > d.max_inputs ||
        static_cast<int>(args.size()) > spec::max_inputs)
        throw "axiom DSL: operator applied to the wrong number of inputs";
    if (static_cast<int>(params.size()) > d.num_params) throw "axiom DSL: more parameters than the operator declares";
    if (output >= d.num_outputs) throw "axiom DSL: output index beyond the operator's outputs";
    expr r;
    pattern_node n;
    n.op = k;
    int slot = 0;
    for (const expr& a : args) {
        if (r.size + a.size >= max_expr_nodes) throw "axiom DSL: expression exceeds max_expr_nodes";
        auto shift = [&](value_ref v) {
            if (!v.is_var) v.index = static_cast<std::int16_t>(v.index + r.size);
            return v;
        };
        for (int i = 0; i < a.size; ++i) {
            pattern_node c = a.nodes[static_cast<std::size_t>(i)];
            for (int j = 0; j < c.num_inputs; ++j) c.inputs[static_cast<std::size_t>(j)] = shift(c.inputs[static_cast<std::size_t>(j)]);
            for (auto& pt : c.params)
                if (pt.k == param_term::kind::dim_of) pt.of = shift(pt.of);
            r.nodes[static_cast<std::size_t>(r.size + i)] = c;
        }
        n.inputs[static_cast<std::size_t>(slot++)] = shift(a.root);
        r.size += a.size;
    }
    n.num_inputs = static_cast<std::uint8_t>(args.size());
    int i = 0;
    for (param_term p : params) n.params[static_cast<std::size_t>(i++)] = p;
    for (; i < d.num_params; ++i) n.params[static_cast<std::size_t>(i)] = pconst(d.params[static_cast<std::size_t>(i)].fallback);
    r.nodes[static_cast<std::size_t>(r.size)] = n;
    r.root = node_ref(r.size, output);
    ++r.size;
    return r;
}
consteval expr apply(op_kind k, std::initializer_list<param_term> params, std::initializer_list<expr> args, int output = 0) {
    return apply(decl(k), params, args, output);
}

// Named constructors, one per operator, in the order of the declarations.
consteval expr ewadd(expr a, expr b) { return apply(op_kind::ewadd, {}, {a, b}); }
consteval expr ewmul(expr a, expr b) { return apply(op_kind::ewmul, {}, {a, b}); }
consteval expr smul(expr a, expr s) { return apply(op_kind::smul, {}, {a, s}); }
consteval expr transpose(param_term perm, expr a) { return apply(op_kind::transpose, {perm}, {a}); }
consteval expr matmul(param_term act, expr a, expr b) { return apply(op_kind::matmul, {act}, {a, b}); }
consteval expr conv2d(param_term sh, param_term sw, param_term pad, param_term act, expr x, expr w) {
    return apply(op_kind::conv2d, {sh, sw, pad, act}, {x, w});
}
// With dilations: an axiom that holds for every dilation says so (the
// four-parameter form fixes them at 1).
consteval expr conv2d(param_term sh, param_term sw, param_term pad, param_term act, param_term dh, param_term dw, expr x,
                      expr w) {
    return apply(op_kind::conv2d, {sh, sw, pad, act, dh, dw}, {x, w});
}
consteval expr enlarge(param_term kh, param_term kw, expr w) { return apply(op_kind::enlarge, {kh, kw}, {w}); }
consteval expr relu(expr a) { return apply(op_kind::relu, {}, {a}); }
consteval expr avgpool(param_term kh, param_term kw, param_term sh, param_term sw, param_term pad, param_term act, expr x) {
    return apply(op_kind::avgpool, {kh, kw, sh, sw, pad, act}, {x});
}
consteval expr maxpool(param_term kh, param_term kw, param_term sh, param_term sw, param_term pad, param_term act, expr x) {
    return apply(op_kind::maxpool, {kh, kw, sh, sw, pad, act}, {x});
}
consteval expr concat(param_term axis, expr a, expr b) { return apply(op_kind::concat, {axis}, {a, b}); }
// split_0 / split_1: the two halves of a split. The split point is the one
// recorded by the tensor's concat history, so it carries no term here.
consteval expr split0(param_term axis, expr a) { return apply(op_kind::split, {axis}, {a}, 0); }
consteval expr split1(param_term axis, expr a) { return apply(op_kind::split, {axis}, {a}, 1); }
consteval expr cpool(param_term c, param_term kh, param_term kw) { return apply(op_kind::cpool, {c, kh, kw}, {}); }
consteval expr iconv(param_term co, param_term ci, param_term k) { return apply(op_kind::iconv, {co, ci, k}, {}); }
consteval expr imatmul(param_term n) { return apply(op_kind::imatmul, {n}, {}); }
consteval expr iewmul() { return apply(op_kind::iewmul, {}, {}); }
consteval expr sigmoid(expr a) { return apply(op_kind::sigmoid, {}, {a}); }
consteval expr tanh(expr a) { return apply(op_kind::tanh, {}, {a}); }
consteval expr batchnorm(expr x, expr scale, expr shift) { return apply(op_kind::batchnorm, {}, {x, scale, shift}); }

struct equation {
    expr lhs, rhs;
};
consteval equation operator==(expr a, expr b) { return {a, b}; }

// Side conditions on parameter variables (e.g. two concat axes differ).
struct condition {
    enum class rel : std::uint8_t { eq, ne };
    param_term a{}, b{};
    rel r = rel::eq;
};
consteval condition equal(param_term a, param_term b) { return {a, b, condition::rel::eq}; }
consteval condition differ(param_term a, param_term b) { return {a, b, condition::rel::ne}; }

struct axiom {
    std::string_view name;
    equation eq;
    std::array<condition, 2> where{};
    int num_where = 0;
};
consteval axiom make_axiom(std::string_view name, equation eq, std::initializer_list<condition> where = {}) {
    if (name.empty()) throw "axiom DSL: every axiom needs a name";
    if (where.size() > 2) throw "axiom DSL: at most two side conditions";
    axiom a{name, eq, {}, static_cast<int>(where.size())};
    int i = 0;
    for (auto c : where) a.where[static_cast<std::size_t>(i++)] = c;
    return a;
}

// Highest tensor / parameter variable index used by an expression, plus one.
constexpr int tensor_vars(const expr& e) {
    int m = e.root.is_var ? e.root.index + 1 : 0;
    for (int i = 0; i < e.size; ++i)
        for (int j = 0; j < e.nodes[static_cast<std::size_t>(i)].num_inputs; ++j) {
            auto v = e.nodes[static_cast<std::size_t>(i)].inputs[static_cast<std::size_t>(j)];
            if (v.is_var && v.index + 1 > m) m = v.index + 1;
        }
    return m;
}
constexpr int param_vars(const expr& e) {
    int m = 0;
    for (int i = 0; i < e.size; ++i)
        for (auto p : e.nodes[static_cast<std::size_t>(i)].params)
            if (p.k == param_term::kind::variable && p.value + 1 > m) m = p.value + 1;
    return m;
}

// Short names for writing axioms.
namespace vars {
inline constexpr expr x = tvar(0), y = tvar(1), z = tvar(2), w = tvar(3), u = tvar(4), v = tvar(5);
inline constexpr param_term p0 = pvar(0), p1 = pvar(1), p2 = pvar(2), p3 = pvar(3), p4 = pvar(4), p5 = pvar(5);
inline constexpr param_term none = pconst(0), relu_act = pconst(1);
inline constexpr param_term valid = pconst(0), same = pconst(1);
inline constexpr param_term one = pconst(1);
}  // namespace vars

}  // namespace tsopt::spec
