#pragma once
// The rule set the examples optimize with, built from the axiom set
// (spec/axioms.hpp) with rewrite::rule_set — no hand-written semantics:
//
//  1. every axiom in both directions where valid, under the conditions of
//     TASO's restricted model that keep it sound on real graphs:
//       - element-wise operands of equal shape (no broadcasting),
//       - convolutions ungrouped (weight's input channels == input's channels)
//         for the axioms that merge or split kernels along output channels
//         or sum convolutions (conv-concat-weight, conv-concat-sum,
//         conv-distrib-ewadd-*),
//       - matmuls 2-D (matmul-concat-sum, matmul-concat-cols, matmul-concat-rows);
//     axioms outside TASO's model (spec::full_semantics_only, e.g.
//     conv-concat-grouped, which merges parallel convs into one grouped conv)
//     carry their own conditions and get no others;
//  2. compositions of two axioms that fuse operators sharing an input while
//     their results are read separately (TASO's multi-output rules). Each is
//     one axiom read right to left followed by split-concat inversion:
//       matmul-fuse-shared:  matmul(x,y), matmul(x,z)
//                            => split1(matmul(x, concat1(y,z)))   [matmul-concat-cols, split*-concat]
//       matmul-batch-shared: matmul(x,z), matmul(y,z)
//                            => split0(matmul(concat0(x,y), z))   [matmul-concat-rows, split*-concat]
//       conv-fuse-shared:    conv(x,y), conv(x,z)
//                            => split1(conv(x, concat0(y,z)))     [conv-concat-weight, split*-concat]
//     with the same conditions as the axioms they come from; the split point
//     is the extent of the operand the concat put first (y's columns, y's
//     output channels, x's rows). examples_rules_test proves each
//     composition from the axioms with the Z3 verifier.
//  3. optionally the generator's tables (tsopt::rules::generated()).
#include <string>
#include <string_view>
#include <vector>

#include "tsopt/rewrite/from_axiom.hpp"
#include "tsopt/rules/generated_rules.hpp"
#include "tsopt/spec/axioms.hpp"

