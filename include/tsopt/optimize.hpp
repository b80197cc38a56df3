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
//  4. with `pet` on (PET's joint optimization): the rule-optimized graph is
//     mutated by pet::mutants (partially equivalent transformations whose
//     non-equivalent regions are recomputed by correction kernels, each
//     candidate exactly equivalent and re-verified), the cheapest candidates
//     are searched again with the rules, and the best is kept; repeated while
//     a round improves and budget remains;
//  5. the result is validated; if it is not cheaper than the input under the
//     cost model, the input is returned unchanged.
#include <algorithm>
#include <chrono>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "tsopt/cost/cost_model.hpp"
#include "tsopt/pet/optimizer.hpp"
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
    // PET's corrected mutants mixed with the rules (joint optimization).
    bool pet = false;
    std::size_t pet_rounds = 2;   // mutate -> re-search rounds while they improve
    std::size_t pet_seeds = 3;    // cheapest corrected mutants searched further per round
    pet::options pet_options{};
};

struct optimize_report {
    double cost_before = 0, cost_after = 0;
    std::size_t parts = 1;
    std::size_t expansions = 0, generated = 0, dedup_hits = 0, rejected = 0, pruned = 0;
    std::map<std::string, int> rule_uses;
    std::map<std::string, int> pet_uses;  // PET mutation families in the result
    std::size_t pet_candidates = 0;       // corrected mutants considered
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
        if (pet_candidates > 0) {
            os << "PET: " << pet_candidates << " corrected mutants considered";
            if (pet_uses.empty()) os << ", none kept\n";
            else {
                os << ", kept:\n";
                for (const auto& [family, n] : pet_uses) os << "  " << n << " x " << family << "\n";
            }
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

    // Rule search over the whole graph, or per part with stitching.
    auto rule_search = [&](graph g, std::chrono::duration<double> budget, std::size_t expansions, bool keep_top_k) {
        const auto started = std::chrono::steady_clock::now();
        if (g.op_count() <= o.partition_threshold) {
            auto r = searcher(expansions, budget, keep_top_k ? o.top_k : 0).run(g, model);
            detail::merge_report(res.report, r.rep);
            g = std::move(r.best);
            if (keep_top_k) res.top_k = std::move(r.top_k);
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
            // Each part gets an even share of what is left, so time a part
            // leaves unused passes on to the next (the +1: the cut search).
            std::size_t parts_left = nparts + 1, expansions_left = expansions;
            std::vector<graph> optimized;
            subs.reserve(parts.parts.size());
            optimized.reserve(parts.parts.size());
            for (const auto& p : parts.parts) {
                auto sg = search::extract(g, p);
                if (sg.g.op_count() == 0) continue;
                const auto time_left = budget - (std::chrono::steady_clock::now() - started);
                const std::size_t share = std::max<std::size_t>(1, expansions_left / parts_left);
                auto r = searcher(share, time_left / static_cast<double>(parts_left), 0).run(sg.g, model);
                --parts_left;
                expansions_left -= std::min(expansions_left, r.rep.expansions);
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
                auto left = budget - (std::chrono::steady_clock::now() - started);
                if (left > decltype(left)::zero()) {
                    auto r = searcher(o.cut_expansions, left, 0).run(g, model);
                    detail::merge_report(res.report, r.rep);
                    g = std::move(r.best);
                }
            }
        }
        return g;
    };

    auto budget_left = [&] { return o.budget - (std::chrono::steady_clock::now() - t0); };
    // What preprocessing took is part of the budget.
    g = rule_search(std::move(g), o.pet ? budget_left() / 2 : budget_left(), o.max_expansions, true);

    // PET joint optimization: corrected mutants of the current best are
    // searched again with the rules; each round keeps the cheapest result.
    for (std::size_t round = 0; o.pet && round < o.pet_rounds && budget_left() > decltype(budget_left())::zero(); ++round) {
        pet::options po = o.pet_options;
        po.budget = std::min<std::chrono::duration<double>>(po.budget, budget_left() / 2);
        auto cands = pet::mutants(g, po);
        res.report.pet_candidates += cands.size();
        std::vector<std::pair<double, std::size_t>> by_cost;
        for (std::size_t i = 0; i < cands.size(); ++i) by_cost.push_back({static_cast<double>(model.graph_cost(cands[i].g)), i});
        std::sort(by_cost.begin(), by_cost.end());
        double best = static_cast<double>(model.graph_cost(g));
        std::optional<std::size_t> kept;
        graph kept_graph;
        const std::size_t seeds = std::min(o.pet_seeds, by_cost.size());
        for (std::size_t s = 0; s < seeds && budget_left() > decltype(budget_left())::zero(); ++s) {
            const auto share = budget_left() / static_cast<double>(seeds - s);
            graph h = rule_search(cands[by_cost[s].second].g, share, std::max<std::size_t>(1, o.max_expansions / 4), false);
            double c = static_cast<double>(model.graph_cost(h));
            if (c < best) {
                best = c;
                kept = by_cost[s].second;
                kept_graph = std::move(h);
            }
        }
        if (!kept) break;
        ++res.report.pet_uses[cands[*kept].family];
        g = std::move(kept_graph);
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
