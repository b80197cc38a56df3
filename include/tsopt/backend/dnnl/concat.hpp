#pragma once
// n-ary concat. Two ways, picked per node:
//  - in the inputs' own layout when all of them share one that a
//    convolution leaves (NHWC from oneDNN's brgemm convolutions (3.2:
//    on AVX2 too), nChw16c / nChw8c from the others) and oneDNN concatenates it
//    with its copying kernel: the convolutions writing the inputs and
//    reading the result then need no reorders around it;
//  - otherwise row-major, as one memcpy per (outer index, input). oneDNN
//    2.6's own row-major concat copied about 20x slower than memcpy
//    (5 x [1,128,56,56] on axis 1: 2.76 ms against 0.13 ms), which made
//    NasNet-A's 18 concats 16 % of its time.
#include "tsopt/backend/dnnl/plan.hpp"

namespace tsopt::backend::dnnl_impl {

// The layouts oneDNN's convolutions leave their results in.
inline constexpr tag conv_layouts[] = {tag::nhwc, tag::nChw16c, tag::nChw8c};

// The first way, or false where it does not apply (nothing lowered then).
inline bool lower_concat_in_conv_layout(lowering& L, std::size_t i, int ax) {
    const int k = static_cast<int>(L.at(i).inputs.size());
    const dims od = L.out_dims(i);
    if (od.size() != 4) return false;
    for (tag t : conv_layouts) {
        std::vector<tref> xs;
        std::vector<dn::memory::desc> mds;
        for (int s = 0; s < k; ++s) {
            tref x = L.in(i, s);
            if (x.md != dn::memory::desc(L.in_dims(i, s), f32, t)) break;
            xs.push_back(x);
            mds.push_back(x.md);
        }
        if (static_cast<int>(xs.size()) != k) continue;
        try {
            dn::concat::primitive_desc pd(L.p.eng, dn::memory::desc(od, f32, t), ax, mds, L.attr());
            if (!std::string_view(pd.impl_info_str()).starts_with("simple")) return false;
            tref y = L.fresh(pd.dst_desc());
            std::vector<std::pair<int, tref>> args;
            for (int s = 0; s < k; ++s) args.push_back({DNNL_ARG_MULTIPLE_SRC + s, xs[static_cast<std::size_t>(s)]});
            args.push_back({DNNL_ARG_DST, y});
            L.add<dn::concat>(i, pd, std::move(args), "concat");
            L.set(i, 0, y);
            return true;
        } catch (const dn::error&) {
            return false;
        }
    }
    return false;
}

inline void lower_concat(lowering& L, std::size_t i) {
    const node& n = L.at(i);
    const int ax = n.params[spec::concat_p::axis];
    if (lower_concat_in_conv_layout(L, i, ax)) return;
    const int k = static_cast<int>(n.inputs.size());
    const dims od = L.out_dims(i);
    std::int64_t outer = 1, inner = 1;
    for (int d = 0; d < ax; ++d) outer *= od[static_cast<std::size_t>(d)];
    for (std::size_t d = static_cast<std::size_t>(ax) + 1; d < od.size(); ++d) inner *= od[d];
    std::vector<tref> xs;
    std::vector<std::size_t> chunk;  // floats each input contributes per outer index
    for (int s = 0; s < k; ++s) {
        xs.push_back(L.plain_in(i, s));
        chunk.push_back(static_cast<std::size_t>(L.in_dims(i, s)[static_cast<std::size_t>(ax)] * inner));
    }
    tref y = L.fresh(plain_md(od));
    auto copy = [outer, chunk](std::span<float* const> in, std::span<float* const> out) {
        float* dst = out[0];
        for (std::int64_t o = 0; o < outer; ++o)
            for (std::size_t s = 0; s < chunk.size(); ++s) {
                std::memcpy(dst, in[s] + static_cast<std::size_t>(o) * chunk[s], chunk[s] * sizeof(float));
                dst += chunk[s];
            }
    };
    L.custom(i, copy, std::move(xs), {y}, "concat (copy)");
    L.set(i, 0, y);
}

}  // namespace tsopt::backend::dnnl_impl
