#pragma once
// Derivations: what the optimizer did to a graph, as a list of rewrites a
// person can read and a program can replay.
//
//   auto r = tsopt::optimize(g, rules, model);
//   for (const auto& s : r.report.derivation.steps()) ...;  // rule, where, cost delta
//   graph again = search::replay(g, r.report.derivation, rules, model);
//   // again computes what r.optimized computes with the same operators (content hash)
//
// A step names the rule and where it applied: the names of the operators
// the rule's source pattern matched, in pattern order. Names, not node ids,
// so a step reads the same in the report and survives partitioning (a
// part's operators keep their names); rewrite::apply gives every new
// operator a name no other operator has, so a name locates one operator.
// Layout moves (rewrite::layout_moves) are steps too, named by the operators
// whose layout they change.
//
// The optimizer works in stages (optimize.hpp): weight preprocessing, merges
// over inputs and weights on the whole graph (leaf merges), a search per
// part with the parts stitched back, a search over the whole graph. A
// derivation keeps that structure, because applying a part's steps to the
// whole graph is not the same as applying them to the part and stitching
// (conversions at the part's boundary, operators shared with other parts),
// and replay must rebuild the very graph that was written.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tsopt/cost/cost_model.hpp"
#include "tsopt/rewrite/apply.hpp"
#include "tsopt/rewrite/layout.hpp"
#include "tsopt/rewrite/match.hpp"
#include "tsopt/rewrite/preprocess.hpp"
#include "tsopt/search/partition.hpp"

namespace tsopt::search {

// How a derivation names a step that was a layout move (rewrite::layout_moves),
// not a rule.
inline constexpr std::string_view layout_move_name = "layout move";
// How it names what weight preprocessing did (rewrite::preprocess): the
// operators on constants folded into weights (one step), and each batch
// norm folded into its convolution (a step each).
inline constexpr std::string_view constants_folded_name = "operators on constants folded into weights";
inline constexpr std::string_view batchnorm_folded_name = "batch norm folded into its convolution";
// ... and the operators it dropped as repeats of an earlier one
// (rewrite::merge_duplicates; one step, where = the dropped operators).
inline constexpr std::string_view duplicates_merged_name = "duplicate operators merged";

struct rewrite_step {
    std::string rule;                // the rule's name, or layout_move_name
    std::vector<std::string> where;  // rule: the matched operators' names, in the source pattern's order;
                                     // layout move: the operators whose layout it changes
    std::size_t variant = 0;         // rule: which of rewrite::apply_all's layout variants;
                                     // layout move: which of rewrite::layout_moves, read only
                                     // where moves changing `where` differ (locate_layout_move)
    // The cost of the graph the step applied to, before and after: the whole
    // graph, or for a step inside a part, the part.
    double cost_before = 0, cost_after = 0;
    // rule: the match's exchanged operands (rewrite::match::swapped), which
    // tell apart two matches of the same operators (?x + ?y on a + b).
    std::uint32_t swapped = 0;
};

// Rewrites by rule name (layout moves as layout_move_name).
inline std::map<std::string, int> uses_of(std::span<const rewrite_step> steps) {
    std::map<std::string, int> u;
    for (const rewrite_step& s : steps) ++u[s.rule];
    return u;
}

struct derivation_part {
    std::vector<std::string> operators;  // the part's operators (search::extract), by name
    std::vector<rewrite_step> steps;
};

struct derivation_stage {
    enum class kind : std::uint8_t {
        leaf_merges,  // whole graph, rewrite::apply (default layouts), weights folded after each
        search,       // whole graph, as the search applies: layout variants, explicit conversions
        parts,        // each part extracted by its operators' names, searched, all stitched back at once
        pet,          // a PET corrected mutant (pet::mutants' candidate pet_index of the graph so far)
    };
    kind k = kind::search;
    std::vector<rewrite_step> steps;      // leaf_merges, search
    std::vector<derivation_part> parts;   // parts
    std::string pet_family;               // pet
    // pet: which of pet::mutants' candidates of the graph so far (none: a
    // report from before PET stages were replayable), and its
    // hash_of_outputs(weights_by::content), which replay checks.
    std::optional<std::size_t> pet_index;
    std::uint64_t pet_hash = 0;
};

// What search::replay calls to rebuild a PET stage: the graph so far and the
// stage's pet_index -> pet::mutant_at(graph, the optimization's PET options,
// index) (tsopt::pet_mutants in optimize.hpp). Kept a function here so the
// derivation does not depend on PET.
using pet_mutant_source = std::function<graph(const graph&, std::size_t index)>;

inline std::string_view to_string(derivation_stage::kind k) {
    switch (k) {
        case derivation_stage::kind::leaf_merges: return "leaf merges";
        case derivation_stage::kind::search: return "search";
        case derivation_stage::kind::parts: return "parts";
        case derivation_stage::kind::pet: return "pet";
    }
    return "?";
}

struct derivation {
    bool preprocessed = false;  // rewrite::preprocess first (duplicates merged, constant operators and batch norms folded)
    // What preprocessing did, as steps (duplicates_merged_name: where = the
    // operators dropped; constants_folded_name: where = the operators
    // folded; batchnorm_folded_name: where = convolution, batch norm), each
    // priced as if applied one after the other; filled by replay.
    std::vector<rewrite_step> preprocessing;
    bool layouts = true;        // search steps enumerate layout variants and make conversions explicit
    bool fold_weights = true;   // search steps fold weight-only operators after each rewrite
    std::vector<derivation_stage> stages;
    bool nhwc_undone = false;   // rewrite::without_nhwc last (a candidate offered for on-board timing)

