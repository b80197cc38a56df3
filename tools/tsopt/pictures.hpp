#pragma once
// Pictures of what `tsopt optimize` did, for --dot DIR: one picture per
// rewrite (the matched region before, its replacement after, a few
// neighbours for context, labelled with the rule and the cost delta), the
// operators the rewrites touched (to colour the overview pictures), and a
// single-file HTML report listing the rewrites with their pictures inline.
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tsopt/io/dot.hpp"
#include "tsopt/rewrite/rule.hpp"
#include "tsopt/search/derivation.hpp"

namespace tsopt::cli {

struct rewrite_pictures {
    std::vector<io::picture> files;  // per drawn rewrite, in order
    std::vector<std::string> svg;    // per drawn rewrite; empty without Graphviz
    std::set<std::string> matched;   // operators some rewrite matched (in the graph it applied to), by name
    std::set<std::string> produced;  // nodes some rewrite made, by name
    std::size_t total = 0;           // rewrites in the derivation
    std::string note;                // why fewer than `total` were drawn, if so
};

// Replays `d` from `original` and draws its first `max_pictures` rewrites
// into dir/rewrite-NNN.dot (+ .svg). Labels carry d's own costs (`unit`).
rewrite_pictures draw_rewrites(const graph& original, const search::derivation& d, std::span<const rewrite::rule> rules,
                               const std::string& dir, std::size_t max_pictures, const std::string& unit);

struct html_report_input {
    std::string title;                                       // "IN -> OUT"
    std::vector<std::pair<std::string, std::string>> facts;  // label, value: the summary's lines
    std::vector<std::string> overview;                       // SVG (or DOT) files of the whole graphs, linked
    const search::derivation* derivation = nullptr;
    const rewrite_pictures* pictures = nullptr;
    std::string unit;                                        // of the costs
};

// One HTML file: the facts, the rewrites in a table (rule, where, cost
// before -> after, delta) linking to their pictures, inline below.
std::string html_report(const html_report_input& in);

}  // namespace tsopt::cli
