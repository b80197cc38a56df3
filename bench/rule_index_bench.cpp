// Optimizer throughput against the size of the rule set (issue #19, docs/benchmarks.md
// "Rule index"): per rule set and zoo model (small variants),
//  - matching one graph: every rule over the whole graph (no index) against
//    rewrite::rule_index, both finding the same matches;
//  - search: expansions per second of the relaxed backtracking search
//    (which matches through the index), over a fixed number of expansions
//    (median of --reps runs), and the graphs it generated per second: a
//    larger set applies more rules per expansion, so its expansions slow
//    down by as many more graphs as it makes, whatever matching costs.
// Rule sets: the base (the built-in default set, or --base LISTING, e.g. an
// N=2 run's), and samples of 300, 3,000, 30,000 ...
// rules (every k-th rule, so each sample spreads over all operators) of the
// union of the listings given (tsopt-gen --listing; loaded and checked like
// tsopt optimize --rules FILE). Sizes beyond the union are left out.
//
// Besides expansions per second, each row gives the graphs the search
// generated, the applications refused (a target that does not fit) and the
// duplicates, over its expansions: the work per expansion grows with them;
// and how many of the new graphs were queued (within alpha of the best).
//
// usage: rule_index_bench [--listing FILE]... [--base LISTING] [--sizes 300,3000,30000]
//                         [--models resnet18,...] [--expansions N] [--reps N] [--top-rules N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tsopt/cost/analytical.hpp"
#include "tsopt/rewrite/rule_index.hpp"
#include "tsopt/rules/default.hpp"
#include "tsopt/rules/load.hpp"
#include "tsopt/search/backtracking.hpp"
#include "tsopt/zoo/zoo.hpp"

using namespace tsopt;
using clock_type = std::chrono::steady_clock;

namespace {

std::vector<std::string> split_list(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    for (std::string x; std::getline(ss, x, ',');)
        if (!x.empty()) out.push_back(x);
    return out;
}

graph small_variant(const std::string& name) {
    for (int image : {64, 96, 128, 160, 224, 299}) {
        try {
            return zoo::build(name, {.image = image, .width_div = 8, .depth_div = 4, .length = 4});
        } catch (const error&) {
        }
    }
    throw error("no small variant of '" + name + "' builds");
}

double seconds_since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }

struct rule_set_row {
    std::string name;
    std::vector<rewrite::rule> rules;
};

}  // namespace

