// Winograd convolutions on the oneDNN backend (backend/dnnl/winograd.hpp):
// the transform kernels of every variant against a direct convolution, and
// whole graphs against the reference: which convolutions take the Winograd
// path, partial tiles, batches, the fused epilogue, and the option that
// turns it off.
#include <algorithm>
#include <cmath>

#include "check.hpp"

using namespace tsopt;
using test::check_against_reference;
namespace wg = tsopt::backend::dnnl_impl::winograd;

namespace {

// What the plan of g runs node `conv` with: "winograd F(4x4,3x3)", ...,
// or "direct".
std::string conv_method(backend::dnnl& b, const graph& g, value conv) {
    auto p = b.compile(g);
    for (const auto& s : p->steps)
        if (s.node == conv.node && s.what.starts_with("winograd F(")) return s.what.substr(0, std::string("winograd F(4x4,3x3)").size());
    return "direct";
}

struct conv_case {
    std::int64_t n, c, k, h, w;
};

graph single_conv(const conv_case& cc, value* conv, conv_options o = {}) {
    graph g;
    std::mt19937_64 rng(21);
    auto x = g.input("x", {cc.n, cc.c, cc.h, cc.w});
    *conv = g.conv2d(x, g.weight("w", {cc.k, cc.c, 3, 3}, rng), o, "conv");
    g.mark_output(*conv);
    return g;
}

// A direct 3x3 "same" convolution of x (layout `in`) with w [K, C, 3, 3].
std::vector<float> direct_conv(const std::vector<float>& x, const std::vector<float>& w, const wg::geometry& g) {
    std::vector<float> y(static_cast<std::size_t>(g.N * g.K * g.H * g.W));
    for (std::int64_t n = 0; n < g.N; ++n)
        for (std::int64_t k = 0; k < g.K; ++k)
            for (std::int64_t oy = 0; oy < g.H; ++oy)
                for (std::int64_t ox = 0; ox < g.W; ++ox) {
                    double s = 0;
                    for (std::int64_t c = 0; c < g.C; ++c)
                        for (int r = 0; r < 3; ++r)
                            for (int q = 0; q < 3; ++q) {
                                const std::int64_t iy = oy + r - 1, ix = ox + q - 1;
                                if (iy < 0 || iy >= g.H || ix < 0 || ix >= g.W) continue;
                                s += static_cast<double>(x[static_cast<std::size_t>(g.in.at(n, 0, iy, ix) + c)]) *
                                     w[static_cast<std::size_t>(((k * g.C + c) * 3 + r) * 3 + q)];
                            }
                    y[static_cast<std::size_t>(n * g.K * g.H * g.W + (k * g.H + oy) * g.W + ox)] = static_cast<float>(s);
                }
    return y;
}

// One kernel pair on random data, the matmul between them done naively;
// the largest error relative to the largest output.
template <int M, int B>
double kernel_error(wg::input_kernel in_k, wg::output_kernel out_k) {
    constexpr int a = M + 2;
    // Channels last, so one base address per pixel serves every channel in
    // direct_conv; 7 x 9: partial tiles in both directions.
    wg::geometry g{2, 2 * B, 2 * B, 7, 9, (7 + M - 1) / M, (9 + M - 1) / M};
    g.in = tsopt::backend::dnnl_impl::strides::of(true, g.C, g.H, g.W, B);
    g.out = tsopt::backend::dnnl_impl::strides::of(true, g.K, g.H, g.W, B);
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> U(-1, 1);
    std::vector<float> x(static_cast<std::size_t>(g.N * g.C * g.H * g.W)), w(static_cast<std::size_t>(g.K * g.C * 9));
    for (auto& v : x) v = U(rng);
    for (auto& v : w) v = U(rng);
    const std::int64_t T = g.tiles();
    std::vector<float> V(static_cast<std::size_t>(a * a * T * g.C)), Uw(static_cast<std::size_t>(a * a * g.C * g.K)),
        Mx(static_cast<std::size_t>(a * a * T * g.K)), y(static_cast<std::size_t>(g.N * g.H * g.W * g.K));
    for (std::int64_t cb = 0; cb < g.C / B; ++cb) in_k(x.data(), V.data(), g, cb, 0, T);
    wg::transform_weights<M>(w.data(), g.K, g.C, Uw.data());
    for (std::int64_t xi = 0; xi < a * a; ++xi)
        for (std::int64_t t = 0; t < T; ++t)
            for (std::int64_t k = 0; k < g.K; ++k) {
                double s = 0;
                for (std::int64_t c = 0; c < g.C; ++c)
                    s += static_cast<double>(V[static_cast<std::size_t>((xi * T + t) * g.C + c)]) *
                         Uw[static_cast<std::size_t>((xi * g.C + c) * g.K + k)];
                Mx[static_cast<std::size_t>((xi * T + t) * g.K + k)] = static_cast<float>(s);
            }
    for (std::int64_t kb = 0; kb < g.K / B; ++kb) out_k(Mx.data(), y.data(), g, kb, 0, T, {}, {});
    const auto want = direct_conv(x, w, g);
    double err = 0, top = 0;
    for (std::int64_t n = 0; n < g.N; ++n)
        for (std::int64_t k = 0; k < g.K; ++k)
            for (std::int64_t oy = 0; oy < g.H; ++oy)
                for (std::int64_t ox = 0; ox < g.W; ++ox) {
                    const float ref = want[static_cast<std::size_t>(n * g.K * g.H * g.W + (k * g.H + oy) * g.W + ox)];
                    const float got = y[static_cast<std::size_t>(g.out.at(n, 0, oy, ox) + k)];
                    err = std::max(err, static_cast<double>(std::fabs(got - ref)));
                    top = std::max(top, static_cast<double>(std::fabs(ref)));
                }
    return err / top;
}

template <int M, int B>
void check_kernels() {
    INFO("F(", M, "x", M, ",3x3), ", B, " lanes");
    CHECK(kernel_error<M, B>(&wg::input_baseline<M, B>, &wg::output_baseline<M, B>) < 1e-5);
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        CHECK(kernel_error<M, B>(&wg::input_avx2<M, B>, &wg::output_avx2<M, B>) < 1e-5);
    else
        MESSAGE("skipped the AVX2 kernels: this CPU has no AVX2");
    if (__builtin_cpu_supports("avx512f"))
        CHECK(kernel_error<M, B>(&wg::input_avx512<M, B>, &wg::output_avx512<M, B>) < 1e-5);
    else
        MESSAGE("skipped the AVX-512 kernels: this CPU has no AVX-512");
#endif
}

}  // namespace

