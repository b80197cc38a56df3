// Grouped convolutions with 2 or 4 channels per group by tsopt's own
// kernel (backend/dnnl/grouped_conv.hpp): the kernel of every instruction
// set this CPU has against a direct convolution in both channel-blocked
// layouts, then whole graphs against the reference: which convolutions take
// it, the fused epilogue, and the option that chooses.
#include <algorithm>
#include <cmath>

#include "check.hpp"

using namespace tsopt;
using test::check_against_reference;
namespace sg = tsopt::backend::dnnl_impl::small_groups;
using tsopt::backend::dnnl_impl::kernel_use;
using tsopt::backend::dnnl_impl::simd;

namespace {

// The direct grouped convolution of x (laid out as g.in says) with w
// [C, G, kh, kw], the epilogue applied: y laid out as g.out says.
std::vector<float> direct(const std::vector<float>& x, const std::vector<float>& w, const sg::geometry& g, int G,
                          std::span<const backend::dnnl_impl::epilogue_op> ep, const std::vector<std::vector<float>>& channel) {
    using op = backend::dnnl_impl::epilogue_op;
    std::vector<float> y(static_cast<std::size_t>(g.N * g.C * g.OH * g.OW));
    for (std::int64_t n = 0; n < g.N; ++n)
        for (std::int64_t k = 0; k < g.C; ++k)
            for (std::int64_t oy = 0; oy < g.OH; ++oy)
                for (std::int64_t ox = 0; ox < g.OW; ++ox) {
                    double s = 0;
                    const std::int64_t grp = k / G;
                    for (int c = 0; c < G; ++c)
                        for (std::int64_t r = 0; r < g.kh; ++r)
                            for (std::int64_t q = 0; q < g.kw; ++q) {
                                const std::int64_t iy = oy * g.sh - g.pt + r * g.dh, ix = ox * g.sw - g.pl + q * g.dw;
                                if (iy < 0 || iy >= g.H || ix < 0 || ix >= g.W) continue;
                                const std::int64_t ic = grp * G + c;
                                s += static_cast<double>(x[static_cast<std::size_t>(g.in.at(n, ic / sg::block, iy, ix) + ic % sg::block)]) *
                                     w[static_cast<std::size_t>(((k * G + c) * g.kh + r) * g.kw + q)];
                            }
                    float v = static_cast<float>(s);
                    for (const op& e : ep) switch (e.k) {
                            case op::kind::add: v += channel[static_cast<std::size_t>(e.operand)][static_cast<std::size_t>(k)]; break;
                            case op::kind::mul: v *= channel[static_cast<std::size_t>(e.operand)][static_cast<std::size_t>(k)]; break;
                            case op::kind::relu: v = v > 0 ? v : v * e.alpha; break;
                            case op::kind::clip: v = std::min(std::max(v, e.alpha), e.beta); break;
                        }
                    y[static_cast<std::size_t>(g.out.at(n, k / sg::block, oy, ox) + k % sg::block)] = v;
                }
    return y;
}

struct kernel_case {
    int G;
    std::int64_t n, c, h, w, kh, kw, stride, dilation, pad;  // pad before the first row and column
};

// The kernel on random data against direct(); the largest error relative to
// the largest output.
double kernel_error(const kernel_case& kc, bool channels_last, simd s) {
    sg::geometry g;
    g.N = kc.n, g.C = kc.c, g.H = kc.h, g.W = kc.w, g.kh = kc.kh, g.kw = kc.kw;
    g.sh = g.sw = kc.stride, g.dh = g.dw = kc.dilation, g.pt = g.pl = kc.pad;
    g.OH = (g.H + 2 * kc.pad - (kc.kh - 1) * kc.dilation - 1) / kc.stride + 1;
    g.OW = (g.W + 2 * kc.pad - (kc.kw - 1) * kc.dilation - 1) / kc.stride + 1;
    g.in = backend::dnnl_impl::strides::of(channels_last, g.C, g.H, g.W, sg::block);
    g.out = backend::dnnl_impl::strides::of(channels_last, g.C, g.OH, g.OW, sg::block);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> U(-1, 1);
    std::vector<float> x(static_cast<std::size_t>(g.N * g.C * g.H * g.W)), w(static_cast<std::size_t>(g.C * kc.G * g.kh * g.kw));
    for (auto& v : x) v = U(rng);
    for (auto& v : w) v = U(rng);
    std::vector<std::vector<float>> channel(2, std::vector<float>(static_cast<std::size_t>(g.C)));
    for (auto& ch : channel)
        for (auto& v : ch) v = U(rng);
    using op = backend::dnnl_impl::epilogue_op;
    const std::vector<op> ep{{op::kind::add, 0}, {op::kind::relu, -1, 0.1f}, {op::kind::mul, 1}, {op::kind::clip, -1, -0.3f, 0.4f}};
    std::vector<float> wv(w.size()), y(static_cast<std::size_t>(g.N * g.C * g.OH * g.OW), 0.f);
    sg::arrange_weights(w.data(), g.C, kc.G, g.kh, g.kw, wv.data());
    const std::vector<const float*> ch{channel[0].data(), channel[1].data()};
    sg::run(sg::kernel_for(kc.G, s), x.data(), wv.data(), y.data(), g, ep, ch);
    const auto want = direct(x, w, g, kc.G, ep, channel);
    double worst = 0, scale = 1e-30;
    for (std::size_t k = 0; k < y.size(); ++k) {
        worst = std::max(worst, static_cast<double>(std::fabs(y[k] - want[k])));
        scale = std::max(scale, static_cast<double>(std::fabs(want[k])));
    }
    return worst / scale;
}

graph grouped(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, int G, int k, conv_options o, value* conv) {
    graph g;
    std::mt19937_64 rng(23);
    auto x = g.input("x", {n, c, h, w});
    *conv = g.conv2d(x, g.weight("w", {c, G, k, k}, rng), o, "conv");
    g.mark_output(*conv);
    return g;
}

// What the plan of g runs node `conv` with: "small groups" or "oneDNN".
std::string method(backend::dnnl& b, const graph& g, value conv) {
    auto p = b.compile(g);
    for (const auto& s : p->steps)
        if (s.node == conv.node && s.what.find("channels per group") != std::string::npos) return "small groups";
    return "oneDNN";
}

}  // namespace

