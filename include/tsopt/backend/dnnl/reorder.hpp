#pragma once
// Data movement on oneDNN, all as reorders or views:
//   split      a view of the input where the parts are contiguous (batch-1
//              channels, rows), else a reorder of a sub-memory into each
//              output that is read (a crop's dropped part is not)
//   transpose  reorder from the input read with permuted strides
//   enlarge    zero fill, then reorder of the kernel into the centred window
//   pad        zero fill, then reorder of the input into the interior
//   reshape    a view: the row-major input buffer with new extents (no step)
//   reorder    the explicit layout conversion: a reorder into NHWC or row-major
//   slice      a view of the input where the box is contiguous, else a
//              reorder of a sub-memory of the input
//   overwrite  reorder of the input, then of the patch into a sub-memory of
//              the copy (PET's correction write-back)
#include "tsopt/backend/dnnl/plan.hpp"

namespace tsopt::backend::dnnl_impl {

inline void reorder_step(lowering& L, std::size_t i, const tref& from, const tref& to, std::string what) {
    dn::reorder::primitive_desc pd(L.p.eng, from.md, L.p.eng, to.md, L.attr());
    L.add<dn::reorder>(i, pd, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}}, std::move(what));
}

// Whether the box of extents od inside a row-major tensor of extents xd is
// one contiguous run: the axes before the first cut one have extent 1 and
// the axes after it are whole (a batch-1 channel range, a range of rows).
inline bool box_contiguous(const dims& xd, const dims& od) {
    std::size_t k = 0;
    while (k < xd.size() && od[k] == xd[k]) ++k;
    for (std::size_t a = 0; a < k && k < xd.size(); ++a)
        if (xd[a] != 1) return false;
    for (std::size_t a = k + 1; a < xd.size(); ++a)
        if (od[a] != xd[a]) return false;
    return true;
}

inline void lower_split(lowering& L, std::size_t i) {
    const node& n = L.at(i);
    const int ax = n.params[spec::split_p::axis];
    tref x = L.plain_in(i, 0);
    const dims xd = L.in_dims(i, 0);
    // Contiguous parts are views of the input: no step, no copy (the
    // buffer's lifetime covers every reader of a part).
    const bool views = box_contiguous(xd, L.out_dims(i, 0));
    std::int64_t inner = 1;  // elements per unit of the split axis
    for (std::size_t a = static_cast<std::size_t>(ax) + 1; a < xd.size(); ++a) inner *= xd[a];
    std::int64_t off = 0;
    for (int o = 0; o < 2; ++o) {
        dims od = L.out_dims(i, o);
        if (views) {
            tref part = x.as(plain_md(od));
            part.offset += static_cast<std::size_t>(off * inner) * sizeof(float);
            L.set(i, o, part);
        } else if (!L.output_read(i, o)) {
            L.set(i, o, L.fresh(plain_md(od)));  // a crop's dropped part: never written, never read
        } else {
            dims offs(od.size(), 0);
            offs[static_cast<std::size_t>(ax)] = off;
            tref y = L.fresh(plain_md(od));
            reorder_step(L, i, x.as(x.md.submemory_desc(od, offs)), y, o == 0 ? "split (first part)" : "split (second part)");
            L.set(i, o, y);
        }
        off += od[static_cast<std::size_t>(ax)];
    }
}

inline void lower_transpose(lowering& L, std::size_t i) {
    const node& n = L.at(i);
    const std::int32_t perm = n.params[spec::transpose_p::perm];
    tref x = L.plain_in(i, 0);
    const shape& is = L.in_shape(i, 0);
    auto ist = strides_of(is);
    dims od = L.out_dims(i), st(od.size());
    for (std::size_t k = 0; k < od.size(); ++k) st[k] = ist[spec::perm_axis(perm, static_cast<int>(k))];
    if (is.rank == 0) st = {1};
    tref src = x.as(dn::memory::desc(od, f32, st));
    tref y = L.fresh(plain_md(od));
    reorder_step(L, i, src, y, "transpose");
    L.set(i, 0, y);
}

