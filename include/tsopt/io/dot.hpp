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

}  // namespace detail

// Graphviz DOT text of a graph.
inline std::string to_dot(const graph& g, const dot_options& o = {}) {
    std::ostringstream d;
    d << "digraph tsopt {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n"
         "  edge [fontname=\"Helvetica\", fontsize=8, color=\"#555555\"];\n";
    if (!o.title.empty()) d << "  labelloc=t;\n  label=\"" << detail::dot_escape(o.title) << "\";\n";
    std::vector<bool> hidden(g.size(), false);
    for (std::size_t i = 0; i < g.size(); ++i) {
        const node& n = g.nodes[i];
        if (n.kind == node_kind::weight && !o.show_weights) {
            hidden[i] = true;
            continue;
        }
        std::string label = n.name + "\n" + std::string(n.type_name());
        if (n.kind == node_kind::op) {
            auto p = detail::param_text(n);
            if (!p.empty()) label += "\n" + p;
        } else if (n.kind == node_kind::opaque && n.opaque) {
            label += "\n(opaque" + (n.opaque->domain.empty() ? std::string() : ", " + n.opaque->domain) + ", " +
                     std::to_string(n.opaque->attribute_count) + " attributes)";
        }
        label += "\n" + detail::shapes_text(n);
        // Non-default storage is what a layout move changed: show it.
        if (n.out_layout == spec::layout::nhwc && n.shapes[0].rank == 4) label += " NHWC";
        else if (n.out_layout == spec::layout::col_major && n.shapes[0].rank >= 2) label += " col-major";
        if (i < o.costs.size()) {
            std::ostringstream c;
            c.precision(3);
            c << o.costs[i];
            label += "\ncost " + c.str() + " " + o.cost_unit;
        }
        std::string style;
        switch (n.kind) {
            case node_kind::input: style = "shape=ellipse, style=filled, fillcolor=\"#cfe2f3\""; break;
            case node_kind::weight: style = "shape=box, style=filled, fillcolor=\"#eeeeee\", fontsize=8"; break;
            case node_kind::opaque: style = "shape=box, style=\"dashed,filled\", fillcolor=\"#fce5cd\""; break;
            case node_kind::op: style = "shape=box, style=\"rounded,filled\", fillcolor=\"#ffffff\""; break;
        }
        if (o.highlight.count(static_cast<std::int32_t>(i)))
            style = (n.kind == node_kind::op ? "shape=box, style=\"rounded,filled\"" : "shape=box, style=filled") +
                    std::string(", fillcolor=\"#ffd966\", penwidth=2.5");
        d << "  n" << i << " [label=\"" << detail::dot_escape(label) << "\", " << style << "];\n";
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
// the destination.
inline picture write_picture(const graph& g, const std::string& stem, const dot_options& o = {}) {
    picture p;
    p.dot_path = stem + ".dot";
    write_file_atomically(p.dot_path, to_dot(g, o));
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
    return p;
}

}  // namespace tsopt::io
