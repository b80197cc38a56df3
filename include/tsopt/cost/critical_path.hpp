#pragma once
// AutoGraph's mixed critical-path cost, for devices that run independent
// operators concurrently (GPU streams, CPU inter-op threads):
//
//   C(g) = path_weight * T_cp(g) + sum_weight * T_sum(g)
//
//   T_cp   the longest path through the DAG with node weights = operator
//          times (what an ideal parallel executor would take);
//   T_sum  the sum of all operator times (what a serial executor takes; it
//          also stands for the contention of kernels running side by side).
//
// Our reading of AutoGraph: the estimate mixes the two because neither alone
// predicts a multi-stream run: T_cp ignores that concurrent kernels share the
// device, T_sum ignores concurrency. The brief's form alpha * T_cp + T_sum is
// path_weight = alpha, sum_weight = 1; the default (1, 0.25) states the same
// trade-off as "critical path plus a quarter of the total work" (alpha = 4).
// With a per-operator time table where a fused operator costs more than the
// max but less than the sum of the branches it replaces, a large enough
// path_weight / sum_weight prefers keeping the branches parallel while
// cost::sum prefers fusing (AutoGraph Figure 1; tests/cost/cost_test.cpp).
//
// Not additive (T_cp is a max over paths); monotone: adding an operator never
// shortens a path nor lowers the sum. Inputs, weights and weight-only
// operators take no time.
#include "tsopt/cost/analytical.hpp"
#include "tsopt/cost/sum.hpp"

namespace tsopt::cost {

struct critical_path_report {
    double critical_path_ms = 0;
    double total_ms = 0;
    double cost = 0;
    std::vector<std::size_t> path;  // node ids of one longest path, in order
};

template <op_cost_source TimeSource = analytical>
class critical_path {
public:
    static constexpr bool additive = false;

    explicit critical_path(TimeSource time = {}, double path_weight = 1.0, double sum_weight = 0.25)
        : time_(std::move(time)), path_weight_(path_weight), sum_weight_(sum_weight) {
        if (!(path_weight >= 0) || !(sum_weight >= 0) || path_weight + sum_weight <= 0)
            throw error("cost::critical_path: path_weight and sum_weight must be non-negative, not both zero");
    }

    double operator_cost(const graph& g, std::size_t i) {
        return runs_at_inference(g, i) ? detail::price(time_, g, i) : 0.0;
    }

    critical_path_report evaluate(const graph& g) {
        auto constant = g.constant_mask();
        std::vector<double> t(g.size(), 0), finish(g.size(), 0);
        std::vector<std::int64_t> pred(g.size(), -1);
        critical_path_report r;
        for (std::size_t i = 0; i < g.size(); ++i)
            if (runs_at_inference(g, i, constant)) t[i] = detail::price(time_, g, i, &constant);
        std::size_t last = 0;
        for (std::size_t i : g.topological_order()) {
            double start = 0;
            for (value v : g.nodes[i].inputs) {
                auto p = static_cast<std::size_t>(v.node);
                if (finish[p] > start || (pred[i] < 0 && finish[p] == start && t[p] > 0)) {
                    start = finish[p];
                    pred[i] = static_cast<std::int64_t>(p);
                }
            }
            finish[i] = start + t[i];
            r.total_ms += t[i];
            if (finish[i] > finish[last]) last = i;
        }
        r.critical_path_ms = g.size() ? finish[last] : 0;
        for (std::int64_t k = g.size() ? static_cast<std::int64_t>(last) : -1; k >= 0; k = pred[static_cast<std::size_t>(k)])
            if (t[static_cast<std::size_t>(k)] > 0) r.path.insert(r.path.begin(), static_cast<std::size_t>(k));
        r.cost = path_weight_ * r.critical_path_ms + sum_weight_ * r.total_ms;
        return r;
    }
    double graph_cost(const graph& g) { return evaluate(g).cost; }

    double path_weight() const { return path_weight_; }
    double sum_weight() const { return sum_weight_; }
    TimeSource& time_source() { return time_; }

private:
    TimeSource time_;
    double path_weight_, sum_weight_;
};
static_assert(cost_model<critical_path<>>);
static_assert(!is_additive_v<critical_path<>>);

}  // namespace tsopt::cost
