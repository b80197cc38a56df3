#pragma once
// The mutation corrector (PET §4): which output boxes of a mutant may differ
// from the original program, exact random tests that decide them, and
// correction kernels that recompute the non-equivalent boxes.
//
//   auto v = pet::verify(original, mutant, leaves, {.tests = 2});
//   v.equivalent;  v.differing[o];  v.error_bound;
//   graph fixed = pet::correct(original, mutant, leaves, v);   // re-verified
//
// Both programs are over the same leaves (subprogram.hpp): leaf i is the
// same tensor in both. Verification:
//  1. box propagation (box.hpp) on both programs; per output, the boxes of
//     the common refinement of the two split sets;
//  2. `tests` evaluations of both programs in the integers modulo 2^31-1
//     (modp), every leaf drawn uniformly at random — weights too, since the
//     mutant must be right for any weights; new constant weights a mutant
//     adds (zero padding) keep their (integer) values;
//  3. per box, the m+1 positions p0, p0+e1, ..., p0+em (m = rank, axes of
//     extent 1 skipped) plus one random position are compared (Theorem 1:
//     inside a box both sides are the same expression translated, so
//     agreement there means agreement on the box).
// Error bound (Theorem 2, Schwartz-Zippel): the difference at a position is a
// polynomial of degree <= D in the leaf values (D from the operators:
// products add degrees, sums take the maximum), so a non-equivalent box
// passes one test with probability <= D/p, all `tests` with <= (D/p)^tests,
// and the chance that any of B boxes is wrongly accepted is
// <= B * (D/p)^tests — reported as `error_bound`.
//
// Correction (§4.3): each differing box of output o (adjacent boxes merged
// first) is recomputed from the *original* program as sub-tensor operators:
// the box is pulled back through every operator (conv: the input window with
// its halo, sliced, zero-padded with `pad` exactly where the original's
// padding lies, then a valid conv with a weight slice; concat/split/slice/
// transpose/pad/ewadd/batchnorm/matmul: the matching input boxes), and the
// result is written into the mutant's output with `overwrite`. Operators
// without a pull-back rule (reshape, enlarge) compute their full value and
// slice it (correct, not cheaper). Weight slices are constant and folded by
// preprocessing, so a correction kernel of a conv is one small conv.
#include <map>
#include <random>
#include <sstream>

#include "tsopt/pet/box.hpp"

