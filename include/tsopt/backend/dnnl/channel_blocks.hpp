#pragma once
// What the backend's own convolution kernels share (Winograd, winograd.hpp;
// small groups, grouped_conv.hpp): activations addressed by channel block
// (blocked nChwBc or channels-last nhwc, B channels contiguous at each pixel),
// a block of channels as one SIMD register of B floats, the per-channel
// epilogue applied before a block is stored (the operators after the
// convolution that oneDNN would run as its post-ops), and the run-time pick
// of the kernel compiled for the CPU.
#include <cstring>
#include <span>

#include "tsopt/backend/dnnl/post_chain.hpp"

namespace tsopt::backend::dnnl_impl {

// Where element (n, channel block, y, x) of an activation starts, in floats;
// the block's channels follow it contiguously. Blocked nChwBc and
// channel-last nhwc are both such layouts.
struct strides {
    std::int64_t n = 0, block = 0, y = 0, x = 0;
    std::int64_t at(std::int64_t in, std::int64_t ib, std::int64_t iy, std::int64_t ix) const {
        return in * n + ib * block + iy * y + ix * x;
    }
    // nChwBc (blocked) or nhwc (channels last) of an N x C x H x W tensor.
    static strides of(bool channels_last, std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t B) {
        if (channels_last) return {H * W * C, B, W * C, C};
        return {C / B * H * W * B, H * W * B, W * B, B};
    }
};

// One channel block: a SIMD register where the target has one. (A typedef
// in a class template: GCC drops vector_size on an alias template.)
template <int B>
struct lanes_of {
    typedef float type __attribute__((vector_size(B * sizeof(float))));
};
template <int B>
using lanes = typename lanes_of<B>::type;
static_assert(sizeof(lanes<16>) == 16 * sizeof(float));

// (By reference: a vector passed or returned by value would have another
// ABI in each target a kernel is compiled for.)
template <int B>
[[gnu::always_inline]] inline void load(lanes<B>& v, const float* p) {
    std::memcpy(&v, p, sizeof v);
}
template <int B>
[[gnu::always_inline]] inline void store(float* p, const lanes<B>& v) {
    std::memcpy(p, &v, sizeof v);
}

// What a kernel applies to its result before storing it, in order.
struct epilogue_op {
    enum class kind { add, mul, relu, clip } k;
    int operand = -1;        // add / mul: index into the step's per-channel inputs
    float alpha = 0, beta = 0;  // relu: negative slope; clip: bounds
};

// The most operators an epilogue applies: the convolution's own activation
// and a post-op chain (max_post_ops).
inline constexpr std::size_t max_epilogue = max_post_ops + 1;

// The epilogue for the longest prefix of `chain` a kernel can apply (the
// rest is cut off and lowered by itself); per-channel operands are appended
// to `channel` as plain [K] views.
inline std::vector<epilogue_op> epilogue_for(post_chain& chain, std::int64_t K, std::vector<tref>& channel) {
    std::vector<epilogue_op> ep;
    std::size_t k = 0;
    for (; k < chain.nodes.size(); ++k) {
        const auto alg = chain.ops[k].first;
        const auto [alpha, beta] = chain.eltwise_ab[k];
        if (chain.kinds[k] == post_chain::kind::binary) {
            channel.push_back(chain.ops[k].second.as(plain_md({K})));
            ep.push_back({alg == dn::algorithm::binary_add ? epilogue_op::kind::add : epilogue_op::kind::mul,
                          static_cast<int>(channel.size() - 1)});
        } else if (chain.kinds[k] == post_chain::kind::eltwise && alg == dn::algorithm::eltwise_relu)
            ep.push_back({epilogue_op::kind::relu, -1, alpha, 0});
        else if (chain.kinds[k] == post_chain::kind::eltwise &&
                 (alg == dn::algorithm::eltwise_clip || alg == dn::algorithm::eltwise_clip_v2))
            ep.push_back({epilogue_op::kind::clip, -1, alpha, beta});
        else
            break;  // a sum (into another tensor's buffer) or another eltwise
    }
    chain.truncate(k);
    return ep;
}

// The convolution's own activation (relu or none: the caller checked), then
// the chain after it as an epilogue; the chain is cut where the epilogue
// stops. `who` names the kernel in the error a too-long chain would raise.
inline std::vector<epilogue_op> conv_epilogue(lowering& L, std::size_t i, post_chain& chain, std::int64_t K,
                                              std::vector<tref>& channel, const char* who) {
    std::vector<epilogue_op> ep;
    if (L.at(i).params[spec::conv2d_p::act]) ep.push_back({epilogue_op::kind::relu, -1, 0, 0});
    auto rest = epilogue_for(chain, K, channel);
    ep.insert(ep.end(), rest.begin(), rest.end());
    if (ep.size() > max_epilogue)  // fusible_chain stops at max_post_ops
        throw error(std::string(who) + ": an epilogue of " + std::to_string(ep.size()) + " operators (at most " +
                    std::to_string(max_epilogue) + ")");
    return ep;
}

// The per-channel operands of output block kb, loaded once for its pixels.
template <int B>
[[gnu::always_inline]] inline void load_operands(lanes<B>* operands, std::span<const epilogue_op> ep,
                                                 std::span<const float* const> channel, std::int64_t kb) {
    for (std::size_t q = 0; q < ep.size(); ++q)
        if (ep[q].operand >= 0) load<B>(operands[q], channel[static_cast<std::size_t>(ep[q].operand)] + kb * B);
}

template <int B>
[[gnu::always_inline]] inline void apply_epilogue(lanes<B>& acc, std::span<const epilogue_op> ep, const lanes<B>* operands) {
    for (std::size_t q = 0; q < ep.size(); ++q) switch (const epilogue_op& e = ep[q]; e.k) {
            case epilogue_op::kind::add: acc += operands[q]; break;
            case epilogue_op::kind::mul: acc *= operands[q]; break;
            case epilogue_op::kind::relu: {
                const lanes<B> zero{};
                acc = acc > zero ? acc : acc * e.alpha;
                break;
            }
            case epilogue_op::kind::clip: {
                const lanes<B> lo = lanes<B>{} + e.alpha, hi = lanes<B>{} + e.beta;
                acc = acc < lo ? lo : acc;
                acc = acc > hi ? hi : acc;
                break;
            }
        }
}

// Which instruction set the kernels run with on this CPU: each kernel is
// compiled for AVX-512, for AVX2 with FMA and for the baseline the program
// is built for.
enum class simd { baseline, avx2, avx512 };
inline simd cpu_simd() {
#if defined(__x86_64__) || defined(__i386__)
    if (__builtin_cpu_supports("avx512f")) return simd::avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return simd::avx2;
#endif
    return simd::baseline;
}

// Runs f(k) for k in [0, tasks) on the OpenMP threads oneDNN runs on (the
// same runtime, libgomp) where the program is built with OpenMP, else on
// this thread.
template <class F>
void parallel_tasks(std::int64_t tasks, F&& f) {
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (std::int64_t k = 0; k < tasks; ++k) f(k);
}

}  // namespace tsopt::backend::dnnl_impl
