// Depthwise convolutions of NASNet-Mobile (11 to 176 channels, 3x3 to 7x7,
// stride 1 and 2), NASNet-A and MobileNetV2 (up to 1008 channels) on
// oneDNN: channels-last in the kernel `format_tag::any` picks (brdgmm_dw on
// AVX-512, what the 1x1 brgconv before it leaves) and in the next
// implementation oneDNN lists for the same layouts (jit_dw), and nChw16c
// (jit_dw), plus the reorder of the input into nChw16c that running one
// alone in that layout costs; and the 1x1 convolutions after them in both
// layouts (brgconv_1x1 vs jit_1x1). What tells which kernel a channels-last
// depthwise convolution should run in (backend/dnnl/conv2d.hpp,
// jit_depthwise_below_channels) and whether a blocked island around the
// separable convolutions would pay (docs/benchmarks.md, "Depthwise
// convolutions: kernels" and "... layouts").
//
//   OMP_NUM_THREADS=1 build/bench/dnnl_depthwise_layouts
//
// The forms run in alternation, 500 rounds, best of each: the machines here
// are shared, and alternation lets load drift hit both alike.
#include <oneapi/dnnl/dnnl.hpp>

#include "dnnl_fill.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

using namespace dnnl;
using tag = memory::format_tag;
constexpr auto f32 = memory::data_type::f32;

using tsopt::bench::fill;

struct timed_primitive {
    primitive p;
    std::unordered_map<int, memory> args;
    std::string impl;
    double best = 1e30;
};

timed_primitive conv_with(const engine& eng, const convolution_forward::primitive_desc& pd) {
    timed_primitive r{convolution_forward(pd), {}, pd.impl_info_str()};
    r.args = {{DNNL_ARG_SRC, memory(pd.src_desc(), eng)}, {DNNL_ARG_WEIGHTS, memory(pd.weights_desc(), eng)},
              {DNNL_ARG_BIAS, memory(pd.bias_desc(), eng)}, {DNNL_ARG_DST, memory(pd.dst_desc(), eng)}};
    for (auto& [k, m] : r.args) fill(m);
    return r;
}

convolution_forward::primitive_desc conv_pd(const engine& eng, memory::dims src, memory::dims w, memory::dims dst, tag t, int stride,
                                            int pad) {
    const memory::dims b{dst[1]};
    return convolution_forward::primitive_desc(eng, prop_kind::forward_inference, algorithm::convolution_direct,
                                               memory::desc(src, f32, t), memory::desc(w, f32, tag::any),
                                               memory::desc(b, f32, tag::x), memory::desc(dst, f32, t), {stride, stride},
                                               {pad, pad}, {pad, pad});
}

timed_primitive conv(const engine& eng, memory::dims src, memory::dims w, memory::dims dst, tag t, int stride, int pad) {
    return conv_with(eng, conv_pd(eng, src, w, dst, t, stride, pad));
}

timed_primitive to_blocked(const engine& eng, memory::dims d) {
    memory from(memory::desc(d, f32, tag::nhwc), eng), to(memory::desc(d, f32, tag::nChw16c), eng);
    fill(from);
    return {reorder(from, to), {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}}, "reorder"};
}

void time_all(stream& s, std::vector<timed_primitive*> ps) {
    for (int round = 0; round < 500; ++round)
        for (auto* p : ps) {
            const auto t0 = std::chrono::steady_clock::now();
            p->p.execute(s, p->args);
            s.wait();
            p->best = std::min(p->best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
}

}  // namespace

int main() {
    engine eng(engine::kind::cpu, 0);
    stream s(eng);
    struct depthwise { int c, hw, k, stride; };
    std::printf("depthwise: channels, input size, kernel, stride | channels-last ms [first kernel] | channels-last ms [next"
                " jit_dw] | its gain | nChw16c ms [kernel] | gain over the first | reorder in ms\n");
    for (auto l : std::vector<depthwise>{{11, 111, 7, 2}, {11, 56, 7, 1}, {22, 56, 7, 2}, {44, 28, 5, 1}, {44, 28, 3, 1},
                                         {88, 28, 7, 2}, {88, 14, 5, 1}, {176, 14, 7, 2}, {176, 7, 3, 1},
                                         // MobileNetV2, NASNet-A (ResNet-sized stages)
                                         {32, 112, 3, 1}, {96, 112, 3, 2}, {144, 56, 3, 1}, {192, 28, 3, 1}, {384, 14, 3, 1},
                                         {576, 14, 3, 1}, {576, 14, 3, 2}, {960, 7, 3, 1}, {168, 42, 5, 1}, {336, 21, 3, 1},
                                         {672, 11, 5, 1}, {1008, 11, 7, 2}}) {
        const int pad = l.k / 2, out = (l.hw + 2 * pad - l.k) / l.stride + 1;
        const memory::dims src{1, l.c, l.hw, l.hw}, w{l.c, 1, 1, l.k, l.k}, dst{1, l.c, out, out};
        auto first = conv_pd(eng, src, w, dst, tag::nhwc, l.stride, pad);
        auto next = conv_pd(eng, src, w, dst, tag::nhwc, l.stride, pad);  // a copy would share (and advance) first's implementation
        while (next.next_impl() && !std::string(next.impl_info_str()).starts_with("jit_dw")) {
        }
        const bool has_next = std::string(next.impl_info_str()).starts_with("jit_dw");
        auto last = conv_with(eng, first), last_jit = conv_with(eng, has_next ? next : first);
        auto blocked = conv(eng, src, w, dst, tag::nChw16c, l.stride, pad);
        auto in = to_blocked(eng, src);
        time_all(s, {&last, &last_jit, &blocked, &in});
        std::printf("  c%-4d %3dx%-3d k%d s%d | %.4f [%s] | %.4f [%s] | %.2fx | %.4f [%s] | %.2fx | %.4f\n", l.c, l.hw, l.hw, l.k,
                    l.stride, last.best, last.impl.c_str(), last_jit.best, has_next ? last_jit.impl.c_str() : "none",
                    last.best / last_jit.best, blocked.best, blocked.impl.c_str(), last.best / blocked.best, in.best);
    }
    struct pointwise { int ci, co, hw; };
    std::printf("1x1: in, out channels, size | channels-last ms [kernel] | nChw16c ms [kernel] | gain\n");
    for (auto l : std::vector<pointwise>{{11, 11, 56}, {22, 22, 28}, {44, 44, 28}, {88, 88, 14}, {176, 176, 7}, {264, 44, 28}}) {
        const memory::dims src{1, l.ci, l.hw, l.hw}, w{l.co, l.ci, 1, 1}, dst{1, l.co, l.hw, l.hw};
        auto last = conv(eng, src, w, dst, tag::nhwc, 1, 0), blocked = conv(eng, src, w, dst, tag::nChw16c, 1, 0);
        time_all(s, {&last, &blocked});
        std::printf("  %4d->%-4d %3dx%-3d | %.4f [%s] | %.4f [%s] | %.2fx\n", l.ci, l.co, l.hw, l.hw, last.best, last.impl.c_str(),
                    blocked.best, blocked.impl.c_str(), last.best / blocked.best);
    }
}
