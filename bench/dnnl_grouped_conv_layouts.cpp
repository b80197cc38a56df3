// ResNeXt-50 (32x4d)'s grouped 3x3 convolutions (+ bias + relu), each fed
// a channels-last input as the 1x1 brgconv before it leaves one, timed
// three ways: on the configured oneDNN with layouts left to it
// (format_tag::any, plus the reorders into and out of what it picks) and
// channels-last throughout, and, for 2 or 4 channels per group, by tsopt's
// own kernel (backend/dnnl/grouped_conv.hpp, channels-last). What made the
// oneDNN plan keep a channels-last input's layout for grouped convolutions
// (backend/dnnl/conv2d.hpp keep_channels_last) and take tsopt's kernel for
// small groups on AVX2 (docs/benchmarks.md, "Grouped convolutions
// channels-last", "Grouped convolutions with small groups"), and what
// showed that the first of these depends on the CPU, so the plan now times
// it on the machine (backend/dnnl/grouped_conv_choice.hpp; "Grouped
// convolutions: the layout timed on the machine").
//
//   OMP_NUM_THREADS=1 build/bench/dnnl_grouped_conv_layouts
//
// The forms run in alternation, 300 rounds, best of each: the machines
// here are shared, and alternation lets load drift hit both alike.
#include <oneapi/dnnl/dnnl.hpp>

#include "dnnl_fill.hpp"

#include "tsopt/backend/dnnl/grouped_conv.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace {

using namespace dnnl;
using tag = memory::format_tag;
constexpr auto f32 = memory::data_type::f32;

using tsopt::bench::fill;

struct form {
    std::string name;
    std::function<void()> run;
    double best_ms = 1e30;
};

// One way of running the convolution: src / dst descriptors as asked
// (any or nhwc), reorders from and to channels-last where the primitive
// picked another layout.
form make_form(engine& eng, stream& st, memory::dim groups, memory::dim c, memory::dim h, memory::dim s, bool channels_last) {
    const memory::dim oh = h / s;
    const memory::dims src{1, c, h, h}, dst{1, c, oh, oh}, wei{groups, c / groups, c / groups, 3, 3};
    const memory::desc nhwc_src(src, f32, tag::nhwc), nhwc_dst(dst, f32, tag::nhwc);
    post_ops po;
    po.append_eltwise(algorithm::eltwise_relu, 0.f, 0.f);
    primitive_attr attr;
    attr.set_post_ops(po);
    convolution_forward::primitive_desc pd(eng, prop_kind::forward_inference, algorithm::convolution_direct,
                                           channels_last ? nhwc_src : memory::desc(src, f32, tag::any),
                                           memory::desc(wei, f32, tag::any), memory::desc({c}, f32, tag::x),
                                           channels_last ? nhwc_dst : memory::desc(dst, f32, tag::any), {s, s}, {1, 1},
                                           {1, 1}, attr);
    std::vector<memory> m{memory(pd.src_desc(), eng), memory(pd.weights_desc(), eng), memory(pd.bias_desc(), eng),
                          memory(pd.dst_desc(), eng),  memory(nhwc_src, eng),          memory(nhwc_dst, eng)};
    for (memory& x : m) fill(x);
    const bool reorder_in = pd.src_desc() != nhwc_src, reorder_out = pd.dst_desc() != nhwc_dst;
    auto conv = convolution_forward(pd);
    auto in = reorder(m[4], m[0]), out = reorder(m[3], m[5]);
    form f;
    f.name = std::string(channels_last ? "channels-last" : "any") + " " + pd.impl_info_str() +
             (reorder_in || reorder_out ? " + reorders" : "");
    f.run = [=, &st]() mutable {
        if (reorder_in) in.execute(st, m[4], m[0]);
        conv.execute(st, {{DNNL_ARG_SRC, m[0]}, {DNNL_ARG_WEIGHTS, m[1]}, {DNNL_ARG_BIAS, m[2]}, {DNNL_ARG_DST, m[3]}});
        if (reorder_out) out.execute(st, m[3], m[5]);
        st.wait();
    };
    return f;
}