    // Every rewrite, in the order applied (a part's steps in its stage's order).
    std::vector<const rewrite_step*> steps() const { return all_steps<const rewrite_step>(*this); }
    std::vector<rewrite_step*> steps() { return all_steps<rewrite_step>(*this); }
    // Rewrites by rule name (layout moves as layout_move_name); with the
    // NHWC choices undone, the rules alone.
    std::map<std::string, int> uses() const {
        std::map<std::string, int> u;
        for (const rewrite_step* s : steps()) ++u[s->rule];
        if (nhwc_undone) u.erase(std::string(layout_move_name));
        return u;
    }
    // Whether replay can rebuild it from the rules alone (a PET stage also
    // needs PET's mutant generator: replay's `pet`).
    bool replayable() const {
        for (const auto& s : stages)
            if (s.k == derivation_stage::kind::pet) return false;
        return true;
    }
    bool empty() const { return !preprocessed && stages.empty() && !nhwc_undone; }

private:
    template <class Step, class Self>
    static std::vector<Step*> all_steps(Self& self) {
        std::vector<Step*> out;
        for (auto& s : self.stages) {
            for (auto& st : s.steps) out.push_back(&st);
            for (auto& p : s.parts)
                for (auto& st : p.steps) out.push_back(&st);
        }
        return out;
    }
};

// The names of the operators a match binds, in the source pattern's order.
inline std::vector<std::string> where_of(const graph& g, const rewrite::match& m) {
    std::vector<std::string> w;
    w.reserve(m.nodes.size());
    for (auto id : m.nodes) w.push_back(g.nodes[static_cast<std::size_t>(id)].name);
    return w;
}

// The operators of `before` whose layout differs in `after` (a layout move's
// result), by name, in before's node order.
inline std::vector<std::string> layout_changes(const graph& before, const graph& after) {
    std::unordered_map<std::string_view, spec::layout> now;
    for (const node& n : after.nodes)
        if (n.kind == node_kind::op) now.emplace(n.name, n.out_layout);
    std::vector<std::string> w;
    for (const node& n : before.nodes) {
        if (n.kind != node_kind::op) continue;
        auto it = now.find(n.name);
        if (it != now.end() && it->second != n.out_layout) w.push_back(n.name);
    }
    return w;
}

// Called by replay after each step with the graph before and after it (the
// part's, for a step inside a part): pictures of rewrites (io/dot.hpp).
using step_observer = std::function<void(std::size_t index, const rewrite_step&, const graph& before, const graph& after)>;

// The layout move of g that changes exactly the operators `where` names
// (layout_changes), as a derivation locates one: by what it changes, not by
// its index in rewrite::layout_moves, which a part extracted again by names
// may order otherwise (NASNet-Mobile's replay failed so). Moves that change
// the same operators are one graph as a rule (two transposes of one
// producer, two convolutions of one NHWC region), so `index` decides only
// between moves whose graphs differ. nullopt, with the reason in *why, when
// no move changes exactly those operators or the index is not among the
// differing ones.
inline std::optional<graph> locate_layout_move(const graph& g, std::span<const std::string> where, std::size_t index,
                                               std::string* why) {
    auto moves = rewrite::layout_moves(g);
    std::vector<std::size_t> same;
    for (std::size_t m = 0; m < moves.size(); ++m)
        if (std::ranges::equal(layout_changes(g, moves[m]), where)) same.push_back(m);
    if (same.empty()) {
        if (why) *why = "none of the graph's " + std::to_string(moves.size()) + " layout moves changes exactly those operators";
        return std::nullopt;
    }
    const auto hash = [&](std::size_t m) { return moves[m].hash_of_outputs(graph::weights_by::address); };
    const bool one_graph = std::ranges::all_of(same, [&](std::size_t m) { return hash(m) == hash(same.front()); });
    if (one_graph) return std::move(moves[same.front()]);
    if (std::ranges::find(same, index) == same.end()) {
        if (why)
            *why = std::to_string(same.size()) + " layout moves change those operators into different graphs, and move " +
                   std::to_string(index) + " is not one of them";
        return std::nullopt;
    }
    return std::move(moves[index]);
}

namespace detail {

// One rule application as the optimizer makes it: the layout variant, then
// (search) explicit conversions, then weight folding.
inline std::optional<graph> apply_step(const rewrite::graph_index& ix, const rewrite::rule& r, const rewrite::match& m,
                                       std::size_t variant, bool layouts, bool fold, rewrite::fold_cache& cache,
                                       std::string* why) {
    auto outs = rewrite::apply_all(ix, r, m,
                                   {.layouts = layouts, .max_constant_bytes = std::numeric_limits<std::size_t>::max()}, why);
    if (variant >= outs.size()) {
        if (why && !outs.empty())
            *why = "it has " + std::to_string(outs.size()) + " layout variant(s), the step names variant " + std::to_string(variant);
        return std::nullopt;
    }
    graph h = std::move(outs[variant]);
    if (layouts) h = rewrite::explicit_conversions(std::move(h));
    return fold ? rewrite::fold_constants(std::move(h), cache) : h;
}

inline std::string describe_step(std::size_t k, const rewrite_step& s) {
    std::string w;
    for (const auto& n : s.where) w += (w.empty() ? "" : ", ") + ("'" + n + "'");
    return "step " + std::to_string(k + 1) + " (" + s.rule + " at " + (w.empty() ? "nothing" : w) + ")";
}

// Applies `s` to g, locating it by names. Throws naming the step when the
// rule is unknown, nothing matches there, or the names are ambiguous.
inline graph apply_named(const graph& g, std::size_t k, const rewrite_step& s,
                         const std::unordered_map<std::string_view, std::size_t>& by_name,
                         std::span<const rewrite::rule> rules, bool layouts, bool fold, rewrite::fold_cache& cache) {
    const std::string what = "replay: " + describe_step(k, s);
    if (s.rule == layout_move_name) {
        std::string why;
        auto moved = locate_layout_move(g, s.where, s.variant, &why);
        if (!moved) throw error(what + ": " + why);
        return fold ? rewrite::fold_constants(*moved, cache) : std::move(*moved);
    }
    auto it = by_name.find(s.rule);
    if (it == by_name.end()) throw error(what + ": no rule of that name in the rule set");
    const rewrite::rule& r = rules[it->second];
    if (s.where.size() != r.src.size())
        throw error(what + ": the rule's source has " + std::to_string(r.src.size()) + " operators, the step names " +
                    std::to_string(s.where.size()));
    // The anchors: operators named like the pattern's last node.
    std::vector<std::int32_t> anchors;
    for (std::size_t i = 0; i < g.size(); ++i)
        if (g.nodes[i].kind == node_kind::op && g.nodes[i].name == s.where.back()) anchors.push_back(static_cast<std::int32_t>(i));
    if (anchors.size() > 1) throw error(what + ": " + std::to_string(anchors.size()) + " operators are named '" + s.where.back() + "'");
    rewrite::graph_index ix(g);
    std::optional<rewrite::match> found;
    rewrite::for_each_match(
        ix, r,
        [&](const rewrite::match& m) {
            if (m.swapped != s.swapped || where_of(g, m) != s.where) return true;
            found = m;
            return false;
        },
        std::span<const std::int32_t>(anchors));
    if (!found) throw error(what + ": the rule does not match there");
    std::string why;
    auto h = apply_step(ix, r, *found, s.variant, layouts, fold, cache, &why);
    if (!h) throw error(what + ": " + (why.empty() ? std::string("the application fails") : why));
    return std::move(*h);
}

// rewrite::preprocess, with what it did as steps (derivation::preprocessing),
// in its order: duplicates merged, constants folded, batch norms folded.
template <class Cost>
graph preprocess_steps(const graph& original, rewrite::fold_cache& cache, Cost& model, std::vector<rewrite_step>& steps) {
    steps.clear();
    double cost = static_cast<double>(model.graph_cost(original));
    rewrite_step twins{std::string(duplicates_merged_name), {}, 0, cost, 0};
    const graph merged = rewrite::merge_duplicates(original, &twins.where);
    if (!twins.where.empty()) {
        twins.cost_after = cost = static_cast<double>(model.graph_cost(merged));
        steps.push_back(std::move(twins));
    }
    graph folded = rewrite::fold_constants(merged, cache);
    {
        const auto constant = merged.constant_mask();
        rewrite_step s{std::string(constants_folded_name), {}, 0, cost, 0};
        for (std::size_t i = 0; i < merged.size(); ++i)
            if (constant[i] && merged.nodes[i].kind == node_kind::op) s.where.push_back(merged.nodes[i].name);
        if (!s.where.empty()) {
            s.cost_after = cost = static_cast<double>(model.graph_cost(folded));
            steps.push_back(std::move(s));
        }
    }
    std::vector<std::pair<std::string, std::string>> norms;
    graph result = rewrite::fold_batchnorm(folded, {}, &norms);
    // Each fold priced on its own, one after the other (the graph itself
    // is the one rewrite::preprocess makes, all folds at once).
    for (const auto& [conv, bn] : norms) {
        folded = rewrite::fold_batchnorm(folded, bn);
        steps.push_back({std::string(batchnorm_folded_name), {conv, bn}, 0, cost, cost = static_cast<double>(model.graph_cost(folded))});
    }
    return result;
}

template <class Cost>
graph replay_steps(graph g, std::vector<rewrite_step>& steps, std::size_t& counter,
                   const std::unordered_map<std::string_view, std::size_t>& by_name, std::span<const rewrite::rule> rules,
                   bool layouts, bool fold, rewrite::fold_cache& cache, Cost& model, const step_observer& on_step) {
    double cost = static_cast<double>(model.graph_cost(g));
    for (auto& s : steps) {
        graph next = apply_named(g, counter, s, by_name, rules, layouts, fold, cache);
        s.cost_before = cost;
        s.cost_after = cost = static_cast<double>(model.graph_cost(next));
        if (on_step) on_step(counter, s, g, next);
        ++counter;
        g = std::move(next);
    }
    return g;
}

}  // namespace detail

// Rebuilds what a derivation describes from the graph it started from,
// filling in each step's cost before and after under `model`. Throws
// tsopt::error naming the first step that cannot be replayed (an unknown
// rule, a place where the rule does not match, a PET stage without `pet`
// or whose mutant is not the one recorded). `on_step`, when given, sees
// each rule step's graphs.
template <cost::cost_model Cost>
graph replay(const graph& original, derivation& d, std::span<const rewrite::rule> rules, Cost&& model,
             const step_observer& on_step = {}, const pet_mutant_source& pet = {}) {
    std::unordered_map<std::string_view, std::size_t> by_name;
    for (std::size_t i = 0; i < rules.size(); ++i) by_name.emplace(rules[i].name, i);
    graph g = original;
    if (d.preprocessed) {
        rewrite::fold_cache cache;
        // The preprocessing listed, if it is, must be what preprocessing does.
        std::vector<rewrite_step> done;
        g = detail::preprocess_steps(original, cache, model, done);
        if (!d.preprocessing.empty()) {
            bool same = done.size() == d.preprocessing.size();
            for (std::size_t i = 0; same && i < done.size(); ++i)
                same = done[i].rule == d.preprocessing[i].rule && done[i].where == d.preprocessing[i].where;
            if (!same)
                throw error("replay: the preprocessing listed (" + std::to_string(d.preprocessing.size()) +
                            " steps) is not what weight preprocessing does to this graph (" + std::to_string(done.size()) + " steps)");
        }
        d.preprocessing = std::move(done);
    }
    std::size_t counter = 0;
    for (std::size_t si = 0; si < d.stages.size(); ++si) {
        auto& st = d.stages[si];
        // A fresh fold cache per stage and per part, as optimize gives each
        // search its own: folding equal constants in two parts through one
        // cache yields one tensor, which the next fold merges into one
        // weight, and the replayed model would share what the written one
        // keeps apart.
        rewrite::fold_cache stage_cache;
        switch (st.k) {
            case derivation_stage::kind::leaf_merges:
                g = detail::replay_steps(std::move(g), st.steps, counter, by_name, rules, false, true, stage_cache, model, on_step);
                break;
            case derivation_stage::kind::search:
                g = detail::replay_steps(std::move(g), st.steps, counter, by_name, rules, d.layouts, d.fold_weights, stage_cache, model,
                                         on_step);
                break;
            case derivation_stage::kind::parts: {
                std::unordered_map<std::string_view, std::size_t> op_by_name;
                for (std::size_t i = 0; i < g.size(); ++i)
                    if (detail::is_operator(g.nodes[i]) && !op_by_name.emplace(g.nodes[i].name, i).second)
                        throw error("replay: stage " + std::to_string(si + 1) + ": two operators are named '" + g.nodes[i].name + "'");
                const extract_context cx(g);
                std::vector<subgraph> subs;
                std::vector<graph> optimized;
                subs.reserve(st.parts.size());
                optimized.reserve(st.parts.size());
                for (auto& p : st.parts) {
                    std::vector<std::size_t> ids;
                    for (const auto& n : p.operators) {
                        auto it = op_by_name.find(n);
                        if (it == op_by_name.end())
                            throw error("replay: stage " + std::to_string(si + 1) + ": a part names operator '" + n +
                                        "', which the graph does not have");
                        ids.push_back(it->second);
                    }
                    subs.push_back(extract(g, ids, cx));
                    rewrite::fold_cache part_cache;
                    optimized.push_back(detail::replay_steps(subs.back().g, p.steps, counter, by_name, rules, d.layouts,
                                                             d.fold_weights, part_cache, model, on_step));
                }
                std::vector<replacement> reps;
                for (std::size_t i = 0; i < subs.size(); ++i) reps.push_back({&subs[i], &optimized[i]});
                if (!reps.empty()) g = stitch(g, reps);
                break;
            }
            case derivation_stage::kind::pet: {
                const std::string what = "replay: stage " + std::to_string(si + 1) + " is a PET corrected mutant (" + st.pet_family + ")";
                if (!st.pet_index) throw error(what + " recorded without its index (a report from before PET stages were replayable)");
                if (!pet) throw error(what + ": replaying it needs PET's mutant generator and the PET options the optimization used");
                graph mutant = pet(g, *st.pet_index);
                if (mutant.hash_of_outputs(graph::weights_by::content) != st.pet_hash)
                    throw error(what + ": PET's candidate " + std::to_string(*st.pet_index) +
                                " of this graph is not the recorded one (other PET options?)");
                g = std::move(mutant);
                break;
            }
        }
    }
    if (d.nhwc_undone) g = rewrite::without_nhwc(std::move(g));
    return g;
}

}  // namespace tsopt::search
