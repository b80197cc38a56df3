#pragma once
// Pictures of graphs: Graphviz DOT text, and SVG through `dot -Tsvg` where
// Graphviz is installed.
//
//   auto changed = tsopt::io::changed_nodes(original, optimized);
//   auto pic = tsopt::io::write_picture(optimized, "out/resnet", {.costs = per_node_ms, .highlight = changed});
//   // pic.svg_path is empty (and pic.note says why) when `dot` is missing
//
// Node labels: name, operator, parameters, output shape(s) with a
// non-default layout (NHWC, col-major), and the cost when a per-node cost
// vector is given. Highlighted nodes (e.g. the regions a
// rewrite produced) are filled gold.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

#include "tsopt/core/graph.hpp"
#include "tsopt/io/atomic_file.hpp"

namespace tsopt::io {

struct dot_options {
    std::vector<double> costs{};           // per node id; empty: no cost annotation
    std::string cost_unit = "ms";
    std::set<std::int32_t> highlight{};    // node ids to fill (rewritten regions)
    std::string title{};
    bool show_weights = true;               // weight nodes (small grey boxes)
    double max_inches = 0;                  // Graphviz `size`: larger drawings are scaled down to fit (0: no limit)
};

namespace detail {

inline std::string dot_escape(std::string_view s) {
    std::string r;
    for (char c : s) {
        if (c == '"' || c == '\\') r += '\\';
        if (c == '\n') { r += "\\n"; continue; }
        r += c;
    }
    return r;
}

inline std::string param_text(const node& n) {
    const spec::op_decl& d = spec::decl(n.op);
    std::string r;
    auto item = [&](std::string_view k, const std::string& v) { r += (r.empty() ? "" : " ") + std::string(k) + "=" + v; };
    switch (n.op) {
        case spec::op_kind::transpose: {
            std::string p;
            for (int i = 0; i < spec::perm_rank(n.params[0]); ++i) p += (i ? "," : "") + std::to_string(spec::perm_axis(n.params[0], i));
            item("perm", "[" + p + "]");
            return r;
        }
        case spec::op_kind::reshape: case spec::op_kind::iewmul: return r;  // the output shape says it
        default: break;
    }
    for (int i = 0; i < d.num_params; ++i) {
        std::string_view k = d.params[static_cast<std::size_t>(i)].name;
        std::int32_t v = n.params[i];
        if (k == "pad") item(k, v == 1 ? "same" : "valid");
        else if (k == "act") {
            if (v) item(k, v == 1 ? "relu" : v == 2 ? "sigmoid" : "tanh");
        } else item(k, std::to_string(v));
    }
    return r;
}

inline std::string shapes_text(const node& n) {
    std::string r;
    for (const auto& s : n.shapes) r += (r.empty() ? "" : " ") + s.str();
    return r;
}

// A node's label: name, operator, parameters, shapes, non-default layout, cost.
inline std::string node_label(const node& n, const double* cost, std::string_view unit) {
    std::string label = n.name + "\n" + std::string(n.type_name());
    if (n.kind == node_kind::op) {
        auto p = param_text(n);
        if (!p.empty()) label += "\n" + p;
    } else if (n.kind == node_kind::opaque && n.opaque) {
        label += "\n(opaque" + (n.opaque->domain.empty() ? std::string() : ", " + n.opaque->domain) + ", " +
                 std::to_string(n.opaque->attribute_count) + " attributes)";
    }
    label += "\n" + shapes_text(n);
    // Non-default storage is what a layout move changed: show it.
    if (n.out_layout == spec::layout::nhwc && n.shapes[0].rank == 4) label += " NHWC";
    else if (n.out_layout == spec::layout::col_major && n.shapes[0].rank >= 2) label += " col-major";
    if (cost) {
        std::ostringstream c;
        c.precision(3);
        c << *cost;
        label += "\ncost " + c.str() + " " + std::string(unit);
    }
    return label;
}

inline std::string node_style(const node& n, bool highlight) {
    if (highlight)
        return (n.kind == node_kind::op ? "shape=box, style=\"rounded,filled\"" : "shape=box, style=filled") +
               std::string(", fillcolor=\"#ffd966\", penwidth=2.5");
    switch (n.kind) {
        case node_kind::input: return "shape=ellipse, style=filled, fillcolor=\"#cfe2f3\"";
        case node_kind::weight: return "shape=box, style=filled, fillcolor=\"#eeeeee\", fontsize=8";
        case node_kind::opaque: return "shape=box, style=\"dashed,filled\", fillcolor=\"#fce5cd\"";
        case node_kind::op: break;
    }
    return "shape=box, style=\"rounded,filled\", fillcolor=\"#ffffff\"";
}

inline constexpr std::string_view dot_header =
    "  node [fontname=\"Helvetica\", fontsize=10];\n"
    "  edge [fontname=\"Helvetica\", fontsize=8, color=\"#555555\"];\n";

}  // namespace detail

// Graphviz DOT text of a graph.
inline std::string to_dot(const graph& g, const dot_options& o = {}) {
    std::ostringstream d;
    d << "digraph tsopt {\n  rankdir=TB;\n" << detail::dot_header;
    if (o.max_inches > 0) d << "  size=\"" << o.max_inches << "," << o.max_inches << "\";\n";
    if (!o.title.empty()) d << "  labelloc=t;\n  label=\"" << detail::dot_escape(o.title) << "\";\n";
    std::vector<bool> hidden(g.size(), false);
    for (std::size_t i = 0; i < g.size(); ++i) {
        const node& n = g.nodes[i];
        if (n.kind == node_kind::weight && !o.show_weights) {
            hidden[i] = true;
            continue;
        }
        const std::string label = detail::node_label(n, i < o.costs.size() ? &o.costs[i] : nullptr, o.cost_unit);
        d << "  n" << i << " [label=\"" << detail::dot_escape(label) << "\", "
          << detail::node_style(n, o.highlight.count(static_cast<std::int32_t>(i)) > 0) << "];\n";
    }
    for (std::size_t i = 0; i < g.size(); ++i) {
        if (hidden[i]) continue;
        for (value v : g.nodes[i].inputs) {
            if (hidden[static_cast<std::size_t>(v.node)]) continue;
            d << "  n" << v.node << " -> n" << i;
            if (g.at(v).num_outputs() > 1) d << " [label=\":" << v.output << "\"]";
            d << ";\n";
        }
    }
    for (std::size_t k = 0; k < g.outputs.size(); ++k) {
        value v = g.outputs[k];
        d << "  out" << k << " [label=\"output " << k << "\", shape=doublecircle, fontsize=8];\n";
        d << "  n" << v.node << " -> out" << k << (g.at(v).num_outputs() > 1 ? " [label=\":" + std::to_string(v.output) + "\"]" : "") << ";\n";
    }
    d << "}\n";
    return d.str();
}

// What one rewrite changed (search::rewrite_step): the operators it matched
// in `before`, located by their names (`where`), and the nodes of `after`
// that replaced them: nodes whose names `before` does not have (new
// operators, folded weights, conversions), and matched names that now name
// another node (the operator that took over a replaced output, or, for a
// layout move, the operators stored differently).
struct rewrite_region {
    std::set<std::int32_t> before, after;
};
inline rewrite_region rewrite_regions(const graph& before, const graph& after, std::span<const std::string> where) {
    std::unordered_set<std::string_view> old_names, matched(where.begin(), where.end());
    for (const node& n : before.nodes) old_names.insert(n.name);
    rewrite_region r;
    for (std::size_t i = 0; i < before.size(); ++i)
        if (before.nodes[i].kind != node_kind::input && matched.count(before.nodes[i].name)) r.before.insert(static_cast<std::int32_t>(i));
    for (std::size_t i = 0; i < after.size(); ++i) {
        const node& n = after.nodes[i];
        if (n.kind != node_kind::input && (!old_names.count(n.name) || matched.count(n.name))) r.after.insert(static_cast<std::int32_t>(i));
    }
    return r;
}

struct rewrite_picture_options {
    std::string title;                       // on top: the rule, where, the cost delta
    std::string before_label = "before", after_label = "after";
    int context = 1;                         // hops of unchanged neighbours shown around each region
    std::size_t max_nodes = 40;              // per side, the region first
    double max_inches = 15;                  // Graphviz `size`: 15 in = 1080 pt, 1440 px at 96 dpi
};

namespace detail {

// The region, then its neighbours (producers and consumers) `hops` deep,
// at most `max_nodes` in all.
inline std::vector<std::int32_t> region_with_context(const graph& g, const std::set<std::int32_t>& region, int hops,
                                                     std::size_t max_nodes) {
    const auto consumers = g.consumers();
    std::vector<std::int32_t> shown(region.begin(), region.end());
    std::unordered_set<std::int32_t> seen(region.begin(), region.end());
    std::size_t level_start = 0;
    for (int h = 0; h < hops && shown.size() < max_nodes; ++h) {
        const std::size_t level_end = shown.size();
        for (std::size_t k = level_start; k < level_end && shown.size() < max_nodes; ++k) {
            const auto i = static_cast<std::size_t>(shown[k]);
            std::vector<std::int32_t> next;
            for (value v : g.nodes[i].inputs) next.push_back(v.node);
            for (auto [c, slot] : consumers[i]) next.push_back(c);
            for (auto j : next)
                if (shown.size() < max_nodes && seen.insert(j).second) shown.push_back(j);
        }
        level_start = level_end;
    }
    return shown;
}

inline void cluster_dot(std::ostringstream& d, const graph& g, const std::set<std::int32_t>& region,
                        const rewrite_picture_options& o, std::string_view prefix, const std::string& label) {
    const auto shown = region_with_context(g, region, o.context, o.max_nodes);
    const std::unordered_set<std::int32_t> in(shown.begin(), shown.end());
    d << "  subgraph cluster_" << prefix << " {\n    label=\"" << dot_escape(label)
      << "\";\n    style=rounded;\n    color=\"#999999\";\n";
    for (auto i : shown) {
        const node& n = g.nodes[static_cast<std::size_t>(i)];
        d << "    " << prefix << i << " [label=\"" << dot_escape(node_label(n, nullptr, "")) << "\", "
          << node_style(n, region.count(i) > 0) << "];\n";
    }
    for (auto i : shown)
        for (value v : g.nodes[static_cast<std::size_t>(i)].inputs)
            if (in.count(v.node)) {
                d << "    " << prefix << v.node << " -> " << prefix << i;
                if (g.at(v).num_outputs() > 1) d << " [label=\":" << v.output << "\"]";
                d << ";\n";
            }
    d << "  }\n";
}

}  // namespace detail

// One rewrite as a picture: the matched region in `before` and its
// replacement in `after`, side by side, each with a few unchanged
// neighbours for context, the changed nodes filled gold.
inline std::string rewrite_to_dot(const graph& before, const graph& after, const rewrite_region& r,
                                  const rewrite_picture_options& o = {}) {
    std::ostringstream d;
    d << "digraph rewrite {\n  rankdir=TB;\n  size=\"" << o.max_inches << "," << o.max_inches << "\";\n" << detail::dot_header;
    if (!o.title.empty()) d << "  labelloc=t;\n  label=\"" << detail::dot_escape(o.title) << "\";\n";
    detail::cluster_dot(d, before, r.before, o, "b", o.before_label);
    detail::cluster_dot(d, after, r.after, o, "a", o.after_label);
    d << "}\n";
    return d.str();
}

// Ids of the nodes of `optimized` that compute something no node of
// `original` computes: the regions rewrites produced (inputs never count).
inline std::set<std::int32_t> changed_nodes(const graph& original, const graph& optimized) {
    auto before = original.node_hashes(graph::weights_by::content);
    std::unordered_set<std::uint64_t> known(before.begin(), before.end());
    auto after = optimized.node_hashes(graph::weights_by::content);
    std::set<std::int32_t> r;
    for (std::size_t i = 0; i < optimized.size(); ++i)
        if (optimized.nodes[i].kind != node_kind::input && !known.count(after[i])) r.insert(static_cast<std::int32_t>(i));
    return r;
}

// Whether Graphviz's `dot` is on the PATH.
inline bool have_dot() { return std::system("command -v dot >/dev/null 2>&1") == 0; }

struct picture {
    std::string dot_path;
    std::string svg_path;  // empty when no SVG was made
    std::string note;      // why not, when not
};

// Writes `stem`.dot and, where Graphviz is installed, `stem`.svg, each
// atomically (io/atomic_file.hpp): `dot` writes the SVG to a pipe, never to
// the destination. `svg`, when given, receives the SVG text.
inline picture write_dot(const std::string& dot_text, const std::string& stem, std::string* svg = nullptr) {
    picture p;
    p.dot_path = stem + ".dot";
    write_file_atomically(p.dot_path, dot_text);
    if (!have_dot()) {
        p.note = "Graphviz 'dot' is not installed: wrote " + p.dot_path + " only (apt-get install graphviz for SVG)";
        return p;
    }
    auto quote = [](const std::string& s) {
        std::string r = "'";
        for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
        return r + "'";
    };
    std::string svg_text;
    std::string cmd = "dot -Tsvg " + quote(p.dot_path) + " 2>/dev/null";
    FILE* pipe = ::popen(cmd.c_str(), "r");
    if (pipe) {
        char buf[1 << 16];
        for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) svg_text.append(buf, n);
    }
    if (!pipe || ::pclose(pipe) != 0 || svg_text.empty()) {
        p.note = "dot -Tsvg failed on " + p.dot_path;
        return p;
    }
    p.svg_path = stem + ".svg";
    write_file_atomically(p.svg_path, svg_text);
    if (svg) *svg = std::move(svg_text);
    return p;
}

inline picture write_picture(const graph& g, const std::string& stem, const dot_options& o = {}) {
    return write_dot(to_dot(g, o), stem);
}

}  // namespace tsopt::io
