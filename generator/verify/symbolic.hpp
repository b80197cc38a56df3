#pragma once
// A scalar type wrapping a Z3 real-valued expression, so that the spec's
// templated reference semantics (spec/ops/*.hpp, eval<T>) run symbolically:
// instantiating them with `zs` turns an operator application on tensors of
// Z3 variables into tensors of Z3 terms. The semantics are not written twice.
//
// relu is interpreted (ite(x > 0, x, 0)); sigmoid, tanh and max (max pooling)
// are uninterpreted real functions. A `symbolic_scope` binds the Z3 context
// the scalars of the current thread live in.
#include <z3++.h>

#include <cstdint>
#include <span>

#include "tsopt/core/tensor.hpp"
#include "tsopt/spec/dsl.hpp"

namespace tsopt::gen {

struct symbolic_state;

class symbolic_scope {
public:
    explicit symbolic_scope(z3::context& ctx);
    ~symbolic_scope();
    symbolic_scope(const symbolic_scope&) = delete;
    symbolic_scope& operator=(const symbolic_scope&) = delete;

private:
    symbolic_state* prev_;
    symbolic_state* own_;
};

// Symbolic scalar. `k` tracks the numerals 0 and 1 so that the reference
// loops (which start sums at zero and multiply by constant kernels) do not
// build `0 + a*1 + ...` terms.
struct zs {
    enum : std::int8_t { zero_k = 0, one_k = 1, general = 2 };
    z3::expr e;
    std::int8_t k = zero_k;

    zs();
    zs(z3::expr x, std::int8_t kind = general) : e(std::move(x)), k(kind) {}

    friend zs operator+(const zs& a, const zs& b);
    friend zs operator-(const zs& a, const zs& b);
    friend zs operator-(const zs& a);
    friend zs operator*(const zs& a, const zs& b);
    zs& operator+=(const zs& o) { return *this = *this + o; }
    zs& operator*=(const zs& o) { return *this = *this * o; }
};

zs sym_zero();
zs sym_one();
zs sym_const(std::int64_t num, std::int64_t den = 1);
zs sym_relu(const zs& x);
zs sym_sigmoid(const zs& x);
zs sym_tanh(const zs& x);
zs sym_max(const zs& a, const zs& b);

// Runs operator `k`'s reference semantics on symbolic tensors (outputs
// pre-shaped by shape inference). Throws tsopt::error for operators without a
// symbolic form (softmax).
void eval_symbolic(spec::op_kind k, const spec::op_params& p, std::span<const tensor<zs>* const> in,
                   std::span<tensor<zs>> out);

}  // namespace tsopt::gen

template <>
struct tsopt::scalar_traits<tsopt::gen::zs> {
    using zs = tsopt::gen::zs;
    static zs zero() { return gen::sym_zero(); }
    static zs one() { return gen::sym_one(); }
    static zs from_int(std::int64_t x) { return gen::sym_const(x); }
    static zs reciprocal(std::int64_t n) { return gen::sym_const(1, n); }
    static zs relu(const zs& x) { return gen::sym_relu(x); }
    static zs sigmoid(const zs& x) { return gen::sym_sigmoid(x); }
    static zs tanh(const zs& x) { return gen::sym_tanh(x); }
    static zs max(const zs& a, const zs& b) { return gen::sym_max(a, b); }
    static constexpr bool exact = true;
};
