#pragma once
// Grouped convolutions with 2 or 4 channels per group in and out
// (ResNeXt-50 32x4d's first stage: 32 groups of 4) by tsopt's own direct
// kernel. oneDNN 3.2 on AVX2 has no direct kernel for them and runs im2col +
// gemm (x64:gemm:jit): ResNeXt-50's 128-channel 56x56 layer takes 4.6-7.2
// ms at 1 thread, 2.9-5.4 at 2, this kernel 1.2 and 0.65 (ONNX Runtime: 1.6
// at 1 thread); 2 channels per group alike (docs/benchmarks.md, "Grouped
// convolutions with small groups", bench/dnnl_grouped_conv_layouts.cpp).
// From 8 channels per group on oneDNN's jit:avx2 and brgconv kernels are as
// fast or faster, and keep them.
//
// How: a block of 8 output channels is one register of 8 lanes holding 8/G
// whole groups, and the input channels those groups read are the same block
// of the input (G divides 8 and the groups have as many inputs as outputs).
// For input channel c of its group every lane needs its own group's c-th
// input: a shuffle within the loaded block (for G = 4, vpermilps: lanes 0-3
// take element c, lanes 4-7 element 4 + c). So per tap and pixel: one load,
// G shuffles and G multiply-adds against weight registers whose lane l
// holds w[8 kb + l][c][ky][kx], arranged once at compile time
// ([block][ky][kx][c][8]). Four output pixels of a row share each weight
// register; the pixels whose taps all fall inside the input take a path
// without bounds checks. Input and output are channel-blocked (channels-last
// nhwc, where a 1x1 brgconv leaves them, or nChw8c), so no reorder
// separates the kernel from its neighbours, and the operators after the
// convolution (bias, ReLU, per-channel multiplies and adds, clip) are
// applied before a block is stored.
//
// Where: CPUs with AVX2 and without AVX-512 (where it was measured against
// oneDNN's kernels), unless dnnl::options::small_groups says always or never
// (grouped_conv_choice.hpp asks).
#include <optional>
#include <utility>

#include "tsopt/backend/dnnl/channel_blocks.hpp"

