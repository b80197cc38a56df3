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
        for (auto l : supported_layouts(src.op)) supported = supported || l == want;
        if (!supported) continue;
        graph v = g;
        v.nodes[static_cast<std::size_t>(t.inputs[0].node)].out_layout = want;
        out.push_back(std::move(v));
    }
    return out;
}

}  // namespace tsopt::rewrite
