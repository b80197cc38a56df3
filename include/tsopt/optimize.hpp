#pragma once
// The entry point:
//
//   auto r = tsopt::optimize(g, rules, tsopt::cost::analytical{}, {.alpha = 1.05, .budget = 10s});
//   r.optimized;              // validated; the original when nothing improved
//   r.report.print(std::cout);
//
// Steps:
//  1. weight preprocessing (rewrite/preprocess.hpp): batchnorm folded into
//     the preceding conv, weight-only operators computed once;
//  2. graphs with more than `partition_threshold` operators are cut into parts
//     by search::partition (min-cut over capacities = rule matches a cut
//     would break), each part is searched on its own (the budget shared
//     evenly) and the results are stitched; then a short whole-graph search
//     (`cut_expansions`) lets rules that span the cuts apply;
//  3. relaxed backtracking search (search/backtracking.hpp) per part;
//  4. the result is validated; if it is not cheaper than the input under the
//     cost model, the input is returned unchanged.
#include <chrono>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "tsopt/cost/cost_model.hpp"
#include "tsopt/rewrite/apply.hpp"
#include "tsopt/rewrite/preprocess.hpp"
#include "tsopt/search/backtracking.hpp"
#include "tsopt/search/partition.hpp"

namespace tsopt {

struct optimize_options {
    double alpha = 1.05;
    std::chrono::duration<double> budget = std::chrono::seconds(30);
    std::size_t max_expansions = 100'000;  // over the whole run
    std::size_t max_queue = 10'000;
    std::uint64_t seed = 0x7a50;
    std::size_t top_k = 0;                 // distinct candidates to return (unpartitioned graphs)
    std::size_t partition_threshold = 30;  // operators; larger graphs are partitioned
    std::size_t cut_expansions = 16;       // whole-graph expansions after stitching parts
    bool preprocess = true;
    bool layouts = true;
};

struct optimize_report {
    double cost_before = 0, cost_after = 0;
    std::size_t parts = 1;
    std::size_t expansions = 0, generated = 0, dedup_hits = 0, rejected = 0, pruned = 0;
    std::map<std::string, int> rule_uses;
    search::stop_reason stopped = search::stop_reason::saturated;  // the most limiting of the parts'
    bool improved = false;
    std::chrono::duration<double> elapsed{};