namespace tsopt::backend::dnnl_impl::small_groups {

inline constexpr int block = 8;  // channels per register (AVX2)

// Extents of one grouped convolution; padding before the first row and
// column is `pt`, `pl` (the rest follows from the output extents).
struct geometry {
    std::int64_t N = 1, C = 0, H = 0, W = 0, OH = 0, OW = 0;
    std::int64_t kh = 0, kw = 0, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0;
    strides in{}, out{};
    // Output columns [lo, hi] read no padding in any tap.
    std::int64_t interior_lo() const { return (pl + sw - 1) / sw; }
    std::int64_t interior_hi() const {
        const std::int64_t last = W - 1 + pl - (kw - 1) * dw;  // ox * sw may reach this
        return last < 0 ? -1 : std::min(OW - 1, last / sw);
    }
};

// Which lane of a loaded block each lane takes for input channel c of its
// group: l - l % G + c.
using lane_index = int __attribute__((vector_size(block * sizeof(int))));
template <int G, int c, class L = std::make_integer_sequence<int, block>>
struct channel_lanes;
template <int G, int c, int... l>
struct channel_lanes<G, c, std::integer_sequence<int, l...>> {
    static constexpr lane_index value{(l - l % G + c)...};
};

// acc += (input channel c of each lane's group) * w, v the loaded block.
// (No lambdas on this path: GCC compiles a lambda in a target("avx2")
// function for the baseline, out of line. Vectors by reference: by value
// they would have another ABI in each target.)
template <int G, int c>
[[gnu::always_inline]] inline void multiply_add(lanes<block>& acc, const lanes<block>& v, const lanes<block>& w) {
    acc += __builtin_shuffle(v, channel_lanes<G, c>::value) * w;
}

inline constexpr int pixels = 4;  // output pixels of a row computed together

// Input channels c.. G - 1 of one tap into one pixel's accumulator.
template <int G, int c>
[[gnu::always_inline]] inline void taps(lanes<block>& acc, const lanes<block>& v, const lanes<block>* w) {
    if constexpr (c < G) {
        multiply_add<G, c>(acc, v, w[c]);
        taps<G, c + 1>(acc, v, w);
    }
}

// Output pixels [ox0, ox0 + count) of row oy, block kb; `inside`: every tap
// of these pixels reads the input (no bounds checks). Each pixel's block is
// loaded once per tap and shuffled once per input channel; the pixels'
// accumulators are four independent multiply-add chains.
template <int G, bool inside>
[[gnu::always_inline]] inline void row_tile(const float* x, const float* wb, float* y, const geometry& g, std::int64_t n,
                                            std::int64_t kb, std::int64_t oy, std::int64_t ox0, int count,
                                            std::span<const epilogue_op> ep, const lanes<block>* operands) {
    lanes<block> acc[pixels] = {};
    for (std::int64_t ky = 0; ky < g.kh; ++ky) {
        const std::int64_t iy = oy * g.sh - g.pt + ky * g.dh;
        if (iy < 0 || iy >= g.H) continue;
        const float* row = x + g.in.at(n, kb, iy, 0);
        for (std::int64_t kx = 0; kx < g.kw; ++kx) {
            lanes<block> w[G];
            #pragma GCC unroll 8
            for (int c = 0; c < G; ++c) load<block>(w[c], wb + ((ky * g.kw + kx) * G + c) * block);
            #pragma GCC unroll 4
            for (int j = 0; j < pixels; ++j) {
                const std::int64_t ix = (ox0 + j) * g.sw - g.pl + kx * g.dw;
                if (!inside && (j >= count || ix < 0 || ix >= g.W)) continue;
                lanes<block> v;
                load<block>(v, row + ix * g.in.x);
                taps<G, 0>(acc[j], v, w);
            }
        }
    }
    #pragma GCC unroll 4
    for (int j = 0; j < pixels; ++j) {
        if (!inside && j >= count) break;
        apply_epilogue<block>(acc[j], ep, operands);
        store<block>(y + g.out.at(n, kb, oy, ox0 + j), acc[j]);
    }
}

// Output row oy of image n, blocks [kb0, kb1). wv: [C / 8][kh][kw][G][8].
// Blocks innermost: a tile's pixels are read and written across the range's
// channels contiguously (one block at a time, block after block, left the
// prefetchers a stride to follow through every pixel and ran ResNeXt's
// 56x56 layer 1.5x slower with the input coming from memory).
template <int G>
[[gnu::always_inline]] inline void row_body(const float* x, const float* wv, float* y, const geometry& g, std::int64_t n,
                                            std::int64_t kb0, std::int64_t kb1, std::int64_t oy, std::span<const epilogue_op> ep,
                                            std::span<const float* const> channel) {
    lanes<block> operands[max_epilogue];
    const std::int64_t lo = std::min(g.interior_lo(), g.OW), hi = g.interior_hi();
    for (std::int64_t ox = 0; ox < g.OW;) {
        // A tile inside the input, or one at a border (or the last, partial one).
        const bool inside = ox >= lo && ox + pixels - 1 <= hi;
        const std::int64_t end = inside ? ox + pixels : ox < lo ? std::min(lo, ox + pixels) : std::min(g.OW, ox + pixels);
        for (std::int64_t kb = kb0; kb < kb1; ++kb) {
            load_operands<block>(operands, ep, channel, kb);
            const float* wb = wv + kb * g.kh * g.kw * G * block;
            if (inside) row_tile<G, true>(x, wb, y, g, n, kb, oy, ox, pixels, ep, operands);
            else row_tile<G, false>(x, wb, y, g, n, kb, oy, ox, static_cast<int>(end - ox), ep, operands);
        }
        ox = end;
    }
}

using row_kernel = void (*)(const float*, const float*, float*, const geometry&, std::int64_t, std::int64_t, std::int64_t,
                            std::int64_t, std::span<const epilogue_op>, std::span<const float* const>);

template <int G>
[[gnu::target("avx2,fma")]] void row_avx2(const float* x, const float* wv, float* y, const geometry& g, std::int64_t n,
                                          std::int64_t kb0, std::int64_t kb1, std::int64_t oy, std::span<const epilogue_op> ep,
                                          std::span<const float* const> channel) {
    row_body<G>(x, wv, y, g, n, kb0, kb1, oy, ep, channel);
}
template <int G>
void row_baseline(const float* x, const float* wv, float* y, const geometry& g, std::int64_t n, std::int64_t kb0, std::int64_t kb1,
                  std::int64_t oy, std::span<const epilogue_op> ep, std::span<const float* const> channel) {
    row_body<G>(x, wv, y, g, n, kb0, kb1, oy, ep, channel);
}

template <int G>
row_kernel kernel_for(simd s) {
    return s == simd::baseline ? &row_baseline<G> : &row_avx2<G>;
}
inline row_kernel kernel_for(int G, simd s) {
    switch (G) {
        case 2: return kernel_for<2>(s);
        case 4: return kernel_for<4>(s);
        default: throw error("small_groups: " + std::to_string(G) + " channels per group (2 or 4)");
    }
}

// Blocks per task: 128 bytes of every pixel, so the rows of a small image
// still make enough tasks for the threads.
inline constexpr std::int64_t blocks_per_task = 4;

// Every output row, in ranges of blocks, on the OpenMP threads.
inline void run(row_kernel k, const float* x, const float* wv, float* y, const geometry& g, std::span<const epilogue_op> ep,
                std::span<const float* const> channel) {
    const std::int64_t blocks = g.C / block, rows = g.N * g.OH, ranges = (blocks + blocks_per_task - 1) / blocks_per_task;
    parallel_tasks(rows * ranges, [&](std::int64_t t) {
        const std::int64_t row = t / ranges, kb0 = t % ranges * blocks_per_task;
        k(x, wv, y, g, row / g.OH, kb0, std::min(blocks, kb0 + blocks_per_task), row % g.OH, ep, channel);
    });
}

// w [C, G, kh, kw] (row-major) as the kernel reads it: [C / 8][kh][kw][G][8].
inline void arrange_weights(const float* w, std::int64_t C, int G, std::int64_t kh, std::int64_t kw, float* out) {
    for (std::int64_t kb = 0; kb < C / block; ++kb)
        for (std::int64_t t = 0; t < kh * kw; ++t)
            for (int c = 0; c < G; ++c)
                for (int l = 0; l < block; ++l)
                    out[((kb * kh * kw + t) * G + c) * block + l] = w[((kb * block + l) * G + c) * kh * kw + t];
}

// Whether this CPU runs the kernel by default (kernel_use::automatic):
// where oneDNN 3.2 has only its gemm or jit:avx2 kernels for small groups.
inline bool automatic_here() { return cpu_simd() == simd::avx2; }

// The kernel's geometry for conv2d node i, channels-last; nullopt where the
// kernel does not take it (not 2 or 4 channels per group in and out,
// channels not a multiple of 8, an activation other than ReLU, weights that
// are not constant).
inline std::optional<geometry> geometry_of(const lowering& L, std::size_t i) {
    using namespace spec::conv2d_p;
    const node& n = L.at(i);
    if (n.params[act] > 1 || !L.is_const(i, 1)) return std::nullopt;
    const shape &xs = L.in_shape(i, 0), &ws = L.in_shape(i, 1);
    if (xs.rank != 4 || ws.rank != 4 || ws[0] != xs[1]) return std::nullopt;  // as many outputs as inputs
    const std::int64_t G = ws[1], C = xs[1];
    if ((G != 2 && G != 4) || C % block != 0) return std::nullopt;
    const auto& weights = L.cvals[static_cast<std::size_t>(n.inputs[1].node)];
    if (weights.empty() || !weights[static_cast<std::size_t>(n.inputs[1].output)]) return std::nullopt;
    const auto pm = static_cast<spec::pad_mode>(n.params[pad]);
    geometry g;
    g.N = xs[0], g.C = C, g.H = xs[2], g.W = xs[3];
    g.kh = ws[2], g.kw = ws[3], g.sh = n.params[stride_h], g.sw = n.params[stride_w], g.dh = n.params[dil_h], g.dw = n.params[dil_w];
    g.pt = spec::detail::window_pad(g.kh, g.dh, pm), g.pl = spec::detail::window_pad(g.kw, g.dw, pm);
    const dims od = L.out_dims(i);
    g.OH = od[2], g.OW = od[3];
    g.in = strides::of(true, g.C, g.H, g.W, block);
    g.out = strides::of(true, g.C, g.OH, g.OW, block);
    return g;
}

// Lowers conv2d node i, of geometry `g` (geometry_of), with this kernel;
// false: the oneDNN convolution should. (Whether to:
// grouped_conv_choice.hpp.)
inline bool lower(lowering& L, std::size_t i, geometry g) {
    const node& n = L.at(i);
    const std::int64_t G = L.in_shape(i, 1)[1], C = g.C;
    const auto& w = L.cvals[static_cast<std::size_t>(n.inputs[1].node)][static_cast<std::size_t>(n.inputs[1].output)];
    const dims od = L.out_dims(i);
    // Channels last unless the input arrives nChw8c (or the node asks for nhwc out).
    const dims xd = L.in_dims(i, 0);
    const bool blocked_in = n.out_layout != spec::layout::nhwc && L.in(i, 0).md == dn::memory::desc(xd, f32, tag::nChw8c);
    const tag t = blocked_in ? tag::nChw8c : tag::nhwc;
    g.in = strides::of(!blocked_in, g.C, g.H, g.W, block);
    g.out = strides::of(!blocked_in, g.C, g.OH, g.OW, block);

    const auto m0 = L.checkpoint();
    try {
        const tref x = L.convert(L.in(i, 0), dn::memory::desc(xd, f32, t), i);
        const tref wv = L.derived_constant(w, plain_md({C / block, g.kh, g.kw, G, block}), plain_md({C / block, g.kh, g.kw, G, block}),
                                           [&](float* out) { arrange_weights(w->data.data(), C, static_cast<int>(G), g.kh, g.kw, out); });
        post_chain chain = fusible_chain(L, i, C, true, true);
        std::vector<tref> channel;
        const std::vector<epilogue_op> ep = conv_epilogue(L, i, chain, C, channel, "small-group convolution");
        const tref y = L.fresh(dn::memory::desc(od, f32, t));
        std::vector<tref> ins{x, wv};
        ins.insert(ins.end(), channel.begin(), channel.end());
        const row_kernel k = kernel_for(static_cast<int>(G), cpu_simd());
        L.custom(
            i,
            [g, ep, k](std::span<float* const> in, std::span<float* const> out) {
                run(k, in[0], in[1], out[0], g, ep, std::span<const float* const>(in.data() + 2, in.size() - 2));
            },
            std::move(ins), {y},
            "grouped convolution " + std::to_string(G) + " channels per group" +
                (chain.nodes.empty() ? "" : " + " + std::to_string(chain.nodes.size()) + " fused"));
        L.set(i, 0, y);
        absorb_chain(L, chain, i, y);
        return true;
    } catch (const dn::error&) {
        L.rollback(m0, i);
        return false;
    }
}

}  // namespace tsopt::backend::dnnl_impl::small_groups
