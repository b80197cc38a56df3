#pragma once
// Stream assignment for multi-stream execution (Nimble, AutoGraph).
//
// Goal: run every pair of operators that the graph leaves unordered on
// different streams (maximum logical concurrency) while using as few streams
// and cross-stream synchronisations as possible. Nimble's construction:
//   1. reduce the operator DAG to its minimum equivalent graph (the
//      transitive reduction: an edge u->v stays only if no longer path
//      u ~> v exists);
//   2. build the bipartite graph (u on the left, v on the right) of the
//      remaining edges and take a maximum matching (Boost.Graph's Edmonds);
//   3. each matched edge u->v puts v right after u on u's stream, so streams
//      are chains of the DAG: ops on one stream were ordered anyway, and the
//      number of streams, |V| - |matching|, is the minimum path cover;
//   4. every reduced edge that is not matched crosses streams and becomes an
//      event (record after u, wait before v); edges removed by the reduction
//      are implied by the others, so they need none.
// Plain C++ over any DAG; `assign_streams(const graph&)` adapts the IR.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/max_cardinality_matching.hpp>

#include "tsopt/core/graph.hpp"

namespace tsopt::parallel {

struct stream_schedule {
    struct event {
        int producer;  // recorded on stream_of[producer] after it runs
        int consumer;  // waited on by stream_of[consumer] before it runs
    };
    std::vector<int> stream_of;            // per DAG vertex
    std::vector<std::vector<int>> streams;  // per stream, vertices in launch order
    std::vector<event> events;
    std::size_t num_streams() const { return streams.size(); }
};

namespace detail {

// Reachability bitsets in reverse topological order; n is small (operators
// of one model), so O(n^2 / 64) words is cheap.
inline std::vector<std::vector<std::uint64_t>> reachability(const std::vector<std::vector<int>>& succ,
                                                            const std::vector<int>& topo) {
    const std::size_t n = succ.size(), words = (n + 63) / 64;
    std::vector<std::vector<std::uint64_t>> reach(n, std::vector<std::uint64_t>(words, 0));
    for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
        auto u = static_cast<std::size_t>(*it);
        for (int v : succ[u]) {
            reach[u][static_cast<std::size_t>(v) / 64] |= 1ull << (v % 64);
            for (std::size_t w = 0; w < words; ++w) reach[u][w] |= reach[static_cast<std::size_t>(v)][w];
        }
    }
    return reach;
}

inline std::vector<int> topological(const std::vector<std::vector<int>>& succ) {
    std::vector<int> indeg(succ.size(), 0), order, ready;
    for (auto& s : succ)
        for (int v : s) ++indeg[static_cast<std::size_t>(v)];
    for (std::size_t i = succ.size(); i-- > 0;)
        if (indeg[i] == 0) ready.push_back(static_cast<int>(i));
    while (!ready.empty()) {
        int u = ready.back();
        ready.pop_back();
        order.push_back(u);
        for (int v : succ[static_cast<std::size_t>(u)])
            if (--indeg[static_cast<std::size_t>(v)] == 0) ready.push_back(v);
    }
    if (order.size() != succ.size()) throw error("stream assignment: the dependency graph has a cycle");
    return order;
}

}  // namespace detail

// Transitive reduction of a DAG given by successor lists.
inline std::vector<std::vector<int>> transitive_reduction(const std::vector<std::vector<int>>& succ) {
    auto topo = detail::topological(succ);
    auto reach = detail::reachability(succ, topo);
    std::vector<std::vector<int>> red(succ.size());
    for (std::size_t u = 0; u < succ.size(); ++u) {
        std::vector<int> s = succ[u];
        std::sort(s.begin(), s.end());
        s.erase(std::unique(s.begin(), s.end()), s.end());
        for (int v : s) {
            bool implied = false;
            for (int w : s)
                if (w != v && (reach[static_cast<std::size_t>(w)][static_cast<std::size_t>(v) / 64] >> (v % 64) & 1)) {
                    implied = true;
                    break;
                }
            if (!implied) red[u].push_back(v);
        }
    }
    return red;
}