namespace tsopt::pet {

struct verify_options {
    int tests = 2;               // random modp evaluations of both programs
    std::uint64_t seed = 0x5e7;
    std::int64_t max_boxes = 1 << 20;  // refuse to test more boxes than this (error)
};

struct verification {
    bool equivalent = true;
    std::vector<std::vector<box>> differing;  // per output, the boxes that differ (unmerged)
    std::vector<std::int64_t> differing_volume;  // per output, elements in differing boxes
    std::int64_t boxes = 0, positions = 0;  // boxes tested, positions compared per test
    int tests = 0;
    int degree = 0;                // D above
    double error_bound = 0;        // probability that a differing box was accepted
    std::string summary() const {
        std::ostringstream s;
        std::int64_t nd = 0;
        for (auto& d : differing) nd += static_cast<std::int64_t>(d.size());
        s << (equivalent ? "equivalent" : "NOT equivalent") << ": " << boxes << " boxes, " << positions
          << " positions x " << tests << " modp tests, " << nd << " differing boxes, degree " << degree
          << ", error bound " << error_bound;
        return s.str();
    }
};

// Evaluates g in modp with leaf values for nodes 0..leaves-1; weights beyond
// the leaves (constants a mutant added) must hold integers.
inline std::vector<tensor<modp>> evaluate_modp(const graph& g, const std::vector<tensor<modp>>& leaf_values) {
    std::vector<std::vector<tensor<modp>>> vals(g.size());
    for (std::size_t i : g.topological_order()) {
        const node& n = g.nodes[i];
        if (i < leaf_values.size()) { vals[i] = {leaf_values[i]}; continue; }
        switch (n.kind) {
            case node_kind::input: throw error("pet: " + n.describe() + " is an input but not a leaf of the subprogram");
            case node_kind::weight: {
                tensor<modp> t(n.data->shape);
                for (std::int64_t k = 0; k < t.size(); ++k) {
                    float x = (*n.data)[k];
                    if (x != std::nearbyint(x))
                        throw error("pet: constant " + n.describe() + " holds a non-integer; it cannot be checked exactly");
                    t[k] = modp(static_cast<std::int64_t>(x));
                }
                vals[i] = {std::move(t)};
                break;
            }
            case node_kind::opaque: throw error("pet: " + n.describe() + " is opaque; subprograms are declared operators only");
            case node_kind::op: {
                std::vector<const tensor<modp>*> args;
                for (value v : n.inputs) args.push_back(&vals[std::size_t(v.node)][std::size_t(v.output)]);
                vals[i] = spec::evaluate<modp>(n.op, n.params, args);
                break;
            }
        }
    }
    std::vector<tensor<modp>> out;
    for (value v : g.outputs) out.push_back(vals[std::size_t(v.node)][std::size_t(v.output)]);
    return out;
}

// Polynomial degree of each output in the leaf values (leaves degree 1).
inline std::vector<int> output_degrees(const graph& g, std::size_t leaves) {
    using K = spec::op_kind;
    std::vector<int> d(g.size(), 0);
    for (std::size_t i : g.topological_order()) {
        const node& n = g.nodes[i];
        if (i < leaves) { d[i] = 1; continue; }
        if (n.kind != node_kind::op) { d[i] = 0; continue; }
        auto in = [&](int k) { return d[std::size_t(n.inputs[std::size_t(k)].node)]; };
        int mx = 0, sum = 0;
        for (std::size_t k = 0; k < n.inputs.size(); ++k) { mx = std::max(mx, in(int(k))); sum += in(int(k)); }
        switch (n.op) {
            case K::conv2d: case K::matmul: case K::ewmul: case K::smul: d[i] = sum; break;
            case K::batchnorm: d[i] = std::max(in(0) + in(1), in(2)); break;
            case K::relu: case K::tanh: d[i] = 2 * mx; break;
            case K::sigmoid: d[i] = 3 * mx; break;
            default: d[i] = mx; break;
        }
        int act = n.op == K::conv2d ? n.params[spec::conv2d_p::act] : n.op == K::matmul ? n.params[spec::matmul_p::act] : 0;
        if (act) d[i] *= act == 2 ? 3 : 2;
    }
    std::vector<int> r;
    for (value v : g.outputs) r.push_back(d[std::size_t(v.node)]);
    return r;
}

inline void check_same_interface(const graph& a, const graph& b, std::size_t leaves) {
    if (a.size() < leaves || b.size() < leaves) throw error("pet: a program has fewer nodes than the shared leaves");
    for (std::size_t i = 0; i < leaves; ++i)
        if (a.nodes[i].kind != b.nodes[i].kind || !(a.nodes[i].shapes == b.nodes[i].shapes) ||
            (a.nodes[i].kind == node_kind::weight && a.nodes[i].data != b.nodes[i].data))
            throw error("pet: leaf " + std::to_string(i) + " differs: " + a.nodes[i].describe() + " vs " + b.nodes[i].describe());
    if (a.outputs.size() != b.outputs.size())
        throw error("pet: programs have " + std::to_string(a.outputs.size()) + " and " + std::to_string(b.outputs.size()) +
                    " outputs");
    for (std::size_t o = 0; o < a.outputs.size(); ++o)
        if (!(a.shape_of(a.outputs[o]) == b.shape_of(b.outputs[o])))
            throw error("pet: output " + std::to_string(o) + " has shape " + a.shape_of(a.outputs[o]).str() + " vs " +
                        b.shape_of(b.outputs[o]).str());
}

// See the header comment.
inline verification verify(const graph& original, const graph& mutant, std::size_t leaves, const verify_options& o = {}) {
    check_same_interface(original, mutant, leaves);
    if (o.tests < 1) throw error("pet::verify: tests must be >= 1, got " + std::to_string(o.tests));
    auto sa = propagate(original), sb = propagate(mutant);
    std::mt19937_64 rng(o.seed);
    std::vector<std::vector<tensor<modp>>> ya, yb;
    for (int t = 0; t < o.tests; ++t) {
        std::vector<tensor<modp>> lv;
        for (std::size_t i = 0; i < leaves; ++i) lv.push_back(random_modp(original.nodes[i].shapes[0], rng));
        ya.push_back(evaluate_modp(original, lv));
        yb.push_back(evaluate_modp(mutant, lv));
    }
    verification v;
    v.tests = o.tests;
    auto da = output_degrees(original, leaves), db = output_degrees(mutant, leaves);
    for (std::size_t k = 0; k < da.size(); ++k) v.degree = std::max({v.degree, da[k], db[k]});
    v.differing.resize(original.outputs.size());
    v.differing_volume.assign(original.outputs.size(), 0);
    for (std::size_t out = 0; out < original.outputs.size(); ++out) {
        value va = original.outputs[out], vb = mutant.outputs[out];
        splits s = refine(sa[std::size_t(va.node)][std::size_t(va.output)], sb[std::size_t(vb.node)][std::size_t(vb.output)]);
        if (s.count() > o.max_boxes)
            throw error("pet::verify: output " + std::to_string(out) + " has " + std::to_string(s.count()) +
                        " boxes, more than max_boxes");
        const shape sh = original.shape_of(va);
        auto st = strides_of(sh);
        s.for_each_box([&](const box& b) {
            ++v.boxes;
            std::vector<std::int64_t> pos;
            auto flat = [&](const shape& p) {
                std::int64_t f = 0;
                for (int d = 0; d < sh.rank; ++d) f += p[d] * st[d];
                return f;
            };
            pos.push_back(flat(b.lo));
            for (int d = 0; d < sh.rank; ++d)
                if (b.hi[d] - b.lo[d] > 1) {
                    shape p = b.lo;
                    p[d] += 1;
                    pos.push_back(flat(p));
                }
            shape p = b.lo;
            for (int d = 0; d < sh.rank; ++d)
                p[d] = b.lo[d] + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(b.hi[d] - b.lo[d]));
            pos.push_back(flat(p));
            v.positions += static_cast<std::int64_t>(pos.size());
            bool same = true;
            for (int t = 0; t < o.tests && same; ++t)
                for (auto f : pos) same = same && ya[std::size_t(t)][out][f] == yb[std::size_t(t)][out][f];
            if (!same) {
                v.differing[out].push_back(b);
                v.differing_volume[out] += b.volume();
                v.equivalent = false;
            }
        });
    }
    double per = static_cast<double>(v.degree) / static_cast<double>(modp::prime);
    v.error_bound = static_cast<double>(v.boxes) * std::pow(per, o.tests);
    return v;
}

