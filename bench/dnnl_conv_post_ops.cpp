// What the operators after a 1x1 convolution cost inside it (as oneDNN
// post-ops) and as steps of their own: NASNet-A's pointwise convolutions
// (channels-last, brgconv_1x1 on AVX-512), each with a bias, a batch norm's
// per-channel scale and shift, a ReLU, a residual add as the sum post-op
// (accumulating into the addend's buffer) or as a binary post-op (reading it
// from another buffer), and the same convolution followed by a separate add
// or batch-norm step, as the oneDNN plan runs the original graph. What tells
// whether folding the batch norms (rewrite::fold_batchnorm) and fusing the
// adds can pay on NASNet-A (docs/benchmarks.md, "NASNet-A: where the time
// goes").
//
//   OMP_NUM_THREADS=1 build/bench/dnnl_conv_post_ops [--rounds N]
//
// Every form of a layer runs in alternation, best of N rounds (default 200)
// each: the machines here are shared, and alternation lets load drift hit
// all forms alike. The operands stay in the caches between runs, so the
// figures are what each form costs at best, not what it costs in a plan
// where its operands were written long before.
#include <oneapi/dnnl/dnnl.hpp>

#include "dnnl_fill.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

using namespace dnnl;
using tag = memory::format_tag;

struct form {
    std::string name;
    std::function<void()> run;
    std::string impl;
    double best_ms = 1e300;
};

memory filled(const memory::desc& md, const engine& eng) {
    memory m(md, eng);
    tsopt::bench::fill(m);
    return m;
}

}  // namespace

int main(int argc, char** argv) {
    int rounds = 200;
    for (int a = 1; a < argc; ++a) {
        if (std::strcmp(argv[a], "--rounds") == 0 && a + 1 < argc) rounds = std::max(1, std::atoi(argv[++a]));
        else {
            std::fprintf(stderr, "usage: dnnl_conv_post_ops [--rounds N]\n");
            return 2;
        }
    }
    engine eng(engine::kind::cpu, 0);
    stream st(eng);
    const auto f32 = memory::data_type::f32;
    const auto* v = version();
    std::printf("oneDNN %d.%d.%d, NASNet-A's 1x1 convolutions channels-last, best of %d alternated rounds (ms)\n", v->major,
                v->minor, v->patch, rounds);
    struct layer { memory::dim c, hw; };
    for (const layer l : {layer{128, 56}, layer{256, 28}, layer{512, 14}}) {
        const memory::desc act({1, l.c, l.hw, l.hw}, f32, tag::nhwc), per_channel({1, l.c, 1, 1}, f32, tag::nchw),
            wei({l.c, l.c, 1, 1}, f32, tag::any), bias_md({l.c}, f32, tag::x);
        memory src = filled(act, eng), dst(act, eng), addend = filled(act, eng), other(act, eng), bias = filled(bias_md, eng),
               scale = filled(per_channel, eng), shift = filled(per_channel, eng);
        std::vector<form> forms;
        // A convolution with post-ops `po` (each a lambda adding its run-time operands).
        auto conv = [&](const std::string& name, bool with_bias, const post_ops& po,
                        std::unordered_map<int, memory> extra) {
            primitive_attr attr;
            attr.set_post_ops(po);
            convolution_forward::primitive_desc pd(eng, prop_kind::forward_inference, algorithm::convolution_direct, act, wei,
                                                   with_bias ? bias_md : memory::desc(), act, {1, 1}, {0, 0}, {0, 0}, attr);
            std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, filled(pd.weights_desc(), eng)}, {DNNL_ARG_DST, dst}};
            if (with_bias) args[DNNL_ARG_BIAS] = bias;
            args.merge(extra);
            convolution_forward prim(pd);
            forms.push_back({name, [prim, args, &st] { prim.execute(st, args); }, pd.impl_info_str()});
            return forms.back().run;
        };
        const auto src1 = [](int k) { return DNNL_ARG_ATTR_MULTIPLE_POST_OP(k) | DNNL_ARG_SRC_1; };
        const auto plain = conv("plain", false, {}, {});
        conv("+ bias", true, {}, {});
        {
            post_ops po;
            po.append_eltwise(algorithm::eltwise_relu, 0.f, 0.f);
            conv("+ bias + relu", true, po, {});
        }
        {
            post_ops po;
            po.append_binary(algorithm::binary_mul, per_channel);
            po.append_binary(algorithm::binary_add, per_channel);
            conv("+ bias + batch norm (mul, add)", true, po, {{src1(0), scale}, {src1(1), shift}});
            po.append_eltwise(algorithm::eltwise_relu, 0.f, 0.f);
            conv("+ bias + batch norm + relu", true, po, {{src1(0), scale}, {src1(1), shift}});
        }
        {
            // The sum accumulates into dst: what dst holds is the addend.
            post_ops po;
            po.append_sum(1.f);
            conv("+ bias + add (sum post-op)", true, po, {});
        }
        {
            post_ops po;
            po.append_binary(algorithm::binary_add, act);
            conv("+ bias + add (binary post-op)", true, po, {{src1(0), addend}});
        }
        {
            binary::primitive_desc pd(eng, algorithm::binary_add, act, act, act);
            binary add(pd);
            forms.push_back({"plain, then an add step",
                             [=, &st] {
                                 plain();
                                 add.execute(st, {{DNNL_ARG_SRC_0, dst}, {DNNL_ARG_SRC_1, addend}, {DNNL_ARG_DST, other}});
                             },
                             forms[0].impl + " ; " + pd.impl_info_str()});
        }
        {
            // lower_batchnorm's step: x * scale, + shift as its post-op.
            post_ops po;
            po.append_binary(algorithm::binary_add, per_channel);
            primitive_attr attr;
            attr.set_post_ops(po);
            binary::primitive_desc pd(eng, algorithm::binary_mul, act, per_channel, act, attr);
            binary norm(pd);
            forms.push_back({"plain, then a batch-norm step",
                             [=, &st] {
                                 plain();
                                 norm.execute(st, {{DNNL_ARG_SRC_0, dst}, {DNNL_ARG_SRC_1, scale}, {src1(0), shift}, {DNNL_ARG_DST, other}});
                             },
                             forms[0].impl + " ; " + pd.impl_info_str()});
        }
        for (auto& f : forms) f.run();
        st.wait();
        for (int r = 0; r < rounds; ++r)
            for (auto& f : forms) {
                const auto t0 = std::chrono::steady_clock::now();
                f.run();
                st.wait();
                f.best_ms = std::min(f.best_ms, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
            }
        std::printf("\n%lld -> %lld channels, %lldx%lld\n", static_cast<long long>(l.c), static_cast<long long>(l.c),
                    static_cast<long long>(l.hw), static_cast<long long>(l.hw));
        for (const auto& f : forms)
            std::printf("  %-32s %8.3f  %+6.1f %%  %s\n", f.name.c_str(), f.best_ms, 100 * (f.best_ms / forms[0].best_ms - 1),
                        f.impl.c_str());
    }
}
