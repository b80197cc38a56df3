#pragma once
// The layout of a grouped convolution that reads a channels-last input
// (ResNeXt: the 1x1 brgconv before it leaves channels-last): oneDNN's
// kernel in that layout (conv2d.hpp keep_channels_last), or the same
// kernel in the blocked layout `format_tag::any` picks, with a reorder in
// and one out. Which is faster depends on the CPU, not on a rule we could
// write down: on the Xeon where the channels-last rule was measured,
// ResNeXt-50's stride-2 grouped layers ran 1.3-1.8x faster channels-last;
// on the EPYC (Zen 4) 1.6-2.2x slower, reorders included
// (docs/benchmarks.md, "Grouped convolutions: the layout timed on the
// machine"). So where the backend times choices
// (lowering_options::time_choices; the dnnl backend's, remembered in its
// measurement cache) both forms run alone on the layer's shape, and the
// plan takes the faster; without a timer, the fixed rule. (Groups of 2 or
// 4 channels go to tsopt's own kernel by its rule first, grouped_conv.hpp:
// timed alone against these forms on the EPYC it won by 4 %, in the plan
// with its bias and ReLU epilogue it lost by up to 10 %, so it is not
// offered here.)
#include <functional>

#include "tsopt/backend/dnnl/grouped_conv.hpp"
#include "tsopt/cost/cache.hpp"

namespace tsopt::backend::dnnl_impl::grouped_choice {

enum class form {
    onednn_as_ruled,    // oneDNN's convolution, channels-last where keep_channels_last keeps it
    onednn_blocked,     // oneDNN's convolution in the layouts `any` picks
    small_group_kernel  // grouped_conv.hpp
};

// A buffer of `md` holding small non-zero values: uninitialised memory can
// hold denormals and NaNs, which slowed one form 10x in a first version of
// bench/dnnl_grouped_conv_layouts.
inline dn::memory filled(const dn::memory::desc& md, const dn::engine& eng) {
    dn::memory m(md, eng);
    auto* p = static_cast<float*>(m.get_data_handle());
    const std::size_t n = md.get_size() / sizeof(float);
    for (std::size_t k = 0; k < n; ++k) p[k] = static_cast<float>((k * 2654435761u) % 1000) / 1000.f - 0.5f;
    return m;
}

// One run of oneDNN's convolution `pd` (bias and its post-ops as built),
// fed and read channels-last: with a reorder from channels-last into its
// source and one from its destination where its layouts are others.
inline std::function<void()> onednn_form(const dn::convolution_forward::primitive_desc& pd, const dn::engine& eng) {
    const dn::memory::desc nhwc_src(pd.src_desc().get_dims(), f32, tag::nhwc), nhwc_dst(pd.dst_desc().get_dims(), f32, tag::nhwc);
    const bool reorder_in = pd.src_desc() != nhwc_src, reorder_out = pd.dst_desc() != nhwc_dst;
    std::vector<dn::memory> m{filled(pd.src_desc(), eng), filled(pd.weights_desc(), eng), filled(pd.dst_desc(), eng),
                              filled(nhwc_src, eng), filled(nhwc_dst, eng)};
    std::unordered_map<int, dn::memory> args{{DNNL_ARG_SRC, m[0]}, {DNNL_ARG_WEIGHTS, m[1]}, {DNNL_ARG_DST, m[2]}};
    if (pd.bias_desc().get_size() > 0) args.emplace(DNNL_ARG_BIAS, filled(pd.bias_desc(), eng));
    auto conv = dn::convolution_forward(pd);
    auto in = reorder_in ? dn::reorder(m[3], m[0]) : dn::reorder(), out = reorder_out ? dn::reorder(m[2], m[4]) : dn::reorder();
    auto st = std::make_shared<dn::stream>(eng);
    return [=]() mutable {
        if (reorder_in) in.execute(*st, m[3], m[0]);
        conv.execute(*st, args);
        if (reorder_out) out.execute(*st, m[2], m[4]);
        st->wait();
    };
}

// The form grouped convolution i runs in. `make(src, dst)` builds its
// oneDNN descriptor (bias + ReLU, as the forms are timed) for the given
// source and destination descriptors; `small_group_kernel_takes_it`: its
// shape is one tsopt's small-group kernel computes.
template <class Make>
form choose(lowering& L, std::size_t i, Make&& make, bool small_group_kernel_takes_it) {
    const kernel_use use = L.options.small_groups;
    if (small_group_kernel_takes_it &&
        (use == kernel_use::always || (use == kernel_use::automatic && small_groups::automatic_here())))
        return form::small_group_kernel;
    const dims xd = L.in_dims(i, 0), od = L.out_dims(i);
    const dn::memory::desc nhwc_src(xd, f32, tag::nhwc);
    if (!L.options.time_choices || xd.size() != 4 || L.in(i, 0).md != nhwc_src || L.at(i).out_layout == spec::layout::nhwc)
        return form::onednn_as_ruled;
    std::vector<std::string> names;
    std::vector<dn::convolution_forward::primitive_desc> pds;
    try {
        const auto blocked = make(any_md(xd), any_md(od));
        if (blocked.src_desc() == nhwc_src) return form::onednn_as_ruled;  // `any` keeps channels-last itself
        const std::string impl = blocked.impl_info_str();
        const auto kept = make(nhwc_src, dn::memory::desc(od, f32, tag::nhwc));
        if (kept.impl_info_str() != impl) return form::onednn_as_ruled;  // keep_channels_last leaves it blocked
        names = {"oneDNN channels-last " + impl, "oneDNN blocked " + impl};
        pds = {kept, blocked};
    } catch (const dn::error&) {
        return form::onednn_as_ruled;
    }
    // A form's primitive and buffers are made only when the timer runs it:
    // once the cache holds both times, a compile makes neither.
    std::vector<std::function<void()>> runs(pds.size());
    const std::string key = "choice|grouped conv|" + cost::op_key::of(L.g, i).str();
    const std::size_t pick = L.options.time_choices(key, names, [&](std::size_t k) {
        if (!runs[k]) runs[k] = onednn_form(pds[k], L.p.eng);
        runs[k]();
    });
    return pick == 1 ? form::onednn_blocked : form::onednn_as_ruled;
}

}  // namespace tsopt::backend::dnnl_impl::grouped_choice