TEST_CASE("winograd kernels: every tile size, block width and instruction set equals the direct convolution") {
    check_kernels<2, 8>();
    check_kernels<2, 16>();
    check_kernels<4, 8>();
    check_kernels<4, 16>();
}

TEST_CASE("winograd: the channels and the output's extent decide") {
    CHECK(wg::enough_channels(64, 64));
    CHECK(wg::enough_channels(32, 128));
    CHECK(wg::enough_channels(48, 64));
    CHECK(wg::enough_channels(32, 64));  // Inception-v3's 147x147 layer
    CHECK(wg::enough_channels(24, 48));
    CHECK(wg::enough_channels(256, 64));
    CHECK_FALSE(wg::enough_channels(16, 16));
    CHECK_FALSE(wg::enough_channels(16, 256));
    CHECK_FALSE(wg::enough_channels(256, 32));
    CHECK_FALSE(wg::enough_channels(128, 16));
    CHECK(wg::tile_for(56, 56) == 4);
    CHECK(wg::tile_for(14, 14) == 4);
    CHECK(wg::tile_for(12, 12) == 4);
    using tsopt::backend::dnnl_impl::simd;
    for (const simd isa : {simd::avx2, simd::avx512}) {
        CHECK(wg::tile_for(8, 8, isa) == 2);  // 4 tiles of 4x4: too few matmul rows
        CHECK(wg::tile_for(10, 8, isa) == 2);
        CHECK(wg::tile_for(5, 5, isa) == 0);
    }
    // Partial 2x2 tiles only with AVX-512 (measured: bench/winograd_layers.cpp).
    CHECK(wg::tile_for(7, 7, simd::avx512) == 2);
    CHECK(wg::tile_for(7, 7, simd::avx2) == 0);
    CHECK(wg::tile_for(8, 7, simd::avx2) == 0);
}

