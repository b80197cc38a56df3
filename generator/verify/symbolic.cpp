#include "symbolic.hpp"

#include <optional>

#include "tsopt/core/error.hpp"
#include "tsopt/spec/registry.hpp"

namespace tsopt::gen {

struct symbolic_state {
    z3::context& ctx;
    z3::expr zero, one;
    z3::func_decl sigmoid, tanh;
    explicit symbolic_state(z3::context& c)
        : ctx(c), zero(c.real_val(0)), one(c.real_val(1)),
          sigmoid(c.function("sigmoid", c.real_sort(), c.real_sort())),
          tanh(c.function("tanh", c.real_sort(), c.real_sort())) {}
};

namespace {
thread_local symbolic_state* current = nullptr;
symbolic_state& st() {
    if (!current) throw error("symbolic scalar used outside a symbolic_scope");
    return *current;
}
}  // namespace

symbolic_scope::symbolic_scope(z3::context& ctx) : prev_(current), own_(new symbolic_state(ctx)) { current = own_; }
symbolic_scope::~symbolic_scope() {
    current = prev_;
    delete own_;
}

zs::zs() : e(st().zero), k(zero_k) {}

zs sym_zero() { return {st().zero, zs::zero_k}; }
zs sym_one() { return {st().one, zs::one_k}; }
zs sym_const(std::int64_t num, std::int64_t den) {
    if (num == 0) return sym_zero();
    if (num == den) return sym_one();
    std::string s = std::to_string(num) + "/" + std::to_string(den);
    return {st().ctx.real_val(s.c_str())};
}

zs operator+(const zs& a, const zs& b) {
    if (a.k == zs::zero_k) return b;
    if (b.k == zs::zero_k) return a;
    return {a.e + b.e};
}
zs operator-(const zs& a, const zs& b) {
    if (b.k == zs::zero_k) return a;
    return {a.e - b.e};
}
zs operator-(const zs& a) {
    if (a.k == zs::zero_k) return a;
    return {-a.e};
}
zs operator*(const zs& a, const zs& b) {
    if (a.k == zs::zero_k || b.k == zs::zero_k) return sym_zero();
    if (a.k == zs::one_k) return b;
    if (b.k == zs::one_k) return a;
    return {a.e * b.e};
}

zs sym_relu(const zs& x) {
    if (x.k == zs::zero_k) return x;
    if (x.k == zs::one_k) return x;
    return {z3::ite(x.e > st().zero, x.e, st().zero)};
}
zs sym_sigmoid(const zs& x) { return {st().sigmoid(x.e)}; }
zs sym_tanh(const zs& x) { return {st().tanh(x.e)}; }
// Interpreted (not an uninterpreted function): axioms such as maxpool-relu
// hold because max is the max of reals (a monotone relu commutes with it).
zs sym_max(const zs& a, const zs& b) { return {z3::ite(a.e >= b.e, a.e, b.e)}; }

void eval_symbolic(spec::op_kind k, const spec::op_params& p, std::span<const tensor<zs>* const> in,
                   std::span<tensor<zs>> out) {
    using spec::op_kind;
    namespace ops = spec::ops;
    switch (k) {
        case op_kind::ewadd: return ops::ewadd_eval<zs>(p, in, out);
        case op_kind::ewmul: return ops::ewmul_eval<zs>(p, in, out);
        case op_kind::smul: return ops::smul_eval<zs>(p, in, out);
        case op_kind::transpose: return ops::transpose_eval<zs>(p, in, out);
        case op_kind::matmul: return ops::matmul_eval<zs>(p, in, out);
        case op_kind::conv2d: return ops::conv2d_eval<zs>(p, in, out);
        case op_kind::enlarge: return ops::enlarge_eval<zs>(p, in, out);
        case op_kind::relu: return ops::unary_eval<zs, 1>(p, in, out);
        case op_kind::avgpool: return ops::pool_eval<zs, false>(p, in, out);
        case op_kind::maxpool: return ops::pool_eval<zs, true>(p, in, out);
        case op_kind::concat: return ops::concat_eval<zs>(p, in, out);
        case op_kind::split: return ops::split_eval<zs>(p, in, out);
        case op_kind::cpool: return ops::cpool_eval<zs>(p, in, out);
        case op_kind::iconv: return ops::iconv_eval<zs>(p, in, out);
        case op_kind::imatmul: return ops::imatmul_eval<zs>(p, in, out);
        case op_kind::iewmul: return ops::ones_eval<zs>(p, in, out);
        case op_kind::sigmoid: return ops::unary_eval<zs, 2>(p, in, out);
        case op_kind::tanh: return ops::unary_eval<zs, 3>(p, in, out);
        case op_kind::batchnorm: return ops::batchnorm_eval<zs>(p, in, out);
        case op_kind::reshape:
        case op_kind::reorder: return ops::copy_eval<zs>(p, in, out);  // values unchanged (layout is physical)
        case op_kind::pad: return ops::pad_eval<zs>(p, in, out);
        case op_kind::slice: return ops::slice_eval<zs>(p, in, out);
        case op_kind::overwrite: return ops::overwrite_eval<zs>(p, in, out);
        case op_kind::softmax:
        case op_kind::count_: break;
    }
    throw error(std::string("no symbolic semantics for operator ") + std::string(spec::name(k)));
}

}  // namespace tsopt::gen
