#pragma once
// Whether a node satisfies the typing restrictions (spec::typing) a rule was
// proven under. The axiom validator (generator/verify) applies the same
// restrictions, so a rule fires only where its proof holds.
#include <cstdint>
#include <string>

#include "tsopt/core/graph.hpp"

namespace tsopt::rewrite {

// "" when node `n` of `g` satisfies every restriction in `needs`, else why not.
// G: a graph, or anything with its at and shape_of (apply's view of a graph
// being built).
template <class G>
std::string violates_typing(const G& g, const node& n, std::uint8_t needs) {
    if (n.kind != node_kind::op || needs == spec::full_semantics) return {};
    auto in = [&](int i) -> const shape& { return g.shape_of(n.inputs[static_cast<std::size_t>(i)]); };
    auto constant_op = [&](int i) {
        const node& p = g.at(n.inputs[static_cast<std::size_t>(i)]);
        return p.kind == node_kind::op && spec::decl(p.op).cls == spec::op_class::constant;
    };
    switch (n.op) {
        case spec::op_kind::ewadd:
        case spec::op_kind::ewmul: {
            // A one-element constant (the iewmul() of ewmul-iewmul-identity)
            // broadcasts; any other operand pair has one shape, as the
            // verifier's shape facts assume of generated rules.
            auto scalar_constant = [&](int i) { return constant_op(i) && in(i).elements() == 1; };
            if ((needs & spec::no_broadcast) && !(in(0) == in(1)) && !scalar_constant(0) && !scalar_constant(1))
                return n.describe() + " broadcasts " + in(0).str() + " with " + in(1).str();
            return {};
        }
        case spec::op_kind::conv2d:
            if ((needs & spec::ungrouped_conv) && in(0)[1] != in(1)[1] && !constant_op(1))
                return n.describe() + " is a grouped convolution";
            return {};
        case spec::op_kind::matmul:
            if ((needs & spec::matmul_2d) && (in(0).rank != 2 || in(1).rank != 2)) return n.describe() + " is a batched matmul";
            return {};
        default: return {};
    }
}

}  // namespace tsopt::rewrite