TEST_CASE("winograd convolutions equal the reference") {
    backend::dnnl b({.persist = false});
    const conv_case cases[] = {
        {1, 64, 64, 28, 28},  // F(4x4), whole tiles
        {2, 64, 96, 13, 13},  // F(4x4), partial tiles, a batch, K != C
        {1, 128, 64, 7, 7},   // F(2x2), partial tiles (AVX-512; direct with AVX2 alone)
        {1, 64, 96, 8, 10},   // F(2x2), whole tiles
        {1, 64, 64, 12, 20},  // not square
    };
    for (const auto& cc : cases) {
        INFO("N=", cc.n, " C=", cc.c, " K=", cc.k, " ", cc.h, "x", cc.w);
        value conv;
        graph g = single_conv(cc, &conv);
        const int m = wg::tile_for(cc.h, cc.w);
        CHECK(conv_method(b, g, conv) == (m == 4 ? "winograd F(4x4,3x3)" : m == 2 ? "winograd F(2x2,3x3)" : "direct"));
        check_against_reference(g, 1e-4, 3, &b);
    }
}

TEST_CASE("winograd: the epilogue runs the operators after the convolution") {
    backend::dnnl b({.persist = false});
    std::mt19937_64 rng(22);
    // conv (fused relu) -> * scale -> + shift -> relu -> + residual:
    // everything before the residual add is the output transform's.
    graph g;
    auto x = g.input("x", {1, 64, 16, 16});
    auto c = g.conv2d(x, g.weight("w", {64, 64, 3, 3}, rng), {.act = relu}, "conv");
    auto y = g.relu(g.ewadd(g.ewmul(c, g.weight("scale", {64, 1, 1}, rng)), g.weight("shift", {1, 64, 1, 1}, rng)));
    g.mark_output(g.ewadd(y, x));
    CHECK(conv_method(b, g, c) == "winograd F(4x4,3x3)");
    auto p = b.compile(g);
    CHECK(p->stats.fused_ops >= 3);
    check_against_reference(g, 1e-4, 4, &b);
}

TEST_CASE("winograd: convolutions it does not fit take the direct method") {
    backend::dnnl b({.persist = false});
    value conv;
    CHECK(conv_method(b, single_conv({1, 16, 64, 28, 28}, &conv), conv) == "direct");  // few channels
    CHECK(conv_method(b, single_conv({1, 32, 128, 28, 28}, &conv), conv) == "winograd F(4x4,3x3)");
    CHECK(conv_method(b, single_conv({1, 64, 64, 5, 5}, &conv), conv) == "direct");    // too few tiles
    CHECK(conv_method(b, single_conv({1, 64, 64, 28, 28}, &conv, {.stride = 2}), conv) == "direct");
    CHECK(conv_method(b, single_conv({1, 64, 64, 28, 28}, &conv, {.dilation = 2}), conv) == "direct");
    CHECK(conv_method(b, single_conv({1, 64, 64, 28, 28}, &conv, {.act = spec::activation::sigmoid}), conv) == "direct");
    graph g = single_conv({1, 64, 64, 28, 28}, &conv, {.stride = 2});
    check_against_reference(g, 1e-4, 5, &b);
}

TEST_CASE("winograd off: options::winograd = false runs every convolution directly") {
    value conv;
    graph g = single_conv({1, 64, 64, 28, 28}, &conv);
    backend::dnnl off({.persist = false, .winograd = false});
    CHECK(conv_method(off, g, conv) == "direct");
    check_against_reference(g, 1e-5, 6, &off);
}
