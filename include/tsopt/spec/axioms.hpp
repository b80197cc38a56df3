#pragma once
// The axiom set: operator properties the Z3 verifier proves generated rules
// from. The first block is TASO's Table 2 (SOSP'19), translated one by one
// from TASO's verifier (verify/verify.py: its 44 axioms, of which Table 2
// lists 43, plus the lemmas it assumes); the second block adds properties of
// the further operators (sigmoid, tanh, batchnorm) and a few identities TASO
// states as lemmas.
//
// Conventions (see docs/verification.md):
//  - tensor variables x, y, z, w; parameter variables p0..p5 stand for every
//    value of the slots' generation domains (the verifier guards them so);
//  - split0/split1 split at the point recorded by the tensor's concat
//    history, so `split0(a, concat(a, x, y)) == x`;
//  - constant operators take their extents from the tensors they act on,
//    through pdim terms (`imatmul(pdim(x, 1))`).
// Every axiom is checked against the operator semantics by
// generator/verify/axiom_check (symbolic execution over small shapes).
#include <span>
#include <string>
#include <vector>

#include "tsopt/spec/axiom_dsl.hpp"

namespace tsopt::spec {
namespace axiom_detail {
using namespace vars;
inline constexpr param_term t10 = pconst(pack_perm({1, 0}));    // 2-D transpose
inline constexpr param_term t021 = pconst(pack_perm({0, 2, 1}));  // batched transpose
inline constexpr param_term ax0 = pconst(0), ax1 = pconst(1), ax2 = pconst(2);
// Extent d of tensor variable v.
consteval param_term dim(const expr& v, int d) { return pdim(v.root, d); }
}  // namespace axiom_detail

inline constexpr std::array all_axioms = [] {
    using namespace axiom_detail;
    // conv2d(stride_h, stride_w, pad, act[, dil_h, dil_w], input, weight); p0, p1 strides, p2 padding,
    // p3 activation, p4, p5 dilations where the axiom holds for every dilation (without: 1).
    return std::array{
        // --- TASO Table 2 --------------------------------------------------
        // ewadd and ewmul are associative, commutative and distributive.
        make_axiom("ewadd-assoc", ewadd(x, ewadd(y, z)) == ewadd(ewadd(x, y), z)),
        make_axiom("ewadd-comm", ewadd(x, y) == ewadd(y, x)),
        make_axiom("ewmul-assoc", ewmul(x, ewmul(y, z)) == ewmul(ewmul(x, y), z)),
        make_axiom("ewmul-comm", ewmul(x, y) == ewmul(y, x)),
        make_axiom("ewmul-distrib-ewadd", ewmul(ewadd(x, y), z) == ewadd(ewmul(x, z), ewmul(y, z))),
        // Scalar multiplication (w a one-element tensor).
        make_axiom("smul-assoc", smul(smul(x, y), w) == smul(x, smul(y, w))),
        make_axiom("smul-distrib-ewadd", smul(ewadd(x, y), w) == ewadd(smul(x, w), smul(y, w))),
        make_axiom("smul-ewmul", smul(ewmul(x, y), w) == ewmul(x, smul(y, w))),
        make_axiom("smul-transpose", smul(transpose(p0, x), w) == transpose(p0, smul(x, w))),
        make_axiom("smul-matmul", smul(matmul(none, x, y), w) == matmul(none, x, smul(y, w))),
        make_axiom("smul-concat", smul(concat(p0, x, y), w) == concat(p0, smul(x, w), smul(y, w))),
        make_axiom("conv-smul-input-weight",
                   conv2d(p0, p1, p2, p3, p4, p5, smul(x, w), y) == conv2d(p0, p1, p2, p3, p4, p5, x, smul(y, w))),
        make_axiom("smul-conv", smul(conv2d(p0, p1, p2, none, p4, p5, x, y), w) == conv2d(p0, p1, p2, none, p4, p5, smul(x, w), y)),
        // relu.
        make_axiom("relu-conv", relu(conv2d(p0, p1, p2, none, p4, p5, x, y)) == conv2d(p0, p1, p2, relu_act, p4, p5, x, y)),
        make_axiom("relu-concat", relu(concat(p0, x, y)) == concat(p0, relu(x), relu(y))),
        make_axiom("relu-transpose", relu(transpose(p0, x)) == transpose(p0, relu(x))),
        // conv2d is linear in its weight and in its input (no activation).
        make_axiom("conv-distrib-ewadd-weight",
                   conv2d(p0, p1, p2, none, p4, p5, x, ewadd(y, z)) ==
                       ewadd(conv2d(p0, p1, p2, none, p4, p5, x, y), conv2d(p0, p1, p2, none, p4, p5, x, z))),
        make_axiom("conv-distrib-ewadd-input",
                   conv2d(p0, p1, p2, none, p4, p5, ewadd(x, y), z) ==
                       ewadd(conv2d(p0, p1, p2, none, p4, p5, x, z), conv2d(p0, p1, p2, none, p4, p5, y, z))),
        // Sum of two convs == one conv over channel-concatenated inputs and weights.
        make_axiom("conv-concat-sum",
                   ewadd(conv2d(p0, p1, p2, none, p4, p5, x, y), conv2d(p0, p1, p2, none, p4, p5, z, w)) ==
                       conv2d(p0, p1, p2, none, p4, p5, concat(ax1, x, z), concat(ax1, y, w))),
        make_axiom("matmul-concat-sum",
                   ewadd(matmul(none, x, y), matmul(none, z, w)) == matmul(none, concat(ax1, x, z), concat(ax0, y, w))),
        // concat commutes with element-wise operators.
        make_axiom("concat-ewadd", concat(p0, ewadd(x, y), ewadd(z, w)) == ewadd(concat(p0, x, z), concat(p0, y, w))),
        make_axiom("concat-ewmul", concat(p0, ewmul(x, y), ewmul(z, w)) == ewmul(concat(p0, x, z), concat(p0, y, w))),
        // conv2d over batch-concatenated inputs, and over output-channel-concatenated weights.
        make_axiom("conv-concat-batch",
                   concat(ax0, conv2d(p0, p1, p2, p3, p4, p5, x, z), conv2d(p0, p1, p2, p3, p4, p5, y, z)) ==
                       conv2d(p0, p1, p2, p3, p4, p5, concat(ax0, x, y), z)),
        make_axiom("conv-concat-weight",
                   concat(ax1, conv2d(p0, p1, p2, p3, p4, p5, x, y), conv2d(p0, p1, p2, p3, p4, p5, x, z)) ==
                       conv2d(p0, p1, p2, p3, p4, p5, x, concat(ax0, y, z))),
        make_axiom("matmul-assoc", matmul(none, x, matmul(none, y, z)) == matmul(none, matmul(none, x, y), z)),
        // split undoes concat.
        make_axiom("split0-concat", split0(p0, concat(p0, x, y)) == x),
        make_axiom("split1-concat", split1(p0, concat(p0, x, y)) == y),
        make_axiom("matmul-concat-cols",
                   matmul(none, x, concat(ax1, y, z)) == concat(ax1, matmul(none, x, y), matmul(none, x, z))),
        make_axiom("matmul-distrib-ewadd",
                   matmul(none, x, ewadd(y, z)) == ewadd(matmul(none, x, y), matmul(none, x, z))),
        // transpose (every permutation in transpose's domain is an involution).
        make_axiom("transpose-involution", transpose(p0, transpose(p0, x)) == x),
        make_axiom("transpose-matmul",
                   transpose(p0, matmul(none, x, y)) == matmul(none, transpose(p0, y), transpose(p0, x))),
        make_axiom("transpose-concat", transpose(t10, concat(ax0, x, y)) == concat(ax1, transpose(t10, x), transpose(t10, y))),
        // Concat geometry: a 2x2 block tensor can be assembled by rows or by columns.
        make_axiom("concat-geometry",
                   concat(p0, concat(p1, x, y), concat(p1, z, w)) == concat(p1, concat(p0, x, z), concat(p0, y, w)),
                   {differ(p0, p1)}),
        make_axiom("transpose-ewadd", transpose(p0, ewadd(x, y)) == ewadd(transpose(p0, x), transpose(p0, y))),
        make_axiom("transpose-ewmul", transpose(p0, ewmul(x, y)) == ewmul(transpose(p0, x), transpose(p0, y))),
        // Pooling over channel / batch concatenation (pool(kh, kw, sh, sw, pad, act)).
        make_axiom("avgpool-concat-channel",
                   concat(ax1, avgpool(p0, p1, p2, p3, p4, p5, x), avgpool(p0, p1, p2, p3, p4, p5, y)) ==
                       avgpool(p0, p1, p2, p3, p4, p5, concat(ax1, x, y))),
        make_axiom("maxpool-concat-batch",
                   concat(ax0, maxpool(p0, p1, p2, p3, p4, p5, x), maxpool(p0, p1, p2, p3, p4, p5, y)) ==
                       maxpool(p0, p1, p2, p3, p4, p5, concat(ax0, x, y))),
        make_axiom("maxpool-concat-channel",
                   concat(ax1, maxpool(p0, p1, p2, p3, p4, p5, x), maxpool(p0, p1, p2, p3, p4, p5, y)) ==
                       maxpool(p0, p1, p2, p3, p4, p5, concat(ax1, x, y))),
        // Constant operators.
        make_axiom("conv-cpool-avgpool",
                   conv2d(p0, p1, p2, p3, x, cpool(dim(x, 1), p4, p5)) == avgpool(p4, p5, p0, p1, p2, p3, x)),
        make_axiom("conv-iconv-identity", conv2d(one, one, same, none, x, iconv(dim(x, 1), p1, p0)) == x),
        make_axiom("matmul-imatmul-identity", matmul(none, x, imatmul(dim(x, 1))) == x),
        make_axiom("ewmul-iewmul-identity", ewmul(x, iewmul()) == x),
        make_axiom("avgpool-iconv-cpool", avgpool(p0, p0, one, one, same, none, iconv(p1, one, p0)) == cpool(p1, p0, p0)),
        make_axiom("conv-enlarge",
                   conv2d(p0, p1, same, p3, x, enlarge(p4, p5, y)) == conv2d(p0, p1, same, p3, x, y)),

        // --- TASO's lemmas and further identities ------------------------------
        make_axiom("imatmul-matmul-identity", matmul(none, imatmul(dim(x, 0)), x) == x),
        make_axiom("transpose-imatmul", transpose(t10, imatmul(p0)) == imatmul(p0)),
        make_axiom("avgpool-concat-batch",
                   concat(ax0, avgpool(p0, p1, p2, p3, p4, p5, x), avgpool(p0, p1, p2, p3, p4, p5, y)) ==
                       avgpool(p0, p1, p2, p3, p4, p5, concat(ax0, x, y))),
        make_axiom("relu-idempotent", relu(relu(x)) == relu(x)),
        make_axiom("relu-split0", split0(p0, relu(x)) == relu(split0(p0, x))),
        make_axiom("relu-split1", split1(p0, relu(x)) == relu(split1(p0, x))),
        make_axiom("concat-split", concat(p0, split0(p0, x), split1(p0, x)) == x),
        make_axiom("transpose-concat-batch",
                   transpose(t021, concat(ax0, x, y)) == concat(ax0, transpose(t021, x), transpose(t021, y))),
        make_axiom("transpose-concat-rows",
                   transpose(t021, concat(ax1, x, y)) == concat(ax2, transpose(t021, x), transpose(t021, y))),
        // Row-concatenation distributes over matmul (the rows of x.z are x's
        // rows times z): time steps of an RNN reading one weight batch into one
        // matmul. 2-D only: a batched z would broadcast x's rows to a new axis 0.
        make_axiom("matmul-concat-rows",
                   matmul(none, concat(ax0, x, y), z) == concat(ax0, matmul(none, x, z), matmul(none, y, z))),
        // concat is associative along one axis (TASO's verifier does not
        // state it; without it Z3 cannot regroup nested concats, and at
        // N = 3 a fifth of the candidates it failed on were such regroupings).
        make_axiom("concat-assoc", concat(p0, x, concat(p0, y, z)) == concat(p0, concat(p0, x, y), z)),
        // A fused relu activation is relu of the result, for matmul and the
        // pools as for conv2d (relu-conv): without these, Z3 sees act = relu
        // as an unrelated operator, and at N = 3 every candidate relating a
        // fused activation to a separate relu stayed unproven.
        make_axiom("relu-matmul", relu(matmul(none, x, y)) == matmul(relu_act, x, y)),
        make_axiom("relu-avgpool", relu(avgpool(p0, p1, p2, p3, p4, none, x)) == avgpool(p0, p1, p2, p3, p4, relu_act, x)),
        make_axiom("relu-maxpool", relu(maxpool(p0, p1, p2, p3, p4, none, x)) == maxpool(p0, p1, p2, p3, p4, relu_act, x)),
        // max commutes with a monotone function: max-pooling relu(x) is relu of
        // max-pooling x (every window holds an element of x; padding never
        // wins a max). Without it, at N = 3 most candidates Z3 left unknown
        // moved a relu across a max-pool (maxpool act=1 of a non-negative
        // tensor is maxpool act=0).
        make_axiom("maxpool-relu", maxpool(p0, p1, p2, p3, p4, none, relu(x)) == relu(maxpool(p0, p1, p2, p3, p4, none, x))),
        // Average pooling is linear (as conv2d with a cpool kernel, which Z3
        // does not invent on its own): sums and scalar factors pass through.
        make_axiom("avgpool-distrib-ewadd",
                   avgpool(p0, p1, p2, p3, p4, none, ewadd(x, y)) ==
                       ewadd(avgpool(p0, p1, p2, p3, p4, none, x), avgpool(p0, p1, p2, p3, p4, none, y))),
        make_axiom("avgpool-smul", avgpool(p0, p1, p2, p3, p4, none, smul(x, w)) == smul(avgpool(p0, p1, p2, p3, p4, none, x), w)),
        // The identity matrix is a 0/1 diagonal matrix, which the identities
        // of matmul alone do not say: it is its own element-wise square and
        // its own relu, and multiplying by it element-wise keeps a diagonal
        // (so a transpose does not change it) and commutes with relu (its
        // elements are not negative). Without them, at N = 3 a third of the
        // candidates Z3 left unknown were such facts (x * I * I = x * I).
        make_axiom("imatmul-ewmul-idempotent", ewmul(imatmul(p0), imatmul(p0)) == imatmul(p0)),
        make_axiom("relu-imatmul", relu(imatmul(p0)) == imatmul(p0)),
        make_axiom("imatmul-ewmul-transpose",
                   ewmul(imatmul(dim(x, 0)), transpose(t10, x)) == ewmul(imatmul(dim(x, 0)), x),
                   {equal(dim(x, 0), dim(x, 1))}),  // else a broadcast gives the sides different shapes
        make_axiom("relu-ewmul-imatmul", relu(ewmul(imatmul(dim(x, 0)), x)) == ewmul(imatmul(dim(x, 0)), relu(x))),
        // sigmoid and tanh: opaque element-wise functions.
        make_axiom("sigmoid-concat", sigmoid(concat(p0, x, y)) == concat(p0, sigmoid(x), sigmoid(y))),
        make_axiom("sigmoid-transpose", sigmoid(transpose(p0, x)) == transpose(p0, sigmoid(x))),
        make_axiom("sigmoid-split0", split0(p0, sigmoid(x)) == sigmoid(split0(p0, x))),
        make_axiom("sigmoid-split1", split1(p0, sigmoid(x)) == sigmoid(split1(p0, x))),
        make_axiom("tanh-concat", tanh(concat(p0, x, y)) == concat(p0, tanh(x), tanh(y))),
        make_axiom("tanh-transpose", tanh(transpose(p0, x)) == transpose(p0, tanh(x))),
        make_axiom("tanh-split0", split0(p0, tanh(x)) == tanh(split0(p0, x))),
        make_axiom("tanh-split1", split1(p0, tanh(x)) == tanh(split1(p0, x))),
        // batchnorm is per channel: it distributes over concat along any other axis.
        make_axiom("batchnorm-concat",
                   batchnorm(concat(p0, x, y), z, w) == concat(p0, batchnorm(x, z, w), batchnorm(y, z, w)),
                   {differ(p0, ax1)}),

        // --- Outside TASO's model (see full_semantics_only below) -------------
        // Two convs over different inputs, channel-concatenated == one grouped
        // conv over the concatenated inputs (ResNeXt's parallel paths, Xie et
        // al. Fig. 3(b) => 3(c)). The merged conv has g1 + g2 groups of
        // (x1 + z1) / (g1 + g2) input and (y0 + w0) / (g1 + g2) output
        // channels, which are each side's own only when both convs have the
        // same group count and group sizes: equal input channels and equal
        // output channels here, equal group width because concat(0, y, w)
        // type-checks only then.
        make_axiom("conv-concat-grouped",
                   concat(ax1, conv2d(p0, p1, p2, p3, p4, p5, x, y), conv2d(p0, p1, p2, p3, p4, p5, z, w)) ==
                       conv2d(p0, p1, p2, p3, p4, p5, concat(ax1, x, z), concat(ax0, y, w)),
                   {equal(dim(x, 1), dim(z, 1)), equal(dim(y, 0), dim(w, 0))}),
    };
}();

// Number of axioms translated from TASO's verifier (the first entries of all_axioms).
inline constexpr std::size_t taso_axiom_count = 44;

// Axioms that are true only in TASO's restricted model (see
// spec::typing): validated there, and shown false under the full
// semantics (broadcasting ewadd/ewmul, grouped conv, batched matmul) by
// `verify_axioms --full-semantics`; tests/verify checks this list against
// that validation (bit by bit) so it cannot drift.
struct restricted_axiom {
    std::string_view name;
    std::uint8_t needs;  // spec::typing bits
};
inline constexpr std::array<restricted_axiom, 10> taso_model_only{{
    {"conv-distrib-ewadd-weight", no_broadcast},
    {"conv-distrib-ewadd-input", no_broadcast},
    {"avgpool-distrib-ewadd", no_broadcast},
    {"conv-concat-sum", ungrouped_conv},
    {"conv-concat-weight", ungrouped_conv},
    {"matmul-concat-sum", matmul_2d},
    {"matmul-concat-cols", matmul_2d},
    {"matmul-concat-rows", matmul_2d},
    {"concat-ewadd", no_broadcast},
    {"concat-ewmul", no_broadcast},
}};

// Axioms whose every instance lies outside TASO's model: they state facts
// about grouped convolutions, which spec::typing's ungrouped_conv excludes
// (their validation there finds no instance that type-checks). They are
// validated under the full semantics, their rules fire with no typing
// restriction (their own side conditions keep them sound), and the Z3 rule
// verifier leaves them out (taso_model_axioms): a generated rule's proof
// is guarded by TASO's typing only at the rule's two ends (rule::needs), so
// a step into grouped terms could let a TASO-model-only axiom (e.g.
// conv-concat-weight) rewrite a grouped convolution it is false for.
inline constexpr std::array<std::string_view, 1> full_semantics_only{"conv-concat-grouped"};

constexpr bool outside_taso_model(std::string_view axiom_name) {
    for (auto n : full_semantics_only)
        if (n == axiom_name) return true;
    return false;
}

// The axioms valid in TASO's model: the rule verifier's (and so the
// generator's) proof base.
inline constexpr auto taso_model_axioms = [] {
    std::array<axiom, all_axioms.size() - full_semantics_only.size()> r{};
    std::size_t k = 0;
    for (const axiom& a : all_axioms)
        if (!outside_taso_model(a.name)) {
            if (k == r.size()) throw "spec::full_semantics_only names an axiom twice";
            r[k++] = a;
        }
    if (k != r.size()) throw "spec::full_semantics_only names an axiom that spec::all_axioms does not have";
    return r;
}();

// The typing restrictions an axiom of the set needs (0: full semantics).
constexpr std::uint8_t typing_needed(std::string_view axiom_name) {
    for (auto r : taso_model_only)
        if (r.name == axiom_name) return r.needs;
    return full_semantics;
}

constexpr const axiom* find_axiom(std::string_view n) {
    for (const axiom& a : all_axioms)
        if (a.name == n) return &a;
    return nullptr;
}

namespace detail {
consteval bool axiom_names_unique() {
    for (std::size_t i = 0; i < all_axioms.size(); ++i)
        for (std::size_t j = i + 1; j < all_axioms.size(); ++j)
            if (all_axioms[i].name == all_axioms[j].name) return false;
    return true;
}
}  // namespace detail
static_assert(detail::axiom_names_unique(), "spec::all_axioms: two axioms share a name");

namespace detail {
// The matcher's license to bind a commutative operator's operands in either
// order (op_decl::commutative): the axiom op(?a, ?b) == op(?b, ?a), with no
// side condition.
constexpr bool states_commutativity(const axiom& a, op_kind k) {
    const expr& l = a.eq.lhs;
    const expr& r = a.eq.rhs;
    if (a.num_where != 0 || l.size != 1 || r.size != 1) return false;
    const pattern_node& x = l.nodes[0];
    const pattern_node& y = r.nodes[0];
    if (x.op != k || y.op != k || x.num_inputs != 2 || y.num_inputs != 2 || !(x.params == y.params)) return false;
    return x.inputs[0].is_var && x.inputs[1].is_var && !(x.inputs[0] == x.inputs[1]) && y.inputs[0] == x.inputs[1] &&
           y.inputs[1] == x.inputs[0];
}
consteval bool commutative_operators_have_axioms() {
    for (const op_decl* d : operators) {
        if (!d->commutative) continue;
        if (d->min_inputs != 2 || d->max_inputs != 2) return false;
        bool stated = false;
        for (const axiom& a : taso_model_axioms) stated = stated || states_commutativity(a, d->kind);
        if (!stated) return false;
    }
    return true;
}
}  // namespace detail
static_assert(detail::commutative_operators_have_axioms(),
              "spec: an operator declared commutative has exactly two inputs and the proof base states op(?x, ?y) == op(?y, ?x)");

// ---------------------------------------------------------------------------
// An engine's own axioms, over its registered operators (and the built-in
// ones): the generator proves its rules from taso_model_axioms and these.
namespace detail {
inline std::vector<axiom>& extension_axiom_list() {
    static std::vector<axiom> v;
    return v;
}
}  // namespace detail

inline std::span<const axiom> extension_axioms() { return detail::extension_axiom_list(); }

// Adds axioms to the generator's proof base. Each must name only declared
// operators (register them first) and a name no other axiom has; the axioms
// must outlive their use (a namespace-scope constexpr array does).
inline void register_axioms(std::span<const axiom> as) {
    auto& list = detail::extension_axiom_list();
    for (const axiom& a : as) {
        const std::string who = "spec::register_axioms: axiom '" + std::string(a.name) + "': ";
        if (find_axiom(a.name)) throw error(who + "a built-in axiom has that name");
        for (const axiom& b : list)
            if (b.name == a.name) throw error(who + "registered twice");
        for (const expr* e : {&a.eq.lhs, &a.eq.rhs})
            for (int i = 0; i < e->size; ++i)
                if (!is_declared(e->nodes[static_cast<std::size_t>(i)].op))
                    throw error(who + "names operator kind " + std::to_string(int(e->nodes[static_cast<std::size_t>(i)].op)) +
                                ", which is not registered (spec::register_operator before its axioms)");
    }
    list.insert(list.end(), as.begin(), as.end());
}

// The generator's proof base: TASO's model's axioms, then the registered
// ones. Throws when a registered operator is declared commutative and no
// registered axiom states it (the matcher would bind its operands in both
// orders on the declaration's word alone).
inline std::vector<axiom> proof_base() {
    std::vector<axiom> r(taso_model_axioms.begin(), taso_model_axioms.end());
    r.insert(r.end(), extension_axioms().begin(), extension_axioms().end());
    for (const op_decl* d : extension_operators()) {
        if (!d->commutative) continue;
        bool stated = false;
        for (const axiom& a : extension_axioms()) stated = stated || detail::states_commutativity(a, d->kind);
        if (!stated)
            throw error("operator '" + std::string(d->name) +
                        "' is declared commutative but no registered axiom states op(?x, ?y) == op(?y, ?x)");
    }
    return r;
}

}  // namespace tsopt::spec
