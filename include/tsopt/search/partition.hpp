#pragma once
// Flow-based graph partitioning (MetaFlow §4.3, refined as in AutoGraph), so
// that the search can optimize a large graph part by part.
//
// API (all in tsopt::search):
//
//   partition_result partition(const graph& g, std::vector<double> capacity, partition_options o = {});
//       capacity[v] (one entry per node of g, >= 0): what cutting at node v
//       loses, normally the number of rule matches that contain v and one of
//       its consumers (spanning_capacity() computes it from match node sets).
//       Returns parts (node sets) in a topological sequence: every edge
//       between parts goes from an earlier part to a later one, so
//       parts[0], parts[1], ... can be optimized and stitched in order. Every
//       node of g (inputs and weights included) is in exactly one part; each
//       part holds at most o.max_part_ops operators (at most o.merge_ops
//       after merging). cut_nodes: operators with a consumer in a later part.
//
//   subgraph extract(const graph& g, std::span<const std::size_t> part);
//       The part's operators as a standalone graph: tensors entering from
//       outside become graph inputs (named after their producer, with its
//       layout), weights are copied in as weights (sharing their data), and
//       every value read outside the part or marked as an output of g becomes
//       an output. `inputs_from` / `outputs_to` map them back to g's values.
//
//   graph stitch(const graph& g, const subgraph& part, const graph& optimized);
//   graph stitch(const graph& g, std::span<const replacement> parts);
//       g with each part's operators replaced by `optimized` (a rewrite of
//       part.g: the same outputs in the same order and shapes; inputs matched
//       by name to part.g's inputs). Several disjoint parts can be replaced at
//       once. The result is validated and compacted (topological node order,
//       operators that reach no output dropped, inputs kept in their order).
//
// Algorithm. Operators only take part in the flow network; inputs and weights
// join the part of their first consumer afterwards.
//  1. Split (MetaFlow): while a set of operators is larger than max_part_ops,
//     take it in topological order; the first (1/2 - window) become forced
//     source side, the last (1/2 - window) forced sink side, the middle is
//     free. Build the split-vertex network: node v -> v_in -> v_out with
//     capacity[v]; each graph edge u -> v as u_out -> v_in, infinite; and
//     v_in -> u_in, infinite, which keeps the source side closed under
//     predecessors (no edge can come back from the sink side). The minimum
//     s-t cut (Boost.Graph boykov_kolmogorov_max_flow; the source side is
//     what s reaches in the residual network) is a minimum-capacity set of
//     cut operators C such that every edge from the source side to the sink
//     side leaves from C. Recurse on both sides.
//  2. Merge (AutoGraph): the split can leave parts much smaller than needed.
//     Consecutive parts of the sequence can be merged while the merged part
//     holds at most merge_ops operators (a union of consecutive parts of a
//     topological sequence is convex). Which groups to form is chosen by
//     dynamic programming — our reading of AutoGraph's Equation 2:
//         F(0) = 0
//         F(j) = min over i < j with ops(P_i..P_{j-1}) <= merge_ops of
//                F(i) + cut(i, j)
//         cut(i, j) = sum of capacity[v] over operators v in P_i..P_{j-1}
//                     that have a consumer in a part >= j
//     i.e. the grouping that loses the fewest rule matches at its
//     boundaries, ties broken towards fewer groups. F(k) is the total
//     capacity of the final cut.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

// GCC 12 reports a false -Wmaybe-uninitialized inside Boost's edge iterator
// (boost::optional) when boykov_kolmogorov_max_flow is instantiated.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/boykov_kolmogorov_max_flow.hpp>
#include <boost/graph/graph_traits.hpp>

#include "tsopt/core/graph.hpp"