inline void lower_enlarge(lowering& L, std::size_t i) {
    const shape& ws = L.in_shape(i, 0);
    dims od = L.out_dims(i);
    tref y = L.fresh(plain_md(od));
    tref window = y.as(y.md.submemory_desc(L.in_dims(i, 0), {0, 0, (od[2] - ws[2]) / 2, (od[3] - ws[3]) / 2}));
    tref x = L.in(i, 0);
    dn::reorder::primitive_desc pd(L.p.eng, x.md, L.p.eng, window.md, L.attr());  // before any step is added
    L.zero(i, y);
    L.add<dn::reorder>(i, pd, {{DNNL_ARG_FROM, x}, {DNNL_ARG_TO, window}}, "enlarge");
    L.set(i, 0, y);
}

inline void lower_pad(lowering& L, std::size_t i) {
    using namespace spec::pad_p;
    const node& n = L.at(i);
    dims od = L.out_dims(i);
    tref y = L.fresh(plain_md(od));
    tref inner = y.as(y.md.submemory_desc(L.in_dims(i, 0), {0, 0, n.params[top], n.params[left]}));
    tref x = L.in(i, 0);
    dn::reorder::primitive_desc pd(L.p.eng, x.md, L.p.eng, inner.md, L.attr());
    L.zero(i, y);
    L.add<dn::reorder>(i, pd, {{DNNL_ARG_FROM, x}, {DNNL_ARG_TO, inner}}, "pad");
    L.set(i, 0, y);
}

inline void lower_slice(lowering& L, std::size_t i) {
    const node& n = L.at(i);
    tref x = L.plain_in(i, 0);
    const shape& is = L.in_shape(i, 0);
    const dims xd = L.in_dims(i, 0);
    dims od = L.out_dims(i), offs(od.size(), 0);
    for (int a = 0; a < is.rank; ++a) offs[static_cast<std::size_t>(a)] = spec::ops::slice_range(n.params, is, a).first;
    if (box_contiguous(xd, od)) {  // a view of the input, like a contiguous split part
        std::int64_t off = 0, stride = 1;
        for (std::size_t a = od.size(); a-- > 0;) {
            off += offs[a] * stride;
            stride *= xd[a];
        }
        tref part = x.as(plain_md(od));
        part.offset += static_cast<std::size_t>(off) * sizeof(float);
        L.set(i, 0, part);
        return;
    }
    tref y = L.fresh(plain_md(od));
    reorder_step(L, i, x.as(x.md.submemory_desc(od, offs)), y, "slice");
    L.set(i, 0, y);
}

inline void lower_overwrite(lowering& L, std::size_t i) {
    const node& n = L.at(i);
    tref x = L.plain_in(i, 0), t = L.plain_in(i, 1);
    dims od = L.out_dims(i), td = L.in_dims(i, 1), offs(od.size(), 0);
    for (std::size_t a = 0; a < od.size(); ++a) offs[a] = n.params[spec::overwrite_p::o0 + static_cast<int>(a)];
    tref y = L.fresh(plain_md(od));
    tref box = y.as(y.md.submemory_desc(td, offs));
    // Both descriptors before any step is added, so a refusal rolls back cleanly.
    dn::reorder::primitive_desc copy(L.p.eng, x.md, L.p.eng, y.md, L.attr()), write(L.p.eng, t.md, L.p.eng, box.md, L.attr());
    L.add<dn::reorder>(i, copy, {{DNNL_ARG_FROM, x}, {DNNL_ARG_TO, y}}, "overwrite (copy)");
    L.add<dn::reorder>(i, write, {{DNNL_ARG_FROM, t}, {DNNL_ARG_TO, box}}, "overwrite (patch)");
    L.set(i, 0, y);
}

inline void lower_reshape(lowering& L, std::size_t i) { L.set(i, 0, L.plain(L.in(i, 0), L.out_dims(i), i)); }

// The explicit layout conversion (rewrite/layout.hpp): a reorder into NHWC
// for an NHWC node, into row-major otherwise (shared with any implicit
// conversion of the same value to the same layout).
inline void lower_layout_reorder(lowering& L, std::size_t i) {
    const node& n = L.at(i);
    dims d = L.out_dims(i);
    const bool nhwc = n.out_layout == spec::layout::nhwc && d.size() == 4;
    L.set(i, 0, L.convert(L.in(i, 0), nhwc ? dn::memory::desc(d, f32, tag::nhwc) : plain_md(d), i));
}

}  // namespace tsopt::backend::dnnl_impl
