#pragma once
// Data movement:
//   transpose  a view when it swaps the last two axes of a value stored the
//              other way round (TASO's layout trick, rewrite/layout.hpp);
//              otherwise one permute kernel writing the wanted layout directly
//   concat     one cudaMemcpy2DAsync per input (rows of `extent * inner`)
//   split      one cudaMemcpy2DAsync per output
//   slice      one cudaMemcpy2DAsync when one axis is cut (a box cut on
//              several axes is refused: it runs on the host)
//   pad        pad2d kernel (zero border on the last two axes)
//   enlarge    pad2d kernel (kernel centred in kh x kw)
//   reshape    a view of the row-major buffer (no step)
//   reorder    the layout conversion its out_layout asks for (a permute
//              step shared by every reader asking for the same layout), or
//              a view when the value is already stored that way
#include "tsopt/backend/cudnn/plan.hpp"

namespace tsopt::backend::cudnn_impl {

inline bool swaps_last_two(std::int32_t perm) {
    int r = spec::perm_rank(perm);
    if (r < 2) return false;
    for (int d = 0; d < r - 2; ++d)
        if (spec::perm_axis(perm, d) != d) return false;
    return spec::perm_axis(perm, r - 2) == r - 1 && spec::perm_axis(perm, r - 1) == r - 2;
}

inline void lower_transpose(lowering& L, std::size_t i) {
    const node& n = L.at(i);
    const std::int32_t pm = n.params[spec::transpose_p::perm];
    const shape& os = L.out_shape(i);
    tref x = L.in(i, 0);
    phys want = wanted(n.out_layout, os.rank);
    if (swaps_last_two(pm) && ((x.layout == phys::col && want == phys::row) || (x.layout == phys::row && want == phys::col))) {
        ++L.p.stats.views;
        return L.set(i, 0, {x.buf, os, want});
    }
    std::array<int, max_rank> perm{};
    for (int d = 0; d < os.rank; ++d) perm[static_cast<std::size_t>(d)] = spec::perm_axis(pm, d);
    L.set(i, 0, L.permute(x, perm, os, want, i, false));
}

// The explicit conversions of rewrite/layout.hpp (layout moves); they ran on
// the host before, one copy to and from the device each.
inline void lower_reorder(lowering& L, std::size_t i) {
    tref x = L.in(i, 0);
    const phys want = wanted(L.at(i).out_layout, L.out_shape(i).rank);
    if (x.layout == want) ++L.p.stats.views;
    L.set(i, 0, L.as(x, want, i));
}

inline void lower_concat(lowering& L, std::size_t i) {
    const int ax = L.at(i).params[spec::concat_p::axis];
    const shape& os = L.out_shape(i);
    std::int64_t outer = 1, inner = 1;
    for (int d = 0; d < ax; ++d) outer *= os[d];
    for (int d = ax + 1; d < os.rank; ++d) inner *= os[d];
    tref y = L.fresh(os);
    std::int64_t off = 0;
    for (int k = 0; k < static_cast<int>(L.at(i).inputs.size()); ++k) {
        tref x = L.row_in(i, k);
        std::int64_t chunk = x.logical[ax] * inner;
        L.add(i, copy2d_step{x, y, 0, off, chunk, outer, chunk, os[ax] * inner}, "concat (input " + std::to_string(k) + ")");
        off += chunk;
    }
    L.finish(i, 0, y);
}

inline void lower_split(lowering& L, std::size_t i) {
    const int ax = L.at(i).params[spec::split_p::axis];
    const shape& is = L.in_shape(i, 0);
    std::int64_t outer = 1, inner = 1;
    for (int d = 0; d < ax; ++d) outer *= is[d];
    for (int d = ax + 1; d < is.rank; ++d) inner *= is[d];
    tref x = L.row_in(i, 0);
    std::int64_t off = 0;
    for (int o = 0; o < 2; ++o) {
        tref y = L.fresh(L.out_shape(i, o));
        std::int64_t chunk = y.logical[ax] * inner;
        L.add(i, copy2d_step{x, y, off, 0, chunk, outer, is[ax] * inner, chunk}, o == 0 ? "split (first part)" : "split (second part)");
        off += chunk;
        L.finish(i, o, y);
    }
}

inline void lower_slice(lowering& L, std::size_t i) {
    const node& n = L.at(i);
    const shape& is = L.in_shape(i, 0);
    int ax = 0;
    bool cut = false;
    for (int d = 0; d < is.rank; ++d) {
        auto [b, e] = spec::ops::slice_range(n.params, is, d);
        if (b == 0 && e == is[d]) continue;
        if (cut) throw refused("a slice on more than one axis");
        cut = true;
        ax = d;
    }
    std::int64_t outer = 1, inner = 1;
    for (int d = 0; d < ax; ++d) outer *= is[d];
    for (int d = ax + 1; d < is.rank; ++d) inner *= is[d];
    auto [b, e] = spec::ops::slice_range(n.params, is, ax);
    tref y = L.fresh(L.out_shape(i));
    L.add(i, copy2d_step{L.row_in(i, 0), y, b * inner, 0, (e - b) * inner, outer, is[ax] * inner, (e - b) * inner}, "slice");
    L.finish(i, 0, y);
}

inline void lower_pad(lowering& L, std::size_t i) {
    using namespace spec::pad_p;
    const node& n = L.at(i);
    const shape &is = L.in_shape(i, 0), &os = L.out_shape(i);
    tref y = L.fresh(os);
    L.add(i, pad_step{L.row_in(i, 0), y, is[0] * is[1], is[2], is[3], os[2], os[3], n.params[top], n.params[left]}, "pad");
    L.finish(i, 0, y);
}

inline void lower_enlarge(lowering& L, std::size_t i) {
    const shape &is = L.in_shape(i, 0), &os = L.out_shape(i);
    tref y = L.fresh(os);
    L.add(i, pad_step{L.row_in(i, 0), y, is[0] * is[1], is[2], is[3], os[2], os[3], (os[2] - is[2]) / 2, (os[3] - is[3]) / 2},
          "enlarge");
    L.finish(i, 0, y);
}

inline void lower_reshape(lowering& L, std::size_t i) {
    ++L.p.stats.views;
    L.finish(i, 0, L.view(L.in(i, 0), L.out_shape(i), i));
}

}  // namespace tsopt::backend::cudnn_impl
