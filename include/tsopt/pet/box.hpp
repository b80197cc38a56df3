#pragma once
// Boxes and box propagation (PET §4.1).
//
// A `splits` value records, per dimension of a tensor, a sorted list of split
// points 0 = s0 < s1 < ... < sk = extent. The boxes of a tensor are the
// products of the intervals [s_i, s_i+1): inside one box every output position
// is computed by the *same* expression up to a translation of the positions it
// reads (same operators, same weights, same kind of padding), which is what
// PET's Theorem 1 needs: two multi-linear programs that agree at m+1 positions
// p0, p0+e1, ..., p0+em of such a box (m = rank) agree on all of it.
//
// propagate() computes split points for every value of a graph, operator by
// operator, from the split points of the inputs. The rules are conservative:
// adding split points is always sound (more, smaller boxes), dropping one
// never is. Per operator:
//   conv2d / pools   input split s (and the tensor's own edges 0 and H, where
//                    the zero padding starts) splits the output wherever the
//                    window starts reading across s: ceil((s + pad - k*dil) /
//                    stride) for every kernel tap k; channels from the
//                    weight's output-channel splits and the group boundaries
//   matmul           rows from a, columns from b, batch axes from both
//   ewadd/ewmul/...  union (broadcast axes of extent 1 add nothing)
//   concat/split/    splits move with the data; a concat adds its seams
//   slice/overwrite/pad
//   transpose        permuted
//   reshape          axes of extent 1 are dropped, then axes are grouped by
//                    equal products; splitting an axis maps each split to
//                    (floor, ceil) on the outer and (s mod e) on the inner
//                    axis; merging axes puts a split at every outer index
//                    (the flat position is affine only inside one outer row)
// Operators tsopt has no rule for (softmax along a split axis, opaque
// operators) keep their inputs' splits where shapes agree and are otherwise
// given every position as a split point (always sound).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "tsopt/core/graph.hpp"

namespace tsopt::pet {

// A half-open box [lo, hi) over the axes of a tensor.
struct box {
    shape lo, hi;  // same rank
    int rank() const { return lo.rank; }
    std::int64_t volume() const {
        std::int64_t v = 1;
        for (int i = 0; i < lo.rank; ++i) v *= hi[i] - lo[i];
        return v;
    }
    shape extents() const {
        shape s;
        for (int i = 0; i < lo.rank; ++i) s.push_back(hi[i] - lo[i]);
        return s;
    }
    bool contains(const box& o) const {
        for (int i = 0; i < lo.rank; ++i)
            if (o.lo[i] < lo[i] || o.hi[i] > hi[i]) return false;
        return true;
    }
    bool overlaps(const box& o) const {
        for (int i = 0; i < lo.rank; ++i)
            if (o.hi[i] <= lo[i] || hi[i] <= o.lo[i]) return false;
        return true;
    }
    std::string str() const {
        std::string s = "[";
        for (int i = 0; i < lo.rank; ++i)
            s += (i ? ", " : "") + std::to_string(lo[i]) + ":" + std::to_string(hi[i]);
        return s + "]";
    }
    static box full(const shape& s) {
        box b;
        b.hi = s;
        b.lo.rank = s.rank;
        return b;
    }
    friend bool operator==(const box&, const box&) = default;
};

struct splits {
    std::vector<std::vector<std::int64_t>> dims;  // per axis, sorted, unique, from 0 to the extent

