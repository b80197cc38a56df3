#pragma once
// The reference backend: executes any graph with the operators' reference
// semantics (simple loops, no speed goal). It defines the truth every
// optimized graph and every other backend is checked against.
#include <functional>
#include <map>

#include "tsopt/backend/backend.hpp"

namespace tsopt::backend {

class reference {
public:
    static constexpr std::string_view name = "reference";

    // Implementations for opaque operators, by type name (optional).
    using opaque_fn = std::function<std::vector<tensor<float>>(const node&, std::span<const tensor<float>* const>)>;
    std::map<std::string, opaque_fn, std::less<>> opaque_impls;

    std::vector<tensor<float>> execute(const graph& g, std::span<const tensor<float>> in) const {
        check_inputs(g, in);
        std::vector<std::vector<tensor<float>>> vals(g.size());
        std::vector<int> uses(g.size(), 0);
        for (const node& n : g.nodes)
            for (value v : n.inputs) ++uses[static_cast<std::size_t>(v.node)];
        for (value v : g.outputs) ++uses[static_cast<std::size_t>(v.node)];
        std::vector<std::size_t> input_pos(g.size(), 0);
        for (std::size_t i = 0, k = 0; i < g.size(); ++i)
            if (g.nodes[i].kind == node_kind::input) input_pos[i] = k++;
        for (std::size_t i : g.topological_order()) {
            const node& n = g.nodes[i];
            std::vector<const tensor<float>*> args;
            for (value v : n.inputs) args.push_back(&vals[static_cast<std::size_t>(v.node)][static_cast<std::size_t>(v.output)]);
            switch (n.kind) {
                case node_kind::input: vals[i] = {in[input_pos[i]]}; break;
                case node_kind::weight: vals[i] = {*n.data}; break;
                case node_kind::op: vals[i] = spec::evaluate<float>(n.op, n.params, args); break;
                case node_kind::opaque: {
                    auto it = opaque_impls.find(n.opaque->type);
                    if (it == opaque_impls.end())
                        throw error(n.describe() + ": the reference backend has no implementation for opaque operator '" +
                                    n.opaque->type + "'");
                    vals[i] = it->second(n, args);
                    break;
                }
            }
            // Free inputs whose last consumer has run.
            for (value v : n.inputs)
                if (--uses[static_cast<std::size_t>(v.node)] == 0) vals[static_cast<std::size_t>(v.node)].clear();
        }
        std::vector<tensor<float>> out;
        for (value v : g.outputs) out.push_back(vals[static_cast<std::size_t>(v.node)][static_cast<std::size_t>(v.output)]);
        return out;
    }
};
static_assert(executor<reference>);

// Random inputs for a graph (uniform in [-1, 1]), in execute() order.
inline std::vector<tensor<float>> random_inputs(const graph& g, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<tensor<float>> r;
    for (value v : g.inputs()) r.push_back(random_float(g.shape_of(v), rng));
    return r;
}

}  // namespace tsopt::backend
