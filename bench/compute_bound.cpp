// How far any FLOP-preserving rewrite could speed a zoo model up on this
// CPU: the original graph's per-step profile on oneDNN, its convolutions and
// matmuls (the operators whose FLOPs no proven rewrite removes) with their
// FLOP rate, and the bound
//
//   end-to-end time / (their FLOPs at the fastest rate any of them reached
//                      + the time of the grouped / depthwise convolutions)
//
// i.e. every dense convolution and matmul at the best rate seen in the same
// profile, grouped convolutions (memory-bound, a few FLOPs per byte) as they
// run now, every other operator free. A ratio target above the bound cannot
// be met by rewriting the graph; only by a faster machine or fewer FLOPs.
//
//   build/bench/compute_bound [--reps N] [model ...]   (default: nasnet_a bert resnext50 nasrnn)
//
// Set OMP_NUM_THREADS as for bench/models_bench.sh (1 there).
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "tsopt/backend/dnnl/executor.hpp"
#include "tsopt/cost/analytical.hpp"
#include "tsopt/zoo/zoo.hpp"

using namespace tsopt;

namespace {

struct compute_profile {
    double e2e_ms = 0, profile_ms = 0, compute_ms = 0, gflop = 0, best_rate = 0;
    double grouped_ms = 0, grouped_gflop = 0;
    std::string best_step;
};

compute_profile profile_model(const std::string& model, int reps) {
    graph g = zoo::build(model, {.seed = 1});
    backend::dnnl be(backend::dnnl::options{.persist = false});
    auto in = backend::random_inputs(g, 1);
    compute_profile b;
    b.e2e_ms = be.time_end_to_end(g, in, reps);
    for (const auto& st : be.profile(g, in, reps)) {
        b.profile_ms += st.ms;
        const node& n = g.nodes[static_cast<std::size_t>(st.node)];
        if (st.conversion || !(n.is_op(spec::op_kind::conv2d) || n.is_op(spec::op_kind::matmul))) continue;
        const double flop = cost::op_flops(g, static_cast<std::size_t>(st.node));
        b.compute_ms += st.ms;
        b.gflop += flop / 1e9;
        if (n.is_op(spec::op_kind::conv2d) && g.shape_of(n.inputs[0])[1] != g.shape_of(n.inputs[1])[1]) {
            b.grouped_ms += st.ms;
            b.grouped_gflop += flop / 1e9;
            continue;
        }
        // Steps under 10 MFLOP take microseconds: timer granularity, not rate.
        if (flop >= 1e7 && st.ms > 0 && flop / st.ms / 1e6 > b.best_rate) {
            b.best_rate = flop / st.ms / 1e6;
            b.best_step = n.describe() + " " + g.shape_of(n.inputs[0]).str() + " x " + g.shape_of(n.inputs[1]).str();
        }
    }
    return b;
}

}  // namespace

int main(int argc, char** argv) {
    int reps = 10;
    std::vector<std::string> models;
    for (int a = 1; a < argc; ++a) {
        std::string s = argv[a];
        if (s == "--reps" && a + 1 < argc) {
            std::string_view v = argv[++a];
            if (std::from_chars(v.data(), v.data() + v.size(), reps).ec != std::errc{} || reps < 1) {
                std::cerr << "compute_bound: --reps wants a positive integer, got '" << v << "'\n";
                return 2;
            }
        } else if (s == "--help") {
            std::cout << "usage: compute_bound [--reps N] [model ...]\n";
            return 0;
        } else
            models.push_back(s);
    }
    if (models.empty()) models = {"nasnet_a", "bert", "resnext50", "nasrnn"};
    const char* omp = std::getenv("OMP_NUM_THREADS");
    std::printf("compute_bound: OMP_NUM_THREADS=%s, %d rounds per figure (profile: minimum per step; end to end: median)\n",
                omp ? omp : "(unset)", reps);
    std::printf("%-14s %9s %11s %14s %8s %10s %10s %9s  %s\n", "model", "e2e_ms", "profile_ms", "conv+matmul_ms", "GFLOP",
                "mean_GF/s", "best_GF/s", "bound", "fastest step");
    int status = 0;
    for (const auto& m : models) {
        std::fprintf(stderr, "compute_bound: profiling %s ...\n", m.c_str());
        try {
            compute_profile b = profile_model(m, reps);
            const double floor_ms = b.best_rate > 0 ? (b.gflop - b.grouped_gflop) / b.best_rate * 1e3 + b.grouped_ms : 0;
            char bound[32] = "-";
            if (floor_ms > 0) std::snprintf(bound, sizeof bound, "%.2fx", b.e2e_ms / floor_ms);
            std::printf("%-14s %9.3f %11.3f %8.3f (%2.0f%%) %8.2f %10.1f %10.1f %9s  %s\n", m.c_str(), b.e2e_ms, b.profile_ms,
                        b.compute_ms, 100 * b.compute_ms / b.profile_ms, b.gflop, b.gflop / b.compute_ms * 1e3, b.best_rate, bound,
                        b.best_step.c_str());
        } catch (const std::exception& e) {
            std::printf("%-14s failed: %s\n", m.c_str(), e.what());
            status = 1;
        }
    }
    std::printf("bound = e2e / (dense GFLOP at best_GF/s + grouped convs' ms): the most any rewrite keeping these FLOPs\n"
                "could give (\"-\": no convolution or matmul of 10 MFLOP, the model is not compute-bound)\n");
    return status;
}
