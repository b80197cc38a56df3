#pragma once
// Joint layout optimization (TASO §5, Figure 5). Layouts are physical: a
// node's `out_layout` says how its output is stored, never what it means, so
// the reference backend ignores them and every rewrite stays semantically
// logical. What layouts change is cost:
//
//  - is_layout_view(g, n): a transpose swapping the last two axes whose input
//    is stored column-major (and which itself produces row-major), or the
//    other way round, moves no data: it reinterprets the producer's buffer.
//    Cost models charge such a transpose nothing.
//  - layout_moves(g): the TASO Figure 5 rewrite as a search move: for a
//    transpose of the output of an operator that can produce the swapped
//    layout (matmul: column-major), store that output swapped, so the
//    transpose becomes a view; the search keeps it when the cost model says
//    so. Applying rules enumerates layouts of new nodes (apply_options::layouts).
//
// NCHW / NHWC (image tensors, rank 4). Operators declaring
// spec::image_layouts (conv2d, pools, activations, ewadd/ewmul, concat)
// compute in their out_layout and read their non-constant rank-4 inputs in
// it; everything else reads and writes NCHW, and graph inputs and outputs are
// NCHW (the interface). Conversions are explicit `reorder` nodes:
//
//  - explicit_conversions(g): every mismatch between how a value is stored
//    and how a reader reads it gets a reorder (one per value and layout,
//    shared by the readers), outputs get one back to NCHW, and reorders that
//    became pointless are dropped (reorder of a reorder reads the original;
//    a reorder into the layout its input already has disappears). Constant
//    inputs (weights, folded operators) never get one: they are re-laid out
//    once at preprocessing, as the cost models assume.
//  - nhwc_moves(g): search moves that put one conv2d, or the whole connected
//    region of NHWC-capable operators around it, into NHWC (and the same
//    back), conversions made explicit at the region's boundary. Whether the
//    result is kept is the cost model's call: NHWC kernels are cheaper only
//    for some convolutions, and every boundary reorder is a full copy.
#include <algorithm>
#include <map>
#include <vector>

#include "tsopt/core/graph.hpp"
#include "tsopt/rewrite/apply.hpp"

