// GPU: every operator case (graphs.hpp) on the cuDNN/cuBLAS backend in all
// four run modes against the reference backend, relative error <= 1e-4 with
// TF32 disabled. Exits 77 (SKIPPED) without a CUDA device (gpu_main.hpp).
#include "gpu_main.hpp"
#include "graphs.hpp"
#include "tsopt/backend/reference/executor.hpp"

using namespace tsopt;
using namespace tsopt::test::cuda;

namespace {

backend::cudnn make_backend(bool fuse) {
    backend::cudnn b({.persist = false, .fuse_conv_relu = fuse});
    b.opaque_impls["Negate"] = negate_impl;
    return b;
}

void check_all_modes(backend::cudnn& b, const case_graph& c) {
    backend::reference ref;
    ref.opaque_impls["Negate"] = negate_impl;
    auto in = backend::random_inputs(c.g, 11);
    auto want = ref.execute(c.g, in);
    for (auto m : {backend::run_mode::sequential, backend::run_mode::sequential_graph, backend::run_mode::multi_stream,
                   backend::run_mode::multi_stream_graph}) {
        INFO("graph '", c.name, "', mode ", backend::to_string(m));
        std::vector<tensor<float>> got;
        REQUIRE_NOTHROW(got = b.execute(c.g, in, m));
        REQUIRE(got.size() == want.size());
        for (std::size_t k = 0; k < got.size(); ++k) {
            INFO("output ", k, " shape ", want[k].shape.str());
            CHECK(relative_error(got[k], want[k]) <= 1e-4);
        }
    }
}

}  // namespace

TEST_CASE("cudnn: every operator case matches the reference in every run mode") {
    auto b = make_backend(true);
    for (const auto& c : op_cases()) check_all_modes(b, c);
}

TEST_CASE("cudnn: convolutions with a separate activation (no fused conv+relu) match too") {
    auto b = make_backend(false);
    for (const auto& c : op_cases())
        if (c.name.rfind("conv", 0) == 0) check_all_modes(b, c);
}

TEST_CASE("cudnn: measured convolution algorithms (cudnnFind) match") {
    backend::cudnn b({.persist = false, .find_conv_algorithms = true});
    for (const auto& c : op_cases())
        if (c.name.rfind("conv", 0) == 0) check_all_modes(b, c);
}

TEST_CASE("cudnn: a replayed plan reads new inputs each time") {
    auto b = make_backend(true);
    const auto c = parallel_cases()[0];
    backend::reference ref;
    for (std::uint64_t seed : {1, 2, 3}) {
        auto in = backend::random_inputs(c.g, seed);
        auto got = b.execute(c.g, in);
        auto want = ref.execute(c.g, in);
        CHECK(relative_error(got[0], want[0]) <= 1e-4);
    }
    CHECK(b.plan_compiles == 1);
    CHECK(b.plan_reuses == 2);
}
