// GPU benchmark of the cuDNN/cuBLAS backend: per zoo model, median latency
//   unoptimized, sequential (one stream, no CUDA Graph)
//   optimized,   sequential
//   optimized,   sequential + CUDA Graph
//   optimized,   multi-stream + CUDA Graph (Nimble's streams, AutoGraph's runtime)
// The optimizer is tsopt::optimize with rules from every axiom of the
// specification, priced by cost::measured<backend::cudnn> (per-operator CUDA
// event timings, cached on disk); among its top-k candidates the one fastest
// end to end on the GPU is kept (pick_fastest). The optimized graph's outputs
// are checked against the unoptimized graph's.
//
//   cuda_bench [--models resnet50,bert] [--batch 1] [--image 0] [--width-div 1]
//              [--budget 30] [--top-k 4] [--reps 50]
//
// Without a usable CUDA device it prints why and exits with status 77.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>

#include "tsopt/backend/cudnn/executor.hpp"
#include "tsopt/cost/sum.hpp"
#include "tsopt/optimize.hpp"
#include "tsopt/rewrite/from_axiom.hpp"
#include "tsopt/spec/axioms.hpp"
#include "tsopt/zoo/zoo.hpp"

using namespace tsopt;
using backend::run_mode;

namespace {

struct args {
    std::vector<std::string> models;
    zoo::options zoo{};
    double budget = 30;
    std::size_t top_k = 4;
    int reps = 50;
};

args parse(int argc, char** argv) {
    args a;
    for (int i = 1; i < argc; ++i) {
        std::string k = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) throw error("cuda_bench: " + k + " needs a value");
            return argv[++i];
        };
        if (k == "--models") {
            std::stringstream ss(next());
            for (std::string m; std::getline(ss, m, ',');) a.models.push_back(m);
        } else if (k == "--batch") a.zoo.batch = std::stoi(next());
        else if (k == "--image") a.zoo.image = std::stoi(next());
        else if (k == "--width-div") a.zoo.width_div = std::stoi(next());
        else if (k == "--budget") a.budget = std::stod(next());
        else if (k == "--top-k") a.top_k = static_cast<std::size_t>(std::stoul(next()));
        else if (k == "--reps") a.reps = std::stoi(next());
        else throw error("cuda_bench: unknown argument '" + k + "'");
    }
    if (a.models.empty())
        for (const auto& m : zoo::models()) a.models.emplace_back(m.name);
    return a;
}

}  // namespace

int main(int argc, char** argv) try {
    args a = parse(argc, argv);
    if (!backend::cudnn::available()) {
        std::printf("cuda_bench: no GPU: %s. Nothing was measured; run this on a machine with a CUDA device.\n",
                    backend::cudnn::unavailable_reason().c_str());
        return 77;
    }
    backend::cudnn b;
    std::printf("device: %s\n%s\nmeasurement cache: %s\n\n", backend::cudnn_impl::device_name().c_str(),
                backend::cudnn_impl::library_versions().c_str(), b.measurements().file().string().c_str());

    rewrite::rule_set rules;
    for (const auto& ax : spec::all_axioms) {
        try {
            rules.add(ax);
        } catch (const error& e) {
            std::cerr << "cuda_bench: skipping axiom " << ax.name << ": " << e.what() << "\n";
        }
    }

    std::printf("%-14s %10s %10s %10s %10s %9s %8s %7s\n", "model", "unopt seq", "opt seq", "opt graph", "opt m-s+g", "speedup", "streams",
                "rel err");
    for (const auto& name : a.models) {
        graph g = zoo::build(name, a.zoo);
        auto in = backend::random_inputs(g, 1);
        double unopt = b.time_end_to_end(g, in, a.reps, run_mode::sequential);

        cost::measured<backend::cudnn> model{b};
        auto r = optimize(g, rules.rules(), model,
                          {.budget = std::chrono::duration<double>(a.budget), .top_k = a.top_k});
        std::vector<graph> cands{r.optimized};
        for (auto& c : r.top_k) cands.push_back(c);
        auto pick = b.pick_fastest(cands, in, 10, run_mode::multi_stream_graph);
        const graph& best = cands[pick.best];

        auto want = b.execute(g, in, run_mode::sequential);
        auto got = b.execute(best, in, run_mode::multi_stream_graph);
        double err = 0;
        for (std::size_t k = 0; k < got.size(); ++k) err = std::max(err, relative_error(got[k], want[k]));

        double seq = b.time_end_to_end(best, in, a.reps, run_mode::sequential);
        double seq_graph = b.time_end_to_end(best, in, a.reps, run_mode::sequential_graph);
        double par_graph = b.time_end_to_end(best, in, a.reps, run_mode::multi_stream_graph);
        std::printf("%-14s %10.3f %10.3f %10.3f %10.3f %8.2fx %8zu %7.1e\n", name.c_str(), unopt, seq, seq_graph, par_graph,
                    unopt / par_graph, b.stats(best, run_mode::multi_stream_graph).streams, err);
        std::fflush(stdout);
    }
    std::printf("\ntimes: median ms of %d runs, inputs resident on the device; speedup = unopt seq / opt multi-stream+graph\n", a.reps);
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "cuda_bench: %s\n", e.what());
    return 1;
}
