// Optimizer benchmark (docs/benchmarks.md, "Optimizer"):
//  1. per zoo model at the papers' sizes: search time and analytical cost
//     before/after tsopt::optimize (target: under 30 s per model on 2 cores;
//     TASO needs up to 10 minutes, MetaFlow up to 5);
//  2. on small graphs (the parts MetaFlow-style partitioning cuts the small
//     zoo models into, at most --small-ops operators): the relaxed search
//     (alpha 1.05) against an exhaustive one (every rewrite enqueued until
//     the queue runs empty), cost ratio side by side.
// usage: optimizer_bench [--budget S] [--models a,b,..] [--small-ops N] [--no-exhaustive]
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

#include "../examples/rules.hpp"
#include "tsopt/cost/analytical.hpp"
#include "tsopt/optimize.hpp"
#include "tsopt/zoo/zoo.hpp"

using namespace tsopt;
using namespace std::chrono;

int main(int argc, char** argv) {
    double budget = 30;
    std::size_t small_ops = 10;
    bool exhaustive = true;
    std::vector<std::string> names;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) throw error(a + " needs a value");
            return argv[++i];
        };
        try {
            if (a == "--budget") budget = std::stod(next());
            else if (a == "--small-ops") small_ops = std::stoul(next());
            else if (a == "--no-exhaustive") exhaustive = false;
            else if (a == "--models") {
                std::stringstream ss(next());
                for (std::string n; std::getline(ss, n, ',');) names.push_back(n);
            } else {
                std::cerr << "usage: optimizer_bench [--budget S] [--models a,b,..] [--small-ops N] [--no-exhaustive]\n";
                return 1;
            }
        } catch (const std::exception& e) {
            std::cerr << "optimizer_bench: " << a << ": " << e.what() << "\n";
            return 1;
        }
    }
    if (names.empty())
        for (const auto& m : zoo::models()) names.push_back(std::string(m.name));
    examples::example_rules rules(examples::rule_source::all);
    cost::analytical model;
    std::printf("rules: %zu (axiom-derived + generated, all proven/validated)\n\n", rules.rules().size());

    std::printf("%-14s %6s %6s %12s %12s %7s %9s  %s\n", "model", "ops", "ops'", "cost ms", "cost' ms", "ratio", "search s",
                "stopped");
    for (const auto& n : names) {
        graph g = zoo::build(n, {});
        auto t0 = steady_clock::now();
        auto r = optimize(g, rules.rules(), model, {.budget = duration<double>(budget)});
        double secs = duration<double>(steady_clock::now() - t0).count();
        std::printf("%-14s %6zu %6zu %12.3f %12.3f %6.3fx %9.1f  %s\n", n.c_str(), g.op_count(), r.optimized.op_count(),
                    r.report.cost_before, r.report.cost_after, r.report.cost_before / r.report.cost_after, secs,
                    std::string(search::to_string(r.report.stopped)).c_str());
        std::fflush(stdout);
    }
    if (!exhaustive) return 0;

    std::printf("\nsmall graphs (parts of <= %zu operators of the small zoo models): relaxed vs exhaustive search\n", small_ops);
    std::printf("%-14s %6s %12s %12s %7s %10s\n", "model", "parts", "relaxed", "exhaustive", "ratio", "saturated");
    for (const auto& n : names) {
        graph g;
        try {
            g = rewrite::preprocess(zoo::build(n, {.image = 64, .width_div = 8, .depth_div = 4, .length = 4}));
        } catch (const error& e) {
            std::printf("%-14s skipped: %s\n", n.c_str(), e.what());
            continue;
        }
        auto parts = search::partition(g, std::vector<double>(g.size(), 1.0), {.max_part_ops = small_ops});
        double relaxed = 0, full = 0;
        std::size_t count = 0, saturated = 0;
        for (const auto& p : parts.parts) {
            auto sg = search::extract(g, p);
            if (sg.g.op_count() < 2) continue;
            auto a = search::backtracking{}.rules(rules.rules()).alpha(1.05).budget(2s).run(sg.g, model);
            auto b = search::backtracking{}.rules(rules.rules()).alpha(1e9).budget(5s).max_expansions(5000).run(sg.g, model);
            relaxed += a.rep.cost_after;
            full += b.rep.cost_after;
            saturated += b.rep.stopped == search::stop_reason::saturated;
            ++count;
        }
        std::printf("%-14s %6zu %12.4f %12.4f %6.3fx %6zu/%zu\n", n.c_str(), count, relaxed, full,
                    full > 0 ? relaxed / full : 1.0, saturated, count);
        std::fflush(stdout);
    }
    return 0;
}
