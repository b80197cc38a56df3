#pragma once
// 3x3 stride-1 convolutions by Winograd's minimal filtering (Lavin and Gray,
// "Fast Algorithms for Convolutional Neural Networks", 2016): F(4x4, 3x3)
// multiplies 36 times per 4x4 output tile where the direct method multiplies
// 144 times, F(2x2, 3x3) 16 times per 2x2 tile instead of 36. oneDNN 3.2
// has no f32 Winograd on AVX2 or AVX-512 without AMX, so tsopt does it:
//
//   V[xi][tile][c] = (B^T d B)[xi]       input transform, custom step
//   M[xi] = V[xi] x U[xi]                one batched oneDNN matmul, [A*A] x [T x C] x [C x K]
//   y = A^T M A + bias, activation       output transform, custom step
//
// with U = G g G^T computed once from the constant weights (shared between
// the plans of one backend, as converted weights are). Input and output
// stay in the blocked layout (nChw8c / nChw16c) oneDNN's direct convolution
// uses on this CPU, so no reorder separates a Winograd convolution from its
// neighbours; the transforms work on one channel block (a SIMD register of
// 8 or 16 floats) at a time, compiled for AVX2 or AVX-512 and picked at run
// time. The output transform applies the per-channel adds / multiplies and
// the ReLU / clip after the convolution (the post-ops oneDNN would run).
//
// Which convolutions: 3x3, stride 1, dilation 1, one group, "same" padding,
// constant weights, enough channels (enough_channels: with few, the
// transforms' memory traffic outweighs the saved multiplies), a blocked or
// channels-last layout. F(4x4, 3x3) where the output has at least 9 tiles
// of 4x4 per image, F(2x2, 3x3) where it has 16 tiles of 2x2 (with AVX2
// alone, only where they cover it exactly: tile_for), else the direct
// convolution: on a 7x7 output (ResNet-50's last stage) the 4x4 tiles leave
// the matmul 4 rows. Measured per layer: bench/winograd_layers.cpp,
// docs/benchmarks.md. The results differ from the direct method's by
// rounding (relative 1e-5 for F(4x4, 3x3), 1e-6 for F(2x2, 3x3) on random
// data); dnnl::options::winograd = false turns it off.
#include <functional>
#include <optional>

#include "tsopt/backend/dnnl/channel_blocks.hpp"