namespace tsopt::examples {

enum class rule_source { axioms, generated, all };

inline rule_source parse_rule_source(std::string_view s) {
    if (s == "axioms") return rule_source::axioms;
    if (s == "generated") return rule_source::generated;
    if (s == "all") return rule_source::all;
    throw error("--rules: expected axioms, generated or all, got '" + std::string(s) + "'");
}

namespace rules_detail {
using namespace spec::vars;
using spec::value_ref;
inline constexpr spec::param_term ax0 = spec::pconst(0), ax1 = spec::pconst(1);
consteval spec::param_term dim(const spec::expr& v, int d) { return spec::pdim(v.root, d); }
inline constexpr value_ref X = spec::var_ref(0), Y = spec::var_ref(1), Z = spec::var_ref(2), W = spec::var_ref(3);

// A split node with an explicit point (the DSL's split0/split1 leave it to
// the concat history).
consteval spec::expr split_at(int output, spec::param_term axis, spec::param_term at, spec::expr a) {
    return spec::apply(spec::op_kind::split, {axis, at}, {a}, output);
}

// A multi-output pattern written as wrap(r0, r1) (any binary operator whose
// only role is to hold both roots): its nodes without the wrapper, and the
// wrapper's inputs as the pattern's outputs.
struct multi {
    std::vector<spec::pattern_node> nodes;
    std::vector<value_ref> outs;
};
inline multi roots_of(const spec::expr& wrapped) {
    multi m;
    m.nodes.assign(wrapped.nodes.begin(), wrapped.nodes.begin() + wrapped.size - 1);
    const auto& w = wrapped.nodes[static_cast<std::size_t>(wrapped.size - 1)];
    for (int i = 0; i < w.num_inputs; ++i) m.outs.push_back(w.inputs[static_cast<std::size_t>(i)]);
    return m;
}

// matmul(x,y), matmul(x,z) => split(matmul(x, concat1(y,z))) at y's columns.
inline constexpr spec::expr matmul_shared_src = concat(ax0, matmul(none, x, y), matmul(none, x, z));
inline constexpr spec::expr matmul_shared_dst =
    concat(ax0, split_at(0, ax1, dim(y, 1), matmul(none, x, concat(ax1, y, z))),
           split_at(1, ax1, dim(y, 1), matmul(none, x, concat(ax1, y, z))));
// matmul(x,z), matmul(y,z) => split(matmul(concat0(x,y), z)) at x's rows: the
// matmuls that share a weight (an RNN's input projections across time steps)
// read it once.
inline constexpr spec::expr matmul_batch_src = concat(ax0, matmul(none, x, z), matmul(none, y, z));
inline constexpr spec::expr matmul_batch_dst =
    concat(ax0, split_at(0, ax0, dim(x, 0), matmul(none, concat(ax0, x, y), z)),
           split_at(1, ax0, dim(x, 0), matmul(none, concat(ax0, x, y), z)));
// conv(x,y), conv(x,z) => split(conv(x, concat0(y,z))) at y's output channels.
inline constexpr spec::expr conv_shared_src =
    concat(ax0, conv2d(p0, p1, p2, p3, x, y), conv2d(p0, p1, p2, p3, x, z));
inline constexpr spec::expr conv_shared_dst =
    concat(ax0, split_at(0, ax1, dim(y, 0), conv2d(p0, p1, p2, p3, x, concat(ax0, y, z))),
           split_at(1, ax1, dim(y, 0), conv2d(p0, p1, p2, p3, x, concat(ax0, y, z))));

inline std::vector<spec::condition> cat(std::initializer_list<std::vector<spec::condition>> parts) {
    std::vector<spec::condition> r;
    for (const auto& p : parts) r.insert(r.end(), p.begin(), p.end());
    return r;
}
inline spec::condition eq(value_ref a, int da, value_ref b, int db) {
    return {spec::pdim(a, da), spec::pdim(b, db), spec::condition::rel::eq};
}
// Weight w of a convolution over x is ungrouped: w's input channels == x's channels.
inline spec::condition ungrouped(value_ref w, value_ref in) { return eq(w, 1, in, 1); }
// a and b are at most 2-D: extent 2 absent, which only the (always absent)
// extent max_rank - 1 of a rank-2 tensor equals (two absent extents compare
// equal; a present and an absent one never do). A rank-6 operand whose extents
// 2 and 5 agree would pass too; no model has one.
inline std::vector<spec::condition> two_d(value_ref a, value_ref b) {
    return {eq(a, 2, a, max_rank - 1), eq(b, 2, b, max_rank - 1)};
}
}  // namespace rules_detail

// The named compositions of rule (2) above, as (name, src, dst, axioms they come from).
struct composed_rule {
    std::string_view name;
    const spec::expr* src;
    const spec::expr* dst;
    std::string_view from;
};
inline constexpr composed_rule composed_rules[] = {
    {"matmul-fuse-shared", &rules_detail::matmul_shared_src, &rules_detail::matmul_shared_dst,
     "matmul-concat-cols (reversed), split0-concat, split1-concat"},
    {"matmul-batch-shared", &rules_detail::matmul_batch_src, &rules_detail::matmul_batch_dst,
     "matmul-concat-rows (reversed), split0-concat, split1-concat"},
    {"conv-fuse-shared", &rules_detail::conv_shared_src, &rules_detail::conv_shared_dst,
     "conv-concat-weight, split0-concat, split1-concat"},
};

// Axioms that hold only under TASO's restricted model, with the conditions
// that restore it. Returns false for axioms to leave out.
inline std::vector<spec::condition> restricted_model(const spec::axiom& a) {
    using namespace rules_detail;
    // Equal shapes for every pair of element-wise operands the axiom may combine.
    auto shapes = cat({rewrite::same_shape(X, Y), rewrite::same_shape(Z, W), rewrite::same_shape(Y, Z)});
    const std::string_view n = a.name;
    // Its own conditions (equal group counts and sizes) are what makes it
    // sound; equal-shape conditions would stop it matching any conv.
    if (spec::outside_taso_model(n)) return {};
    if (n == "conv-concat-weight") return cat({{ungrouped(Y, X), ungrouped(Z, X)}});
    if (n == "conv-concat-sum") return cat({{ungrouped(Y, X), ungrouped(W, Z)}, rewrite::same_shape(Y, W)});
    if (n == "conv-distrib-ewadd-weight") return cat({{ungrouped(Y, X), ungrouped(Z, X)}, rewrite::same_shape(Y, Z)});
    if (n == "conv-distrib-ewadd-input") return cat({{ungrouped(Z, X)}, rewrite::same_shape(X, Y)});
    if (n == "matmul-concat-sum") return cat({two_d(X, Y), two_d(Z, W), rewrite::same_shape(Y, W)});
    if (n == "matmul-concat-cols" || n == "matmul-concat-rows") return cat({two_d(X, Y), two_d(Y, Z)});
    return shapes;
}

// Owns the rules; rules() is the span to hand to tsopt::optimize.
class example_rules {
public:
    explicit example_rules(rule_source src = rule_source::axioms) {
        using namespace rules_detail;
        if (src != rule_source::generated) {
            for (const auto& a : spec::all_axioms) axioms_.add(a, restricted_model(a));
            auto m = roots_of(matmul_shared_src), md = roots_of(matmul_shared_dst);
            axioms_.add_rule("matmul-fuse-shared", m.nodes, md.nodes, m.outs, md.outs,
                             cat({two_d(X, Y), two_d(Y, Z)}), "axioms matmul-concat-cols, split0-concat, split1-concat");
            auto b = roots_of(matmul_batch_src), bd = roots_of(matmul_batch_dst);
            axioms_.add_rule("matmul-batch-shared", b.nodes, bd.nodes, b.outs, bd.outs,
                             cat({two_d(X, Y), two_d(Y, Z)}), "axioms matmul-concat-rows, split0-concat, split1-concat");
            auto c = roots_of(conv_shared_src), cd = roots_of(conv_shared_dst);
            axioms_.add_rule("conv-fuse-shared", c.nodes, cd.nodes, c.outs, cd.outs, {ungrouped(Y, X), ungrouped(Z, X)},
                             "axioms conv-concat-weight, split0-concat, split1-concat");
            all_.assign(axioms_.rules().begin(), axioms_.rules().end());
        }
        if (src != rule_source::axioms) {
            auto gen = tsopt::rules::generated();
            all_.insert(all_.end(), gen.begin(), gen.end());
        }
    }
    example_rules(const example_rules&) = delete;
    example_rules& operator=(const example_rules&) = delete;

    std::span<const rewrite::rule> rules() const { return all_; }

private:
    rewrite::rule_set axioms_;
    std::vector<rewrite::rule> all_;
};

}  // namespace tsopt::examples
