#pragma once
// A rewrite rule as plain constexpr data: source and target patterns over
// shared tensor variables (?0, ?1 ...) and parameter variables, and which
// target value replaces which source output. The generator emits tables of
// these (rules/generated_rules.hpp); the matcher iterates them.
#include <cstdint>
#include <span>
#include <string_view>

#include "tsopt/spec/axiom_dsl.hpp"

namespace tsopt::rewrite {

// The semantics a rule was proven in. TASO's verification model (and ours,
// by default) types operators more narrowly than their full semantics:
// ewadd/ewmul operands of equal shape (no broadcasting), ungrouped conv2d
// unless the kernel is a constant operator, and 2-D matmul. A few axioms
// (spec::taso_model_only) are false outside that model, so a rule whose
// proof may use them is applied only where every node it reads or writes
// lies inside the model (rewrite/model.hpp checks this).
enum class proof_model : std::uint8_t { taso_restricted, full };

struct rule {
    std::string_view name;        // stable, human-readable identifier
    std::string_view text;        // S-expression form: "(src) => (dst)"
    std::string_view provenance;  // how it was found and proven
    std::span<const spec::pattern_node> src;
    std::span<const spec::pattern_node> dst;
    // src_out[i] is replaced by dst_out[i]; more than one means a
    // multi-output rule.
    std::span<const spec::value_ref> src_out;
    std::span<const spec::value_ref> dst_out;
    int num_tensor_vars = 0;
    int num_param_vars = 0;
    // Side conditions that must hold on a match (parameter terms compared
    // for equality / inequality; dim_of terms express shape constraints the
    // operators' shape rules do not imply, e.g. "y and z have equal extents"
    // where broadcasting would otherwise accept them). Empty: none.
    std::span<const spec::condition> where{};
    // Restricted unless shown otherwise: the safe default for generated
    // tables, whose proofs may use any axiom.
    proof_model model = proof_model::taso_restricted;
};

}  // namespace tsopt::rewrite