inline stream_schedule assign_streams(const std::vector<std::vector<int>>& succ) {
    const int n = static_cast<int>(succ.size());
    auto red = transitive_reduction(succ);
    using bipartite = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS>;
    bipartite b(static_cast<std::size_t>(2 * n));  // u -> u (left), v -> n + v (right)
    for (int u = 0; u < n; ++u)
        for (int v : red[static_cast<std::size_t>(u)]) boost::add_edge(static_cast<std::size_t>(u), static_cast<std::size_t>(n + v), b);
    std::vector<boost::graph_traits<bipartite>::vertex_descriptor> mate(static_cast<std::size_t>(2 * n));
    boost::edmonds_maximum_cardinality_matching(b, &mate[0]);
    const auto none = boost::graph_traits<bipartite>::null_vertex();

    std::vector<int> next(static_cast<std::size_t>(n), -1), prev(static_cast<std::size_t>(n), -1);
    for (int u = 0; u < n; ++u) {
        auto m = mate[static_cast<std::size_t>(u)];
        if (m != none && static_cast<int>(m) >= n) {
            next[static_cast<std::size_t>(u)] = static_cast<int>(m) - n;
            prev[m - static_cast<std::size_t>(n)] = u;
        }
    }
    stream_schedule s;
    s.stream_of.assign(static_cast<std::size_t>(n), -1);
    // Chains start at vertices with no matched predecessor; number them in
    // topological order of their heads so stream 0 holds the first op.
    for (int u : detail::topological(succ)) {
        if (prev[static_cast<std::size_t>(u)] != -1) continue;
        std::vector<int> chain;
        for (int v = u; v != -1; v = next[static_cast<std::size_t>(v)]) {
            s.stream_of[static_cast<std::size_t>(v)] = static_cast<int>(s.streams.size());
            chain.push_back(v);
        }
        s.streams.push_back(std::move(chain));
    }
    for (int u = 0; u < n; ++u)
        for (int v : red[static_cast<std::size_t>(u)])
            if (next[static_cast<std::size_t>(u)] != v) s.events.push_back({u, v});
    return s;
}

// Checks that a schedule orders every dependency u -> v, either by stream
// order or by a chain of events and stream orders. Returns "" when valid.
inline std::string check_schedule(const std::vector<std::vector<int>>& succ, const stream_schedule& s) {
    const std::size_t n = succ.size();
    if (s.stream_of.size() != n) return "schedule covers " + std::to_string(s.stream_of.size()) + " of " + std::to_string(n) + " vertices";
    // Happens-before graph: stream order edges plus event edges.
    std::vector<std::vector<int>> hb(n);
    std::vector<int> seen(n, 0);
    for (auto& st : s.streams)
        for (std::size_t i = 0; i < st.size(); ++i) {
            ++seen[static_cast<std::size_t>(st[i])];
            if (i + 1 < st.size()) hb[static_cast<std::size_t>(st[i])].push_back(st[i + 1]);
        }
    for (std::size_t v = 0; v < n; ++v)
        if (seen[v] != 1) return "vertex " + std::to_string(v) + " is launched " + std::to_string(seen[v]) + " times";
    for (auto e : s.events) hb[static_cast<std::size_t>(e.producer)].push_back(e.consumer);
    std::vector<int> topo;
    try {
        topo = detail::topological(hb);
    } catch (const error&) {
        return "stream order and events form a cycle (deadlock)";
    }
    auto reach = detail::reachability(hb, topo);
    for (std::size_t u = 0; u < n; ++u)
        for (int v : succ[u])
            if (!(reach[u][static_cast<std::size_t>(v) / 64] >> (v % 64) & 1))
                return "dependency " + std::to_string(u) + " -> " + std::to_string(v) + " is not ordered";
    return {};
}

// Operator-level DAG of a graph (inputs and weights are not launched), with
// the mapping back to node ids.
struct op_dag {
    std::vector<std::vector<int>> succ;
    std::vector<std::size_t> node_of;  // DAG vertex -> graph node id
};
inline op_dag operator_dag(const graph& g) {
    op_dag d;
    std::vector<int> vertex(g.size(), -1);
    for (std::size_t i : g.topological_order())
        if (g.nodes[i].kind == node_kind::op || g.nodes[i].kind == node_kind::opaque) {
            vertex[i] = static_cast<int>(d.node_of.size());
            d.node_of.push_back(i);
        }
    d.succ.resize(d.node_of.size());
    for (std::size_t v = 0; v < d.node_of.size(); ++v)
        for (value in : g.nodes[d.node_of[v]].inputs)
            if (int u = vertex[static_cast<std::size_t>(in.node)]; u >= 0) d.succ[static_cast<std::size_t>(u)].push_back(static_cast<int>(v));
    return d;
}

}  // namespace tsopt::parallel