// Merges boxes that are adjacent along one axis and equal on the others.
inline std::vector<box> merge_boxes(std::vector<box> bs) {
    bool changed = true;
    while (changed) {
        changed = false;
        for (std::size_t i = 0; i < bs.size() && !changed; ++i)
            for (std::size_t j = i + 1; j < bs.size() && !changed; ++j) {
                int diff = -1, ndiff = 0;
                for (int d = 0; d < bs[i].rank(); ++d)
                    if (bs[i].lo[d] != bs[j].lo[d] || bs[i].hi[d] != bs[j].hi[d]) { diff = d; ++ndiff; }
                if (ndiff != 1) continue;
                if (bs[i].hi[diff] == bs[j].lo[diff] || bs[j].hi[diff] == bs[i].lo[diff]) {
                    bs[i].lo[diff] = std::min(bs[i].lo[diff], bs[j].lo[diff]);
                    bs[i].hi[diff] = std::max(bs[i].hi[diff], bs[j].hi[diff]);
                    bs.erase(bs.begin() + static_cast<std::ptrdiff_t>(j));
                    changed = true;
                }
            }
    }
    return bs;
}

namespace detail {

// Builds, inside `m`, operators computing box `b` of value `v` of the
// original program `o` (leaves shared: leaf ids are equal in both).
class box_recompute {
public:
    box_recompute(const graph& o, graph& m, std::size_t leaves) : o_(o), m_(m), leaves_(leaves) {}

    value operator()(value v, const box& b) {
        std::string key = std::to_string(v.node) + ":" + std::to_string(v.output) + b.str();
        if (auto it = memo_.find(key); it != memo_.end()) return it->second;
        value r = compute(v, b);
        memo_[key] = r;
        return r;
    }

