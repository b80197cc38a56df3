// Per-operator time on the oneDNN backend against the reference backend,
// side by side, plus a few zoo models end to end.
//
//   build-dnnl/bench/dnnl_ops_bench [--quick]
//
// Reference: median wall time of executing the one-node graph (inputs copied,
// simple loops). oneDNN "op": backend::dnnl::measure (the node's own
// primitive, median); "e2e": time_end_to_end of the same one-node graph
// (input copy, layout conversions, output copy included). Measurements go to
// a throw-away cache so every run measures afresh.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "tsopt/backend/dnnl/executor.hpp"
#include "tsopt/backend/reference/executor.hpp"
#include "tsopt/zoo/zoo.hpp"

using namespace tsopt;

namespace {

double median_ms(int reps, auto&& f) {
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        f();
        t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

struct bench_case {
    std::string what;
    graph g;
};

graph one(auto&& build) {
    graph g;
    build(g);
    return g;
}

}  // namespace

int main(int argc, char** argv) {
    bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
    std::mt19937_64 rng(1);
    std::vector<bench_case> cases;
    const std::int64_t C = quick ? 32 : 64, HW = quick ? 28 : 56;
    cases.push_back({"conv 3x3 " + std::to_string(C) + "->" + std::to_string(C) + " relu", one([&](graph& g) {
                         g.mark_output(g.conv2d(g.input("x", {1, C, HW, HW}), g.weight("w", {C, C, 3, 3}, rng), {.act = relu}));
                     })});
    cases.push_back({"conv 1x1 stride 2", one([&](graph& g) {
                         g.mark_output(g.conv2d(g.input("x", {1, C, HW, HW}), g.weight("w", {2 * C, C, 1, 1}, rng), {.stride = 2}));
                     })});
    cases.push_back({"depthwise 3x3", one([&](graph& g) {
                         g.mark_output(g.conv2d(g.input("x", {1, C, HW, HW}), g.weight("w", {C, 1, 3, 3}, rng)));
                     })});
    cases.push_back({"grouped conv (32 groups)", one([&](graph& g) {
                         g.mark_output(g.conv2d(g.input("x", {1, 128, HW / 2, HW / 2}), g.weight("w", {128, 4, 3, 3}, rng)));
                     })});
    cases.push_back({"dilated conv 3x3 d2", one([&](graph& g) {
                         g.mark_output(g.conv2d(g.input("x", {1, C, HW, HW}), g.weight("w", {C, C, 3, 3}, rng), {.dilation = 2}));
                     })});
    cases.push_back({"matmul 256x512x512", one([&](graph& g) {
                         g.mark_output(g.matmul(g.input("a", {256, 512}), g.weight("b", {512, 512}, rng)));
                     })});
    cases.push_back({"batched matmul 16x64x64x64", one([&](graph& g) {
                         g.mark_output(g.matmul(g.input("a", {16, 64, 64}), g.input("b", {16, 64, 64})));
                     })});
    cases.push_back({"maxpool 3x3 s2", one([&](graph& g) {
                         g.mark_output(g.maxpool(g.input("x", {1, C, HW, HW}), {.kernel = 3, .stride = 2}));
                     })});
    cases.push_back({"avgpool 3x3 s1", one([&](graph& g) { g.mark_output(g.avgpool(g.input("x", {1, C, HW, HW}))); })});
    cases.push_back({"ewadd", one([&](graph& g) {
                         g.mark_output(g.ewadd(g.input("a", {1, C, HW, HW}), g.input("b", {1, C, HW, HW})));
                     })});
    cases.push_back({"ewmul broadcast [C,1,1]", one([&](graph& g) {
                         g.mark_output(g.ewmul(g.input("a", {1, C, HW, HW}), g.weight("b", {C, 1, 1}, rng)));
                     })});
    cases.push_back({"batchnorm", one([&](graph& g) {
                         g.mark_output(g.batchnorm(g.input("x", {1, C, HW, HW}), g.weight("s", {C}, rng), g.weight("t", {C}, rng)));
                     })});
    cases.push_back({"sigmoid", one([&](graph& g) { g.mark_output(g.sigmoid(g.input("x", {1, C, HW, HW}))); })});
    cases.push_back({"concat x3 (channels)", one([&](graph& g) {
                         g.mark_output(g.concat(1, {g.input("a", {1, C, HW, HW}), g.input("b", {1, C, HW, HW}), g.input("c", {1, C, HW, HW})}));
                     })});
    cases.push_back({"split (channels)", one([&](graph& g) {
                         auto [p, q] = g.split(1, int(C / 2), g.input("x", {1, C, HW, HW}));
                         g.mark_output(p);
                         g.mark_output(q);
                     })});
    cases.push_back({"transpose NCHW->NHWC", one([&](graph& g) {
                         g.mark_output(g.transpose(g.input("x", {1, C, HW, HW}), {0, 2, 3, 1}));
                     })});
    cases.push_back({"pad 1,1,1,1", one([&](graph& g) { g.mark_output(g.pad(g.input("x", {1, C, HW, HW}), 1, 1, 1, 1)); })});
    cases.push_back({"softmax [64,1000]", one([&](graph& g) { g.mark_output(g.softmax(g.input("x", {64, 1000}), 1)); })});

    auto dir = std::filesystem::temp_directory_path() / ("tsopt-dnnl-bench-" + std::to_string(::getpid()));
    backend::dnnl dn({.cache_dir = dir});
    backend::reference ref;
    std::printf("%-34s %12s %12s %12s %9s\n", "operator", "reference ms", "oneDNN op ms", "oneDNN e2e", "speed-up");
    for (auto& c : cases) {
        auto in = backend::random_inputs(c.g, 1);
        double r = median_ms(quick ? 1 : 3, [&] { ref.execute(c.g, in); });
        std::size_t node = 0;
        for (std::size_t i = 0; i < c.g.size(); ++i)
            if (c.g.nodes[i].kind == node_kind::op) node = i;
        double m = dn.measure(c.g, node);
        double e = dn.time_end_to_end(c.g, in, quick ? 5 : 15);
        std::printf("%-34s %12.4f %12.4f %12.4f %8.1fx\n", c.what.c_str(), r, m, e, r / e);
    }
    std::printf("\n%-34s %12s %12s %9s %14s\n", "model (small, batch 1)", "reference ms", "oneDNN ms", "speed-up",
                "planned/naive");
    for (const char* name : {"resnet18", "squeezenet", "bert", "nasrnn"}) {
        zoo::options o{.batch = 1, .image = 96, .width_div = quick ? 8 : 2, .depth_div = quick ? 2 : 1, .length = 8};
        graph g = zoo::build(name, o);
        auto in = backend::random_inputs(g, 1);
        double r = median_ms(1, [&] { ref.execute(g, in); });
        double e = dn.time_end_to_end(g, in, quick ? 3 : 10);
        auto st = dn.stats(g);
        std::printf("%-34s %12.3f %12.3f %8.1fx %6.2f / %.2f MB\n", name, r, e, r / e, st.planned_bytes / 1e6, st.naive_bytes / 1e6);
    }
    std::filesystem::remove_all(dir);
}
