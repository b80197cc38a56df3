#pragma once
// MetaFlow's multi-dimensional cost: each graph is measured along several
// axes, a weighting turns them into the scalar the search compares, and a
// memory limit makes a graph infeasible.
//
//   metrics   time_ms      sum of per-operator times (from the time source)
//             flops        sum of op_flops over operators that run
//             memory_bytes memory accesses: bytes read + written by them
//             launches     number of kernels run
//             peak_bytes   peak live memory of a liveness scan over
//                          g.topological_order(): resident constants (weights
//                          and folded results that a running operator reads),
//                          plus graph inputs and activations from the moment
//                          they are produced to their last reader (graph
//                          outputs to the end); a node's inputs and outputs
//                          are live together while it runs.
//
//   graph_cost(g) = +inf (cost::infeasible)           if peak_bytes > memory_limit
//                 = w.time * time_ms + w.flops * flops + w.memory * memory_bytes
//                   + w.launches * launches + w.peak * peak_bytes   otherwise
//
// Not additive (peak memory is a maximum, the limit a threshold): a search
// must call graph_cost on every candidate. Every component is monotone in the
// operator set, so graph_cost is too. operator_cost(g, i) is the weighted sum
// of node i's own components (peak memory excluded).
#include <limits>

#include "tsopt/cost/analytical.hpp"
#include "tsopt/cost/sum.hpp"

namespace tsopt::cost {

struct metrics {
    double time_ms = 0;
    double flops = 0;
    double memory_bytes = 0;
    double launches = 0;
    double peak_bytes = 0;
};

// Multipliers of each metric in the scalar cost (default: time only).
struct weights {
    double time = 1;       // per millisecond
    double flops = 0;      // per FLOP
    double memory = 0;     // per byte accessed
    double launches = 0;   // per kernel
    double peak = 0;       // per byte of peak memory
};

// Peak live bytes of g executed in topological order (see above).
inline double peak_memory(const graph& g, double bytes_per_element = 4) {
    auto constant = g.constant_mask();
    auto order = g.topological_order();
    std::vector<std::size_t> last_use(g.size(), 0), pos(g.size(), 0);
    for (std::size_t k = 0; k < order.size(); ++k) pos[order[k]] = k;
    std::vector<bool> is_output(g.size(), false), resident(g.size(), false);
    for (value v : g.outputs) is_output[static_cast<std::size_t>(v.node)] = true;
    auto bytes = [&](std::size_t i) {
        double b = 0;
        for (const shape& s : g.nodes[i].shapes) b += static_cast<double>(s.elements());
        return b * bytes_per_element;
    };
    for (std::size_t i = 0; i < g.size(); ++i)
        for (value v : g.nodes[i].inputs) {
            auto p = static_cast<std::size_t>(v.node);
            last_use[p] = std::max(last_use[p], pos[i]);
            if (constant[p] && runs_at_inference(g, i, constant)) resident[p] = true;
        }
    double live = 0;
    for (std::size_t i = 0; i < g.size(); ++i) {
        if (constant[i] && is_output[i]) resident[i] = true;
        if (resident[i]) live += bytes(i);
        if (g.nodes[i].kind == node_kind::input) live += bytes(i);
    }
    double peak = live;
    // Bytes to free after step k.
    std::vector<double> free_after(order.size(), 0);
    for (std::size_t i = 0; i < g.size(); ++i) {
        const bool dynamic = g.nodes[i].kind == node_kind::input || runs_at_inference(g, i, constant);
        if (!dynamic || is_output[i]) continue;
        // Freed after the last reader ran; unread values right after they appear.
        free_after[std::max(last_use[i], pos[i])] += bytes(i);
    }
    for (std::size_t k = 0; k < order.size(); ++k) {
        std::size_t i = order[k];
        if (runs_at_inference(g, i, constant)) {
            live += bytes(i);
            peak = std::max(peak, live);
        }
        live -= free_after[k];
    }
    return peak;
}

template <op_cost_source TimeSource = analytical>
class multi_dim {
public:
    static constexpr bool additive = false;

    explicit multi_dim(TimeSource time = {}, weights w = {}, double memory_limit_bytes = std::numeric_limits<double>::infinity(),
                       machine m = {})
        : time_(std::move(time)), w_(w), limit_(memory_limit_bytes), m_(m) {
        if (!(w.time >= 0 && w.flops >= 0 && w.memory >= 0 && w.launches >= 0 && w.peak >= 0))
            throw error("cost::multi_dim: weights must be non-negative");
        if (!(memory_limit_bytes > 0)) throw error("cost::multi_dim: the memory limit must be positive");
        m_.check();
    }

    // Node i's own metrics (peak_bytes: 0); zeros for nodes that do not run.
    metrics op_metrics(const graph& g, std::size_t i) { return op_metrics(g, i, g.constant_mask()); }
    metrics op_metrics(const graph& g, std::size_t i, const std::vector<bool>& constant) {
        metrics r;
        if (!runs_at_inference(g, i, constant)) return r;
        r.time_ms = detail::price(time_, g, i, &constant);
        r.flops = op_flops(g, i);
        r.memory_bytes = op_bytes(g, i, m_);
        r.launches = 1;
        return r;
    }
    metrics evaluate(const graph& g) {
        auto constant = g.constant_mask();
        metrics r;
        for (std::size_t i = 0; i < g.size(); ++i) {
            metrics o = op_metrics(g, i, constant);
            r.time_ms += o.time_ms;
            r.flops += o.flops;
            r.memory_bytes += o.memory_bytes;
            r.launches += o.launches;
        }
        r.peak_bytes = peak_memory(g, m_.bytes_per_element);
        return r;
    }
    double scalar(const metrics& x) const {
        if (x.peak_bytes > limit_) return infeasible;
        return w_.time * x.time_ms + w_.flops * x.flops + w_.memory * x.memory_bytes + w_.launches * x.launches +
               w_.peak * x.peak_bytes;
    }
    bool feasible(const graph& g) { return peak_memory(g, m_.bytes_per_element) <= limit_; }

    double operator_cost(const graph& g, std::size_t i) {
        metrics o = runs_at_inference(g, i) ? op_metrics(g, i, g.constant_mask()) : metrics{};
        return w_.time * o.time_ms + w_.flops * o.flops + w_.memory * o.memory_bytes + w_.launches * o.launches;
    }
    double graph_cost(const graph& g) { return scalar(evaluate(g)); }

    const weights& weighting() const { return w_; }
    double memory_limit() const { return limit_; }
    TimeSource& time_source() { return time_; }

private:
    TimeSource time_;
    weights w_;
    double limit_;
    machine m_;
};
static_assert(cost_model<multi_dim<>>);
static_assert(!is_additive_v<multi_dim<>>);

}  // namespace tsopt::cost
