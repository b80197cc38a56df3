#pragma once
// TASO / MetaFlow's graph cost: the sum of per-operator costs.
//
//   cost::sum s{source};             // any per-operator cost source
//   cost::measured<B> m{backend};    // backend.measure(g, node) through an op_cache
//
// A source is either a cost model-like object with operator_cost(g, i), or a
// callable double(const graph&, std::size_t) (handy for tables in tests:
// `cost::sum{[&](const graph& g, std::size_t i) { return table.at(g.nodes[i].name); }}`).
// sum applies the common rules on top of the source: inputs, weights and
// weight-only (folded) operators cost 0, so the source is only asked about
// operators that run at inference. Both models are additive.
#include <memory>
#include <utility>

#include "tsopt/backend/backend.hpp"
#include "tsopt/cost/cache.hpp"
#include "tsopt/cost/cost_model.hpp"

namespace tsopt::cost {

// Something that prices one operator node.
template <class S>
concept op_cost_source = requires(S& s, const graph& g, std::size_t i) {
    { s.operator_cost(g, i) } -> std::convertible_to<double>;
} || requires(S& s, const graph& g, std::size_t i) {
    { s(g, i) } -> std::convertible_to<double>;
};

namespace detail {
// `constant`, when given, is g.constant_mask(), passed on to a source that
// takes it, so pricing every node of a graph stays linear.
template <class S>
double price(S& s, const graph& g, std::size_t i, const std::vector<bool>* constant = nullptr) {
    double c;
    if constexpr (requires { s.operator_cost(g, i, *constant); })
        c = static_cast<double>(constant ? s.operator_cost(g, i, *constant) : s.operator_cost(g, i));
    else if constexpr (requires { s.operator_cost(g, i); }) c = static_cast<double>(s.operator_cost(g, i));
    else c = static_cast<double>(s(g, i));
    if (!(c >= 0)) throw error("cost source priced " + g.nodes[i].describe() + " at " + std::to_string(c) +
                               "; costs must be non-negative numbers");
    return c;
}
}  // namespace detail

template <op_cost_source Source>
class sum {
public:
    static constexpr bool additive = true;

    explicit sum(Source s) : source_(std::move(s)) {}

    double operator_cost(const graph& g, std::size_t i) {
        return runs_at_inference(g, i) ? detail::price(source_, g, i) : 0.0;
    }
    double operator_cost(const graph& g, std::size_t i, const std::vector<bool>& constant) {
        return runs_at_inference(g, i, constant) ? detail::price(source_, g, i, &constant) : 0.0;
    }
    double graph_cost(const graph& g) {
        auto constant = g.constant_mask();
        double t = 0;
        for (std::size_t i = 0; i < g.size(); ++i) t += operator_cost(g, i, constant);
        return t;
    }
    Source& source() { return source_; }

private:
    Source source_;
};
template <class S>
sum(S) -> sum<S>;

// Measured per-operator times: backend.measure(g, node) (median ms), asked
// once per distinct op_key; the cache may be shared between models and
// saved/loaded (op_cache::save / load).
template <backend::measurer B>
class measured {
public:
    static constexpr bool additive = true;

    explicit measured(B& backend, std::shared_ptr<op_cache<double>> cache = std::make_shared<op_cache<double>>())
        : backend_(&backend), cache_(std::move(cache)) {
        if (!cache_) throw error("cost::measured: the cache must not be null");
    }

    double operator_cost(const graph& g, std::size_t i) { return runs_at_inference(g, i) ? lookup(g, i) : 0.0; }
    double operator_cost(const graph& g, std::size_t i, const std::vector<bool>& constant) {
        return runs_at_inference(g, i, constant) ? lookup(g, i) : 0.0;
    }
    double graph_cost(const graph& g) {
        auto constant = g.constant_mask();
        double t = 0;
        for (std::size_t i = 0; i < g.size(); ++i) t += operator_cost(g, i, constant);
        return t;
    }
    op_cache<double>& cache() { return *cache_; }
    const std::shared_ptr<op_cache<double>>& shared_cache() const { return cache_; }

private:
    double lookup(const graph& g, std::size_t i) {
        return cache_->get_or(op_key::of(g, i), [&] {
            double ms = static_cast<double>(backend_->measure(g, i));
            if (!(ms >= 0))
                throw error(std::string(B::name) + " backend measured " + g.nodes[i].describe() + " at " +
                            std::to_string(ms) + " ms; measurements must be non-negative");
            return ms;
        });
    }
    B* backend_;
    std::shared_ptr<op_cache<double>> cache_;
};

}  // namespace tsopt::cost
