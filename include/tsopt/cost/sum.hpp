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
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
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
//
// Measuring can be given a deadline (measure_until: a command's --budget,
// which a cold cache would otherwise overrun: the demo's 638 operators take
// about 2 s). Past it, an operator the cache does not hold is priced by an
// estimator instead (the analytical model), scaled by what the cached
// operators of the graph being priced cost against their estimates, so both
// kinds of price are in one unit. Estimates are kept apart and never enter
// the cache (a later run measures them), and each is fixed at first use, so
// a graph's price does not drift during a search.
template <backend::measurer B>
class measured {
public:
    static constexpr bool additive = true;
    using estimator = std::function<double(const graph&, std::size_t, const std::vector<bool>&)>;

    explicit measured(B& backend, std::shared_ptr<op_cache<double>> cache = std::make_shared<op_cache<double>>())
        : backend_(&backend), cache_(std::move(cache)) {
        if (!cache_) throw error("cost::measured: the cache must not be null");
    }

    void measure_until(std::chrono::steady_clock::time_point deadline, estimator estimate) {
        if (!estimate) throw error("cost::measured: measure_until needs an estimator");
        deadline_ = deadline;
        estimate_ = std::move(estimate);
    }
    // Operators priced by the estimator so far (distinct op_keys).
    std::size_t estimated() const { return estimates_.size(); }

    double operator_cost(const graph& g, std::size_t i) { return runs_at_inference(g, i) ? lookup(g, i, nullptr) : 0.0; }
    double operator_cost(const graph& g, std::size_t i, const std::vector<bool>& constant) {
        return runs_at_inference(g, i, constant) ? lookup(g, i, &constant) : 0.0;
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
    // A price, once found, never changes (a measurement is cached, an
    // estimate fixed at first use), so it is remembered by the key's hash:
    // a search prices every operator of every graph it makes, and building
    // each key (two vectors) and reading the clock was a tenth of a search
    // on zoo_rnntc's 1,931 operators.
    double lookup(const graph& g, std::size_t i, const std::vector<bool>* constant) {
        const std::uint64_t h = op_key::hash_of(g, i);
        if (auto it = priced_.find(h); it != priced_.end()) return it->second;
        const double ms = lookup_key(g, i, constant);
        priced_.emplace(h, ms);
        return ms;
    }
    double lookup_key(const graph& g, std::size_t i, const std::vector<bool>* constant) {
        op_key k = op_key::of(g, i);
        if (deadline_ && std::chrono::steady_clock::now() >= *deadline_) {
            if (const double* ms = cache_->find(k)) return *ms;
            return estimate(g, i, k, constant);
        }
        return cache_->get_or(k, [&] {
            double ms = static_cast<double>(backend_->measure(g, i));
            if (!(ms >= 0))
                throw error(std::string(B::name) + " backend measured " + g.nodes[i].describe() + " at " +
                            std::to_string(ms) + " ms; measurements must be non-negative");
            return ms;
        });
    }
    double estimate(const graph& g, std::size_t i, const op_key& k, const std::vector<bool>* constant) {
        if (auto it = estimates_.find(k); it != estimates_.end()) return it->second;
        std::vector<bool> own;
        if (!constant) constant = &(own = g.constant_mask());
        if (!scale_) {
            // Measured against estimated over the operators of g the cache holds.
            double ms = 0, est = 0;
            for (std::size_t j = 0; j < g.size(); ++j) {
                if (!runs_at_inference(g, j, *constant)) continue;
                if (const double* m = cache_->find(op_key::of(g, j))) {
                    ms += *m;
                    est += estimate_(g, j, *constant);
                }
            }
            scale_ = ms > 0 && est > 0 ? ms / est : 1.0;
        }
        const double e = *scale_ * estimate_(g, i, *constant);
        if (!(e >= 0)) throw error("cost::measured: the estimator priced " + g.nodes[i].describe() + " at " + std::to_string(e));
        estimates_.emplace(k, e);
        return e;
    }
    B* backend_;
    std::shared_ptr<op_cache<double>> cache_;
    std::optional<std::chrono::steady_clock::time_point> deadline_;
    estimator estimate_;
    std::optional<double> scale_;
    std::unordered_map<op_key, double, op_key_hash> estimates_;
    std::unordered_map<std::uint64_t, double> priced_;  // by op_key::hash_of
};

}  // namespace tsopt::cost
