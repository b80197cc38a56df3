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
    // spec::typing restrictions under which the rule was proven: it fires
    // only where every node it matches or creates satisfies them
    // (rewrite/model.hpp). All of them unless shown otherwise: the safe
    // default for generated tables, whose proofs may use any axiom.
    std::uint8_t needs = spec::taso_typing;
};

}  // namespace tsopt::rewrite