    static splits trivial(const shape& s) {
        splits r;
        for (int i = 0; i < s.rank; ++i) r.dims.push_back({0, s[i]});
        return r;
    }
    static splits every(const shape& s) {
        splits r;
        for (int i = 0; i < s.rank; ++i) {
            std::vector<std::int64_t> d;
            for (std::int64_t k = 0; k <= s[i]; ++k) d.push_back(k);
            r.dims.push_back(std::move(d));
        }
        return r;
    }
    int rank() const { return static_cast<int>(dims.size()); }
    std::int64_t extent(int i) const { return dims[static_cast<std::size_t>(i)].back(); }
    // Number of boxes (saturating, to bound enumeration).
    std::int64_t count() const {
        std::int64_t n = 1;
        for (auto& d : dims) n = std::min<std::int64_t>(n * static_cast<std::int64_t>(d.size() - 1), std::int64_t(1) << 40);
        return n;
    }
    // Common refinement of two split sets over the same shape.
    friend splits refine(const splits& a, const splits& b) {
        splits r = a;
        for (std::size_t i = 0; i < r.dims.size(); ++i) r.dims[i].insert(r.dims[i].end(), b.dims[i].begin(), b.dims[i].end());
        r.normalize();
        return r;
    }
    void add(int axis, std::int64_t s) { dims[static_cast<std::size_t>(axis)].push_back(s); }
    void normalize() {
        for (auto& d : dims) {
            std::int64_t e = *std::max_element(d.begin(), d.end());
            std::erase_if(d, [&](std::int64_t x) { return x < 0 || x > e; });
            d.push_back(0);
            std::sort(d.begin(), d.end());
            d.erase(std::unique(d.begin(), d.end()), d.end());
        }
    }
    // Calls f(box) for every box (row-major order of box indices).
    template <class F>
    void for_each_box(F&& f) const {
        const int r = rank();
        std::vector<std::size_t> idx(static_cast<std::size_t>(r), 0);
        for (auto& d : dims)
            if (d.size() < 2) return;
        while (true) {
            box b;
            b.lo.rank = b.hi.rank = r;
            for (int i = 0; i < r; ++i) {
                b.lo[i] = dims[std::size_t(i)][idx[std::size_t(i)]];
                b.hi[i] = dims[std::size_t(i)][idx[std::size_t(i)] + 1];
            }
            f(b);
            int d = r - 1;
            for (; d >= 0; --d) {
                if (++idx[std::size_t(d)] + 1 < dims[std::size_t(d)].size()) break;
                idx[std::size_t(d)] = 0;
            }
            if (d < 0) return;
        }
    }
};

namespace detail {

// Output splits along one windowed axis (conv or pool) from input splits.
inline std::vector<std::int64_t> window_splits(const std::vector<std::int64_t>& in, std::int64_t out_extent, std::int64_t k,
                                               std::int64_t stride, std::int64_t dil, std::int64_t pad) {
    std::vector<std::int64_t> r{0, out_extent};
    for (std::int64_t s : in)
        for (std::int64_t t = 0; t < k; ++t) {
            // first output position whose tap t reads at or after s
            std::int64_t num = s + pad - t * dil;
            std::int64_t q = num >= 0 ? (num + stride - 1) / stride : -((-num) / stride);
            if (q > 0 && q < out_extent) r.push_back(q);
        }
    return r;
}

inline void shift_into(std::vector<std::int64_t>& dst, const std::vector<std::int64_t>& src, std::int64_t offset,
                       std::int64_t lo, std::int64_t hi) {
    for (std::int64_t s : src) dst.push_back(std::clamp(s + offset, lo, hi));
}

// reshape: see the header comment.
inline splits reshape_splits(const splits& in, const shape& is, const shape& os) {
    std::vector<int> ia, oa;  // axes of extent > 1
    for (int i = 0; i < is.rank; ++i)
        if (is[i] != 1) ia.push_back(i);
    for (int i = 0; i < os.rank; ++i)
        if (os[i] != 1) oa.push_back(i);
    splits out = splits::trivial(os);
    std::size_t a = 0, b = 0;
    while (a < ia.size() && b < oa.size()) {
        // Input axes [a, a2) and output axes [b, b2) of equal product P.
        std::size_t a2 = a + 1, b2 = b + 1;
        std::int64_t pa = is[ia[a]], pb = os[oa[b]];
        while (pa != pb) {
            if (pa < pb) pa *= is[ia[a2++]];
            else pb *= os[oa[b2++]];
        }
        // Flat break points: where the flat index leaves an input box, or
        // (several input axes) where it wraps to the next row of the
        // innermost input axis.
        std::vector<std::int64_t> flat;
        const std::int64_t last = is[ia[a2 - 1]];
        if (a2 - a == 1) flat = in.dims[std::size_t(ia[a])];
        else
            for (std::int64_t row = 0; row < pa / last; ++row)
                for (std::int64_t x : in.dims[std::size_t(ia[a2 - 1])]) flat.push_back(row * last + x);
        // Output axes separate positions before and after each break f0.
        for (std::int64_t f0 : flat) {
            if (f0 <= 0 || f0 >= pa) continue;
            std::int64_t inner = pb;
            for (std::size_t k = b; k < b2; ++k) {
                std::int64_t rem_before = f0 % inner;
                if (rem_before == 0) break;
                inner /= os[oa[k]];
                std::int64_t q = (f0 / inner) % os[oa[k]];
                out.add(oa[k], q);
                if (f0 % inner == 0) break;
                out.add(oa[k], q + 1);
            }
        }
        a = a2;
        b = b2;
    }
    out.normalize();
    return out;
}

}  // namespace detail

// Split points of every output of every node of g, indexed [node][output].
inline std::vector<std::vector<splits>> propagate(const graph& g) {
    using K = spec::op_kind;
    std::vector<std::vector<splits>> sp(g.size());
    for (std::size_t i : g.topological_order()) {
        const node& n = g.nodes[i];
        auto& out = sp[i];
        auto in = [&](int k) -> const splits& {
            value v = n.inputs[std::size_t(k)];
            return sp[std::size_t(v.node)][std::size_t(v.output)];
        };
        auto ish = [&](int k) { return g.shape_of(n.inputs[std::size_t(k)]); };
        if (n.kind != node_kind::op) {
            for (auto& s : n.shapes) out.push_back(splits::trivial(s));
            continue;
        }
        const shape& os = n.shapes[0];
        splits r = splits::trivial(os);
        switch (n.op) {
            case K::conv2d:
            case K::avgpool:
            case K::maxpool: {
                const bool conv = n.op == K::conv2d;
                const splits& x = in(0);
                std::int64_t kh, kw, sh, sw, dh = 1, dw = 1;
                spec::pad_mode pm;
                if (conv) {
                    shape w = ish(1);
                    kh = w[2]; kw = w[3];
                    sh = n.params[spec::conv2d_p::stride_h]; sw = n.params[spec::conv2d_p::stride_w];
                    dh = n.params[spec::conv2d_p::dil_h]; dw = n.params[spec::conv2d_p::dil_w];
                    pm = static_cast<spec::pad_mode>(n.params[spec::conv2d_p::pad]);
                    // Output channels: the weight's, plus group boundaries.
                    std::int64_t groups = ish(0)[1] / w[1], cog = w[0] / groups;
                    for (std::int64_t s : in(1).dims[0]) r.add(1, s);
                    for (std::int64_t gi = 0; gi <= groups; ++gi) r.add(1, gi * cog);
                    // Input-channel splits at group boundaries move to the output.
                    for (std::int64_t s : x.dims[1])
                        if (groups > 1 && s % w[1] == 0) r.add(1, s / w[1] * cog);
                } else {
                    kh = n.params[spec::pool_p::kh]; kw = n.params[spec::pool_p::kw];
                    sh = n.params[spec::pool_p::stride_h]; sw = n.params[spec::pool_p::stride_w];
                    pm = static_cast<spec::pad_mode>(n.params[spec::pool_p::pad]);
                    for (std::int64_t s : x.dims[1]) r.add(1, s);
                }
                for (std::int64_t s : x.dims[0]) r.add(0, s);
                std::int64_t ph = spec::detail::window_pad(kh, dh, pm), pw = spec::detail::window_pad(kw, dw, pm);
                for (std::int64_t s : detail::window_splits(x.dims[2], os[2], kh, sh, dh, ph)) r.add(2, s);
                for (std::int64_t s : detail::window_splits(x.dims[3], os[3], kw, sw, dw, pw)) r.add(3, s);
                break;
            }
            case K::matmul: {
                shape a = ish(0), b = ish(1);
                const int R = os.rank;
                for (int k = 0; k < 2; ++k) {
                    shape s = ish(k);
                    for (int d = 0; d < s.rank - 2; ++d) {
                        int od = d + (R - s.rank);
                        if (s[d] == os[od]) for (std::int64_t x : in(k).dims[std::size_t(d)]) r.add(od, x);
                    }
                }
                for (std::int64_t x : in(0).dims[std::size_t(a.rank - 2)]) r.add(R - 2, x);
                for (std::int64_t x : in(1).dims[std::size_t(b.rank - 1)]) r.add(R - 1, x);
                break;
            }
            case K::ewadd:
            case K::ewmul:
            case K::smul:
            case K::relu:
            case K::sigmoid:
            case K::tanh: {
                const int k_in = (n.op == K::smul || n.inputs.size() == 1) ? 1 : 2;
                for (int k = 0; k < k_in; ++k) {
                    shape s = ish(k);
                    for (int d = 0; d < s.rank; ++d) {
                        int od = d + (os.rank - s.rank);
                        if (s[d] == os[od]) for (std::int64_t x : in(k).dims[std::size_t(d)]) r.add(od, x);
                    }
                }
                break;
            }
            case K::batchnorm:
                r = in(0);
                for (std::int64_t x : in(1).dims[0]) r.add(1, x);
                for (std::int64_t x : in(2).dims[0]) r.add(1, x);
                break;
            case K::softmax: {
                r = in(0);
                int ax = n.params[spec::softmax_p::axis];
                // every position reads the whole axis: splits along it affect all
                std::vector<std::int64_t> along = r.dims[std::size_t(ax)];
                (void)along;
                break;
            }
            case K::concat: {
                int ax = n.params[spec::concat_p::axis];
                std::int64_t off = 0;
                for (std::size_t k = 0; k < n.inputs.size(); ++k) {
                    const splits& s = in(int(k));
                    for (int d = 0; d < os.rank; ++d) {
                        if (d == ax) detail::shift_into(r.dims[std::size_t(d)], s.dims[std::size_t(d)], off, 0, os[d]);
                        else for (std::int64_t x : s.dims[std::size_t(d)]) r.add(d, x);
                    }
                    off += ish(int(k))[ax];
                }
                break;
            }
            case K::split: {
                int ax = n.params[spec::split_p::axis], at = n.params[spec::split_p::at];
                const splits& s = in(0);
                splits r1 = splits::trivial(n.shapes[1]);
                for (int d = 0; d < os.rank; ++d) {
                    if (d == ax) {
                        detail::shift_into(r.dims[std::size_t(d)], s.dims[std::size_t(d)], 0, 0, at);
                        detail::shift_into(r1.dims[std::size_t(d)], s.dims[std::size_t(d)], -at, 0, n.shapes[1][d]);
                    } else {
                        for (std::int64_t x : s.dims[std::size_t(d)]) { r.add(d, x); r1.add(d, x); }
                    }
                }
                r.normalize();
                r1.normalize();
                out = {r, r1};
                continue;
            }
            case K::transpose: {
                auto pm = n.params[spec::transpose_p::perm];
                for (int d = 0; d < os.rank; ++d) r.dims[std::size_t(d)] = in(0).dims[std::size_t(spec::perm_axis(pm, d))];
                break;
            }
            case K::reshape: r = detail::reshape_splits(in(0), ish(0), os); break;
            case K::pad: {
                using namespace spec::pad_p;
                r = in(0);
                for (int d = 2; d < 4; ++d) {
                    std::int64_t before = n.params[d == 2 ? top : left];
                    std::vector<std::int64_t> v{0, os[d], before, before + ish(0)[d]};
                    detail::shift_into(v, in(0).dims[std::size_t(d)], before, 0, os[d]);
                    r.dims[std::size_t(d)] = v;
                }
                break;
            }
            case K::enlarge: {
                r = in(0);
                for (int d = 2; d < 4; ++d) {
                    std::int64_t off = (os[d] - ish(0)[d]) / 2;
                    std::vector<std::int64_t> v{0, os[d], off, off + ish(0)[d]};
                    detail::shift_into(v, in(0).dims[std::size_t(d)], off, 0, os[d]);
                    r.dims[std::size_t(d)] = v;
                }
                break;
            }
            case K::slice:
                for (int d = 0; d < os.rank; ++d) {
                    auto [b, e] = spec::ops::slice_range(n.params, ish(0), d);
                    detail::shift_into(r.dims[std::size_t(d)], in(0).dims[std::size_t(d)], -b, 0, e - b);
                }
                break;
            case K::overwrite: {
                r = in(0);
                shape ps = ish(1);
                for (int d = 0; d < os.rank; ++d) {
                    std::int64_t o = n.params[spec::overwrite_p::o0 + d];
                    r.add(d, o);
                    r.add(d, o + ps[d]);
                    detail::shift_into(r.dims[std::size_t(d)], in(1).dims[std::size_t(d)], o, 0, os[d]);
                }
                break;
            }
            case K::cpool:
            case K::iconv:
            case K::imatmul:
            case K::iewmul: break;
            default: r = splits::every(os); break;
        }
        r.normalize();
        out.push_back(std::move(r));
    }
    return sp;
}

}  // namespace tsopt::pet
