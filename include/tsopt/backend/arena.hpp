#pragma once
// Compilation helpers shared by the backends that plan their own memory
// (dnnl, cudnn): which nodes need to run (the oneDNN backend also leaves
// explicit layout conversions to their readers), and greedy placement of
// buffers in one arena. What makes two buffers conflict is the backend's:
// step-interval overlap on one stream (dnnl), not ordered by happens-before
// across streams (cudnn).
#include <algorithm>
#include <cstddef>
#include <optional>
#include <utility>
#include <vector>

#include "tsopt/core/graph.hpp"

namespace tsopt::backend {

// live[i]: some graph output depends on node i.
inline std::vector<bool> live_nodes(const graph& g) {
    std::vector<bool> live(g.size(), false);
    std::vector<std::size_t> stack;
    for (value v : g.outputs) stack.push_back(static_cast<std::size_t>(v.node));
    while (!stack.empty()) {
        std::size_t i = stack.back();
        stack.pop_back();
        if (live[i]) continue;
        live[i] = true;
        for (value v : g.nodes[i].inputs) stack.push_back(static_cast<std::size_t>(v.node));
    }
    return live;
}

// g with every reader of a layout conversion node (`reorder`, made by
// rewrite::explicit_conversions) and every graph output reading the
// conversion's input instead; node ids unchanged, the conversions left
// unread (live_nodes skips them). What a backend that converts layouts
// itself compiles: a reader converts a value into the layout it wants where
// it wants another (nhwc straight into a convolution's blocked layout, not
// through row-major; an activation stays fusable into the operator before
// the conversion), as it does for the written model, whose importer drops
// the Identity the exporter writes for a conversion. Compiled as
// conversions, a candidate of `tsopt optimize` ran slower than the model it
// was written as (zoo_nasnet_a: 329 ms against 285), so the end-to-end pick
// timed another graph than the one it wrote. nullopt when g has none.
inline std::optional<graph> bypass_layout_conversions(const graph& g) {
    const auto conversion = [](const node& n) { return n.is_op(spec::op_kind::reorder); };
    if (std::ranges::none_of(g.nodes, conversion)) return std::nullopt;
    graph r = g;
    const auto source = [&](value v) {
        while (conversion(g.at(v))) v = g.at(v).inputs[0];
        return v;
    };
    for (node& n : r.nodes)
        if (!conversion(n))
            for (value& v : n.inputs) v = source(v);
    for (value& v : r.outputs) v = source(v);
    return r;
}

// Places the buffers bufs[order[k]] (each with `bytes` and `offset`) in one
// arena, largest first (ties in the given order), each at the lowest offset
// clear of every buffer placed before it that it conflicts with
// (conflict(buffer, placed) true: they may be live together). Returns the
// arena size needed (0 when order is empty).
template <class Buffers, class Conflict>
std::size_t place_in_arena(Buffers& bufs, std::vector<int> order, Conflict&& conflict) {
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        return bufs[static_cast<std::size_t>(a)].bytes > bufs[static_cast<std::size_t>(b)].bytes;
    });
    std::size_t size = 0;
    std::vector<int> placed;
    for (int bi : order) {
        auto& x = bufs[static_cast<std::size_t>(bi)];
        std::vector<std::pair<std::size_t, std::size_t>> busy;
        for (int q : placed) {
            const auto& y = bufs[static_cast<std::size_t>(q)];
            if (conflict(x, y)) busy.push_back({y.offset, y.offset + y.bytes});
        }
        std::sort(busy.begin(), busy.end());
        std::size_t off = 0;
        for (auto [lo, hi] : busy) {
            if (off + x.bytes <= lo) break;
            off = std::max(off, hi);
        }
        x.offset = off;
        size = std::max(size, off + x.bytes);
        placed.push_back(bi);
    }
    return size;
}

}  // namespace tsopt::backend
