#pragma once
// Multi-linear subprograms (PET §3): the graph is cut at its non-linear
// operators, and what is left between them are tensor programs that are
// linear in each of their inputs (weights included), over conv2d (grouped,
// strided, dilated), matmul (batched), ewadd, ewmul, smul, avgpool,
// batchnorm (inference form), concat, split, transpose, reshape, pad,
// enlarge, slice and overwrite, plus the constant operators.
//
//   graph u = pet::unfuse_activations(g);        // conv(act=relu) -> conv, relu
//   auto parts = pet::linear_components(u);      // maximal linear op sets
//   for (auto& ops : pet::subsets(u, parts[0], 4))  // PET's subset enumeration
//       pet::subprogram sp = pet::extract(u, ops); // a standalone graph
//   graph g2 = pet::splice(u, sp, replacement);  // put a mutant back
//
// A subprogram's graph `sp.g` lists its leaves first: input nodes in0, in1, ...
// (values computed outside, in `sp.inputs`), then copies of the weight nodes
// it reads (same tensor, `sp.weights` names the full graph's nodes), then its
// operators. Mutants are built on the same leaves (mutation.hpp), so leaf i
// means the same tensor in the original and in every mutant; outputs are
// `sp.g.outputs`, matching `sp.outputs` in the full graph.
#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <vector>

#include "tsopt/core/graph.hpp"