namespace tsopt::backend::dnnl_impl::winograd {

// The transform matrices of F(m x m, 3 x 3), tile size a = m + 2.
template <int M>
struct matrices;
template <>
struct matrices<2> {
    static constexpr int a = 4;
    static constexpr float BT[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
    static constexpr float G[4][3] = {{1, 0, 0}, {.5f, .5f, .5f}, {.5f, -.5f, .5f}, {0, 0, 1}};
    static constexpr float AT[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
};
template <>
struct matrices<4> {
    static constexpr int a = 6;
    static constexpr float BT[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                                       {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
    static constexpr float G[6][3] = {{1.f / 4, 0, 0},
                                      {-1.f / 6, -1.f / 6, -1.f / 6},
                                      {-1.f / 6, 1.f / 6, -1.f / 6},
                                      {1.f / 24, 1.f / 12, 1.f / 6},
                                      {1.f / 24, -1.f / 12, 1.f / 6},
                                      {0, 0, 1}};
    static constexpr float AT[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};
};

// Extents of one Winograd convolution (padding 1 on every side, so the
// output is H x W).
struct geometry {
    std::int64_t N = 1, C = 0, K = 0, H = 0, W = 0;
    std::int64_t th = 0, tw = 0;  // tiles per column / row of one image
    strides in{}, out{};
    int m = 0;  // the output tile's side, F(m x m, 3 x 3) (tile_for)
    std::int64_t tiles() const { return N * th * tw; }
};

// The small matrix products are written out in each transform: one helper
// taking the operand as a lambda ran the layers 10-20 % slower (GCC did not
// inline it into the target-specific kernels below). Their loops are
// unrolled by force (`GCC unroll`): with constant indices the tile arrays
// live in registers and the zero and unit coefficients fold away. Without
// it (GCC 12, -O2) the input transform ran 3-4x and the output transform
// 1.4-2.5x slower (the layers of bench/winograd_layers, docs/benchmarks.md).

// Input transform of tiles [t0, t1) of channel block cb: x in g.in's
// layout, V is [a*a][tiles][C].
template <int M, int B>
[[gnu::always_inline]] inline void input_body(const float* x, float* V, const geometry& g, std::int64_t cb, std::int64_t t0,
                                              std::int64_t t1) {
    using W = matrices<M>;
    constexpr int a = W::a;
    const std::int64_t T = g.tiles(), per_image = g.th * g.tw;
    for (std::int64_t t = t0; t < t1; ++t) {
        const std::int64_t n = t / per_image, ty = t % per_image / g.tw, tx = t % g.tw;
        lanes<B> d[a][a], tmp[a][a];
        #pragma GCC unroll 8
        for (int i = 0; i < a; ++i)
            #pragma GCC unroll 8
            for (int j = 0; j < a; ++j) {
                const std::int64_t y = ty * M + i - 1, xx = tx * M + j - 1;
                if (y < 0 || y >= g.H || xx < 0 || xx >= g.W) d[i][j] = lanes<B>{};
                else load<B>(d[i][j], x + g.in.at(n, cb, y, xx));
            }
        #pragma GCC unroll 8
        for (int i = 0; i < a; ++i)
            #pragma GCC unroll 8
            for (int j = 0; j < a; ++j) {
                lanes<B> acc{};
                #pragma GCC unroll 8
                for (int k = 0; k < a; ++k)
                    if (W::BT[i][k] != 0) acc += W::BT[i][k] * d[k][j];
                tmp[i][j] = acc;
            }
        #pragma GCC unroll 8
        for (int i = 0; i < a; ++i)
            #pragma GCC unroll 8
            for (int j = 0; j < a; ++j) {
                lanes<B> acc{};
                #pragma GCC unroll 8
                for (int k = 0; k < a; ++k)
                    if (W::BT[j][k] != 0) acc += W::BT[j][k] * tmp[i][k];
                store<B>(V + ((i * a + j) * T + t) * g.C + cb * B, acc);
            }
    }
}

// Output transform of tiles [t0, t1) of output channel block kb: Mx is
// [a*a][tiles][K], y in g.out's layout; `channel` holds the per-channel
// operands.
template <int M, int B>
[[gnu::always_inline]] inline void output_body(const float* Mx, float* y, const geometry& g, std::int64_t kb, std::int64_t t0,
                                               std::int64_t t1, std::span<const epilogue_op> ep,
                                               std::span<const float* const> channel) {
    using W = matrices<M>;
    constexpr int a = W::a;
    const std::int64_t T = g.tiles(), per_image = g.th * g.tw;
    lanes<B> operands[max_epilogue];
    load_operands<B>(operands, ep, channel, kb);
    for (std::int64_t t = t0; t < t1; ++t) {
        const std::int64_t n = t / per_image, ty = t % per_image / g.tw, tx = t % g.tw;
        lanes<B> m[a][a], tmp[M][a];
        #pragma GCC unroll 8
        for (int i = 0; i < a; ++i)
            #pragma GCC unroll 8
            for (int j = 0; j < a; ++j) load<B>(m[i][j], Mx + ((i * a + j) * T + t) * g.K + kb * B);
        #pragma GCC unroll 8
        for (int i = 0; i < M; ++i)
            #pragma GCC unroll 8
            for (int j = 0; j < a; ++j) {
                lanes<B> acc{};
                #pragma GCC unroll 8
                for (int k = 0; k < a; ++k)
                    if (W::AT[i][k] != 0) acc += W::AT[i][k] * m[k][j];
                tmp[i][j] = acc;
            }
        #pragma GCC unroll 8
        for (int i = 0; i < M; ++i)
            #pragma GCC unroll 8
            for (int j = 0; j < M; ++j) {
                const std::int64_t oy = ty * M + i, ox = tx * M + j;
                if (oy >= g.H || ox >= g.W) continue;
                lanes<B> acc{};
                #pragma GCC unroll 8
                for (int k = 0; k < a; ++k)
                    if (W::AT[j][k] != 0) acc += W::AT[j][k] * tmp[i][k];
                apply_epilogue<B>(acc, ep, operands);
                store<B>(y + g.out.at(n, kb, oy, ox), acc);
            }
    }
}

using input_kernel = void (*)(const float*, float*, const geometry&, std::int64_t, std::int64_t, std::int64_t);
using output_kernel = void (*)(const float*, float*, const geometry&, std::int64_t, std::int64_t, std::int64_t,
                               std::span<const epilogue_op>, std::span<const float* const>);

// Each kernel compiled three times: for AVX-512, for AVX2 with FMA, and for
// the baseline the program is built for; kernels<M, B>() picks by the CPU.
template <int M, int B>
[[gnu::target("avx512f")]] void input_avx512(const float* x, float* V, const geometry& g, std::int64_t cb, std::int64_t t0,
                                             std::int64_t t1) {
    input_body<M, B>(x, V, g, cb, t0, t1);
}
template <int M, int B>
[[gnu::target("avx2,fma")]] void input_avx2(const float* x, float* V, const geometry& g, std::int64_t cb, std::int64_t t0,
                                            std::int64_t t1) {
    input_body<M, B>(x, V, g, cb, t0, t1);
}
template <int M, int B>
void input_baseline(const float* x, float* V, const geometry& g, std::int64_t cb, std::int64_t t0, std::int64_t t1) {
    input_body<M, B>(x, V, g, cb, t0, t1);
}
template <int M, int B>
[[gnu::target("avx512f")]] void output_avx512(const float* Mx, float* y, const geometry& g, std::int64_t kb, std::int64_t t0,
                                              std::int64_t t1, std::span<const epilogue_op> ep,
                                              std::span<const float* const> channel) {
    output_body<M, B>(Mx, y, g, kb, t0, t1, ep, channel);
}
template <int M, int B>
[[gnu::target("avx2,fma")]] void output_avx2(const float* Mx, float* y, const geometry& g, std::int64_t kb, std::int64_t t0,
                                             std::int64_t t1, std::span<const epilogue_op> ep,
                                             std::span<const float* const> channel) {
    output_body<M, B>(Mx, y, g, kb, t0, t1, ep, channel);
}
template <int M, int B>
void output_baseline(const float* Mx, float* y, const geometry& g, std::int64_t kb, std::int64_t t0, std::int64_t t1,
                     std::span<const epilogue_op> ep, std::span<const float* const> channel) {
    output_body<M, B>(Mx, y, g, kb, t0, t1, ep, channel);
}

template <int M, int B>
std::pair<input_kernel, output_kernel> kernels() {
    switch (cpu_simd()) {
        case simd::avx512: return {&input_avx512<M, B>, &output_avx512<M, B>};
        case simd::avx2: return {&input_avx2<M, B>, &output_avx2<M, B>};
        case simd::baseline: break;
    }
    return {&input_baseline<M, B>, &output_baseline<M, B>};
}

// Runs f(block, t0, t1) over every (channel block, tile range) pair, on the
// OpenMP threads (parallel_tasks).
//
// Tile ranges outermost, channel blocks innermost: the transformed planes
// ([a*a][tiles][channels]) hold one tile's channels contiguously, so a
// thread writes (input transform) or reads (output transform) each
// (plane, tile) row whole while its cache lines are fresh. Block-major
// order made one pass over all the planes per channel block, each touching
// 64 bytes of every row: the input transform of GoogLeNet's 64 -> 192 at
// 56x56 took 0.22 ms that way, 0.12 ms this way (1 thread, the unrolled
// kernels above; 0.17 -> 0.07 ms on 2).
template <class F>
void for_blocks(std::int64_t blocks, std::int64_t tiles, F&& f) {
    constexpr std::int64_t chunk = 8;  // tiles per task: a few KB of output each
    const std::int64_t chunks = (tiles + chunk - 1) / chunk;
    parallel_tasks(blocks * chunks, [&](std::int64_t k) {
        const std::int64_t b = k % blocks, t0 = k / blocks * chunk;
        f(b, t0, std::min(tiles, t0 + chunk));
    });
}

// U[xi][c][k] = (G g G^T)[xi] of weights w [K, C, 3, 3] (row-major).
template <int M>
void transform_weights(const float* w, std::int64_t K, std::int64_t C, float* U) {
    using W = matrices<M>;
    constexpr int a = W::a;
    for (std::int64_t k = 0; k < K; ++k)
        for (std::int64_t c = 0; c < C; ++c) {
            const float* g = w + (k * C + c) * 9;
            float tmp[a][3];
            for (int i = 0; i < a; ++i)
                for (int j = 0; j < 3; ++j) {
                    float s = 0;
                    for (int q = 0; q < 3; ++q) s += W::G[i][q] * g[q * 3 + j];
                    tmp[i][j] = s;
                }
            for (int i = 0; i < a; ++i)
                for (int j = 0; j < a; ++j) {
                    float s = 0;
                    for (int q = 0; q < 3; ++q) s += tmp[i][q] * W::G[j][q];
                    U[((i * a + j) * C + c) * K + k] = s;
                }
        }
}

// Whether the multiplies Winograd saves (C x K per output pixel) outweigh
// the transforms' memory traffic (C + K per pixel). Measured with the
// unrolled transforms (conv + bias + ReLU, 1 / 2 threads, AVX-512 Xeon;
// docs/benchmarks.md, "Winograd convolutions"): 32 -> 64 at 147x147 gains
// 1.42x / 1.25x, 32 -> 32 and 24 -> 48 at 56x56 1.47x / 1.15x and 1.18x /
// 1.23x; with 16 input channels, or few outputs for many inputs, it loses
// on 2 threads: 16 -> 16 0.93x, 16 -> 128 0.83x, 16 -> 256 0.77x,
// 256 -> 32 0.97x, 256 -> 16 0.67x. (Before the kernels were unrolled it
// took only 32 -> 64 and up, with C x K >= 3072.)
inline bool enough_channels(std::int64_t C, std::int64_t K) { return C >= 24 && K >= 32 && 4 * K >= C; }

// The tile size for an H x W output, 0 for the direct method. With AVX2
// alone, F(2x2, 3x3) only where its tiles cover the output exactly: on
// ResNet-50's 7x7 output (512 -> 512; 8x8 computed for 49 outputs, and a
// 16-row matmul per transformed point reading 16 MB of U) it ran 0.69-0.79x
// of oneDNN's direct kernel on the AVX2-only EPYC, while Inception-v3's
// 384 -> 384 at 8x8 ran 1.25-1.44x (bench/winograd_layers.cpp); with
// AVX-512 the 7x7 layer ran 0.99-1.10x and keeps Winograd.
inline int tile_for(std::int64_t H, std::int64_t W, simd isa = cpu_simd()) {
    auto tiles = [&](std::int64_t m) { return ((H + m - 1) / m) * ((W + m - 1) / m); };
    if (tiles(4) >= 9) return 4;
    if (tiles(2) >= 16 && (isa == simd::avx512 || (H % 2 == 0 && W % 2 == 0))) return 2;
    return 0;
}

template <int M, int B>
void lower_as(lowering& L, std::size_t i, const geometry& g, const std::shared_ptr<const tensor<float>>& weights,
              const dn::memory::desc& blocked_in, const dn::memory::desc& blocked_out) {
    constexpr int a = matrices<M>::a;
    const std::int64_t T = g.tiles();
    const dn::memory::desc v_md = plain_md({a * a, T, g.C}), m_md = plain_md({a * a, T, g.K});
    dn::matmul::primitive_desc mm(L.p.eng, v_md, any_md({a * a, g.C, g.K}), m_md, L.attr());
    // U, in the layout the matmul reads, computed once per weight tensor.
    tref U = L.derived_constant(weights, plain_md({a * a, g.C, g.K}), mm.weights_desc(),
                                [&](float* u) { transform_weights<M>(weights->data.data(), g.K, g.C, u); });

    post_chain chain = fusible_chain(L, i, g.K, true, true);
    std::vector<tref> channel;
    const std::vector<epilogue_op> ep = conv_epilogue(L, i, chain, g.K, channel, "winograd");  // act checked by lower()

    const tref x = L.convert(L.in(i, 0), blocked_in, i);
    const tref V = L.fresh(v_md), Mx = L.fresh(m_md), y = L.fresh(blocked_out);
    const auto [in_k, out_k] = kernels<M, B>();
    const std::string tile = "F(" + std::to_string(M) + "x" + std::to_string(M) + ",3x3)";
    L.custom(
        i,
        [g, in_k = in_k](std::span<float* const> in, std::span<float* const> out) {
            for_blocks(g.C / B, g.tiles(), [&](std::int64_t cb, std::int64_t t0, std::int64_t t1) { in_k(in[0], out[0], g, cb, t0, t1); });
        },
        {x}, {V}, "winograd " + tile + " input transform");
    L.add<dn::matmul>(i, mm, {{DNNL_ARG_SRC, V}, {DNNL_ARG_WEIGHTS, U}, {DNNL_ARG_DST, Mx}}, "winograd " + tile + " matmul");
    std::vector<tref> ins{Mx};
    ins.insert(ins.end(), channel.begin(), channel.end());
    L.custom(
        i,
        [g, ep, out_k = out_k](std::span<float* const> in, std::span<float* const> out) {
            const std::span<const float* const> channel(in.data() + 1, in.size() - 1);
            for_blocks(g.K / B, g.tiles(), [&](std::int64_t kb, std::int64_t t0, std::int64_t t1) {
                out_k(in[0], out[0], g, kb, t0, t1, ep, channel);
            });
        },
        std::move(ins), {y},
        "winograd " + tile + " output transform" + (chain.nodes.empty() ? "" : " + " + std::to_string(chain.nodes.size()) + " fused"));
    L.set(i, 0, y);
    absorb_chain(L, chain, i, y);
}

// The geometry of conv2d node i where its parameters and shapes qualify for
// Winograd (see the top of this file), tiles included; lower() takes it
// unless oneDNN's direct convolution reads a layout the transforms do not.
inline std::optional<geometry> qualifying_geometry(const lowering& L, std::size_t i) {
    using namespace spec::conv2d_p;
    if (!L.options.winograd) return std::nullopt;
    const node& n = L.at(i);
    if (n.params[act] > 1 || n.out_layout == spec::layout::nhwc || !L.is_const(i, 1)) return std::nullopt;
    const shape &xs = L.in_shape(i, 0), &ws = L.in_shape(i, 1);
    if (xs.rank != 4 || ws.rank != 4 || ws[2] != 3 || ws[3] != 3 || ws[1] != xs[1]) return std::nullopt;
    if (n.params[stride_h] != 1 || n.params[stride_w] != 1 || n.params[dil_h] != 1 || n.params[dil_w] != 1) return std::nullopt;
    const auto pm = static_cast<spec::pad_mode>(n.params[pad]);
    if (spec::detail::window_pad(3, 1, pm) != 1) return std::nullopt;
    geometry g{xs[0], xs[1], ws[0], xs[2], xs[3], 0, 0};
    if (L.out_dims(i) != dims{g.N, g.K, g.H, g.W} || !enough_channels(g.C, g.K)) return std::nullopt;
    g.m = tile_for(g.H, g.W);
    if (g.m == 0) return std::nullopt;
    g.th = (g.H + g.m - 1) / g.m;
    g.tw = (g.W + g.m - 1) / g.m;
    return g;
}

// Lowers conv2d node i by Winograd where it qualifies; false: the direct
// convolution should.
inline bool lower(lowering& L, std::size_t i) {
    auto qualifying = qualifying_geometry(L, i);
    if (!qualifying) return false;
    geometry g = *qualifying;
    const int m = g.m;
    const node& n = L.at(i);
    const dims od = L.out_dims(i);
    const auto& weights = L.cvals[static_cast<std::size_t>(n.inputs[1].node)];
    if (weights.empty() || !weights[static_cast<std::size_t>(n.inputs[1].output)]) return false;
    const auto& w = weights[static_cast<std::size_t>(n.inputs[1].output)];
    const dims xd = L.in_dims(i, 0);
    const auto m0 = L.checkpoint();
    try {
        // The channel block of the layout oneDNN's direct convolution reads here.
        const dn::convolution_forward::primitive_desc direct(
            L.p.eng, dn::prop_kind::forward_inference, dn::algorithm::convolution_direct, any_md(xd), any_md(L.in_dims(i, 1)),
            any_md(od), dims{1, 1}, dims{0, 0}, dims{1, 1}, dims{1, 1}, L.attr());
        // The layout oneDNN's direct convolution reads and writes here: blocked
        // (nChw16c, nChw8c) or channels last (brgconv's nhwc). The
        // transforms work in it, so no reorder is added around them.
        auto fits = [&](int b) { return g.C % b == 0 && g.K % b == 0; };
        int block = 0;
        tag t = tag::undef;
        if (direct.src_desc() == dn::memory::desc(xd, f32, tag::nChw16c) && fits(16)) block = 16, t = tag::nChw16c;
        else if (direct.src_desc() == dn::memory::desc(xd, f32, tag::nChw8c) && fits(8)) block = 8, t = tag::nChw8c;
        else if (direct.src_desc() == dn::memory::desc(xd, f32, tag::nhwc)) {
            t = tag::nhwc;  // channel blocks of the width of the CPU's vectors
            block = cpu_simd() == simd::avx512 && fits(16) ? 16 : fits(8) ? 8 : 0;
        }
        if (block == 0) return false;
        const dn::memory::desc in_md(xd, f32, t), out_md(od, f32, t);
        g.in = strides::of(t == tag::nhwc, g.C, g.H, g.W, block);
        g.out = strides::of(t == tag::nhwc, g.K, g.H, g.W, block);
        if (m == 4 && block == 16) lower_as<4, 16>(L, i, g, w, in_md, out_md);
        else if (m == 4) lower_as<4, 8>(L, i, g, w, in_md, out_md);
        else if (block == 16) lower_as<2, 16>(L, i, g, w, in_md, out_md);
        else lower_as<2, 8>(L, i, g, w, in_md, out_md);
        return true;
    } catch (const dn::error&) {
        L.rollback(m0, i);  // oneDNN refused a part: the direct convolution instead
        return false;
    }
}

}  // namespace tsopt::backend::dnnl_impl::winograd