    value slice_of(value x, const box& b) {
        shape s = m_.shape_of(x);
        if (box::full(s) == b) return x;
        if (s.rank > 4) throw error("pet: cannot slice rank-" + std::to_string(s.rank) + " tensor " + s.str());
        spec::op_params p;
        for (int d = 0; d < s.rank; ++d) {
            p[spec::slice_p::b0 + d] = static_cast<std::int32_t>(b.lo[d]);
            p[spec::slice_p::e0 + d] = static_cast<std::int32_t>(b.hi[d]);
        }
        return m_.add1(spec::op_kind::slice, p, {x}, "pet.correction.slice");
    }

private:
    const graph& o_;
    graph& m_;
    std::size_t leaves_;
    std::map<std::string, value> memo_;

    shape oshape(value v) const { return o_.shape_of(v); }
    value full(value v) { return (*this)(v, box::full(oshape(v))); }

    // Box of a broadcast input: axes of extent 1 (or missing) stay [0, 1).
    static box broadcast_box(const box& b, const shape& in, const shape& out) {
        box r = box::full(in);
        for (int d = 0; d < in.rank; ++d) {
            int od = d + (out.rank - in.rank);
            if (in[d] == out[od]) { r.lo[d] = b.lo[od]; r.hi[d] = b.hi[od]; }
        }
        return r;
    }

    value recreate(const node& n, std::vector<value> in, const std::string& suffix = "") {
        return m_.add(n.op, n.params, std::move(in), n.name + ".pet" + suffix)[0];
    }

