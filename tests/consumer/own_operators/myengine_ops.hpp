#pragma once
// An engine's own operators and axioms, declared with tsopt's DSL outside
// tsopt (docs/install.md, "Your own operators"): `neg` (-x) and `sub`
// (x - y), with the algebra that relates them to tsopt's ewadd, ewmul and
// matmul. myengine_gen.cpp registers them and runs tsopt-gen's command line,
// which enumerates graphs over them, proves the rules from these axioms
// with Z3 and writes myengine_rules.hpp; own_operators_test.cpp registers
// them again and optimizes with those rules.
#include <tsopt/core/graph.hpp>
#include <tsopt/spec/axioms.hpp>

#include <random>

namespace myengine {
namespace ops {
namespace ts = tsopt::spec;

template <class T>
void neg_eval(const ts::op_params&, std::span<const tsopt::tensor<T>* const> in, std::span<tsopt::tensor<T>> out) {
    for (std::int64_t i = 0; i < out[0].size(); ++i) out[0][i] = -(*in[0])[i];
}
// Same-shape operands: broadcasting needs no axiom of its own here.
inline std::string sub_shape(const ts::op_params&, std::span<const tsopt::shape> in, std::span<tsopt::shape> out) {
    if (!(in[0] == in[1])) return "sub: operands must have the same shape, got " + in[0].str() + " and " + in[1].str();
    out[0] = in[0];
    return {};
}
template <class T>
void sub_eval(const ts::op_params&, std::span<const tsopt::tensor<T>* const> in, std::span<tsopt::tensor<T>> out) {
    for (std::int64_t i = 0; i < out[0].size(); ++i) out[0][i] = (*in[0])[i] - (*in[1])[i];
}
inline std::int64_t elements(const ts::op_params&, std::span<const tsopt::shape>, std::span<const tsopt::shape> out) {
    return out[0].elements();
}
inline std::string same_shape(const ts::op_params&, std::span<const tsopt::shape> in, std::span<tsopt::shape> out) {
    out[0] = in[0];
    return {};
}
}  // namespace ops

inline constexpr tsopt::spec::op_decl neg_decl{
    .kind = tsopt::spec::extension_kind(0), .name = "neg", .math = "-x",
    .input_names = {"x"}, .cls = tsopt::spec::op_class::elementwise,
    .infer = ops::same_shape, .eval_float = ops::neg_eval<float>, .eval_modp = ops::neg_eval<tsopt::modp>,
    .flops = ops::elements};

inline constexpr tsopt::spec::op_decl sub_decl{
    .kind = tsopt::spec::extension_kind(1), .name = "sub", .math = "x - y (same shapes)",
    .min_inputs = 2, .max_inputs = 2, .input_names = {"x", "y"}, .cls = tsopt::spec::op_class::elementwise,
    .infer = ops::sub_shape, .eval_float = ops::sub_eval<float>, .eval_modp = ops::sub_eval<tsopt::modp>,
    .flops = ops::elements};

// The DSL's expressions over the two operators, as tsopt's own are written.
consteval tsopt::spec::expr neg(tsopt::spec::expr a) { return tsopt::spec::apply(neg_decl, {}, {a}); }
consteval tsopt::spec::expr sub(tsopt::spec::expr a, tsopt::spec::expr b) { return tsopt::spec::apply(sub_decl, {}, {a, b}); }

inline constexpr auto axioms = [] {
    using namespace tsopt::spec;
    using namespace tsopt::spec::vars;
    return std::array{
        make_axiom("sub-is-ewadd-neg", sub(x, y) == ewadd(x, neg(y))),
        make_axiom("neg-neg", neg(neg(x)) == x),
        make_axiom("neg-distrib-ewadd", neg(ewadd(x, y)) == ewadd(neg(x), neg(y))),
        make_axiom("neg-ewmul", ewmul(neg(x), y) == neg(ewmul(x, y))),
        make_axiom("neg-matmul", matmul(none, neg(x), y) == neg(matmul(none, x, y))),
        make_axiom("neg-transpose", neg(transpose(p0, x)) == transpose(p0, neg(x))),
    };
}();

// -(-x @ w) + -b with x [16,32], w [32,24] random, b [16,24]: five
// operators, two (x @ w - b: matmul, sub) under the engine's rules. The
// graph the tests and the examples optimize.
inline tsopt::graph negated_product(std::uint64_t seed = 3) {
    std::mt19937_64 rng(seed);
    tsopt::graph g;
    auto neg = [&](tsopt::value v) { return g.add1(neg_decl.kind, {}, {v}); };
    auto x = g.input("x", {16, 32});
    auto b = g.input("b", {16, 24});
    auto m = g.matmul(neg(x), g.weight("w", {32, 24}, rng));
    g.mark_output(g.ewadd(neg(m), neg(b)));
    return g;
}

// Once per program, before graphs, rules or the generator name them.
inline void register_spec() {
    tsopt::spec::register_operator(neg_decl);
    tsopt::spec::register_operator(sub_decl);
    static const bool axioms_registered = (tsopt::spec::register_axioms(axioms), true);
    (void)axioms_registered;
}

}  // namespace myengine