namespace tsopt::pet {

// Whether node n belongs to a multi-linear program: a declared linear or
// data-movement operator without a fused activation, or a constant.
inline bool is_linear(const node& n) {
    if (n.kind != node_kind::op) return false;
    using K = spec::op_kind;
    switch (n.op) {
        case K::conv2d: return n.params[spec::conv2d_p::act] == 0;
        case K::matmul: return n.params[spec::matmul_p::act] == 0;
        case K::avgpool: return n.params[spec::pool_p::act] == 0;
        case K::ewadd: case K::ewmul: case K::smul: case K::batchnorm: case K::concat: case K::split:
        case K::transpose: case K::reshape: case K::pad: case K::enlarge: case K::slice: case K::overwrite:
        case K::cpool: case K::iconv: case K::imatmul: case K::iewmul:
            return true;
        default: return false;
    }
}

// conv2d / matmul / avgpool with a fused activation become the linear
// operator followed by the activation as its own node, so that the linear
// part joins a subprogram (post-optimization fuses them back).
inline graph unfuse_activations(const graph& g) {
    graph r = g;
    using K = spec::op_kind;
    const std::size_t n0 = r.nodes.size();
    for (std::size_t i = 0; i < n0; ++i) {
        node& n = r.nodes[i];
        if (n.kind != node_kind::op) continue;
        int slot = n.op == K::conv2d ? spec::conv2d_p::act : n.op == K::matmul ? spec::matmul_p::act
                 : n.op == K::avgpool ? spec::pool_p::act : -1;
        if (slot < 0 || n.params[slot] == 0) continue;
        auto act = static_cast<spec::activation>(n.params[slot]);
        n.params[slot] = 0;
        const value old{static_cast<std::int32_t>(i), 0};
        K ak = act == spec::activation::relu ? K::relu : act == spec::activation::sigmoid ? K::sigmoid : K::tanh;
        std::string nm = r.nodes[i].name + ".act";
        value a = r.add1(ak, {}, {old}, nm);
        for (std::size_t j = 0; j + 1 < r.nodes.size(); ++j)
            for (value& v : r.nodes[j].inputs)
                if (v == old) v = a;
        for (value& v : r.outputs)
            if (v == old) v = a;
    }
    return std::move(r).compacted();
}

// Maximal sets of linear operators connected by an edge between them or by
// reading the same tensor. Sets are sorted by node id.
inline std::vector<std::vector<std::size_t>> linear_components(const graph& g) {
    std::vector<std::size_t> parent(g.size());
    std::iota(parent.begin(), parent.end(), std::size_t{0});
    auto find = [&](std::size_t x) {
        while (parent[x] != x) x = parent[x] = parent[parent[x]];
        return x;
    };
    auto unite = [&](std::size_t a, std::size_t b) { parent[find(a)] = find(b); };
    std::vector<bool> lin(g.size());
    for (std::size_t i = 0; i < g.size(); ++i) lin[i] = is_linear(g.nodes[i]);
    std::map<std::pair<std::int32_t, std::int32_t>, std::size_t> reader;  // value -> first linear reader
    for (std::size_t i = 0; i < g.size(); ++i) {
        if (!lin[i]) continue;
        for (value v : g.nodes[i].inputs) {
            if (lin[std::size_t(v.node)]) unite(i, std::size_t(v.node));
            const node& p = g.at(v);
            if (p.kind == node_kind::weight) continue;  // sharing a weight is not sharing data
            auto [it, fresh] = reader.try_emplace({v.node, v.output}, i);
            if (!fresh) unite(i, it->second);
        }
    }
    std::map<std::size_t, std::vector<std::size_t>> groups;
    for (std::size_t i = 0; i < g.size(); ++i)
        if (lin[i]) groups[find(i)].push_back(i);
    std::vector<std::vector<std::size_t>> r;
    for (auto& [k, v] : groups) r.push_back(std::move(v));
    return r;
}

// Whether replacing `ops` by one new subgraph keeps g acyclic: no path
// leaves the set and comes back into it.
inline bool is_convex(const graph& g, const std::vector<std::size_t>& ops) {
    std::vector<char> in(g.size(), 0), seen(g.size(), 0);
    for (auto i : ops) in[i] = 1;
    auto cons = g.consumers();
    std::vector<std::size_t> stack;
    for (auto i : ops)
        for (auto [c, s] : cons[i])
            if (!in[std::size_t(c)] && !seen[std::size_t(c)]) { seen[std::size_t(c)] = 1; stack.push_back(std::size_t(c)); }
    while (!stack.empty()) {
        auto j = stack.back();
        stack.pop_back();
        for (auto [c, s] : cons[j]) {
            if (in[std::size_t(c)]) return false;
            if (!seen[std::size_t(c)]) { seen[std::size_t(c)] = 1; stack.push_back(std::size_t(c)); }
        }
    }
    return true;
}

// PET's subset enumeration: the connected, convex subsets of a linear
// component with at most `d` operators that contain at least one operator
// doing arithmetic (not only data movement), at most `limit` of them, the
// whole component first when it is small and convex enough.
inline std::vector<std::vector<std::size_t>> subsets(const graph& g, const std::vector<std::size_t>& component, int d,
                                                      std::size_t limit = 256) {
    std::vector<std::vector<std::size_t>> r;
    if (component.empty()) return r;
    std::set<std::size_t> comp(component.begin(), component.end());
    // Adjacency inside the component (edges and shared non-weight inputs).
    std::map<std::size_t, std::set<std::size_t>> adj;
    std::map<std::pair<std::int32_t, std::int32_t>, std::vector<std::size_t>> readers;
    for (auto i : component)
        for (value v : g.nodes[i].inputs) {
            if (comp.count(std::size_t(v.node))) { adj[i].insert(std::size_t(v.node)); adj[std::size_t(v.node)].insert(i); }
            if (g.at(v).kind != node_kind::weight) readers[{v.node, v.output}].push_back(i);
        }
    for (auto& [v, rs] : readers)
        for (auto a : rs)
            for (auto b : rs)
                if (a != b) adj[a].insert(b);
    auto arithmetic = [&](const std::vector<std::size_t>& s) {
        for (auto i : s) {
            auto k = g.nodes[i].op;
            if (spec::decl(k).cls == spec::op_class::linear || k == spec::op_kind::ewadd || k == spec::op_kind::ewmul) return true;
        }
        return false;
    };
    std::set<std::vector<std::size_t>> seen;
    auto emit = [&](std::vector<std::size_t> s) {
        std::sort(s.begin(), s.end());
        if (!seen.insert(s).second) return;
        if (arithmetic(s) && is_convex(g, s)) r.push_back(std::move(s));
    };
    if (static_cast<int>(component.size()) <= d) emit(component);
    // ESU-style growth from each seed over larger ids.
    std::vector<std::size_t> cur;
    std::function<void(std::set<std::size_t>, std::size_t)> grow = [&](std::set<std::size_t> ext, std::size_t seed) {
        if (r.size() >= limit) return;
        emit(cur);
        if (static_cast<int>(cur.size()) >= d) return;
        while (!ext.empty() && r.size() < limit) {
            std::size_t w = *ext.begin();
            ext.erase(ext.begin());
            std::set<std::size_t> next = ext;
            for (auto u : adj[w])
                if (u > seed && std::find(cur.begin(), cur.end(), u) == cur.end()) {
                    bool neighbour_of_cur = false;
                    for (auto c : cur) neighbour_of_cur = neighbour_of_cur || adj[c].count(u) || c == u;
                    if (!neighbour_of_cur) next.insert(u);
                }
            cur.push_back(w);
            grow(next, seed);
            cur.pop_back();
        }
    };
    for (auto seed : component) {
        cur = {seed};
        std::set<std::size_t> ext;
        for (auto u : adj[seed])
            if (u > seed) ext.insert(u);
        grow(ext, seed);
        if (r.size() >= limit) break;
    }
    // Larger sets first: they give the mutations the most room.
    std::stable_sort(r.begin(), r.end(), [](auto& a, auto& b) { return a.size() > b.size(); });
    return r;
}

struct subprogram {
    graph g;                          // leaves first (inputs, then weights), then the operators
    std::vector<value> inputs;        // full-graph values behind g's input nodes, in order
    std::vector<std::int32_t> weights;  // full-graph weight nodes behind g's weight leaves, in order
    std::vector<std::size_t> ops;     // the operators' ids in the full graph
    std::vector<value> outputs;       // full-graph values behind g.outputs, in order
    std::size_t leaves() const { return inputs.size() + weights.size(); }
};

// The operators `ops` of g as a standalone program (see the header comment).
inline subprogram extract(const graph& g, std::vector<std::size_t> ops) {
    std::sort(ops.begin(), ops.end());
    subprogram sp;
    sp.ops = ops;
    std::vector<char> in(g.size(), 0);
    for (auto i : ops) {
        if (g.nodes[i].kind != node_kind::op) throw error("pet::extract: " + g.nodes[i].describe() + " is not an operator");
        in[i] = 1;
    }
    std::vector<std::size_t> order;
    for (auto i : g.topological_order())
        if (in[i]) order.push_back(i);
    // Leaves in order of first use.
    std::map<std::pair<std::int32_t, std::int32_t>, value> map;
    std::vector<value> wvals;
    for (auto i : order)
        for (value v : g.nodes[i].inputs) {
            if (in[std::size_t(v.node)] || map.count({v.node, v.output})) continue;
            if (g.at(v).kind == node_kind::weight) {
                map[{v.node, v.output}] = {};
                wvals.push_back(v);
            } else {
                map[{v.node, v.output}] = sp.g.input("in" + std::to_string(sp.inputs.size()), g.shape_of(v));
                sp.inputs.push_back(v);
            }
        }
    for (value v : wvals) {
        node w = g.at(v);
        value nv{static_cast<std::int32_t>(sp.g.nodes.size()), 0};
        sp.g.nodes.push_back(std::move(w));
        map[{v.node, v.output}] = nv;
        sp.weights.push_back(v.node);
    }
    for (auto i : order) {
        node n = g.nodes[i];
        for (value& v : n.inputs) v = map.at({v.node, v.output});
        std::int32_t id = static_cast<std::int32_t>(sp.g.nodes.size());
        for (int o = 0; o < n.num_outputs(); ++o) map[{static_cast<std::int32_t>(i), o}] = {id, o};
        sp.g.nodes.push_back(std::move(n));
    }
    // Outputs: values read outside the set, or graph outputs.
    std::set<std::pair<std::int32_t, std::int32_t>> outs;
    for (std::size_t j = 0; j < g.size(); ++j) {
        if (in[j]) continue;
        for (value v : g.nodes[j].inputs)
            if (in[std::size_t(v.node)]) outs.insert({v.node, v.output});
    }
    for (value v : g.outputs)
        if (in[std::size_t(v.node)]) outs.insert({v.node, v.output});
    for (auto [nd, o] : outs) {
        sp.outputs.push_back({nd, o});
        sp.g.outputs.push_back(map.at({nd, o}));
    }
    return sp;
}

// g with sp's operators replaced by `replacement`, a program over sp's leaves
// (same leaf layout) with one output per sp output. Throws tsopt::error on a
// cycle (a non-convex set) or a shape mismatch.
inline graph splice(const graph& g, const subprogram& sp, const graph& replacement) {
    if (replacement.outputs.size() != sp.outputs.size())
        throw error("pet::splice: replacement has " + std::to_string(replacement.outputs.size()) + " outputs, subprogram " +
                    std::to_string(sp.outputs.size()));
    graph r = g;
    const std::size_t L = sp.leaves();
    std::vector<value> map(replacement.size());
    for (std::size_t k = 0; k < sp.inputs.size(); ++k) map[k] = sp.inputs[k];
    for (std::size_t k = 0; k < sp.weights.size(); ++k) map[sp.inputs.size() + k] = {sp.weights[k], 0};
    for (std::size_t i = L; i < replacement.size(); ++i) {
        node n = replacement.nodes[i];
        for (value& v : n.inputs) {
            if (std::size_t(v.node) < L) v = map[std::size_t(v.node)];
            else v = {map[std::size_t(v.node)].node, v.output};
        }
        map[i] = {static_cast<std::int32_t>(r.nodes.size()), 0};
        r.nodes.push_back(std::move(n));
    }
    auto mapped = [&](value v) {
        if (std::size_t(v.node) < L) return map[std::size_t(v.node)];
        return value{map[std::size_t(v.node)].node, v.output};
    };
    const std::size_t appended = g.size();
    for (std::size_t k = 0; k < sp.outputs.size(); ++k) {
        value from = sp.outputs[k], to = mapped(replacement.outputs[k]);
        if (!(g.shape_of(from) == r.shape_of(to)))
            throw error("pet::splice: output " + std::to_string(k) + " changes shape " + g.shape_of(from).str() + " -> " +
                        r.shape_of(to).str());
        for (std::size_t j = 0; j < appended; ++j)
            for (value& v : r.nodes[j].inputs)
                if (v == from) v = to;
        for (value& v : r.outputs)
            if (v == from) v = to;
    }
    (void)r.topological_order();  // throws on a cycle
    return std::move(r).compacted();
}

}  // namespace tsopt::pet