    value compute(value v, const box& b) {
        using K = spec::op_kind;
        if (std::size_t(v.node) < leaves_) return slice_of(v, b);
        const node& n = o_.at(v);
        if (n.kind == node_kind::weight) {  // a constant of the original beyond the leaves
            value w{static_cast<std::int32_t>(m_.nodes.size()), 0};
            m_.nodes.push_back(n);
            return slice_of(w, b);
        }
        if (n.kind != node_kind::op) throw error("pet: cannot recompute " + n.describe());
        const shape os = oshape(v);
        const bool whole = box::full(os) == b;
        auto in = [&](int k) { return n.inputs[std::size_t(k)]; };
        auto ish = [&](int k) { return o_.shape_of(in(k)); };
        if (!whole) switch (n.op) {
            case K::conv2d:
            case K::avgpool: {
                const bool conv = n.op == K::conv2d;
                shape xs = ish(0);
                std::int64_t kh, kw, sh, sw, dh = 1, dw = 1;
                spec::pad_mode pm;
                box xb = box::full(xs), wb;
                box got = b;  // the box the sub-operator computes (channels may widen to whole groups)
                if (conv) {
                    shape ws = ish(1);
                    kh = ws[2]; kw = ws[3];
                    sh = n.params[spec::conv2d_p::stride_h]; sw = n.params[spec::conv2d_p::stride_w];
                    dh = n.params[spec::conv2d_p::dil_h]; dw = n.params[spec::conv2d_p::dil_w];
                    pm = static_cast<spec::pad_mode>(n.params[spec::conv2d_p::pad]);
                    std::int64_t groups = xs[1] / ws[1], cog = ws[0] / groups;
                    if (groups > 1) {
                        got.lo[1] = b.lo[1] / cog * cog;
                        got.hi[1] = (b.hi[1] + cog - 1) / cog * cog;
                        xb.lo[1] = got.lo[1] / cog * ws[1];
                        xb.hi[1] = got.hi[1] / cog * ws[1];
                    }
                    wb = box::full(ws);
                    wb.lo[0] = got.lo[1];
                    wb.hi[0] = got.hi[1];
                } else {
                    kh = n.params[spec::pool_p::kh]; kw = n.params[spec::pool_p::kw];
                    sh = n.params[spec::pool_p::stride_h]; sw = n.params[spec::pool_p::stride_w];
                    pm = static_cast<spec::pad_mode>(n.params[spec::pool_p::pad]);
                    xb.lo[1] = b.lo[1]; xb.hi[1] = b.hi[1];
                }
                xb.lo[0] = b.lo[0]; xb.hi[0] = b.hi[0];
                std::int64_t pads[2][2];
                const std::int64_t k[2] = {kh, kw}, s[2] = {sh, sw}, dl[2] = {dh, dw};
                for (int a = 0; a < 2; ++a) {
                    int d = 2 + a;
                    std::int64_t p = spec::detail::window_pad(k[a], dl[a], pm);
                    std::int64_t lo = b.lo[d] * s[a] - p, hi = (b.hi[d] - 1) * s[a] - p + (k[a] - 1) * dl[a] + 1;
                    pads[a][0] = std::max<std::int64_t>(0, -lo);
                    pads[a][1] = std::max<std::int64_t>(0, hi - xs[d]);
                    xb.lo[d] = std::max<std::int64_t>(lo, 0);
                    xb.hi[d] = std::min<std::int64_t>(hi, xs[d]);
                    if (xb.lo[d] >= xb.hi[d]) return slice_of(full(v), b);
                }
                value x = (*this)(in(0), xb);
                if (pads[0][0] || pads[0][1] || pads[1][0] || pads[1][1])
                    x = m_.pad(x, int(pads[0][0]), int(pads[0][1]), int(pads[1][0]), int(pads[1][1]), n.name + ".pet.pad");
                spec::op_params p = n.params;
                if (conv) p[spec::conv2d_p::pad] = static_cast<std::int32_t>(spec::pad_mode::valid);
                else p[spec::pool_p::pad] = static_cast<std::int32_t>(spec::pad_mode::valid);
                std::vector<value> args{x};
                if (conv) args.push_back((*this)(in(1), wb));
                value y = m_.add(n.op, p, args, n.name + ".pet")[0];
                if (!(got == b)) {
                    box rel = box::full(m_.shape_of(y));
                    rel.lo[1] = b.lo[1] - got.lo[1];
                    rel.hi[1] = b.hi[1] - got.lo[1];
                    y = slice_of(y, rel);
                }
                return y;
            }
            case K::matmul: {
                shape a = ish(0), c = ish(1);
                box ab = broadcast_box(b, a, os), cb = broadcast_box(b, c, os);
                ab.lo[a.rank - 1] = 0; ab.hi[a.rank - 1] = a[a.rank - 1];
                ab.lo[a.rank - 2] = b.lo[os.rank - 2]; ab.hi[a.rank - 2] = b.hi[os.rank - 2];
                cb.lo[c.rank - 2] = 0; cb.hi[c.rank - 2] = c[c.rank - 2];
                cb.lo[c.rank - 1] = b.lo[os.rank - 1]; cb.hi[c.rank - 1] = b.hi[os.rank - 1];
                return recreate(n, {(*this)(in(0), ab), (*this)(in(1), cb)});
            }
            case K::ewadd:
            case K::ewmul:
                return recreate(n, {(*this)(in(0), broadcast_box(b, ish(0), os)), (*this)(in(1), broadcast_box(b, ish(1), os))});
            case K::smul: return recreate(n, {(*this)(in(0), b), full(in(1))});
            case K::batchnorm: {
                box cb = box::full(ish(1));
                cb.lo[0] = b.lo[1]; cb.hi[0] = b.hi[1];
                return recreate(n, {(*this)(in(0), b), (*this)(in(1), cb), (*this)(in(2), cb)});
            }
            case K::concat: {
                int ax = n.params[spec::concat_p::axis];
                std::vector<value> parts;
                std::int64_t off = 0;
                for (std::size_t k = 0; k < n.inputs.size(); ++k) {
                    std::int64_t e = ish(int(k))[ax];
                    std::int64_t lo = std::max(b.lo[ax], off), hi = std::min(b.hi[ax], off + e);
                    if (lo < hi) {
                        box pb = b;
                        pb.lo[ax] = lo - off;
                        pb.hi[ax] = hi - off;
                        parts.push_back((*this)(in(int(k)), pb));
                    }
                    off += e;
                }
                if (parts.size() == 1) return parts[0];
                spec::op_params p = n.params;
                return m_.add(K::concat, p, parts, n.name + ".pet")[0];
            }
            case K::split: {
                int ax = n.params[spec::split_p::axis], at = n.params[spec::split_p::at];
                box ib = b;
                if (v.output == 1) { ib.lo[ax] += at; ib.hi[ax] += at; }
                return (*this)(in(0), ib);
            }
            case K::transpose: {
                auto pm = n.params[spec::transpose_p::perm];
                box ib = box::full(ish(0));
                for (int d = 0; d < os.rank; ++d) {
                    ib.lo[spec::perm_axis(pm, d)] = b.lo[d];
                    ib.hi[spec::perm_axis(pm, d)] = b.hi[d];
                }
                return recreate(n, {(*this)(in(0), ib)});
            }
            case K::pad: {
                using namespace spec::pad_p;
                shape xs = ish(0);
                box ib = b;
                int pads[4] = {0, 0, 0, 0};
                for (int a = 0; a < 2; ++a) {
                    int d = 2 + a;
                    std::int64_t before = n.params[a == 0 ? top : left];
                    std::int64_t lo = std::max<std::int64_t>(b.lo[d] - before, 0), hi = std::min<std::int64_t>(b.hi[d] - before, xs[d]);
                    if (lo >= hi) return slice_of(full(v), b);
                    ib.lo[d] = lo;
                    ib.hi[d] = hi;
                    pads[2 * a] = static_cast<int>(std::max<std::int64_t>(0, before - b.lo[d]));
                    pads[2 * a + 1] = static_cast<int>(std::max<std::int64_t>(0, b.hi[d] - (before + xs[d])));
                }
                value x = (*this)(in(0), ib);
                if (pads[0] || pads[1] || pads[2] || pads[3]) x = m_.pad(x, pads[0], pads[1], pads[2], pads[3], n.name + ".pet");
                return x;
            }
            case K::slice: {
                box ib = b;
                for (int d = 0; d < os.rank; ++d) {
                    auto [lo, hi] = spec::ops::slice_range(n.params, ish(0), d);
                    (void)hi;
                    ib.lo[d] += lo;
                    ib.hi[d] += lo;
                }
                return (*this)(in(0), ib);
            }
            case K::overwrite: {
                shape ps = ish(1);
                box pbx = box::full(os);
                for (int d = 0; d < os.rank; ++d) {
                    pbx.lo[d] = n.params[spec::overwrite_p::o0 + d];
                    pbx.hi[d] = pbx.lo[d] + ps[d];
                }
                if (pbx.contains(b)) {
                    box ib = b;
                    for (int d = 0; d < os.rank; ++d) { ib.lo[d] -= pbx.lo[d]; ib.hi[d] -= pbx.lo[d]; }
                    return (*this)(in(1), ib);
                }
                if (!pbx.overlaps(b)) return (*this)(in(0), b);
                break;
            }
            default: break;
        }
        if (!whole) return slice_of(full(v), b);
        // The whole value: the same operator over whole inputs.
        std::vector<value> args;
        for (value u : n.inputs) args.push_back(full(u));
        auto outs = m_.add(n.op, n.params, args, n.name + ".pet");
        for (int k = 0; k < static_cast<int>(outs.size()); ++k)
            memo_[std::to_string(v.node) + ":" + std::to_string(k) + box::full(o_.at(v).shapes[std::size_t(k)]).str()] = outs[std::size_t(k)];
        return outs[std::size_t(v.output)];
    }
};

}  // namespace detail

