#pragma once
// Membership of a node in TASO's restricted verification model (see
// rewrite::proof_model): the typing under which every axiom, and so every
// rule proven from them, is true. Rules proven only there are applied only
// where all the nodes they match and create satisfy it.
#include <string>

#include "tsopt/core/graph.hpp"

namespace tsopt::rewrite {

// "" when node `n` of `g` lies inside the model, else why it does not.
inline std::string outside_taso_model(const graph& g, const node& n) {
    if (n.kind != node_kind::op) return {};
    auto in = [&](int i) -> const shape& { return g.shape_of(n.inputs[static_cast<std::size_t>(i)]); };
    switch (n.op) {
        case spec::op_kind::ewadd:
        case spec::op_kind::ewmul:
            if (!(in(0) == in(1))) return n.describe() + " broadcasts " + in(0).str() + " with " + in(1).str();
            return {};
        case spec::op_kind::conv2d: {
            const node& w = g.at(n.inputs[1]);
            bool constant_kernel = w.is_op(spec::op_kind::cpool) || w.is_op(spec::op_kind::iconv);
            if (in(0)[1] != in(1)[1] && !constant_kernel) return n.describe() + " is a grouped convolution";
            return {};
        }
        case spec::op_kind::matmul:
            if (in(0).rank != 2 || in(1).rank != 2) return n.describe() + " is a batched matmul";
            return {};
        default: return {};
    }
}

}  // namespace tsopt::rewrite
