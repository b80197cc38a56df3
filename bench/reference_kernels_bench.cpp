// The reference executor's float convolution and matmul: the definitions'
// per-term loops against the blocked products that replace them
// (spec/ops/float_gemm.hpp), side by side in one run, on ResNet-50's
// convolution shapes and a BERT layer's matmuls. Prints each shape's
// GFLOP/s both ways, the ratio, and whether the outputs are equal bit for
// bit (they must be: the same sums in the same order).
//
//   build/bench/reference_kernels_bench [--reps N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tsopt/io/progress.hpp"
#include "tsopt/spec/registry.hpp"

using namespace tsopt;
using namespace tsopt::spec;

namespace {

template <class F>
double median_ms(int reps, F&& f) {
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        f();
        t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

tensor<float> random_tensor(const shape& s, std::uint64_t& state) {
    tensor<float> t(s);
    for (auto& v : t.data) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        v = static_cast<float>(static_cast<std::int64_t>(state >> 40) % 2001 - 1000) / 1000.0f;
    }
    return t;
}

struct row {
    std::string name;
    double flops, per_term_ms, blocked_ms;
    bool equal;
};

// Times `per_term` and `blocked` in interleaved rounds on the same inputs.
template <class PerTerm, class Blocked>
row compare(const std::string& name, double flops, int reps, const std::vector<const tensor<float>*>& in,
            const shape& out_shape, const op_params& p, PerTerm per_term, Blocked blocked) {
    std::vector<tensor<float>> a{tensor<float>(out_shape)}, b{tensor<float>(out_shape)};
    std::vector<double> ta, tb;
    for (int r = 0; r < reps; ++r) {
        ta.push_back(median_ms(1, [&] { per_term(p, in, std::span<tensor<float>>(a)); }));
        tb.push_back(median_ms(1, [&] { blocked(p, in, std::span<tensor<float>>(b)); }));
    }
    std::sort(ta.begin(), ta.end());
    std::sort(tb.begin(), tb.end());
    return {name, flops, ta[ta.size() / 2], tb[tb.size() / 2], a[0].data == b[0].data};
}

}  // namespace

int main(int argc, char** argv) {
    int reps = 5;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
        else {
            std::fprintf(stderr, "usage: %s [--reps N]\n", argv[0]);
            return 1;
        }
    }
    std::uint64_t state = 1;
    std::vector<row> rows;
    // ResNet-50's convolution shapes (one of each), batch 1: input [C, H, W],
    // weight [Cout, Cin, k, k], stride, same padding for k > 1.
    struct conv_case { std::int64_t c, h, co, k; int s; };
    const conv_case convs[] = {{3, 224, 64, 7, 2},    {64, 56, 64, 1, 1},   {64, 56, 64, 3, 1},  {64, 56, 256, 1, 1},
                               {256, 56, 128, 1, 1}, {128, 28, 128, 3, 1}, {128, 28, 512, 1, 1}, {256, 14, 256, 3, 1},
                               {1024, 14, 256, 1, 1}, {512, 7, 512, 3, 1}, {512, 7, 2048, 1, 1}, {1024, 14, 2048, 1, 2}};
    const std::size_t total = std::size(convs) + 3;
    std::size_t done = 0;
    io::progress prog(false, "reference_kernels_bench");
    for (const conv_case& c : convs) {
        prog.bar("timing", done++, total, "conv " + std::to_string(c.k) + "x" + std::to_string(c.k));
        const tensor<float> x = random_tensor(shape{1, c.c, c.h, c.h}, state), w = random_tensor(shape{c.co, c.c, c.k, c.k}, state);
        op_params p;
        p[conv2d_p::stride_h] = p[conv2d_p::stride_w] = c.s;
        p[conv2d_p::pad] = c.k > 1 ? 1 : 0;
        p[conv2d_p::dil_h] = p[conv2d_p::dil_w] = 1;
        const shape ins[] = {x.shape, w.shape};
        shape out[1];
        if (auto e = ops::conv2d_shape(p, ins, out); !e.empty()) {
            std::fprintf(stderr, "\nbad case: %s\n", e.c_str());
            return 1;
        }
        const std::string name = "conv " + std::to_string(c.k) + "x" + std::to_string(c.k) + "/" + std::to_string(c.s) + " " +
                                  x.shape.str() + " -> " + out[0].str();
        rows.push_back(compare(name, double(ops::conv2d_flops(p, ins, out)), reps, {&x, &w}, out[0], p,
                               ops::conv2d_per_tap<float>, ops::conv2d_eval<float>));
    }
    // A BERT-base layer at sequence length 128: the QKV, attention and
    // feed-forward products.
    struct matmul_case { shape a, b; };
    const matmul_case matmuls[] = {{shape{1, 128, 768}, shape{768, 2304}},
                                   {shape{12, 128, 64}, shape{12, 64, 128}},
                                   {shape{1, 128, 768}, shape{768, 3072}}};
    for (const matmul_case& m : matmuls) {
        prog.bar("timing", done++, total, "matmul");
        const tensor<float> a = random_tensor(m.a, state), b = random_tensor(m.b, state);
        const op_params p{};
        const shape ins[] = {a.shape, b.shape};
        shape out[1];
        if (auto e = ops::matmul_shape(p, ins, out); !e.empty()) {
            std::fprintf(stderr, "\nbad case: %s\n", e.c_str());
            return 1;
        }
        rows.push_back(compare("matmul " + a.shape.str() + " x " + b.shape.str(), double(ops::matmul_flops(p, ins, out)),
                               reps, {&a, &b}, out[0], p, ops::matmul_per_term<float>, ops::matmul_eval<float>));
    }
    prog.bar("timing", done, total);
    prog.clear();

    std::printf("reference float kernels, median of %d interleaved rounds\n", reps);
    std::printf("%-58s %12s %12s %8s %s\n", "shape", "per-term", "blocked", "ratio", "outputs");
    double sum_a = 0, sum_b = 0;
    bool all_equal = true;
    for (const row& r : rows) {
        std::printf("%-58s %7.2f GF/s %7.2f GF/s %7.2fx %s\n", r.name.c_str(), r.flops / r.per_term_ms / 1e6,
                    r.flops / r.blocked_ms / 1e6, r.per_term_ms / r.blocked_ms, r.equal ? "equal" : "DIFFER");
        sum_a += r.per_term_ms, sum_b += r.blocked_ms;
        all_equal = all_equal && r.equal;
    }
    std::printf("summary: %zu shapes, per-term %.1f ms, blocked %.1f ms in all: %.2fx; outputs %s\n", rows.size(), sum_a,
                sum_b, sum_a / sum_b, all_equal ? "equal bit for bit" : "DIFFER");
    return all_equal ? 0 : 3;
}
