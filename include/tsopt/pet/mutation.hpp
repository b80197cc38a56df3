#pragma once
// The mutation generator (PET §5.1, Algorithm 1): programs over the same
// leaves with the same output shapes as a multi-linear subprogram, which the
// corrector (correction.hpp) then verifies and repairs.
//
//   pet::mutation_options o;                 // depth 3, 1 round
//   auto ms = pet::mutate(sp.g, sp.leaves(), o);
//   for (auto& m : ms) m.family, m.g ...
//
// Two sources of mutants:
//  * PET's key families, matched directly on the program (they are what the
//    paper's figures show, and a bounded DFS of depth 3 finds only the
//    smaller ones):
//      batch_convs   two convs sharing a weight and parameters on inputs of
//                    one shape -> concat the inputs along batch (exact) or
//                    width/height (wrong on the seam columns: corrected),
//                    one conv, split                           (Figure 1)
//      dilated_conv  a dilated conv (dilation d) -> the input's d x d
//                    phases moved to the batch axis (exact) or tiled in
//                    space (wrong along the tile seams: corrected) by a
//                    reshape+transpose+reshape, a regular conv, and back
//                                                               (Figure 3)
//      merge_convs   two convs on one input, different output channels and
//                    (odd) kernel sizes -> one conv with the kernels
//                    enlarged (zero-padded) and concatenated, then split;
//                    two convs on two inputs of one shape -> one grouped
//                    conv, the smaller weight zero-padded in output
//                    channels, split and sliced                 (Figure 10)
//  * a depth-first search over the operator set (Algorithm 1): starting
//    from the leaves, add one operator at a time (conv2d with the program's
//    parameters, matmul, ewadd, ewmul, concat, split, transpose, enlarge,
//    and reshape+transpose fused into one compound step: the phase
//    rearrangement of a dilation) up to `depth` operators; every program
//    whose newest tensor matches the output shape is a candidate. Candidates
//    are screened with one exact modp evaluation: a mutant agreeing with the
//    original on fewer than `min_equal_fraction` of the output positions is
//    dropped (its correction would cost about as much as the original).
//    `rounds` > 1 mutates the mutants again.
#include <functional>
#include <set>
#include <string>
#include <unordered_set>

#include "tsopt/pet/correction.hpp"