namespace tsopt::search {

struct partition_options {
    std::size_t max_part_ops = 30;  // split until parts have at most this many operators
    std::size_t merge_ops = 0;      // merge consecutive parts up to this many operators (0: max_part_ops)
    bool merge = true;              // run the merging dynamic program
    double window = 0.25;           // fraction of a set on each side of its middle that the cut may use
    // Past this time, sets still too large are cut into consecutive runs of
    // max_part_ops operators of their topological order instead of by
    // minimum cuts (linear, where the cuts cost seconds on a 100k-node
    // graph): a caller out of budget gets valid parts at once.
    std::optional<std::chrono::steady_clock::time_point> deadline{};
};

struct partition_result {
    std::vector<std::vector<std::size_t>> parts;  // node ids (ascending) per part, parts in topological sequence
    std::vector<std::size_t> part_of;             // node id -> index into parts
    std::vector<std::size_t> cut_nodes;           // operators with a consumer in a later part (ascending)
    double cut_capacity = 0;                      // sum of capacity over cut_nodes
};

// Number of matches (each given as the node ids it covers) that contain node
// v and at least one consumer of v: what a cut at v breaks.
inline std::vector<double> spanning_capacity(const graph& g, const std::vector<std::vector<std::size_t>>& matches) {
    std::vector<double> cap(g.size(), 0);
    std::vector<char> in(g.size(), 0);
    for (const auto& m : matches) {
        for (std::size_t v : m) {
            if (v >= g.size()) throw error("spanning_capacity: match names node " + std::to_string(v) + ", graph has " +
                                           std::to_string(g.size()));
            in[v] = 1;
        }
        for (std::size_t v : m)
            for (value u : g.nodes[v].inputs)
                if (in[static_cast<std::size_t>(u.node)] == 1) {
                    cap[static_cast<std::size_t>(u.node)] += 1;
                    in[static_cast<std::size_t>(u.node)] = 2;  // count each node once per match
                }
        for (std::size_t v : m) in[v] = 0;
    }
    return cap;
}

namespace detail {

inline bool is_operator(const node& n) { return n.kind == node_kind::op || n.kind == node_kind::opaque; }

// One minimum vertex cut of `set` (operators in topological order). Returns
// the flags "on the source side", one per element of set.
inline std::vector<bool> min_vertex_cut(const graph& g, const std::vector<std::size_t>& set,
                                        const std::vector<double>& capacity, double window) {
    using traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
    using network = boost::adjacency_list<
        boost::vecS, boost::vecS, boost::directedS, boost::no_property,
        boost::property<boost::edge_capacity_t, double,
                        boost::property<boost::edge_residual_capacity_t, double,
                                        boost::property<boost::edge_reverse_t, traits::edge_descriptor>>>>;
    const std::size_t n = set.size();
    // Position in `set` by node id: a map the size of the set, not of the
    // graph (split calls this once per piece).
    std::unordered_map<std::size_t, std::size_t> local;
    local.reserve(n);
    double total = 0;
    for (std::size_t k = 0; k < n; ++k) {
        local.emplace(set[k], k);
        total += capacity[set[k]];
    }
    const double big = total + 1.0;  // more than any finite cut
    const std::size_t s = 2 * n, t = 2 * n + 1;
    network net(2 * n + 2);
    auto cap = boost::get(boost::edge_capacity, net);
    auto rev = boost::get(boost::edge_reverse, net);
    auto res = boost::get(boost::edge_residual_capacity, net);
    auto add = [&](std::size_t a, std::size_t b, double c) {
        auto e = boost::add_edge(a, b, net).first;
        auto r = boost::add_edge(b, a, net).first;
        cap[e] = c;
        cap[r] = 0;
        rev[e] = r;
        rev[r] = e;
    };
    auto in_of = [](std::size_t k) { return 2 * k; };
    auto out_of = [](std::size_t k) { return 2 * k + 1; };
    for (std::size_t k = 0; k < n; ++k) {
        add(in_of(k), out_of(k), capacity[set[k]]);
        for (value u : g.nodes[set[k]].inputs) {
            auto it = local.find(static_cast<std::size_t>(u.node));
            if (it == local.end()) continue;
            add(out_of(it->second), in_of(k), big);
            add(in_of(k), in_of(it->second), big);
        }
    }
    const std::size_t half = n / 2;
    const auto free_each = static_cast<std::size_t>(std::floor(static_cast<double>(n) * window));
    const std::size_t lo = std::max<std::size_t>(1, half > free_each ? half - free_each : 0);
    const std::size_t hi = std::max(lo, std::min(n - 1, half + free_each));
    for (std::size_t k = 0; k < lo; ++k) add(s, in_of(k), big);
    for (std::size_t k = hi; k < n; ++k) add(in_of(k), t, big);

    boost::boykov_kolmogorov_max_flow(net, cap, res, rev, boost::get(boost::vertex_index, net), s, t);

    // Source side: what s reaches through edges with residual capacity left.
    std::vector<bool> reach(2 * n + 2, false);
    std::vector<std::size_t> stack{s};
    reach[s] = true;
    const double eps = 1e-9 * big;
    while (!stack.empty()) {
        std::size_t a = stack.back();
        stack.pop_back();
        for (auto [it, end] = boost::out_edges(a, net); it != end; ++it) {
            std::size_t b = boost::target(*it, net);
            if (!reach[b] && res[*it] > eps) {
                reach[b] = true;
                stack.push_back(b);
            }
        }
    }
    if (reach[t]) throw error("partition: internal error, the sink is reachable after max flow");
    std::vector<bool> side(n);
    for (std::size_t k = 0; k < n; ++k) side[k] = reach[in_of(k)];
    for (std::size_t k = 0; k < n; ++k) local[set[k]] = -1;
    return side;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

inline void split(const graph& g, const std::vector<std::size_t>& set, const std::vector<double>& capacity,
                  const partition_options& o, std::vector<std::vector<std::size_t>>& out) {
    if (set.size() <= o.max_part_ops) {
        out.push_back(set);
        return;
    }
    // A run of a topological order is convex, as the cuts' sides are.
    if (o.deadline && std::chrono::steady_clock::now() > *o.deadline) {
        for (std::size_t b = 0; b < set.size(); b += o.max_part_ops)
            out.emplace_back(set.begin() + static_cast<std::ptrdiff_t>(b),
                             set.begin() + static_cast<std::ptrdiff_t>(std::min(set.size(), b + o.max_part_ops)));
        return;
    }
    auto side = min_vertex_cut(g, set, capacity, o.window);
    std::vector<std::size_t> a, b;
    for (std::size_t k = 0; k < set.size(); ++k) (side[k] ? a : b).push_back(set[k]);
    if (a.empty() || b.empty())  // cannot happen: both ends are forced
        throw error("partition: internal error, a minimum cut left one side empty");
    split(g, a, capacity, o, out);
    split(g, b, capacity, o, out);
}

}  // namespace detail

inline partition_result partition(const graph& g, std::vector<double> capacity, partition_options o = {}) {
    if (capacity.size() != g.size())
        throw error("partition: capacity has " + std::to_string(capacity.size()) + " entries, the graph has " +
                    std::to_string(g.size()) + " nodes");
    for (std::size_t i = 0; i < capacity.size(); ++i)
        if (!(capacity[i] >= 0) || !std::isfinite(capacity[i]))
            throw error("partition: capacity of " + g.nodes[i].describe() + " is " + std::to_string(capacity[i]) +
                        "; capacities must be finite and non-negative");
    if (o.max_part_ops < 1) throw error("partition: max_part_ops must be at least 1");
    if (o.merge_ops == 0) o.merge_ops = o.max_part_ops;
    if (o.merge_ops < o.max_part_ops)
        throw error("partition: merge_ops (" + std::to_string(o.merge_ops) + ") must be at least max_part_ops (" +
                    std::to_string(o.max_part_ops) + ")");
    if (!(o.window >= 0 && o.window < 0.5)) throw error("partition: window must be in [0, 0.5)");

    const auto order = g.topological_order();
    std::vector<std::size_t> ops;
    for (std::size_t i : order)
        if (detail::is_operator(g.nodes[i])) ops.push_back(i);

    std::vector<std::vector<std::size_t>> pieces;
    if (!ops.empty()) detail::split(g, ops, capacity, o, pieces);

    // Merge consecutive pieces by dynamic programming (see the header comment).
    std::vector<std::vector<std::size_t>> groups;
    const std::size_t k = pieces.size();
    if (o.merge && k > 1) {
        std::vector<std::size_t> piece_of(g.size(), 0);
        for (std::size_t p = 0; p < k; ++p)
            for (std::size_t v : pieces[p]) piece_of[v] = p;
        std::vector<std::int64_t> last(g.size(), -1);  // last piece reading each operator
        for (std::size_t p = 0; p < k; ++p)
            for (std::size_t v : pieces[p])
                for (value u : g.nodes[v].inputs)
                    last[static_cast<std::size_t>(u.node)] =
                        std::max(last[static_cast<std::size_t>(u.node)], static_cast<std::int64_t>(p));
        const double inf = std::numeric_limits<double>::infinity();
        std::vector<double> best(k + 1, inf);
        std::vector<std::size_t> count(k + 1, 0), from(k + 1, 0);
        best[0] = 0;
        for (std::size_t j = 1; j <= k; ++j) {
            std::size_t size = 0;
            for (std::size_t i = j; i-- > 0;) {
                size += pieces[i].size();
                if (size > o.merge_ops) break;
                double c = 0;
                for (std::size_t p = i; p < j; ++p)
                    for (std::size_t v : pieces[p])
                        if (last[v] >= static_cast<std::int64_t>(j)) c += capacity[v];
                double f = best[i] + c;
                if (f < best[j] || (f == best[j] && count[i] + 1 < count[j])) {
                    best[j] = f;
                    count[j] = count[i] + 1;
                    from[j] = i;
                }
            }
        }
        std::vector<std::size_t> bounds;
        for (std::size_t j = k; j > 0; j = from[j]) bounds.push_back(j);
        bounds.push_back(0);
        std::reverse(bounds.begin(), bounds.end());
        for (std::size_t b = 0; b + 1 < bounds.size(); ++b) {
            std::vector<std::size_t> grp;
            for (std::size_t p = bounds[b]; p < bounds[b + 1]; ++p) grp.insert(grp.end(), pieces[p].begin(), pieces[p].end());
            groups.push_back(std::move(grp));
        }
    } else {
        groups = std::move(pieces);
    }
    if (groups.empty()) groups.emplace_back();

    partition_result r;
    const std::size_t none = static_cast<std::size_t>(-1);
    r.part_of.assign(g.size(), none);
    for (std::size_t p = 0; p < groups.size(); ++p)
        for (std::size_t v : groups[p]) r.part_of[v] = p;
    // Inputs and weights join the earliest part that reads them (part 0 if none).
    auto cons = g.consumers();
    for (std::size_t i = 0; i < g.size(); ++i) {
        if (r.part_of[i] != none) continue;
        std::size_t p = none;
        for (auto [c, slot] : cons[i]) {
            (void)slot;
            p = std::min(p, r.part_of[static_cast<std::size_t>(c)]);
        }
        r.part_of[i] = p == none ? 0 : p;
    }
    r.parts.assign(groups.size(), {});
    for (std::size_t i = 0; i < g.size(); ++i) r.parts[r.part_of[i]].push_back(i);
    for (std::size_t i = 0; i < g.size(); ++i) {
        if (!detail::is_operator(g.nodes[i])) continue;
        bool cut = false;
        for (auto [c, slot] : cons[i]) {
            (void)slot;
            if (r.part_of[static_cast<std::size_t>(c)] != r.part_of[i]) cut = true;
        }
        if (cut) {
            r.cut_nodes.push_back(i);
            r.cut_capacity += capacity[i];
        }
    }
    return r;
}

// ---- extraction and stitching ---------------------------------------------

struct subgraph {
    graph g;                          // standalone: boundary tensors are its inputs
    std::vector<std::size_t> nodes;   // the operators of the whole graph it holds (ascending)
    std::vector<value> inputs_from;   // g.inputs()[k] stands for this value of the whole graph
    std::vector<value> outputs_to;    // g.outputs[k] computes this value of the whole graph
};

// What extract reads of the whole graph, computed once when extracting many
// parts of it (linear in the graph, then each extract is linear in its part).
struct extract_context {
    explicit extract_context(const graph& whole) : position(whole.size()), consumers(whole.consumers()) {
        auto order = whole.topological_order();
        for (std::size_t k = 0; k < order.size(); ++k) position[order[k]] = k;
    }
    std::vector<std::size_t> position;  // in a topological order
    std::vector<std::vector<std::pair<std::int32_t, std::int32_t>>> consumers;
};

inline subgraph extract(const graph& whole, std::span<const std::size_t> part, const extract_context& cx) {
    subgraph sg;
    std::unordered_set<std::size_t> member;
    std::vector<std::size_t> ordered;
    for (std::size_t v : part) {
        if (v >= whole.size())
            throw error("extract: part names node " + std::to_string(v) + ", the graph has " + std::to_string(whole.size()));
        if (detail::is_operator(whole.nodes[v]) && member.insert(v).second) ordered.push_back(v);
    }
    std::sort(ordered.begin(), ordered.end(), [&](std::size_t a, std::size_t b) { return cx.position[a] < cx.position[b]; });
    std::map<value, value> map;  // whole value -> value in sg.g
    std::map<std::size_t, value> weights;
    std::set<std::string> names;
    graph& g = sg.g;
    for (std::size_t i : ordered) {
        sg.nodes.push_back(i);
        node n = whole.nodes[i];
        for (value& v : n.inputs) {
            if (auto it = map.find(v); it != map.end()) {
                v = it->second;
                continue;
            }
            const node& p = whole.at(v);
            value nv;
            if (p.kind == node_kind::weight) {
                auto w = weights.find(static_cast<std::size_t>(v.node));
                if (w == weights.end()) {
                    node copy = p;
                    g.nodes.push_back(std::move(copy));
                    w = weights.emplace(static_cast<std::size_t>(v.node),
                                        value{static_cast<std::int32_t>(g.nodes.size() - 1), 0}).first;
                }
                nv = w->second;
            } else {
                std::string name = p.name;
                if (p.num_outputs() > 1) name += ":" + std::to_string(v.output);
                if (names.count(name)) name += "#" + std::to_string(v.node);
                names.insert(name);
                nv = g.input(name, whole.shape_of(v));
                g.nodes.back().out_layout = p.out_layout;
                sg.inputs_from.push_back(v);
            }
            map.emplace(v, nv);
            v = nv;
        }
        g.nodes.push_back(std::move(n));
        for (int k = 0; k < whole.nodes[i].num_outputs(); ++k)
            map.emplace(value{static_cast<std::int32_t>(i), k}, value{static_cast<std::int32_t>(g.nodes.size() - 1), k});
    }
    if (sg.nodes.empty()) throw error("extract: the part holds no operators");
    // Outputs: values read outside the part or marked as outputs of the whole graph.
    std::set<value> needed;
    for (std::size_t i : sg.nodes)
        for (auto [c, slot] : cx.consumers[i])
            if (!member.count(static_cast<std::size_t>(c))) needed.insert(whole.nodes[static_cast<std::size_t>(c)].inputs[static_cast<std::size_t>(slot)]);
    for (value v : whole.outputs)
        if (member.count(static_cast<std::size_t>(v.node))) needed.insert(v);
    for (std::size_t i : sg.nodes)
        for (int k = 0; k < whole.nodes[i].num_outputs(); ++k) {
            value v{static_cast<std::int32_t>(i), k};
            if (needed.count(v)) {
                g.outputs.push_back(map.at(v));
                sg.outputs_to.push_back(v);
            }
        }
    std::sort(sg.nodes.begin(), sg.nodes.end());
    return sg;
}

inline subgraph extract(const graph& whole, std::span<const std::size_t> part) {
    return extract(whole, part, extract_context(whole));
}

struct replacement {
    const subgraph* part;
    const graph* optimized;
};

inline graph stitch(const graph& whole, std::span<const replacement> reps) {
    graph r;
    r.nodes = whole.nodes;
    r.outputs = whole.outputs;
    std::map<value, value> redirect;  // value (in r) -> the value now computing it (in r)
    std::vector<char> replaced(whole.size(), 0);
    for (std::size_t ri = 0; ri < reps.size(); ++ri)
        for (std::size_t v : reps[ri].part->nodes) {
            const std::string which = "stitch: part " + std::to_string(ri);
            if (v >= whole.size()) throw error(which + " names node " + std::to_string(v) + " outside the graph");
            if (replaced[v]) throw error(which + " overlaps another part at " + whole.nodes[v].describe());
            replaced[v] = 1;
        }
    // Names of the nodes the result keeps, so the parts' nodes are named apart from them.
    std::set<std::string> names;
    for (std::size_t i = 0; i < whole.size(); ++i)
        if (!replaced[i]) names.insert(whole.nodes[i].name);
    for (std::size_t ri = 0; ri < reps.size(); ++ri) {
        const subgraph& part = *reps[ri].part;
        const graph& opt = *reps[ri].optimized;
        const std::string which = "stitch: part " + std::to_string(ri);
        if (opt.outputs.size() != part.outputs_to.size())
            throw error(which + ": the optimized graph has " + std::to_string(opt.outputs.size()) + " outputs, the part " +
                        std::to_string(part.outputs_to.size()));
        // Input names of the part -> whole-graph values.
        std::map<std::string, value, std::less<>> by_name;
        auto part_inputs = part.g.inputs();
        if (part_inputs.size() != part.inputs_from.size())
            throw error(which + ": the subgraph's inputs and inputs_from disagree");
        for (std::size_t k = 0; k < part_inputs.size(); ++k) by_name[part.g.at(part_inputs[k]).name] = part.inputs_from[k];
        const auto offset = static_cast<std::int32_t>(r.nodes.size());
        std::vector<value> input_value(opt.size());
        for (std::size_t i = 0; i < opt.size(); ++i) {
            const node& n = opt.nodes[i];
            if (n.kind != node_kind::input) continue;
            auto it = by_name.find(n.name);
            if (it == by_name.end())
                throw error(which + ": the optimized graph's input '" + n.name + "' is not an input of the part");
            if (!(whole.shape_of(it->second) == n.shapes[0]))
                throw error(which + ": input '" + n.name + "' has shape " + n.shapes[0].str() + ", the graph's tensor " +
                            whole.shape_of(it->second).str());
            input_value[i] = it->second;
        }
        auto translate = [&](value v) {
            const node& p = opt.at(v);
            if (p.kind == node_kind::input) return input_value[static_cast<std::size_t>(v.node)];
            return value{offset + v.node, v.output};
        };
        for (std::size_t i = 0; i < opt.size(); ++i) {
            node n = opt.nodes[i];
            for (value& v : n.inputs) v = translate(v);
            // A name the part made (a conversion `<x>/to_nhwc`, a rule's new
            // node) may be one the graph or an earlier part already holds.
            if (n.kind != node_kind::input) {
                n.name = unused_name(n.name, [&](const std::string& x) { return names.count(x) > 0; });
                names.insert(n.name);
            }
            r.nodes.push_back(std::move(n));  // inputs become dead placeholders, dropped by compaction
        }
        for (std::size_t k = 0; k < opt.outputs.size(); ++k) {
            value to = part.outputs_to[k];
            if (!(opt.shape_of(opt.outputs[k]) == whole.shape_of(to)))
                throw error(which + ": output " + std::to_string(k) + " has shape " + opt.shape_of(opt.outputs[k]).str() +
                            ", it replaces " + whole.at(to).describe() + " of shape " + whole.shape_of(to).str());
            redirect[to] = translate(opt.outputs[k]);
        }
    }
    auto resolve = [&](value v) {
        for (std::size_t steps = 0; steps <= redirect.size(); ++steps) {
            auto it = redirect.find(v);
            if (it == redirect.end()) return v;
            v = it->second;
        }
        throw error("stitch: the parts' outputs refer to each other in a cycle");
    };
    for (node& n : r.nodes)
        for (value& v : n.inputs) v = resolve(v);
    for (value& v : r.outputs) v = resolve(v);
    // Placeholders for the optimized graphs' inputs must not stay graph inputs.
    graph out;
    {
        std::vector<char> keep(r.nodes.size(), 1);
        for (std::size_t i = whole.size(); i < r.nodes.size(); ++i)
            if (r.nodes[i].kind == node_kind::input) keep[i] = 0;
        for (std::size_t i = 0; i < whole.size(); ++i)
            if (replaced[i]) keep[i] = 0;
        std::vector<std::int32_t> remap(r.nodes.size(), -1);
        for (std::size_t i = 0; i < r.nodes.size(); ++i)
            if (keep[i]) {
                remap[i] = static_cast<std::int32_t>(out.nodes.size());
                out.nodes.push_back(std::move(r.nodes[i]));
            }
        for (node& n : out.nodes)
            for (value& v : n.inputs) {
                if (remap[static_cast<std::size_t>(v.node)] < 0)
                    throw error("stitch: " + n.describe() + " still reads a replaced or placeholder node");
                v.node = remap[static_cast<std::size_t>(v.node)];
            }
        for (value v : r.outputs) {
            if (remap[static_cast<std::size_t>(v.node)] < 0) throw error("stitch: a graph output refers to a replaced node");
            out.outputs.push_back({remap[static_cast<std::size_t>(v.node)], v.output});
        }
    }
    out.validate();
    return std::move(out).compacted();
}

inline graph stitch(const graph& whole, const subgraph& part, const graph& optimized) {
    replacement r{&part, &optimized};
    return stitch(whole, std::span<const replacement>(&r, 1));
}

}  // namespace tsopt::search
