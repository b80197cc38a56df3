#pragma once
// What a cost model is. The search (search/backtracking.hpp) and the
// optimizer are templates over this concept; every model in cost/ satisfies it.
//
//   operator_cost(g, i)  price of node i of g alone, in milliseconds (a time
//                        estimate; models that price in other units say so).
//   graph_cost(g)        the scalar the search minimises, compared with <.
//
// Requirements every model meets, and the search may rely on:
//   * costs are non-negative; graph_cost may be +infinity (`infeasible`),
//     meaning "never choose this graph" (a memory limit exceeded); it is
//     never NaN;
//   * deterministic for a given model state (measured models cache, so a
//     repeated question gets the same answer);
//   * inputs and weights cost 0; operators whose inputs are all constant
//     (graph::constant_mask) cost 0, because they are folded before inference;
//   * monotone in the operator set: adding an operator node to a graph
//     without changing the others never lowers graph_cost (true for all the
//     models here; for critical_path it holds because both terms are
//     monotone, for multi_dim because every component is).
//
// Additivity. A model with `static constexpr bool additive = true` promises
//     graph_cost(g) == sum over nodes i of operator_cost(g, i)
// up to rounding, so a search may price a rewrite incrementally:
//     cost(g') = cost(g) - sum(removed ops) + sum(added ops).
// Additive: cost::sum (and so cost::measured, cost::analytical used through
// cost::sum), cost::analytical itself.
// NOT additive: cost::multi_dim (peak memory is a liveness maximum and the
// memory limit is a threshold) and cost::critical_path (the longest path is a
// max over paths). For these the search must call graph_cost on each
// candidate; `is_additive_v<M>` tells the two apart at compile time.
//
// operator_cost depends only on the node, its parameters, its input shapes
// and layouts and its output layout (cost::op_key, cost/cache.hpp), never on
// the rest of the graph, except that constant-folded operators are free.
#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tsopt/core/graph.hpp"

namespace tsopt::cost {

template <class M>
concept cost_model = requires(M& m, const graph& g, std::size_t node) {
    { m.operator_cost(g, node) } -> std::convertible_to<double>;  // one node
    { m.graph_cost(g) } -> std::convertible_to<double>;            // the whole graph, scalar used by the search
};

// True when M declares itself additive over operators (see above).
template <class M>
inline constexpr bool is_additive_v = requires { requires M::additive; };

// graph_cost of a graph that must never be chosen.
inline constexpr double infeasible = std::numeric_limits<double>::infinity();

// Whether node i is an operator that runs at inference time: declared or
// opaque, and not folded away as weight-only. `constant` is g.constant_mask().
inline bool runs_at_inference(const graph& g, std::size_t i, const std::vector<bool>& constant) {
    const node& n = g.nodes[i];
    if (n.kind == node_kind::input || n.kind == node_kind::weight) return false;
    return !constant[i];
}

namespace detail {
// Ancestor walks by the single-node runs_at_inference below. Pricing a whole
// graph computes graph::constant_mask once and passes it down instead; the
// tests read this counter to hold every graph-wide pass to that.
inline std::atomic<std::size_t> inference_walks{0};
}  // namespace detail

// The same question without a precomputed mask, for pricing one node: walks
// the ancestors of node i (memoised in a map the size of what it visits, not
// of the graph). Pricing many nodes of one graph: use the overload above.
inline bool runs_at_inference(const graph& g, std::size_t i) {
    if (i >= g.size()) throw error("cost: node " + std::to_string(i) + " out of range (graph has " +
                                   std::to_string(g.size()) + " nodes)");
    const node& n = g.nodes[i];
    if (n.kind == node_kind::input || n.kind == node_kind::weight) return false;
    if (n.kind == node_kind::opaque) return true;
    detail::inference_walks.fetch_add(1, std::memory_order_relaxed);
    // 1 constant, 2 not constant
    std::unordered_map<std::size_t, std::uint8_t> memo;
    auto known = [&](std::size_t j) -> std::uint8_t {
        auto it = memo.find(j);
        return it == memo.end() ? 0 : it->second;
    };
    std::vector<std::pair<std::size_t, std::size_t>> stack{{i, 0}};  // (node, next input to look at)
    while (!stack.empty()) {
        auto [j, next] = stack.back();
        const node& nj = g.nodes[j];
        if (nj.kind == node_kind::weight) { memo[j] = 1; stack.pop_back(); continue; }
        if (nj.kind != node_kind::op) { memo[j] = 2; stack.pop_back(); continue; }
        std::uint8_t verdict = 1;
        bool descended = false;
        while (next < nj.inputs.size()) {
            std::size_t p = static_cast<std::size_t>(nj.inputs[next].node);
            std::uint8_t k = known(p);
            if (k == 2) { verdict = 2; break; }
            if (k == 1) { ++next; continue; }
            stack.back().second = next;
            stack.push_back({p, 0});
            descended = true;
            break;
        }
        if (descended) continue;
        memo[j] = verdict;
        stack.pop_back();
    }
    return known(i) != 1;
}

}  // namespace tsopt::cost