TEST_CASE("small-group kernel: every variant equals a direct convolution, blocked and channels last") {
    const kernel_case cases[] = {
        {4, 1, 16, 9, 11, 3, 3, 1, 1, 1},   // ResNeXt's form, borders on every side, a partial tile of pixels
        {2, 2, 16, 7, 6, 3, 3, 1, 1, 1},    // two images
        {4, 1, 24, 10, 9, 3, 3, 2, 1, 1},   // stride 2
        {4, 1, 8, 12, 13, 3, 3, 1, 2, 2},   // dilation 2
        {2, 1, 16, 8, 8, 1, 1, 1, 1, 0},    // 1x1
        {2, 1, 8, 11, 14, 5, 5, 1, 1, 2},   // 5x5
        {4, 1, 16, 6, 5, 3, 3, 1, 1, 0},    // valid: no padding at all
        {4, 1, 8, 2, 3, 3, 3, 1, 1, 1},     // narrower than the kernel: no interior pixel
    };
    std::vector<simd> targets{simd::baseline};
    if (backend::dnnl_impl::cpu_simd() != simd::baseline) targets.push_back(simd::avx2);
    for (const auto& kc : cases)
        for (bool channels_last : {true, false})
            for (simd s : targets) {
                INFO("G ", kc.G, " C ", kc.c, " ", kc.h, "x", kc.w, " k ", kc.kh, " stride ", kc.stride, " dilation ", kc.dilation,
                     channels_last ? " nhwc" : " nChw8c", s == simd::baseline ? " baseline" : " avx2");
                CHECK(kernel_error(kc, channels_last, s) <= 1e-5);
            }
}

TEST_CASE("small-group kernel: the plan takes it for 2 and 4 channels per group, equal to the reference") {
    backend::dnnl b({.persist = false, .small_groups = kernel_use::always});
    value conv;
    for (int G : {2, 4})
        for (int stride : {1, 2}) {
            INFO("G ", G, " stride ", stride);
            graph g = grouped(1, 32, 14, 15, G, 3, {.stride = stride, .act = relu}, &conv);
            CHECK(method(b, g, conv) == "small groups");
            check_against_reference(g, 1e-5, 3, &b);
        }
    // Not its forms: 8 channels per group, depthwise, channels not a multiple of 8, sigmoid.
    CHECK(method(b, grouped(1, 32, 14, 14, 8, 3, {}, &conv), conv) == "oneDNN");
    CHECK(method(b, grouped(1, 32, 14, 14, 1, 3, {}, &conv), conv) == "oneDNN");
    CHECK(method(b, grouped(1, 12, 14, 14, 4, 3, {}, &conv), conv) == "oneDNN");
    CHECK(method(b, grouped(1, 32, 14, 14, 4, 3, {.act = spec::activation::sigmoid}, &conv), conv) == "oneDNN");
    check_against_reference(grouped(1, 12, 14, 14, 4, 3, {}, &conv), 1e-5, 4, &b);
}

TEST_CASE("small-group kernel: the bias, ReLU and per-channel multiply after it run in its epilogue") {
    graph g;
    std::mt19937_64 rng(29);
    auto x = g.input("x", {2, 64, 12, 12});
    // A 1x1 convolution first, so the grouped one reads what oneDNN leaves (channels last or blocked).
    auto a = g.relu(g.conv2d(x, g.weight("w1", {64, 64, 1, 1}, rng)));
    auto conv = g.conv2d(a, g.weight("w2", {64, 4, 3, 3}, rng), {}, "grouped");
    auto y = g.ewmul(g.relu(g.ewadd(conv, g.weight("bias", {64, 1, 1}, rng))), g.weight("scale", {64, 1, 1}, rng));
    auto z = g.conv2d(y, g.weight("w3", {32, 64, 1, 1}, rng));
    g.mark_output(z);
    backend::dnnl b({.persist = false, .small_groups = kernel_use::always});
    auto p = b.compile(g);
    bool fused = false;
    for (const auto& s : p->steps)
        if (s.node == conv.node) {
            INFO(s.what);
            fused = s.what == "grouped convolution 4 channels per group + 3 fused";
        }
    CHECK(fused);
    check_against_reference(g, 1e-5, 5, &b);
}

TEST_CASE("small-group kernel: kernel_use never keeps oneDNN's, automatic follows the CPU") {
    value conv;
    graph g = grouped(1, 32, 14, 14, 4, 3, {}, &conv);
    backend::dnnl never({.persist = false, .small_groups = kernel_use::never});
    CHECK(method(never, g, conv) == "oneDNN");
    check_against_reference(g, 1e-5, 6, &never);
    backend::dnnl automatic({.persist = false});
    CHECK(method(automatic, g, conv) == (sg::automatic_here() ? "small groups" : "oneDNN"));
}
