// A consumer of the installed GPU backend (pkg-config tsopt-cuda, CMake
// tsopt::cuda): optimizes a small SqueezeNet with the shipped rules, runs
// the original and the optimized graph on cuDNN/cuBLAS (multi-stream CUDA
// Graphs) and checks both against the reference executor. Without a CUDA
// device it says why and exits 77, the skip code of consumers_test.py.
#include <tsopt/backend/cudnn/executor.hpp>
#include <tsopt/backend/reference/executor.hpp>
#include <tsopt/cost/analytical.hpp>
#include <tsopt/optimize.hpp>
#include <tsopt/rules/default.hpp>
#include <tsopt/zoo/zoo.hpp>

#include <cstdio>
#include <cstdlib>

int main() {
    using namespace std::chrono_literals;
    ::setenv("NVIDIA_TF32_OVERRIDE", "0", 1);  // exact fp32, as the reference computes
    if (!tsopt::backend::cudnn::available()) {
        std::printf("SKIPPED: %s\n", tsopt::backend::cudnn::unavailable_reason().c_str());
        return 77;
    }
    tsopt::graph g = tsopt::zoo::build("squeezenet", {.image = 48, .width_div = 8, .depth_div = 4});
    auto r = tsopt::optimize(g, tsopt::rules::default_rules(), tsopt::cost::analytical{}, {.budget = 2s});
    auto in = tsopt::backend::random_inputs(g, 5);
    auto want = tsopt::backend::reference{}.execute(g, in);
    tsopt::backend::cudnn gpu({.persist = false});
    double worst = 0;
    for (const tsopt::graph* h : {&g, &r.optimized}) {
        auto got = gpu.execute(*h, in);
        for (std::size_t k = 0; k < got.size(); ++k) worst = std::max(worst, tsopt::relative_error(got[k], want[k]));
    }
    std::printf("cuDNN: original %.3f ms, optimized %.3f ms; worst relative error against the reference %.2e\n",
                gpu.time_end_to_end(g, in), gpu.time_end_to_end(r.optimized, in), worst);
    return worst <= 1e-3 ? 0 : 1;  // deep nets on cuDNN: 1e-4..1e-3 (tests/cuda)
}
