// The 3x3 stride-1 convolutions of ResNet-50, Inception-v3, GoogLeNet and
// SqueezeNet 1.1
// (with their bias and ReLU), each timed on the oneDNN backend by Winograd
// (dnnl::options::winograd, the default) and by oneDNN's direct kernels, in
// interleaved rounds in one process: the speed-up per layer and for the
// layers together (docs/benchmarks.md, "Winograd convolutions"). The
// "cold" columns time the convolution alone with its weights evicted from
// the caches first (backend::dnnl::measure, as the cost model does), which
// is how it meets them in a model whose weights do not fit in the cache:
// Winograd's transformed weights are 16/9 (F(2x2)) or 4 (F(4x4)) times the
// size of the direct method's.
//
//   OMP_NUM_THREADS=1 build/bench/winograd_layers [--rounds 5]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "tsopt/backend/dnnl/executor.hpp"

using namespace tsopt;

namespace {

struct layer {
    const char* model;
    std::int64_t c, k, h;
};

graph conv_bias_relu(const layer& l, value* conv) {
    graph g;
    std::mt19937_64 rng(31);
    auto x = g.input("x", {1, l.c, l.h, l.h});
    *conv = g.conv2d(x, g.weight("w", {l.k, l.c, 3, 3}, rng), {}, "conv");
    g.mark_output(g.relu(g.ewadd(*conv, g.weight("bias", {1, l.k, 1, 1}, rng))));
    return g;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    int rounds = 5;
    for (int i = 1; i + 1 < argc; ++i)
        if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::max(1, std::atoi(argv[i + 1]));
    const layer layers[] = {{"resnet50", 64, 64, 56},    {"resnet50", 128, 128, 28}, {"resnet50", 256, 256, 14},
                            {"resnet50", 512, 512, 7},   {"inception_v3", 64, 96, 35}, {"inception_v3", 96, 96, 35},
                            {"inception_v3", 192, 192, 17}, {"inception_v3", 384, 384, 8}, {"googlenet", 64, 192, 56},
                            {"googlenet", 96, 128, 28},  {"googlenet", 128, 192, 28}, {"googlenet", 112, 224, 14},
                            {"squeezenet1_1", 32, 128, 27}, {"squeezenet1_1", 48, 192, 13}, {"squeezenet1_1", 64, 256, 13},
                            {"inception_v3", 32, 64, 147}};
    backend::dnnl wino({.persist = false}), direct({.persist = false, .winograd = false});
    const char* omp = std::getenv("OMP_NUM_THREADS");
    std::printf("Winograd against oneDNN's direct convolution (conv + bias + ReLU, batch 1), OMP_NUM_THREADS=%s, "
                "median of %d interleaved rounds of 20 runs\n",
                omp ? omp : "(unset)", rounds);
    std::printf("%-13s %5s %5s %7s  %-22s %10s %10s %8s %10s %10s %10s %8s\n", "model", "C", "K", "HxW", "method", "direct ms",
                "winograd ms", "speed-up", "max rel err", "cold direct", "cold wino", "speed-up");
    double sum_direct = 0, sum_wino = 0, sum_cold_direct = 0, sum_cold_wino = 0;
    for (std::size_t li = 0; li < std::size(layers); ++li) {
        const layer& l = layers[li];
        value conv;
        graph g = conv_bias_relu(l, &conv);
        auto in = backend::random_inputs(g, 9);
        std::string method = "direct";
        const auto plan = wino.compile(g);
        for (const auto& s : plan->steps)
            if (s.node == conv.node && s.what.starts_with("winograd F(")) method = s.what.substr(0, 19);
        const auto a = wino.execute(g, in), b = direct.execute(g, in);
        double err = 0, top = 0;
        for (std::size_t i = 0; i < a[0].data.size(); ++i) {
            err = std::max(err, static_cast<double>(std::fabs(a[0].data[i] - b[0].data[i])));
            top = std::max(top, static_cast<double>(std::fabs(b[0].data[i])));
        }
        std::vector<double> td, tw;
        for (int r = 0; r < rounds; ++r) {
            td.push_back(direct.time_end_to_end(g, in, 20));
            tw.push_back(wino.time_end_to_end(g, in, 20));
        }
        const double d = median(td), w = median(tw);
        const double cd = direct.measure(g, static_cast<std::size_t>(conv.node)), cw = wino.measure(g, static_cast<std::size_t>(conv.node));
        sum_direct += d;
        sum_wino += w;
        sum_cold_direct += cd;
        sum_cold_wino += cw;
        std::printf("%-13s %5lld %5lld %3lldx%-3lld  %-22s %10.3f %10.3f %7.2fx %10.1e %10.3f %10.3f %7.2fx\n", l.model,
                    static_cast<long long>(l.c), static_cast<long long>(l.k), static_cast<long long>(l.h),
                    static_cast<long long>(l.h), method.c_str(), d, w, d / w, err / top, cd, cw, cd / cw);
        std::fflush(stdout);
        wino.drop_plans();
        direct.drop_plans();
    }
    std::printf("summary: %zu layers, direct %.3f ms, winograd %.3f ms in all: %.2fx; cold weights: direct %.3f ms, winograd %.3f "
                "ms: %.2fx\n",
                std::size(layers), sum_direct, sum_wino, sum_direct / sum_wino, sum_cold_direct, sum_cold_wino,
                sum_cold_direct / sum_cold_wino);
}
