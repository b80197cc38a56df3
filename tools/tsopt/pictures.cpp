// See pictures.hpp.
#include "pictures.hpp"

#include <cstdio>
#include <filesystem>
#include <sstream>

#include "tsopt/cost/analytical.hpp"

namespace tsopt::cli {

namespace {

std::string joined(const std::vector<std::string>& names) {
    std::string s;
    for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
    return s.empty() ? "-" : s;
}

std::string number(double x) {
    std::ostringstream o;
    o.precision(4);
    o << x;
    return o.str();
}

std::string delta(const search::rewrite_step& s) {
    const double d = s.cost_after - s.cost_before;
    return (d > 0 ? "+" : "") + number(d);
}

std::string html_escape(std::string_view s) {
    std::string r;
    for (char c : s) switch (c) {
            case '&': r += "&amp;"; break;
            case '<': r += "&lt;"; break;
            case '>': r += "&gt;"; break;
            case '"': r += "&quot;"; break;
            default: r += c;
        }
    return r;
}

// An SVG as dot writes it, without the XML prolog and DOCTYPE, for inlining.
std::string inline_svg(const std::string& svg) {
    auto at = svg.find("<svg");
    return at == std::string::npos ? std::string() : svg.substr(at);
}

}  // namespace

rewrite_pictures draw_rewrites(const graph& original, const search::derivation& d, std::span<const rewrite::rule> rules,
                               const std::string& dir, std::size_t max_pictures, const std::string& unit) {
    rewrite_pictures out;
    const auto steps = d.steps();
    out.total = steps.size();
    if (steps.empty()) return out;
    if (!d.replayable()) {
        out.note = "the derivation has a PET stage, which cannot be replayed: no pictures of rewrites";
        return out;
    }
    search::derivation copy = d;  // replay fills in its own costs; labels keep d's
    search::replay(original, copy, rules, cost::analytical{},
                   [&](std::size_t k, const search::rewrite_step& s, const graph& before, const graph& after) {
                       const auto region = io::rewrite_regions(before, after, s.where);
                       for (auto i : region.before) out.matched.insert(before.nodes[static_cast<std::size_t>(i)].name);
                       for (auto i : region.after) out.produced.insert(after.nodes[static_cast<std::size_t>(i)].name);
                       if (k >= max_pictures) return;
                       const search::rewrite_step& mine = *steps[k];
                       io::rewrite_picture_options po;
                       po.title = std::to_string(k + 1) + ". " + mine.rule + " at " + joined(mine.where) + ": cost " +
                                  number(mine.cost_before) + " -> " + number(mine.cost_after) + " " + unit + " (" +
                                  delta(mine) + ")";
                       po.before_label = "before (matched, gold)";
                       po.after_label = "after (replacement, gold)";
                       char stem[32];
                       std::snprintf(stem, sizeof stem, "rewrite-%03zu", k + 1);
                       std::string svg;
                       out.files.push_back(io::write_dot(io::rewrite_to_dot(before, after, region, po),
                                                         (std::filesystem::path(dir) / stem).string(), &svg));
                       out.svg.push_back(std::move(svg));
                   });
    if (out.total > max_pictures)
        out.note = "pictures of the first " + std::to_string(max_pictures) + " of " + std::to_string(out.total) + " rewrites";
    return out;
}

std::string html_report(const html_report_input& in) {
    std::ostringstream h;
    h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>tsopt: " << html_escape(in.title)
      << "</title>\n<style>body{font-family:Helvetica,Arial,sans-serif;margin:1.5em;max-width:1600px}"
         "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}"
         "td.n{text-align:right}.better{color:#1a7f37}.worse{color:#b42318}svg{max-width:100%;height:auto}"
         "section{margin-top:2em;border-top:1px solid #ddd}</style></head><body>\n"
      << "<h1>tsopt optimize: " << html_escape(in.title) << "</h1>\n<table>\n";
    for (const auto& [k, v] : in.facts) h << "<tr><th>" << html_escape(k) << "</th><td>" << html_escape(v) << "</td></tr>\n";
    h << "</table>\n";
    if (!in.overview.empty()) {
        h << "<p>Whole graphs (the operators rewrites matched, and those they made, in gold):";
        for (const auto& f : in.overview) {
            const auto name = std::filesystem::path(f).filename().string();
            h << " <a href=\"" << html_escape(name) << "\">" << html_escape(name) << "</a>";
        }
        h << "</p>\n";
    }
    if (in.derivation && !in.derivation->preprocessing.empty()) {
        h << "<h2>Weight preprocessing (" << in.derivation->preprocessing.size() << " steps)</h2>\n"
             "<table><tr><th>#</th><th>what</th><th>where</th><th>cost before</th><th>after</th><th>delta</th></tr>\n";
        std::size_t k = 0;
        for (const auto& s : in.derivation->preprocessing)
            h << "<tr><td>p" << ++k << "</td><td>" << html_escape(s.rule) << "</td><td>" << html_escape(joined(s.where))
              << "</td><td>" << number(s.cost_before) << "</td><td>" << number(s.cost_after) << "</td><td>" << delta(s)
              << "</td></tr>\n";
        h << "</table>\n";
    }
    const auto steps = in.derivation ? in.derivation->steps() : std::vector<const search::rewrite_step*>{};
    h << "<h2>Rewrites in the written model (" << steps.size() << ")</h2>\n";
    if (steps.empty()) h << "<p>None: the written model is the original" << (in.derivation && in.derivation->preprocessed ? " with weight preprocessing" : "") << ".</p>\n";
    else {
        h << "<p>In the order applied; costs (" << html_escape(in.unit)
          << ") are of the graph each rewrite applied to: the whole graph, or the part it was searched in.</p>\n"
             "<table><tr><th>#</th><th>rule</th><th>where (operators matched)</th><th>cost before</th><th>after</th><th>delta</th></tr>\n";
        for (std::size_t k = 0; k < steps.size(); ++k) {
            const auto& s = *steps[k];
            const bool drawn = in.pictures && k < in.pictures->files.size();
            h << "<tr><td class=\"n\">" << (drawn ? "<a href=\"#r" + std::to_string(k + 1) + "\">" : "") << k + 1
              << (drawn ? "</a>" : "") << "</td><td>" << html_escape(s.rule) << "</td><td>" << html_escape(joined(s.where))
              << "</td><td class=\"n\">" << number(s.cost_before) << "</td><td class=\"n\">" << number(s.cost_after)
              << "</td><td class=\"n " << (s.cost_after < s.cost_before ? "better" : s.cost_after > s.cost_before ? "worse" : "")
              << "\">" << delta(s) << "</td></tr>\n";
        }
        h << "</table>\n";
    }
    if (in.pictures) {
        if (!in.pictures->note.empty()) h << "<p>" << html_escape(in.pictures->note) << ".</p>\n";
        for (std::size_t k = 0; k < in.pictures->files.size(); ++k) {
            const auto& f = in.pictures->files[k];
            h << "<section id=\"r" << k + 1 << "\"><h3>" << k + 1 << ". " << html_escape(steps[k]->rule) << "</h3>\n<p>"
              << html_escape(joined(steps[k]->where)) << ": cost " << number(steps[k]->cost_before) << " &rarr; "
              << number(steps[k]->cost_after) << " (" << delta(*steps[k]) << "). Files: <a href=\""
              << html_escape(std::filesystem::path(f.dot_path).filename().string()) << "\">dot</a>";
            if (!f.svg_path.empty())
                h << ", <a href=\"" << html_escape(std::filesystem::path(f.svg_path).filename().string()) << "\">svg</a>";
            h << "</p>\n";
            if (!in.pictures->svg[k].empty()) h << inline_svg(in.pictures->svg[k]) << "\n";
            else if (!f.note.empty()) h << "<p>" << html_escape(f.note) << "</p>\n";
            h << "</section>\n";
        }
    }
    h << "</body></html>\n";
    return h.str();
}

}  // namespace tsopt::cli