    void print(std::ostream& os) const {
        os << "tsopt::optimize: cost " << cost_before << " -> " << cost_after;
        if (cost_before > 0) os << " (" << 100.0 * (cost_before - cost_after) / cost_before << "% lower)";
        os << (improved ? "" : ", kept the input") << "\n"
           << "parts " << parts << ", expanded " << expansions << ", generated " << generated << ", duplicates "
           << dedup_hits << ", rejected " << rejected << ", pruned " << pruned << "\n"
           << "stopped: " << search::to_string(stopped) << " after " << elapsed.count() << " s\n";
        if (rule_uses.empty()) os << "rules used: none\n";
        else {
            os << "rules used:\n";
            for (const auto& [name, n] : rule_uses) os << "  " << n << " x " << name << "\n";
        }
    }
};

struct optimize_result {
    graph optimized;
    optimize_report report;
    std::vector<graph> top_k;
};

namespace detail {

inline void merge_report(optimize_report& into, const search::report& r) {
    into.expansions += r.expansions;
    into.generated += r.generated;
    into.dedup_hits += r.dedup_hits;
    into.rejected += r.rejected;
    into.pruned += r.pruned;
    for (const auto& [n, k] : r.rule_uses) into.rule_uses[n] += k;
    if (static_cast<int>(r.stopped) > static_cast<int>(into.stopped)) into.stopped = r.stopped;
}

// Capacities for the partitioner: per node, the rule matches a cut there breaks.
inline std::vector<double> match_capacity(const graph& g, std::span<const rewrite::rule> rules) {
    rewrite::graph_index ix(g);
    std::vector<std::vector<std::size_t>> sets;
    for (const auto& r : rules)
        rewrite::for_each_match(ix, r, [&](const rewrite::match& m) {
            sets.emplace_back(m.nodes.begin(), m.nodes.end());
            return sets.size() < 200'000;
        });
    return search::spanning_capacity(g, sets);
}

}  // namespace detail

template <cost::cost_model Cost>
optimize_result optimize(const graph& input, std::span<const rewrite::rule> rules, Cost&& model, const optimize_options& o = {}) {
    const auto t0 = std::chrono::steady_clock::now();
    input.validate();
    optimize_result res;
    res.report.cost_before = static_cast<double>(model.graph_cost(input));

    rewrite::fold_cache cache;
    graph g = o.preprocess ? rewrite::preprocess(input, cache) : input;

    auto searcher = [&](std::size_t expansions, std::chrono::duration<double> budget, std::size_t top_k) {
        return search::backtracking{}
            .rules(rules)
            .alpha(o.alpha)
            .budget(budget)
            .max_expansions(expansions)
            .max_queue(o.max_queue)
            .seed(o.seed)
            .top_k(top_k)
            .layouts(o.layouts)
            .fold_weights(o.preprocess);
    };

    if (g.op_count() <= o.partition_threshold) {
        auto r = searcher(o.max_expansions, o.budget, o.top_k).run(g, model);
        detail::merge_report(res.report, r.rep);
        g = std::move(r.best);
        res.top_k = std::move(r.top_k);
    } else {
        auto parts = search::partition(g, detail::match_capacity(g, rules), {.max_part_ops = o.partition_threshold});
        std::vector<search::subgraph> subs;
        std::size_t nparts = 0;
        for (const auto& p : parts.parts) {
            std::size_t ops = 0;
            for (auto v : p) ops += g.nodes[v].kind == node_kind::op || g.nodes[v].kind == node_kind::opaque;
            if (ops > 0) ++nparts;
        }
        res.report.parts = nparts;
        const std::size_t share = std::max<std::size_t>(1, o.max_expansions / (nparts + 1));
        const auto time_share = o.budget / static_cast<double>(nparts + 1);
        std::vector<graph> optimized;
        subs.reserve(parts.parts.size());
        optimized.reserve(parts.parts.size());
        for (const auto& p : parts.parts) {
            auto sg = search::extract(g, p);
            if (sg.g.op_count() == 0) continue;
            auto r = searcher(share, time_share, 0).run(sg.g, model);
            detail::merge_report(res.report, r.rep);
            if (!(r.rep.cost_after < r.rep.cost_before)) continue;
            subs.push_back(std::move(sg));
            optimized.push_back(std::move(r.best));
        }
        std::vector<search::replacement> reps;
        for (std::size_t i = 0; i < subs.size(); ++i) reps.push_back({&subs[i], &optimized[i]});
        if (!reps.empty()) g = search::stitch(g, reps);
        // Rules spanning the cuts: a short search over the whole graph.
        if (o.cut_expansions > 0) {
            auto left = o.budget - (std::chrono::steady_clock::now() - t0);
            if (left > decltype(left)::zero()) {
                auto r = searcher(o.cut_expansions, left, 0).run(g, model);
                detail::merge_report(res.report, r.rep);
                g = std::move(r.best);
            }
        }
    }

    g.validate();
    double after = static_cast<double>(model.graph_cost(g));
    if (after < res.report.cost_before) {
        res.optimized = std::move(g);
        res.report.cost_after = after;
        res.report.improved = true;
    } else {
        res.optimized = input;
        res.report.cost_after = res.report.cost_before;
        res.report.rule_uses.clear();
    }
    if (res.top_k.empty() && o.top_k > 0) res.top_k.push_back(res.optimized);
    res.report.elapsed = std::chrono::steady_clock::now() - t0;
    return res;
}

}  // namespace tsopt
