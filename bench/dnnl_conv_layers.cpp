// The convolution layers of ResNet-50 (1 image, fused ReLU, layouts left to
// oneDNN) timed alone on the configured oneDNN: what chose the oneDNN
// version (docs/benchmarks.md, "Which oneDNN"). Build it against another
// oneDNN (-Donednn_prefix=...) to compare versions on one machine.
//
//   OMP_NUM_THREADS=1 build/bench/dnnl_conv_layers
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <unordered_map>

int main() {
    using namespace dnnl;
    using tag = memory::format_tag;
    struct layer { memory::dim ic, oc, h, k, s; };
    const layer layers[] = {{3, 64, 224, 7, 2},    {64, 64, 56, 1, 1},    {64, 64, 56, 3, 1},   {64, 256, 56, 1, 1},
                            {256, 128, 56, 1, 1},  {128, 128, 56, 3, 2},  {128, 512, 28, 1, 1}, {256, 256, 28, 3, 2},
                            {256, 256, 14, 3, 1},  {1024, 256, 14, 1, 1}, {512, 512, 7, 3, 1},  {2048, 512, 7, 1, 1}};
    engine eng(engine::kind::cpu, 0);
    stream st(eng);
    const auto* v = version();
    std::printf("oneDNN %d.%d.%d, 12 ResNet-50 convolutions, best of 15 runs each\n", v->major, v->minor, v->patch);
    double total_ms = 0, total_flops = 0;
    for (const layer& l : layers) {
        const memory::dim p = l.k / 2, oh = (l.h + 2 * p - l.k) / l.s + 1;
        const auto f32 = memory::data_type::f32;
        memory::desc src({1, l.ic, l.h, l.h}, f32, tag::any), wei({l.oc, l.ic, l.k, l.k}, f32, tag::any),
            bias({l.oc}, f32, tag::x), dst({1, l.oc, oh, oh}, f32, tag::any);
        post_ops po;
        po.append_eltwise(algorithm::eltwise_relu, 0.f, 0.f);
        primitive_attr attr;
        attr.set_post_ops(po);
        convolution_forward::primitive_desc pd(eng, prop_kind::forward_inference, algorithm::convolution_direct, src, wei, bias,
                                               dst, {l.s, l.s}, {p, p}, {p, p}, attr);
        memory s(pd.src_desc(), eng), w(pd.weights_desc(), eng), b(bias, eng), d(pd.dst_desc(), eng);
        convolution_forward conv(pd);
        std::unordered_map<int, memory> args{{DNNL_ARG_SRC, s}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_BIAS, b}, {DNNL_ARG_DST, d}};
        for (int i = 0; i < 3; ++i) conv.execute(st, args);
        st.wait();
        double best = 1e30;
        for (int r = 0; r < 15; ++r) {
            auto t0 = std::chrono::steady_clock::now();
            conv.execute(st, args);
            st.wait();
            best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
        const double flops = 2.0 * static_cast<double>(l.oc * oh * oh * l.ic * l.k * l.k);
        std::printf("%5lld -> %4lld  %3lldx%-3lld k%lld s%lld  %8.3f ms  %6.1f GF/s  %s\n", static_cast<long long>(l.ic),
                    static_cast<long long>(l.oc), static_cast<long long>(l.h), static_cast<long long>(l.h),
                    static_cast<long long>(l.k), static_cast<long long>(l.s), best, flops / best / 1e6, pd.impl_info_str());
        total_ms += best;
        total_flops += flops;
    }
    std::printf("total %.3f ms, %.1f GF/s\n", total_ms, total_flops / total_ms / 1e6);
}
