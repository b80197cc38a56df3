#pragma once
// The rule sets a tool can choose among by name (tsopt optimize --rules,
// the examples' --rules):
//
//   generated  the default set (tsopt/rules/default.hpp): every rule made by
//              tsopt-gen and proven by Z3;
//   axioms     the axiom set (spec/axioms.hpp) read as rules, each axiom in
//              both directions where valid, for comparison and for the one
//              rewrite the generator cannot reach yet (conv-concat-grouped:
//              parallel convolutions into one grouped convolution, outside
//              TASO's model);
//   all        both.
//
// The axiom-derived rules fire under the conditions of TASO's restricted
// model that keep them sound on real graphs:
//   - element-wise operands of equal shape (no broadcasting),
//   - convolutions ungrouped (weight's input channels == input's channels)
//     for the axioms that merge or split kernels along output channels or
//     sum convolutions (conv-concat-weight, conv-concat-sum,
//     conv-distrib-ewadd-*),
//   - matmuls 2-D (matmul-concat-sum, matmul-concat-cols, matmul-concat-rows);
// axioms outside TASO's model (spec::full_semantics_only) carry their own
// conditions and get no others. Axioms are validated by symbolic execution
// (tests/spec), so every rule here is still checked; none is composed by
// hand.
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "tsopt/rewrite/from_axiom.hpp"
#include "tsopt/rules/default.hpp"
#include "tsopt/spec/axioms.hpp"

namespace tsopt::rules {

enum class built_in_set { generated, axioms, all };

inline built_in_set parse_built_in_set(std::string_view s) {
    if (s == "generated") return built_in_set::generated;
    if (s == "axioms") return built_in_set::axioms;
    if (s == "all") return built_in_set::all;
    throw error("--rules: expected generated, axioms or all, got '" + std::string(s) + "'");
}

inline std::string_view describe(built_in_set s) {
    switch (s) {
        case built_in_set::generated: return "generated";
        case built_in_set::axioms: return "axiom-derived";
        case built_in_set::all: return "generated + axiom-derived";
    }
    return "?";
}

namespace built_in_detail {
using spec::value_ref;
inline constexpr value_ref X = spec::var_ref(0), Y = spec::var_ref(1), Z = spec::var_ref(2), W = spec::var_ref(3);

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
}  // namespace built_in_detail

// The conditions of TASO's restricted model under which axiom `a` is a sound
// rewrite on real graphs (see the top of this file).
inline std::vector<spec::condition> restricted_model(const spec::axiom& a) {
    using namespace built_in_detail;
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

// Owns the chosen set; rules() is the span to hand to tsopt::optimize.
class built_in_rules {
public:
    explicit built_in_rules(built_in_set s = built_in_set::generated) : set_(s) {
        if (s != built_in_set::generated) {
            for (const auto& a : spec::all_axioms) axioms_.add(a, restricted_model(a));
            all_.assign(axioms_.rules().begin(), axioms_.rules().end());
        }
        if (s != built_in_set::axioms) {
            auto gen = default_rules();
            all_.insert(all_.end(), gen.begin(), gen.end());
        }
    }
    built_in_rules(const built_in_rules&) = delete;
    built_in_rules& operator=(const built_in_rules&) = delete;

    std::span<const rewrite::rule> rules() const { return all_; }
    built_in_set set() const { return set_; }

private:
    built_in_set set_;
    rewrite::rule_set axioms_;
    std::vector<rewrite::rule> all_;
};

}  // namespace tsopt::rules