namespace tsopt::pet {

struct mutation_options {
    int depth = 3;                    // operators a DFS mutant may have
    int rounds = 1;                   // mutate mutants again
    bool families = true;             // PET's key families (Figures 1, 3, 10)
    bool dfs = true;                  // the generic DFS
    int dfs_max_ops = 2;              // run the DFS only on programs this small
    std::size_t dfs_budget = 4000;    // DFS states expanded per program
    std::size_t max_mutants = 64;     // per program and round
    double min_equal_fraction = 0.5;  // DFS screening, see above
    std::uint64_t seed = 0x3e7;
};

struct mutant {
    graph g;             // over the same leaves as the original
    std::string family;  // "batch_convs(width)", "dilated_conv(batch)", "dfs", ...
};

namespace detail {

using vmap = std::map<std::pair<std::int32_t, std::int32_t>, value>;

// g without operators that reach no output, leaves 0..leaves-1 kept in place.
inline graph trim(const graph& g, std::size_t leaves) {
    std::vector<char> live(g.size(), 0);
    std::vector<std::size_t> stack;
    for (value v : g.outputs) stack.push_back(std::size_t(v.node));
    while (!stack.empty()) {
        auto i = stack.back();
        stack.pop_back();
        if (live[i]) continue;
        live[i] = 1;
        for (value v : g.nodes[i].inputs) stack.push_back(std::size_t(v.node));
    }
    std::vector<std::int32_t> remap(g.size(), -1);
    graph r;
    for (std::size_t i = 0; i < g.size(); ++i) {
        if (i >= leaves && !live[i]) continue;
        remap[i] = static_cast<std::int32_t>(r.nodes.size());
        node n = g.nodes[i];
        for (value& v : n.inputs) v.node = remap[std::size_t(v.node)];
        r.nodes.push_back(std::move(n));
    }
    for (value v : g.outputs) r.outputs.push_back({remap[std::size_t(v.node)], v.output});
    return r;
}

// A copy of `o`'s leaves: mutants start from it.
inline graph leaves_of(const graph& o, std::size_t leaves) {
    graph m;
    m.nodes.assign(o.nodes.begin(), o.nodes.begin() + static_cast<std::ptrdiff_t>(leaves));
    return m;
}

// Rebuilds `o` with the operators in `replaced` swapped for what `build`
// adds: build(m, in) gets the mapped inputs of the replaced operators (in
// their order, inputs of each in turn) and returns their mapped outputs, one
// per (operator, output) in order. Every other operator is copied.
inline graph rebuild(const graph& o, std::size_t leaves, const std::vector<std::size_t>& replaced,
                     const std::function<std::vector<value>(graph&, const std::vector<value>&)>& build) {
    graph m = leaves_of(o, leaves);
    vmap map;
    for (std::size_t i = 0; i < leaves; ++i) map[{std::int32_t(i), 0}] = {std::int32_t(i), 0};
    std::set<std::size_t> rep(replaced.begin(), replaced.end());
    auto order = o.topological_order();
    std::vector<char> done(o.size(), 0);
    for (std::size_t i = 0; i < leaves; ++i) done[i] = 1;
    bool built = replaced.empty();
    auto ready = [&](const node& n) {
        for (value v : n.inputs)
            if (!map.count({v.node, v.output})) return false;
        return true;
    };
    for (bool progress = true; progress;) {
        progress = false;
        if (!built) {
            bool all = true;
            for (auto i : replaced) all = all && ready(o.nodes[i]);
            if (all) {
                std::vector<value> in;
                for (auto i : replaced)
                    for (value v : o.nodes[i].inputs) in.push_back(map.at({v.node, v.output}));
                auto outs = build(m, in);
                std::size_t k = 0;
                for (auto i : replaced)
                    for (int q = 0; q < o.nodes[i].num_outputs(); ++q) map[{std::int32_t(i), q}] = outs.at(k++);
                for (auto i : replaced) done[i] = 1;
                built = progress = true;
            }
        }
        for (auto i : order) {
            if (done[i] || rep.count(i) || !ready(o.nodes[i])) continue;
            node n = o.nodes[i];
            for (value& v : n.inputs) v = map.at({v.node, v.output});
            std::int32_t id = static_cast<std::int32_t>(m.nodes.size());
            for (int q = 0; q < n.num_outputs(); ++q) map[{std::int32_t(i), q}] = {id, q};
            m.nodes.push_back(std::move(n));
            done[i] = 1;
            progress = true;
        }
    }
    for (value v : o.outputs) {
        auto it = map.find({v.node, v.output});
        if (it == map.end()) throw error("pet: mutation left output of " + o.at(v).describe() + " unbuilt");
        m.outputs.push_back(it->second);
    }
    m.validate();
    return m;
}

inline bool plain_conv(const node& n) { return n.is_op(spec::op_kind::conv2d) && n.params[spec::conv2d_p::act] == 0; }

inline spec::op_params conv_params(std::int32_t stride_h, std::int32_t stride_w, spec::pad_mode pad, std::int32_t dil) {
    spec::op_params p;
    p[spec::conv2d_p::stride_h] = stride_h;
    p[spec::conv2d_p::stride_w] = stride_w;
    p[spec::conv2d_p::pad] = static_cast<std::int32_t>(pad);
    p[spec::conv2d_p::dil_h] = p[spec::conv2d_p::dil_w] = dil;
    return p;
}

// Figure 1.
inline void batch_convs(const graph& o, std::size_t leaves, std::vector<mutant>& out) {
    for (std::size_t i = leaves; i < o.size(); ++i)
        for (std::size_t j = i + 1; j < o.size(); ++j) {
            const node &a = o.nodes[i], &b = o.nodes[j];
            if (!plain_conv(a) || !plain_conv(b) || !(a.inputs[1] == b.inputs[1]) || !(a.params == b.params)) continue;
            if (a.inputs[0] == b.inputs[0]) continue;
            shape xs = o.shape_of(a.inputs[0]);
            if (!(xs == o.shape_of(b.inputs[0]))) continue;
            const bool unit_stride = a.params[spec::conv2d_p::stride_h] == 1 && a.params[spec::conv2d_p::stride_w] == 1;
            for (int axis : {0, 3, 2}) {
                if (axis != 0 && !unit_stride) continue;
                shape ys = a.shapes[0];
                auto build = [&](graph& m, const std::vector<value>& in) -> std::vector<value> {
                    value cat = m.concat(axis, {in[0], in[2]}, a.name + ".pet.batch");
                    value y = m.add1(spec::op_kind::conv2d, a.params, {cat, in[1]}, a.name + "+" + b.name);
                    auto [y1, y2] = m.split(axis, static_cast<int>(ys[axis]), y, a.name + ".pet.unbatch");
                    return {y1, y2};
                };
                try {
                    out.push_back({rebuild(o, leaves, {i, j}, build),
                                   std::string("batch_convs(") + (axis == 0 ? "batch" : axis == 3 ? "width" : "height") + ")"});
                } catch (const error&) {
                }
            }
        }
}

// The phase rearrangement of a dilation d on [N,C,H,W]: to the batch axis
// ([d*d*N, C, H/d, W/d]) or tiled in space ([N, C, H, W], phase-major), and
// back. One compound step (reshape + transpose + reshape) of the generator.
inline value phases(graph& m, value x, int d, bool to_batch, const std::string& name) {
    shape s = m.shape_of(x);
    std::int64_t N = s[0], C = s[1], H = s[2], W = s[3];
    value r = m.reshape(x, shape{N, C, H / d, d, W / d, d}, name + ".reshape");
    if (to_batch) {
        value t = m.transpose(r, {3, 5, 0, 1, 2, 4}, name + ".transpose");
        return m.reshape(t, shape{d * d * N, C, H / d, W / d}, name + ".reshape2");
    }
    value t = m.transpose(r, {0, 1, 3, 2, 5, 4}, name + ".transpose");
    return m.reshape(t, shape{N, C, H, W}, name + ".reshape2");
}
inline value unphases(graph& m, value y, int d, bool from_batch, std::int64_t N, const std::string& name) {
    shape s = m.shape_of(y);
    if (from_batch) {
        std::int64_t C = s[1], h = s[2], w = s[3];
        value r = m.reshape(y, shape{d, d, N, C, h, w}, name + ".reshape");
        value t = m.transpose(r, {2, 3, 4, 0, 5, 1}, name + ".transpose");
        return m.reshape(t, shape{N, C, h * d, w * d}, name + ".reshape2");
    }
    std::int64_t C = s[1], H = s[2], W = s[3];
    value r = m.reshape(y, shape{N, C, d, H / d, d, W / d}, name + ".reshape");
    value t = m.transpose(r, {0, 1, 3, 2, 5, 4}, name + ".transpose");
    return m.reshape(t, shape{N, C, H, W}, name + ".reshape2");
}

// Figure 3.
inline void dilated_conv(const graph& o, std::size_t leaves, std::vector<mutant>& out) {
    for (std::size_t i = leaves; i < o.size(); ++i) {
        const node& a = o.nodes[i];
        if (!plain_conv(a)) continue;
        int d = a.params[spec::conv2d_p::dil_h];
        if (d < 2 || a.params[spec::conv2d_p::dil_w] != d || a.params[spec::conv2d_p::stride_h] != 1 ||
            a.params[spec::conv2d_p::stride_w] != 1 || a.params[spec::conv2d_p::pad] != int(spec::pad_mode::same))
            continue;
        shape xs = o.shape_of(a.inputs[0]);
        if (xs[2] % d || xs[3] % d) continue;
        for (bool to_batch : {true, false}) {
            auto build = [&](graph& m, const std::vector<value>& in) -> std::vector<value> {
                value x = phases(m, in[0], d, to_batch, a.name + ".pet.s2b");
                value y = m.add1(spec::op_kind::conv2d, conv_params(1, 1, spec::pad_mode::same, 1), {x, in[1]}, a.name + ".pet.conv");
                return {unphases(m, y, d, to_batch, xs[0], a.name + ".pet.b2s")};
            };
            try {
                out.push_back({rebuild(o, leaves, {i}, build), to_batch ? "dilated_conv(batch)" : "dilated_conv(tiled)"});
            } catch (const error&) {
            }
        }
    }
}

// Figure 10.
inline void merge_convs(const graph& o, std::size_t leaves, std::vector<mutant>& out) {
    for (std::size_t i = leaves; i < o.size(); ++i)
        for (std::size_t j = i + 1; j < o.size(); ++j) {
            const node &a = o.nodes[i], &b = o.nodes[j];
            if (!plain_conv(a) || !plain_conv(b)) continue;
            spec::op_params pa = a.params, pb = b.params;
            if (!(pa == pb)) continue;
            shape wa = o.shape_of(a.inputs[1]), wb = o.shape_of(b.inputs[1]);
            shape xa = o.shape_of(a.inputs[0]), xb = o.shape_of(b.inputs[0]);
            if (wa[1] != xa[1] || wb[1] != xb[1]) continue;  // ungrouped only
            const bool same_kernel = wa[2] == wb[2] && wa[3] == wb[3];
            if (!same_kernel && pa[spec::conv2d_p::pad] != int(spec::pad_mode::same)) continue;
            const std::int64_t kh = std::max(wa[2], wb[2]), kw = std::max(wa[3], wb[3]);
            if (!same_kernel && (pa[spec::conv2d_p::dil_h] != 1 || pa[spec::conv2d_p::dil_w] != 1)) continue;
            auto enlarge = [&](graph& m, value w, const shape& s) {
                if (s[2] == kh && s[3] == kw) return w;
                spec::op_params p;
                p[spec::enlarge_p::kh] = static_cast<std::int32_t>(kh);
                p[spec::enlarge_p::kw] = static_cast<std::int32_t>(kw);
                return m.add1(spec::op_kind::enlarge, p, {w}, m.at(w).name + ".pet.enlarge");
            };
            if (a.inputs[0] == b.inputs[0]) {
                auto build = [&](graph& m, const std::vector<value>& in) -> std::vector<value> {
                    value w = m.concat(0, {enlarge(m, in[1], wa), enlarge(m, in[3], wb)}, a.name + ".pet.wcat");
                    value y = m.add1(spec::op_kind::conv2d, pa, {in[0], w}, a.name + "+" + b.name);
                    auto [y1, y2] = m.split(1, static_cast<int>(wa[0]), y, a.name + ".pet.split");
                    return {y1, y2};
                };
                try { out.push_back({rebuild(o, leaves, {i, j}, build), "merge_convs(shared input)"}); } catch (const error&) {}
            } else if (xa == xb) {
                // One grouped conv; the smaller weight zero-padded in output channels.
                const std::int64_t cmax = std::max(wa[0], wb[0]);
                auto build = [&](graph& m, const std::vector<value>& in) -> std::vector<value> {
                    auto padded = [&](value w, const shape& s) {
                        w = enlarge(m, w, s);
                        if (s[0] == cmax) return w;
                        value z = m.weight(m.at(w).name + ".pet.zeros", tensor<float>(shape{cmax - s[0], s[1], kh, kw}));
                        return m.concat(0, {w, z}, m.at(w).name + ".pet.padc");
                    };
                    value x = m.concat(1, {in[0], in[2]}, a.name + ".pet.xcat");
                    value w = m.concat(0, {padded(in[1], wa), padded(in[3], wb)}, a.name + ".pet.wcat");
                    value y = m.add1(spec::op_kind::conv2d, pa, {x, w}, a.name + "+" + b.name);
                    auto [y1, y2] = m.split(1, static_cast<int>(cmax), y, a.name + ".pet.split");
                    auto cut = [&](value v, std::int64_t c) {
                        if (c == cmax) return v;
                        spec::op_params p;
                        p[spec::slice_p::e1] = static_cast<std::int32_t>(c);
                        return m.add1(spec::op_kind::slice, p, {v}, m.at(v).name + ".pet.slice");
                    };
                    return {cut(y1, wa[0]), cut(y2, wb[0])};
                };
                try { out.push_back({rebuild(o, leaves, {i, j}, build), "merge_convs(grouped)"}); } catch (const error&) {}
            }
        }
}

// ---- the generic DFS (Algorithm 1) --------------------------------------

struct dfs_state {
    const graph& o;
    std::size_t leaves;
    const mutation_options& opt;
    std::vector<tensor<modp>> leaf_values;
    std::vector<tensor<modp>> target;  // the original's outputs on leaf_values
    std::vector<spec::op_params> conv_ps;  // conv parameters seen in the program
    std::vector<int> dilations;
    std::vector<std::int64_t> kernels;
    std::size_t expanded = 0;
    std::unordered_set<std::uint64_t> seen;  // fingerprints of accepted mutants
    std::vector<mutant>& out;
};

inline std::uint64_t fingerprint(const std::vector<tensor<modp>>& ys) {
    std::uint64_t h = 0x1234;
    for (auto& y : ys)
        for (auto x : y.data) h = hashing::combine(h, x.v);
    return h;
}

inline void dfs_candidate(dfs_state& st, graph& m) {
    // The newest value must be the (single) output.
    if (st.o.outputs.size() != 1) return;
    value last{static_cast<std::int32_t>(m.nodes.size() - 1), 0};
    if (!(m.shape_of(last) == st.o.shape_of(st.o.outputs[0]))) return;
    graph c = m;
    c.outputs = {last};
    std::vector<tensor<modp>> y;
    try { y = evaluate_modp(c, st.leaf_values); } catch (const error&) { return; }
    std::int64_t eq = 0, n = y[0].size();
    for (std::int64_t k = 0; k < n; ++k) eq += y[0][k] == st.target[0][k];
    if (static_cast<double>(eq) < st.opt.min_equal_fraction * static_cast<double>(n)) return;
    c = trim(c, st.leaves);
    const std::uint64_t h = c.structural_hash();
    if (h == st.o.structural_hash() || !st.seen.insert(h).second) return;
    st.out.push_back({std::move(c), "dfs"});
}

inline void dfs(dfs_state& st, graph& m, int depth) {
    if (st.out.size() >= st.opt.max_mutants || st.expanded >= st.opt.dfs_budget) return;
    ++st.expanded;
    if (m.nodes.size() > st.leaves) dfs_candidate(st, m);
    if (depth == 0) return;
    std::vector<value> avail;
    for (std::size_t i = 0; i < m.nodes.size(); ++i)
        for (int q = 0; q < m.nodes[i].num_outputs(); ++q) avail.push_back({std::int32_t(i), q});
    auto attempt = [&](spec::op_kind k, const spec::op_params& p, std::vector<value> in) {
        if (st.out.size() >= st.opt.max_mutants || st.expanded >= st.opt.dfs_budget) return;
        std::vector<shape> ins;
        for (value v : in) ins.push_back(m.shape_of(v));
        std::array<shape, spec::max_outputs> outs;
        if (!spec::infer_shapes(k, p, ins, std::span<shape>(outs.data(), std::size_t(spec::decl(k).num_outputs))).empty())
            return;
        std::size_t size = m.nodes.size();
        m.add(k, p, std::move(in), "pet.dfs");
        dfs(st, m, depth - 1);
        m.nodes.resize(size);
    };
    using K = spec::op_kind;
    for (value a : avail) {
        shape sa = m.shape_of(a);
        // unary steps
        if (sa.rank == 4) {
            if (m.at(a).kind == node_kind::weight)
                for (auto k : st.kernels) {
                    spec::op_params p;
                    p[spec::enlarge_p::kh] = p[spec::enlarge_p::kw] = static_cast<std::int32_t>(k);
                    attempt(K::enlarge, p, {a});
                }
            for (int d : st.dilations) {
                if (sa[2] % d || sa[3] % d) continue;
                for (bool b : {true, false}) {
                    std::size_t size = m.nodes.size();
                    phases(m, a, d, b, "pet.dfs.s2b");
                    dfs(st, m, depth - 1);
                    m.nodes.resize(size);
                    if (sa[0] % (d * d) == 0 || !b) {
                        unphases(m, a, d, b, b ? sa[0] / (d * d) : sa[0], "pet.dfs.b2s");
                        dfs(st, m, depth - 1);
                        m.nodes.resize(size);
                    }
                }
            }
        }
        if (sa.rank >= 2) {
            spec::op_params p;
            std::vector<int> perm;
            for (int d = 0; d < sa.rank; ++d) perm.push_back(d);
            std::swap(perm[std::size_t(sa.rank - 1)], perm[std::size_t(sa.rank - 2)]);
            std::int32_t packed = static_cast<std::int32_t>(sa.rank) << 24;
            for (int d = 0; d < sa.rank; ++d) packed |= perm[std::size_t(d)] << (3 * d);
            p[spec::transpose_p::perm] = packed;
            attempt(K::transpose, p, {a});
        }
        for (int ax = 0; ax < sa.rank; ++ax)
            for (std::int64_t at : {sa[ax] / 2}) {
                if (at <= 0) continue;
                spec::op_params p;
                p[spec::split_p::axis] = ax;
                p[spec::split_p::at] = static_cast<std::int32_t>(at);
                attempt(K::split, p, {a});
            }
        // binary steps
        for (value b : avail) {
            shape sb = m.shape_of(b);
            if (sa.rank == 4 && sb.rank == 4 && m.at(a).kind != node_kind::weight && m.at(b).kind != node_kind::input)
                for (auto p : st.conv_ps) attempt(K::conv2d, p, {a, b});
            if (sa.rank >= 2 && sb.rank >= 2) attempt(K::matmul, {}, {a, b});
            if (a < b) {
                attempt(K::ewadd, {}, {a, b});
                attempt(K::ewmul, {}, {a, b});
            }
            if (!(a == b) && sa.rank == sb.rank)
                for (int ax = 0; ax < sa.rank; ++ax) {
                    spec::op_params p;
                    p[spec::concat_p::axis] = ax;
                    attempt(K::concat, p, {a, b});
                }
        }
    }
}

}  // namespace detail

// The DFS of Algorithm 1 alone (see the header comment).
inline std::vector<mutant> dfs_mutants(const graph& o, std::size_t leaves, const mutation_options& opt = {}) {
    std::vector<mutant> out;
    std::mt19937_64 rng(opt.seed);
    detail::dfs_state st{o, leaves, opt, {}, {}, {}, {}, {}, 0, {}, out};
    for (std::size_t i = 0; i < leaves; ++i) st.leaf_values.push_back(random_modp(o.nodes[i].shapes[0], rng));
    st.target = evaluate_modp(o, st.leaf_values);
    std::set<std::int64_t> ks;
    std::set<int> ds;
    for (std::size_t i = leaves; i < o.size(); ++i) {
        const node& n = o.nodes[i];
        if (!n.is_op(spec::op_kind::conv2d)) continue;
        spec::op_params p = n.params;
        p[spec::conv2d_p::act] = 0;
        for (int dil : {1, int(p[spec::conv2d_p::dil_h])}) {
            spec::op_params q = p;
            q[spec::conv2d_p::dil_h] = q[spec::conv2d_p::dil_w] = dil;
            if (std::find(st.conv_ps.begin(), st.conv_ps.end(), q) == st.conv_ps.end()) st.conv_ps.push_back(q);
        }
        shape w = o.shape_of(n.inputs[1]);
        if (w[2] == w[3]) ks.insert(w[2] + 2);
        if (p[spec::conv2d_p::dil_h] > 1) ds.insert(p[spec::conv2d_p::dil_h]);
    }
    st.kernels.assign(ks.begin(), ks.end());
    st.dilations.assign(ds.begin(), ds.end());
    graph m = detail::leaves_of(o, leaves);
    detail::dfs(st, m, opt.depth);
    return out;
}

// All mutants of program `o` over its `leaves` (see the header comment).
inline std::vector<mutant> mutate(const graph& o, std::size_t leaves, const mutation_options& opt = {}) {
    std::vector<mutant> all;
    std::vector<graph> frontier{o};
    for (int r = 0; r < std::max(1, opt.rounds); ++r) {
        std::vector<graph> next;
        for (const graph& g : frontier) {
            std::vector<mutant> ms;
            if (opt.families) {
                detail::batch_convs(g, leaves, ms);
                detail::dilated_conv(g, leaves, ms);
                detail::merge_convs(g, leaves, ms);
            }
            if (opt.dfs && static_cast<int>(g.op_count()) <= opt.dfs_max_ops) {
                auto d = dfs_mutants(g, leaves, opt);
                ms.insert(ms.end(), d.begin(), d.end());
            }
            if (ms.size() > opt.max_mutants) ms.resize(opt.max_mutants);
            for (auto& m : ms) {
                if (r + 1 < opt.rounds) next.push_back(m.g);
                if (r > 0) m.family += "+round" + std::to_string(r + 1);
                all.push_back(std::move(m));
            }
        }
        frontier = std::move(next);
    }
    return all;
}

}  // namespace tsopt::pet