int main(int argc, char** argv) try {
    std::vector<std::string> listings, models{"resnet18", "inception_v3", "nasnet_a", "bert"};
    std::vector<std::size_t> sizes{300, 3000, 30000};
    std::size_t expansions = 40;
    int reps = 5;
    std::size_t top_rules = 0;  // print the rules with the most matches per model (largest set)
    std::string base_listing;   // the set the others are compared with; default: the built-in one
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) throw error(a + ": missing value");
            return argv[++i];
        };
        if (a == "--listing") listings.push_back(next());
        else if (a == "--sizes") {
            sizes.clear();
            for (auto& s : split_list(next())) sizes.push_back(std::stoul(s));
        } else if (a == "--models") models = split_list(next());
        else if (a == "--expansions") expansions = std::stoul(next());
        else if (a == "--reps") reps = std::stoi(next());
        else if (a == "--top-rules") top_rules = std::stoul(next());
        else if (a == "--base") base_listing = next();
        else {
            std::cerr << "usage: rule_index_bench [--listing FILE]... [--base LISTING] [--sizes 300,3000,30000] "
                         "[--models a,b] [--expansions N] [--reps N] [--top-rules N]\n";
            return a == "--help" ? 0 : 2;
        }
    }

    // The union of the listings, each rule text once.
    std::vector<std::unique_ptr<rules::loaded_rules>> loaded;
    std::vector<rewrite::rule> pool;
    std::set<std::string_view> texts;
    for (const auto& path : listings) {
        loaded.push_back(std::make_unique<rules::loaded_rules>(rules::load_listing(path)));
        for (const auto& r : loaded.back()->rules())
            if (texts.insert(r.text).second) pool.push_back(r);
        std::fprintf(stderr, "loaded %s: %zu rules (union %zu)\n", path.c_str(), loaded.back()->rules().size(), pool.size());
    }
    std::vector<rule_set_row> sets;
    if (base_listing.empty()) {
        auto built_in = tsopt::rules::default_rules();
        sets.push_back({"default", std::vector<rewrite::rule>(built_in.begin(), built_in.end())});
    } else {
        loaded.push_back(std::make_unique<rules::loaded_rules>(rules::load_listing(base_listing)));
        sets.push_back({"base", std::vector<rewrite::rule>(loaded.back()->rules().begin(), loaded.back()->rules().end())});
    }
    for (std::size_t k : sizes) {
        if (k > pool.size()) {
            std::fprintf(stderr, "size %zu left out: the listings hold %zu rules\n", k, pool.size());
            continue;
        }
        rule_set_row row{"sample " + std::to_string(k), {}};
        for (std::size_t i = 0; i < k; ++i) row.rules.push_back(pool[i * pool.size() / k]);
        sets.push_back(std::move(row));
    }
    if (!pool.empty() && sets.back().rules.size() < pool.size()) sets.push_back({"all " + std::to_string(pool.size()), pool});

    std::printf("%-14s %-13s %7s %8s | %12s %12s %8s | %10s %9s | %10s %9s | %8s %8s %8s %8s\n", "rule set", "model", "rules",
                "matches", "match all ms", "indexed ms", "speedup", "expand/s", "vs base", "graphs/s", "vs base", "graphs", "rejected",
                "dupes", "queued");
    std::vector<double> base_rate(models.size(), 0), base_graph_rate(models.size(), 0);
    for (const auto& set : sets) {
        const rewrite::rule_index idx(set.rules);
        for (std::size_t mi = 0; mi < models.size(); ++mi) {
            graph g = small_variant(models[mi]);
            rewrite::graph_index ix(g);
            std::size_t brute_matches = 0, indexed_matches = 0;
            auto t0 = clock_type::now();
            for (int r = 0; r < reps; ++r) {
                brute_matches = 0;
                for (const auto& rule : set.rules) brute_matches += rewrite::for_each_match(ix, rule, [](const rewrite::match&) { return true; });
            }
            double brute_ms = seconds_since(t0) * 1e3 / reps;
            t0 = clock_type::now();
            for (int r = 0; r < reps; ++r)
                indexed_matches = idx.for_each_match(ix, [](std::size_t, const rewrite::match&) { return true; });
            double indexed_ms = seconds_since(t0) * 1e3 / reps;
            if (brute_matches != indexed_matches)
                throw error("the index found " + std::to_string(indexed_matches) + " matches, matching every rule " +
                            std::to_string(brute_matches));

            if (top_rules && &set == &sets.back()) {
                std::vector<std::pair<std::size_t, std::size_t>> per_rule(set.rules.size());
                for (std::size_t i = 0; i < per_rule.size(); ++i) per_rule[i] = {0, i};
                idx.for_each_match(ix, [&](std::size_t ri, const rewrite::match&) { ++per_rule[ri].first; return true; });
                std::sort(per_rule.rbegin(), per_rule.rend());
                for (std::size_t i = 0; i < std::min(top_rules, per_rule.size()) && per_rule[i].first; ++i)
                    std::printf("    %6zu matches: %s\n", per_rule[i].first, std::string(set.rules[per_rule[i].second].text).c_str());
            }
            // The search --reps times (deterministic: the same graphs each
            // time), its median time.
            std::vector<double> seconds;
            search::report rep;
            for (int r = 0; r < reps; ++r) {
                rep = search::backtracking{}
                          .rules(set.rules)
                          .budget(std::chrono::seconds(120))
                          .max_expansions(expansions)
                          .run(g, cost::analytical{})
                          .rep;
                seconds.push_back(rep.elapsed.count());
            }
            std::sort(seconds.begin(), seconds.end());
            const double median_s = seconds[seconds.size() / 2];
            const double rate = static_cast<double>(rep.expansions) / median_s;
            const double graph_rate = static_cast<double>(rep.generated) / median_s;
            if (&set == &sets.front()) {
                base_rate[mi] = rate;
                base_graph_rate[mi] = graph_rate;
            }
            std::printf("%-14s %-13s %7zu %8zu | %12.2f %12.2f %7.1fx | %10.1f %8.2fx | %10.0f %8.2fx | %8zu %8zu %8zu %8zu\n",
                        set.name.c_str(), models[mi].c_str(), set.rules.size(), indexed_matches, brute_ms, indexed_ms,
                        brute_ms / indexed_ms, rate, base_rate[mi] > 0 ? rate / base_rate[mi] : 0.0, graph_rate,
                        base_graph_rate[mi] > 0 ? graph_rate / base_graph_rate[mi] : 0.0, rep.generated, rep.rejected,
                        rep.dedup_hits, rep.enqueued);
            std::fflush(stdout);
        }
    }
    return 0;
} catch (const std::exception& e) {
    std::cerr << "rule_index_bench: " << e.what() << "\n";
    return 1;
}