struct correction_report {
    int kernels = 0;                 // overwrite operators added
    std::int64_t corrected_elements = 0;
    verification after;              // re-verification of the corrected mutant
};

// The mutant with every differing box of `v` recomputed from the original
// (see the header comment), re-verified; throws tsopt::error if the
// corrected program still differs (which would be a bug in the corrector).
inline graph correct(const graph& original, const graph& mutant, std::size_t leaves, const verification& v,
                     correction_report* rep = nullptr, const verify_options& vo = {}) {
    graph m = mutant;
    detail::box_recompute rc(original, m, leaves);
    int kernels = 0;
    std::int64_t elems = 0;
    for (std::size_t out = 0; out < v.differing.size(); ++out) {
        for (const box& b : merge_boxes(v.differing[out])) {
            value patch = rc(original.outputs[out], b);
            spec::op_params p;
            for (int d = 0; d < b.rank(); ++d) p[spec::overwrite_p::o0 + d] = static_cast<std::int32_t>(b.lo[d]);
            if (b.rank() > 4) throw error("pet::correct: output rank " + std::to_string(b.rank()) + " > 4");
            m.outputs[out] = m.add1(spec::op_kind::overwrite, p, {m.outputs[out], patch}, "pet.correction.overwrite");
            ++kernels;
            elems += b.volume();
        }
    }
    verification after = verify(original, m, leaves, vo);
    if (!after.equivalent)
        throw error("pet::correct: the corrected mutant still differs (" + after.summary() + ")");
    if (rep) *rep = {kernels, elems, after};
    return m;
}

}  // namespace tsopt::pet