// tsopt's small-group kernel on the same channels-last input, bias and relu
// in its epilogue (as the oneDNN plan runs it).
form small_group_form(memory::dim groups, memory::dim c, memory::dim h, memory::dim s) {
    namespace sg = tsopt::backend::dnnl_impl::small_groups;
    using tsopt::backend::dnnl_impl::epilogue_op;
    const int G = static_cast<int>(c / groups);
    sg::geometry g;
    g.C = c, g.H = g.W = h, g.OH = g.OW = h / s, g.kh = g.kw = 3, g.sh = g.sw = s, g.pt = g.pl = 1;
    g.in = tsopt::backend::dnnl_impl::strides::of(true, c, h, h, sg::block);
    g.out = tsopt::backend::dnnl_impl::strides::of(true, c, g.OH, g.OW, sg::block);
    auto x = std::make_shared<std::vector<float>>(static_cast<std::size_t>(c * h * h));
    auto w = std::make_shared<std::vector<float>>(static_cast<std::size_t>(c * G * 9));
    auto y = std::make_shared<std::vector<float>>(static_cast<std::size_t>(c * g.OH * g.OW));
    auto bias = std::make_shared<std::vector<float>>(static_cast<std::size_t>(c));
    for (auto* v : {x.get(), w.get(), bias.get()})
        for (std::size_t i = 0; i < v->size(); ++i) (*v)[i] = static_cast<float>((i * 2654435761u) % 1000) / 1000.f - 0.5f;
    auto wv = std::make_shared<std::vector<float>>(w->size());
    sg::arrange_weights(w->data(), c, G, 3, 3, wv->data());
    const std::vector<epilogue_op> ep{{epilogue_op::kind::add, 0}, {epilogue_op::kind::relu, -1}};
    const sg::row_kernel k = sg::kernel_for(G, tsopt::backend::dnnl_impl::cpu_simd());
    form f;
    f.name = "tsopt small-group kernel";
    f.run = [=] {
        const float* channel[] = {bias->data()};
        sg::run(k, x->data(), wv->data(), y->data(), g, ep, channel);
    };
    return f;
}

}  // namespace

int main() {
    struct layer { memory::dim c, h, s, groups = 32; };
    // Stage by stage, each distinct shape once (32 groups throughout), then
    // the first layer's with 2 channels per group.
    const layer layers[] = {{128, 56, 1}, {256, 56, 2}, {256, 28, 1}, {512, 28, 2}, {512, 14, 1}, {1024, 14, 2}, {1024, 7, 1},
                            {128, 56, 1, 64}};
    engine eng(engine::kind::cpu, 0);
    stream st(eng);
    const auto* v = version();
    std::printf("oneDNN %d.%d.%d, grouped 3x3 convolutions of ResNeXt-50 32x4d (+relu; layer: channels per group / channels) on a channels-last input, best of 300 alternated runs\n",
                v->major, v->minor, v->patch);
    std::printf("%-20s %-44s %9s %-30s %9s %7s %9s %7s\n", "layer", "layouts left to oneDNN", "ms", "channels-last", "ms", "ratio",
                "tsopt ms", "ratio");
    for (const layer& l : layers) {
        form a = make_form(eng, st, l.groups, l.c, l.h, l.s, false), b = make_form(eng, st, l.groups, l.c, l.h, l.s, true);
        const bool small = l.c / l.groups <= 4;  // what the kernel takes: 2 or 4 channels per group
        form t = small ? small_group_form(l.groups, l.c, l.h, l.s) : form{};
        std::vector<form*> forms{&a, &b};
        if (small) forms.push_back(&t);
        for (int w = 0; w < 5; ++w)
            for (form* f : forms) f->run();
        for (int r = 0; r < 300; ++r)
            for (form* f : forms) {
                const auto t0 = std::chrono::steady_clock::now();
                f->run();
                f->best_ms = std::min(f->best_ms, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
            }
        char what[64];
        std::snprintf(what, sizeof what, "%lld/%lld ch %lldx%lld s%lld", static_cast<long long>(l.c / l.groups),
                      static_cast<long long>(l.c), static_cast<long long>(l.h), static_cast<long long>(l.h), static_cast<long long>(l.s));
        std::printf("%-20s %-44s %9.3f %-30s %9.3f %6.2fx", what, a.name.c_str(), a.best_ms, b.name.c_str(), b.best_ms,
                    a.best_ms / b.best_ms);
        if (small) std::printf(" %9.3f %6.2fx", t.best_ms, std::min(a.best_ms, b.best_ms) / t.best_ms);
        std::printf("\n");
    }
}