namespace tsopt::rewrite {

// True for a permutation that swaps the last two axes and keeps the others.
inline bool swaps_last_two(std::int32_t perm) {
    int r = spec::perm_rank(perm);
    if (r < 2) return false;
    for (int i = 0; i < r - 2; ++i)
        if (spec::perm_axis(perm, i) != i) return false;
    return spec::perm_axis(perm, r - 2) == r - 1 && spec::perm_axis(perm, r - 1) == r - 2;
}

inline bool is_layout_view(const graph& g, std::size_t n) {
    const node& t = g.nodes[n];
    if (!t.is_op(spec::op_kind::transpose) || !swaps_last_two(t.params[spec::transpose_p::perm])) return false;
    const node& src = g.at(t.inputs[0]);
    bool in_col = src.out_layout == spec::layout::col_major, out_col = t.out_layout == spec::layout::col_major;
    return in_col != out_col;
}

// ---- NCHW / NHWC ----------------------------------------------------------

// Whether value v is stored NHWC (its producer's layout, for a rank-4 value).
inline bool stored_nhwc(const graph& g, value v) {
    return g.at(v).out_layout == spec::layout::nhwc && g.shape_of(v).rank == 4;
}

// Whether node n reads its input in slot s as NHWC: only an operator that
// computes in NHWC reads its rank-4 activations so (a conv's filter is a
// weight, laid out by the kernel itself). A reorder reads whatever it gets.
inline bool reads_nhwc(const graph& g, std::size_t n, std::size_t s) {
    const node& c = g.nodes[n];
    if (c.kind != node_kind::op || c.is_op(spec::op_kind::reorder)) return false;
    if (c.out_layout != spec::layout::nhwc || spec::decl(c.op).layouts != spec::image_layouts) return false;
    if (c.is_op(spec::op_kind::conv2d) && s != 0) return false;
    return g.shape_of(c.inputs[s]).rank == 4;
}

// Whether node n can compute in NHWC: an image-layout operator with a rank-4 output.
inline bool can_be_nhwc(const graph& g, std::size_t n) {
    const node& c = g.nodes[n];
    return c.kind == node_kind::op && spec::decl(c.op).layouts == spec::image_layouts && c.shapes[0].rank == 4;
}

namespace detail {
// Bypasses pointless reorders in place (see explicit_conversions); the
// caller compacts.
inline void simplify_reorders(graph& g) {
    std::vector<value> alias(g.size());
    std::map<std::pair<std::pair<std::int32_t, std::int32_t>, int>, std::int32_t> first;  // (value, layout) -> reorder
    auto resolve = [&](value v) { return alias[static_cast<std::size_t>(v.node)].node >= 0 ? alias[static_cast<std::size_t>(v.node)] : v; };
    for (auto& a : alias) a = {-1, 0};
    for (std::size_t i : g.topological_order()) {
        node& n = g.nodes[i];
        for (value& v : n.inputs) v = resolve(v);
        if (!n.is_op(spec::op_kind::reorder)) continue;
        while (g.at(n.inputs[0]).is_op(spec::op_kind::reorder)) n.inputs[0] = g.at(n.inputs[0]).inputs[0];
        value src = n.inputs[0];
        bool src_nhwc = stored_nhwc(g, src), want_nhwc = n.out_layout == spec::layout::nhwc && n.shapes[0].rank == 4;
        if (src_nhwc == want_nhwc) { alias[i] = src; continue; }
        auto key = std::make_pair(std::make_pair(src.node, src.output), static_cast<int>(n.out_layout));
        if (auto it = first.find(key); it != first.end()) alias[i] = {it->second, 0};
        else first[key] = static_cast<std::int32_t>(i);
    }
    for (value& v : g.outputs) v = resolve(v);
}
}  // namespace detail

// g with every layout mismatch of an image tensor turned into an explicit
// reorder node, and pointless reorders removed. Compacted.
inline graph explicit_conversions(graph g) {
    bool any = false;
    for (const node& n : g.nodes) any = any || n.out_layout == spec::layout::nhwc;
    if (!any) return g;  // nothing to convert: the common case, kept cheap for the search
    const auto constant = g.constant_mask();
    std::map<std::pair<std::pair<std::int32_t, std::int32_t>, bool>, value> made;  // (value, to NHWC) -> reorder
    auto convert = [&](value v, bool to_nhwc) {
        auto key = std::make_pair(std::make_pair(v.node, v.output), to_nhwc);
        if (auto it = made.find(key); it != made.end()) return it->second;
        // Named apart from any reorder of an earlier conversion still in g.
        auto taken = [&g](const std::string& x) {
            return std::any_of(g.nodes.begin(), g.nodes.end(), [&](const node& n) { return n.name == x; });
        };
        value r = g.add1(spec::op_kind::reorder, {}, {v}, unused_name(g.at(v).name + (to_nhwc ? "/to_nhwc" : "/to_nchw"), taken));
        g.nodes[static_cast<std::size_t>(r.node)].out_layout = to_nhwc ? spec::layout::nhwc : spec::layout::nchw;
        return made[key] = r;
    };
    const std::size_t original = g.size();
    for (std::size_t i = 0; i < original; ++i) {
        if (g.nodes[i].kind != node_kind::op && g.nodes[i].kind != node_kind::opaque) continue;
        if (g.nodes[i].is_op(spec::op_kind::reorder)) continue;
        for (std::size_t s = 0; s < g.nodes[i].inputs.size(); ++s) {
            value v = g.nodes[i].inputs[s];
            if (constant[static_cast<std::size_t>(v.node)] || g.shape_of(v).rank != 4) continue;
            bool want = reads_nhwc(g, i, s);
            if (stored_nhwc(g, v) != want) g.nodes[i].inputs[s] = convert(v, want);
        }
    }
    for (value& v : g.outputs)
        if (stored_nhwc(g, v)) v = convert(v, false);
    detail::simplify_reorders(g);
    return std::move(g).compacted();
}

// g with the image operators in `ids` computing in layout l, conversions explicit.
inline graph with_layout(const graph& g, const std::vector<std::size_t>& ids, spec::layout l) {
    graph v = g;
    for (std::size_t i : ids) v.nodes[i].out_layout = l;
    return explicit_conversions(std::move(v));
}

// The operators connected to node `seed` through edges between operators
// that can compute in NHWC and are stored `l` (reorders and constants cut
// the region).
inline std::vector<std::size_t> layout_region(const graph& g, std::size_t seed, spec::layout l, const std::vector<bool>& constant,
                                              const std::vector<std::vector<std::pair<std::int32_t, std::int32_t>>>& cons) {
    auto member = [&](std::size_t i) {
        return can_be_nhwc(g, i) && !constant[i] && (g.nodes[i].out_layout == spec::layout::nhwc) == (l == spec::layout::nhwc);
    };
    std::vector<std::size_t> region, stack{seed};
    std::vector<bool> seen(g.size(), false);
    seen[seed] = true;
    while (!stack.empty()) {
        std::size_t i = stack.back();
        stack.pop_back();
        region.push_back(i);
        std::vector<std::size_t> next;
        for (value v : g.nodes[i].inputs) next.push_back(static_cast<std::size_t>(v.node));
        for (auto [c, slot] : cons[i]) next.push_back(static_cast<std::size_t>(c));
        for (std::size_t j : next)
            if (!seen[j] && member(j)) { seen[j] = true; stack.push_back(j); }
    }
    std::sort(region.begin(), region.end());
    return region;
}
inline std::vector<std::size_t> layout_region(const graph& g, std::size_t seed, spec::layout l, const std::vector<bool>& constant) {
    return layout_region(g, seed, l, constant, g.consumers());
}

// NCHW <-> NHWC search moves: for each convolution that runs at inference,
// the convolution alone and its whole region switched to the other layout,
// with explicit conversions. Deterministic order, no duplicates.
inline std::vector<graph> nhwc_moves(const graph& g) {
    std::vector<graph> out;
    const auto constant = g.constant_mask();
    const auto cons = g.consumers();
    std::vector<bool> in_region(g.size(), false);
    for (std::size_t i = 0; i < g.size(); ++i) {
        if (!g.nodes[i].is_op(spec::op_kind::conv2d) || constant[i] || !can_be_nhwc(g, i)) continue;
        const spec::layout now = g.nodes[i].out_layout == spec::layout::nhwc ? spec::layout::nhwc : spec::layout::nchw;
        const spec::layout other = now == spec::layout::nhwc ? spec::layout::nchw : spec::layout::nhwc;
        auto region = layout_region(g, i, now, constant, cons);
        out.push_back(with_layout(g, {i}, other));
        if (region.size() > 1 && !in_region[i]) out.push_back(with_layout(g, region, other));
        for (std::size_t j : region) in_region[j] = true;
    }
    return out;
}

// g with every image tensor back in NCHW and the reorders that leaves
// pointless dropped: the same rewrites without the layout choices. A cost
// model can misjudge NHWC kernels against the conversions they need (each
// priced alone, not as they run together), so callers that measure whole
// graphs offer this as a candidate too.
inline graph without_nhwc(graph g) {
    bool any = false;
    for (node& n : g.nodes)
        if (n.out_layout == spec::layout::nhwc) {
            n.out_layout = spec::layout::nchw;
            any = true;
        }
    if (!any) return g;
    detail::simplify_reorders(g);
    return std::move(g).compacted();
}

// Graphs that differ from g by one transpose turned into a view (its
// producer's output stored with the last two axes swapped), and, for
// transposes already views, the move back. Deterministic order.
inline std::vector<graph> layout_moves(const graph& g) {
    std::vector<graph> out;
    for (std::size_t i = 0; i < g.size(); ++i) {
        const node& t = g.nodes[i];
        if (!t.is_op(spec::op_kind::transpose) || !swaps_last_two(t.params[spec::transpose_p::perm])) continue;
        const node& src = g.at(t.inputs[0]);
        if (src.kind != node_kind::op) continue;
        spec::layout want = src.out_layout == spec::layout::col_major ? spec::layout::row_major : spec::layout::col_major;
        bool supported = false;
        for (auto l : supported_layouts(src.op, src.shapes[0])) supported = supported || l == want;
        if (!supported) continue;
        graph v = g;
        v.nodes[static_cast<std::size_t>(t.inputs[0].node)].out_layout = want;
        out.push_back(std::move(v));
    }
    for (auto& v : nhwc_moves(g)) out.push_back(std::move(v));
    return out;
}

}  // namespace tsopt::rewrite
