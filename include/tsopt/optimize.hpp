#pragma once
// The entry point:
//
//   auto r = tsopt::optimize(g, rules, tsopt::cost::analytical{}, {.alpha = 1.05, .budget = 10s});
//   r.optimized;              // validated; the original when nothing improved
//   r.report.print(std::cout);
//
// Steps:
//  1. weight preprocessing (rewrite/preprocess.hpp): batchnorm folded into
//     the preceding conv, weight-only operators computed once;
//  2. graphs with more than `partition_threshold` operators are cut into parts
//     by search::partition (min-cut over capacities = rule matches a cut
//     would break), each part is searched on its own (the budget shared
//     evenly) and the results are stitched; then a short whole-graph search
//     (`cut_expansions`) lets rules that span the cuts apply. Before
//     partitioning, multi-output matches whose operands are inputs and
//     weights (operators sharing an operand anywhere in the graph, e.g. the
//     input matmuls x_t.W of every time step of an RNN), which no part would
//     see together, are applied on the whole graph, the cheapest first,
//     while the cost model prices them cheaper (`leaf_matches`; detail::
//     leaf_phase);
//  3. relaxed backtracking search (search/backtracking.hpp) per part;
//  4. with `pet` on (PET's joint optimization): the rule-optimized graph is
//     mutated by pet::mutants (partially equivalent transformations whose
//     non-equivalent regions are recomputed by correction kernels, each
//     candidate exactly equivalent and re-verified), the cheapest candidates
//     are searched again with the rules, and the best is kept; repeated while
//     a round improves and budget remains;
//  5. the result is validated; if it is not cheaper than the input under the
//     cost model, the input is returned unchanged.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "tsopt/cost/cost_model.hpp"
#include "tsopt/pet/optimizer.hpp"
#include "tsopt/rewrite/apply.hpp"
#include "tsopt/rewrite/preprocess.hpp"
#include "tsopt/rewrite/rule_index.hpp"
#include "tsopt/search/backtracking.hpp"
#include "tsopt/search/derivation.hpp"
#include "tsopt/search/partition.hpp"

namespace tsopt {

struct optimize_options {
    double alpha = 1.05;
    std::chrono::duration<double> budget = std::chrono::seconds(30);
    std::size_t max_expansions = 100'000;  // over the whole run
    std::size_t max_queue = 10'000;
    // Bytes a search may hold in queued graphs, counting their nodes and the
    // constants new to it (search::backtracking::max_memory), and in its fold
    // cache; 0: max(64 MiB, the bytes of the input's weights), so the search
    // holds at most about one more model's worth of folded weights.
    std::size_t max_memory = 0;
    std::uint64_t seed = 0x7a50;
    std::size_t top_k = 0;                 // distinct candidates to return for on-board timing: the result, it
                                           // without NHWC choices, the preprocessed input, then the search's
                                           // runner-ups (partitioned graphs: the graph before the parts' search,
                                           // the other leaf-merge orders)
    std::size_t partition_threshold = 30;  // operators; larger graphs are partitioned
    std::size_t cut_expansions = 16;       // whole-graph expansions after stitching parts
    // Before partitioning, multi-output matches over inputs and weights
    // (operators sharing an operand anywhere in the graph) are applied on the
    // whole graph while the cost model prices them cheaper, within
    // leaf_share of the budget.
    bool leaf_matches = true;
    double leaf_share = 0.5;
    bool preprocess = true;
    bool layouts = true;
    // Largest constant a rule application may create (rewrite::apply_options);
    // 0: max(16 MiB, the bytes of the input's weights).
    std::size_t max_constant_bytes = 0;
    // PET's corrected mutants mixed with the rules (joint optimization).
    bool pet = false;
    std::size_t pet_rounds = 2;   // mutate -> re-search rounds while they improve
    std::size_t pet_seeds = 3;    // cheapest corrected mutants searched further per round
    pet::options pet_options{};
    // Replay every derivation returned (the result's and each top-k
    // candidate's) from the input before returning: fills in every step's
    // cost and checks that each rebuilds its graph. Off: derivations carry
    // the search's costs only (none for preprocessing and leaf merges), and
    // a caller replays what it uses with search::replay (the CLI replays the
    // candidate it writes, after timing, outside the budget).
    bool replay_derivations = true;
};

struct optimize_report {
    double cost_before = 0, cost_after = 0;
    std::size_t parts = 1;
    std::size_t leaf_matches = 0;  // multi-output matches over inputs/weights applied before partitioning
    std::chrono::duration<double> leaf_time{};
    std::size_t expansions = 0, generated = 0, dedup_hits = 0, rejected = 0, pruned = 0;
    std::size_t oversized_constants = 0;   // applications refused: a constant above max_constant_bytes
    std::size_t max_constant_bytes = 0;    // the limit in force
    std::map<std::string, int> rule_uses;  // derivation.uses(): rewrites by rule name (or "layout move")
    // What preprocessing did, by kind (batch norms folded into their
    // convolution, operators on constants folded into weights): part of
    // `optimized` when `improved`, and of every top-k candidate but the input.
    std::map<std::string, int> preprocessing;
    // The derivation of `optimized`, rewrite by rewrite (rule, where, cost
    // before and after), in stages; search::replay rebuilds `optimized` from
    // the input with it (with pet_mutants(options.pet_options) when it has a
    // PET stage). Empty when the input was kept.
    search::derivation derivation;
    std::map<std::string, int> pet_uses;  // PET mutation families in the result
    std::size_t pet_candidates = 0;       // corrected mutants considered
    search::stop_reason stopped = search::stop_reason::saturated;  // the most limiting of the parts'
    bool improved = false;
    std::chrono::duration<double> elapsed{};

    void print(std::ostream& os) const {
        os << "tsopt::optimize: cost " << cost_before << " -> " << cost_after;
        if (cost_before > 0) os << " (" << 100.0 * (cost_before - cost_after) / cost_before << "% lower)";
        os << (improved ? "" : ", kept the input") << "\n"
           << "parts " << parts << ", expanded " << expansions << ", generated " << generated << ", duplicates "
           << dedup_hits << ", rejected " << rejected << " (" << oversized_constants << " for a constant above "
           << max_constant_bytes << " bytes), pruned " << pruned << "\n"
           << "stopped: " << search::to_string(stopped) << " after " << elapsed.count() << " s\n";
        if (leaf_time.count() > 0)
            os << "multi-output matches over inputs and weights applied before partitioning: " << leaf_matches << " in "
               << leaf_time.count() << " s\n";
        if (rule_uses.empty()) os << "rules used: none\n";
        else {
            os << "rules used:\n";
            for (const auto& [name, n] : rule_uses) os << "  " << n << " x " << name << "\n";
        }
        if (improved && !preprocessing.empty()) {
            os << "preprocessing:\n";
            for (const auto& [what, n] : preprocessing) os << "  " << n << " x " << what << "\n";
        }
        if (pet_candidates > 0) {
            os << "PET: " << pet_candidates << " corrected mutants considered";
            if (pet_uses.empty()) os << ", none kept\n";
            else {
                os << ", kept:\n";
                for (const auto& [family, n] : pet_uses) os << "  " << n << " x " << family << "\n";
            }
        }
    }
};

struct optimize_result {
    graph optimized;
    optimize_report report;
    std::vector<graph> top_k;
    std::vector<search::derivation> top_k_derivations;  // each top_k graph's, as report.derivation

    // The derivation of `optimized` or of a top-k candidate (matched by
    // structure); nullptr for any other graph. Its rule uses: uses().
    const search::derivation* derivation_of(const graph& h) const {
        const std::uint64_t k = h.structural_hash();
        if (k == optimized.structural_hash()) return &report.derivation;
        for (std::size_t i = 0; i < top_k.size() && i < top_k_derivations.size(); ++i)
            if (top_k[i].structural_hash() == k) return &top_k_derivations[i];
        return nullptr;
    }
};

// What search::replay needs to rebuild a derivation's PET stages: the
// corrected mutants of the optimization's PET options (optimize_options::
// pet_options), as pet::mutant_at lists them.
inline search::pet_mutant_source pet_mutants(pet::options o) {
    return [o = std::move(o)](const graph& g, std::size_t index) { return pet::mutant_at(g, o, index); };
}

namespace detail {

inline void merge_report(optimize_report& into, const search::report& r) {
    into.expansions += r.expansions;
    into.generated += r.generated;
    into.dedup_hits += r.dedup_hits;
    into.rejected += r.rejected;
    into.oversized_constants += r.oversized_constants;
    into.pruned += r.pruned;
    if (static_cast<int>(r.stopped) > static_cast<int>(into.stopped)) into.stopped = r.stopped;
}

// Capacities for the partitioner: per node, the rule matches a cut there breaks.
inline std::vector<double> match_capacity(const graph& g, const rewrite::rule_index& index) {
    rewrite::graph_index ix(g);
    std::vector<std::vector<std::size_t>> sets;
    index.for_each_match(ix, [&](std::size_t, const rewrite::match& m) {
        sets.emplace_back(m.nodes.begin(), m.nodes.end());
        return sets.size() < 200'000;
    });
    return search::spanning_capacity(g, sets);
}

// Which values exist before any computation: graph inputs, weights,
// weight-only operators, and what data-movement operators (concat, split,
// transpose, ...) make of those alone.
inline std::vector<char> leaf_values(const graph& g) {
    auto constant = g.constant_mask();
    std::vector<char> leaf(g.size(), 0);
    for (std::size_t i : g.topological_order()) {
        const node& n = g.nodes[i];
        if (n.kind == node_kind::input || n.kind == node_kind::weight || constant[i]) leaf[i] = 1;
        else if (n.kind == node_kind::op && spec::decl(n.op).cls == spec::op_class::data_movement) {
            leaf[i] = 1;
            for (value v : n.inputs) leaf[i] = leaf[i] && leaf[static_cast<std::size_t>(v.node)];
        }
    }
    return leaf;
}

// Matches of multi-output rules over leaf values (leaf_values: every tensor
// the match binds exists before any computation), applied on the whole graph
// before it is partitioned. Such a match fuses operators that share an
// operand but need not be near each other: an RNN's input matmuls x_t.W of
// every time step share W, and all x_t are graph inputs. The partition's
// capacities cannot keep them together (spanning_capacity counts producer ->
// consumer pairs; two readers of one weight have no edge between them), so
// each part's search would see one step only.
//
// A candidate merges every reader of the shared operand at once: the match,
// then the same rule again on the merged operator and the next reader of
// the shared input or weight (identified by name), until none is left. One
// merge alone can cost more than it saves where the whole does not (oneDNN
// runs a 2-row matmul slower than two 1-row ones, 5 rows in about the time
// of 2.5). Steepest descent: each round prices every candidate with `model`
// (weights folded) and keeps the cheapest when it is below the current
// graph. Stops when none improves, after `max_steps`, or at `deadline`.
// `only`: a rule index to restrict to (others skipped). Returns the number
// of rule applications kept (`steps` lists them).
template <class Cost>
std::size_t apply_leaf_matches(graph& g, const rewrite::rule_index& index, Cost& model,
                               std::chrono::steady_clock::time_point deadline, std::size_t max_steps,
                               std::vector<search::rewrite_step>& steps,
                               const rewrite::apply_options& ao, std::optional<std::size_t> only = std::nullopt) {
    const auto rules = index.rules();
    rewrite::fold_cache cache;
    double cost = static_cast<double>(model.graph_cost(g));
    std::size_t kept = 0;
    auto out_of_time = [&] { return std::chrono::steady_clock::now() > deadline; };
    auto all_leaves = [](const std::vector<char>& leaf, const rewrite::match& m) {
        for (value v : m.tensors)
            if (v.node >= 0 && !leaf[static_cast<std::size_t>(v.node)]) return false;
        return true;
    };
    // Tensor variables read by two or more source nodes: the shared operands.
    auto shared_vars = [](const rewrite::rule& r) {
        std::vector<int> readers(static_cast<std::size_t>(r.num_tensor_vars), 0), shared;
        for (const auto& n : r.src)
            for (int k = 0; k < n.num_inputs; ++k)
                if (n.inputs[static_cast<std::size_t>(k)].is_var) ++readers[static_cast<std::size_t>(n.inputs[static_cast<std::size_t>(k)].index)];
        for (int v = 0; v < r.num_tensor_vars; ++v)
            if (readers[static_cast<std::size_t>(v)] > 1) shared.push_back(v);
        return shared;
    };
    // A named input or weight bound to every shared variable, or nothing.
    auto shared_names = [&](const graph& h, const rewrite::rule& r, const rewrite::match& m) {
        std::vector<std::string> names;
        for (int v : shared_vars(r)) {
            value b = m.tensors[static_cast<std::size_t>(v)];
            const node& n = h.nodes[static_cast<std::size_t>(b.node)];
            if ((n.kind != node_kind::input && n.kind != node_kind::weight) || n.name.empty()) return std::vector<std::string>{};
            names.push_back(n.name);
        }
        return names;
    };
    while (kept < max_steps && !out_of_time()) {
        const auto leaf = leaf_values(g);
        rewrite::graph_index ix(g);
        std::optional<graph> best;
        double best_cost = cost;
        std::size_t best_steps = 0;
        std::vector<search::rewrite_step> best_where;
        std::set<std::pair<std::size_t, std::vector<std::string>>> merged;  // (rule, shared operand) done this round
        std::set<std::pair<std::size_t, std::vector<std::int32_t>>> priced;  // a match and its mirror price alike
        std::vector<std::pair<std::size_t, std::vector<std::int32_t>>> candidates;
        index.for_each_candidate(ix, [&](std::size_t ri, std::span<const std::int32_t> anchors) {
            if (rules[ri].src_out.size() > 1 && (!only || *only == ri)) candidates.emplace_back(ri, std::vector(anchors.begin(), anchors.end()));
            return true;
        });
        for (const auto& [ri, anchors] : candidates) {
            if (out_of_time()) break;
            const rewrite::rule& r = rules[ri];
            for (const auto& m : rewrite::find_matches(ix, r, std::numeric_limits<std::size_t>::max(), anchors, index.plan(ri))) {
                if (out_of_time()) break;
                if (!all_leaves(leaf, m)) continue;
                std::vector<std::int32_t> nodes = m.nodes;
                std::sort(nodes.begin(), nodes.end());
                if (!priced.insert({ri, std::move(nodes)}).second) continue;
                const auto names = shared_names(g, r, m);
                if (!names.empty() && merged.count({ri, names})) continue;
                auto out = rewrite::apply(ix, r, m, ao);
                if (!out) continue;
                if (!names.empty()) merged.insert({ri, names});
                graph h = rewrite::fold_constants(*out, cache);
                std::size_t steps = 1;
                std::vector<search::rewrite_step> where{{.rule = std::string(r.name), .where = search::where_of(g, m), .swapped = m.swapped}};
                // The next readers of the same named operand, one at a time.
                for (bool more = !names.empty(); more && steps < max_steps && !out_of_time();) {
                    more = false;
                    const auto hleaf = leaf_values(h);
                    rewrite::graph_index hx(h);
                    for (const auto& m2 : rewrite::find_matches(hx, r)) {
                        if (!all_leaves(hleaf, m2) || shared_names(h, r, m2) != names) continue;
                        auto o2 = rewrite::apply(hx, r, m2, ao);
                        if (!o2) continue;
                        where.push_back({.rule = std::string(r.name), .where = search::where_of(h, m2), .swapped = m2.swapped});
                        h = rewrite::fold_constants(*o2, cache);
                        ++steps;
                        more = true;
                        break;
                    }
                }
                const double c = static_cast<double>(model.graph_cost(h));
                if (!(c < best_cost)) continue;
                best = std::move(h);
                best_cost = c;
                best_steps = steps;
                best_where = std::move(where);
            }
        }
        if (!best) break;
        g = std::move(*best);
        cost = best_cost;
        kept += best_steps;
        for (auto& s : best_where) steps.push_back(std::move(s));
    }
    return kept;
}

// The step before partitioning: apply_leaf_matches from several orders,
// the cheapest result kept. Steepest descent is myopic where merges compete
// for the same operators (an RNN's x_t.W_i: merged across the steps by W_i,
// or across i by x_t; whichever is priced a little cheaper first blocks the
// other), so besides all rules at once it starts with each multi-output
// rule alone, then continues with all. `others`: the other distinct results,
// cheapest first (candidates for on-board verification).
struct leaf_result {
    graph best;
    std::size_t applied = 0;
    std::vector<search::rewrite_step> steps;  // best's, in order
    std::vector<graph> others;
    std::vector<std::vector<search::rewrite_step>> others_steps;
};
template <class Cost>
leaf_result leaf_phase(const graph& g, const rewrite::rule_index& index, Cost& model,
                       std::chrono::steady_clock::time_point deadline, const rewrite::apply_options& ao) {
    const auto rules = index.rules();
    // Only multi-output rules with a match over leaves can start a run (any
    // other applies nothing first): found once through the index, not by one
    // run per rule, which a generated set of thousands of such rules makes slow.
    std::vector<std::optional<std::size_t>> firsts{std::nullopt};
    {
        const auto leaf = leaf_values(g);
        rewrite::graph_index ix(g);
        index.for_each_candidate(ix, [&](std::size_t ri, std::span<const std::int32_t> anchors) {
            if (rules[ri].src_out.size() < 2) return true;
            rewrite::for_each_match(
                ix, rules[ri],
                [&](const rewrite::match& m) {
                    for (value v : m.tensors)
                        if (v.node >= 0 && !leaf[static_cast<std::size_t>(v.node)]) return true;
                    firsts.push_back(ri);
                    return false;
                },
                anchors);
            return true;
        });
    }
    struct run { double cost; std::uint64_t hash; leaf_result r; };
    std::vector<run> runs;
    for (auto first : firsts) {
        if (std::chrono::steady_clock::now() > deadline) break;
        leaf_result r{g, 0, {}, {}, {}};
        if (first) {
            r.applied += apply_leaf_matches(r.best, index, model, deadline, g.op_count(), r.steps, ao, first);
            if (r.applied == 0) continue;  // the rule has no leaf match that pays
        }
        r.applied += apply_leaf_matches(r.best, index, model, deadline, g.op_count(), r.steps, ao);
        if (r.applied == 0) continue;
        const std::uint64_t h = r.best.structural_hash();
        bool seen = false;
        for (const auto& x : runs) seen = seen || x.hash == h;
        if (!seen) runs.push_back({static_cast<double>(model.graph_cost(r.best)), h, std::move(r)});
    }
    if (runs.empty()) return {g, 0, {}, {}, {}};
    std::stable_sort(runs.begin(), runs.end(), [](const run& a, const run& b) { return a.cost < b.cost; });
    leaf_result out = std::move(runs.front().r);
    for (std::size_t i = 1; i < runs.size(); ++i) {
        out.others.push_back(std::move(runs[i].r.best));
        out.others_steps.push_back(std::move(runs[i].r.steps));
    }
    return out;
}

// What rewrite::preprocess did between `before` and `after`, by kind.
inline std::map<std::string, int> preprocessing_done(const graph& before, const graph& after) {
    const auto constant = before.constant_mask();
    int folded = 0, norms_before = 0, norms_after = 0;
    for (std::size_t i = 0; i < before.size(); ++i) {
        if (before.nodes[i].kind != node_kind::op) continue;
        if (constant[i]) ++folded;
        else norms_before += before.nodes[i].is_op(spec::op_kind::batchnorm);
    }
    for (const node& n : after.nodes) norms_after += n.is_op(spec::op_kind::batchnorm);
    std::map<std::string, int> done;
    std::vector<std::string> twins;
    (void)rewrite::merge_duplicates(before, &twins);
    if (!twins.empty()) done["duplicate operator merged into its twin"] = static_cast<int>(twins.size());
    if (folded > 0) done["operator on constants folded into a weight"] = folded;
    if (norms_before > norms_after) done["batch norm folded into its convolution"] = norms_before - norms_after;
    return done;
}

inline std::size_t weight_bytes(const graph& g) {
    std::unordered_set<const void*> seen;
    std::size_t bytes = 0;
    for (const node& n : g.nodes)
        if (n.kind == node_kind::weight && n.data && seen.insert(n.data.get()).second) bytes += n.data->size() * sizeof(float);
    return bytes;
}

}  // namespace detail

// optimize_options::max_constant_bytes when left 0: max(16 MiB, the bytes of
// g's weights), so no rewrite grows the model by more than about its own size.
inline std::size_t default_max_constant_bytes(const graph& g) {
    return std::max<std::size_t>(std::size_t(16) << 20, detail::weight_bytes(g));
}

// optimize_options::max_memory when left 0: max(64 MiB, the bytes of g's weights).
inline std::size_t default_max_memory(const graph& g) {
    return std::max<std::size_t>(std::size_t(64) << 20, detail::weight_bytes(g));
}

template <cost::cost_model Cost>
optimize_result optimize(const graph& input, std::span<const rewrite::rule> rules, Cost&& model, const optimize_options& o = {}) {
    const auto t0 = std::chrono::steady_clock::now();
    input.validate();
    optimize_result res;
    res.report.cost_before = static_cast<double>(model.graph_cost(input));

    const std::size_t max_memory = o.max_memory ? o.max_memory : default_max_memory(input);
    rewrite::fold_cache cache(max_memory);
    graph g = o.preprocess ? rewrite::preprocess(input, cache) : input;
    const graph preprocessed = o.top_k > 1 ? g : graph{};
    if (o.preprocess) res.report.preprocessing = detail::preprocessing_done(input, g);
    res.report.max_constant_bytes = o.max_constant_bytes ? o.max_constant_bytes : default_max_constant_bytes(input);

    // One index for every search, part and phase of this call.
    const rewrite::rule_index index(rules);
    auto searcher = [&](std::size_t expansions, std::chrono::duration<double> budget, std::size_t top_k) {
        return search::backtracking{}
            .rules(index)
            .alpha(o.alpha)
            .budget(budget)
            .max_expansions(expansions)
            .max_queue(o.max_queue)
            .max_memory(max_memory)
            .seed(o.seed)
            .top_k(top_k)
            .layouts(o.layouts)
            .fold_weights(o.preprocess)
            .max_constant_bytes(res.report.max_constant_bytes);
    };

    // Rule search over the whole graph, or per part with stitching. Returns
    // the graph with its derivation (the stages of rewrites).
    using stages_t = std::vector<search::derivation_stage>;
    using search_kind = search::derivation_stage::kind;
    // Candidates offered for on-board timing with their stages (top_k).
    std::vector<stages_t> offered_stages;
    struct searched {
        graph g;
        stages_t stages;
    };
    auto rule_search = [&](graph g, std::chrono::duration<double> budget, std::size_t expansions,
                           bool keep_top_k) -> searched {
        const auto started = std::chrono::steady_clock::now();
        stages_t stages;
        auto search_stage = [](std::vector<search::rewrite_step> steps) {
            search::derivation_stage st;
            st.k = search_kind::search;
            st.steps = std::move(steps);
            return st;
        };
        if (g.op_count() <= o.partition_threshold) {
            auto r = searcher(expansions, budget, keep_top_k ? o.top_k : 0).run(g, model);
            detail::merge_report(res.report, r.rep);
            g = std::move(r.best);
            if (!r.steps.empty()) stages.push_back(search_stage(std::move(r.steps)));
            if (keep_top_k) {
                res.top_k = std::move(r.top_k);
                offered_stages.clear();
                for (auto& st : r.top_k_steps) {
                    offered_stages.emplace_back();
                    if (!st.empty()) offered_stages.back().push_back(search_stage(std::move(st)));
                }
            }
        } else {
            std::optional<graph> before_parts;
            std::vector<graph> leaf_alternatives;
            std::vector<stages_t> leaf_alternatives_stages;
            auto leaf_stage = [](std::vector<search::rewrite_step> steps) {
                stages_t st;
                if (steps.empty()) return st;
                st.emplace_back();
                st.back().k = search_kind::leaf_merges;
                st.back().steps = std::move(steps);
                return st;
            };
            if (o.leaf_matches) {
                const auto deadline =
                    started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(budget * o.leaf_share);
                auto leaf = detail::leaf_phase(g, index, model, deadline,
                                               {.max_constant_bytes = res.report.max_constant_bytes,
                                                .oversized_constants = &res.report.oversized_constants});
                if (leaf.applied > 0) {
                    g = std::move(leaf.best);
                    stages = leaf_stage(std::move(leaf.steps));
                    if (keep_top_k && o.top_k > 1) {
                        before_parts = g;
                        leaf_alternatives = std::move(leaf.others);
                        for (auto& st : leaf.others_steps) leaf_alternatives_stages.push_back(leaf_stage(std::move(st)));
                        if (leaf_alternatives.size() + 2 > o.top_k) {
                            leaf_alternatives.resize(o.top_k - 2);
                            leaf_alternatives_stages.resize(o.top_k - 2);
                        }
                    }
                }
                res.report.leaf_matches += leaf.applied;
                res.report.leaf_time += std::chrono::steady_clock::now() - started;
            }
            const stages_t leaf_stages = stages;
            // Out of time already (a large model whose import took the
            // budget): pricing the cuts and partitioning would only be thrown away.
            if (std::chrono::steady_clock::now() - started >= budget) {
                res.report.stopped = std::max(res.report.stopped, search::stop_reason::time_limit);
                return {std::move(g), std::move(stages)};
            }
            const auto search_deadline = started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(budget);
            auto parts = search::partition(g, detail::match_capacity(g, index),
                                           {.max_part_ops = o.partition_threshold, .deadline = search_deadline});
            std::vector<search::subgraph> subs;
            std::size_t nparts = 0;
            for (const auto& p : parts.parts) {
                std::size_t ops = 0;
                for (auto v : p) ops += g.nodes[v].kind == node_kind::op || g.nodes[v].kind == node_kind::opaque;
                if (ops > 0) ++nparts;
            }
            res.report.parts = nparts;
            // Each part gets an even share of what is left, so time a part
            // leaves unused passes on to the next (the +1: the cut search).
            std::size_t parts_left = nparts + 1, expansions_left = expansions;
            std::vector<graph> optimized;
            search::derivation_stage parts_stage;
            parts_stage.k = search_kind::parts;
            subs.reserve(parts.parts.size());
            optimized.reserve(parts.parts.size());
            const search::extract_context whole(g);
            for (const auto& p : parts.parts) {
                // Parts left when the budget is spent stay as they are.
                if (std::chrono::steady_clock::now() - started >= budget) {
                    res.report.stopped = std::max(res.report.stopped, search::stop_reason::time_limit);
                    break;
                }
                auto sg = search::extract(g, p, whole);
                if (sg.g.op_count() == 0) continue;
                const auto time_left = budget - (std::chrono::steady_clock::now() - started);
                const std::size_t share = std::max<std::size_t>(1, expansions_left / parts_left);
                auto r = searcher(share, time_left / static_cast<double>(parts_left), 0).run(sg.g, model);
                --parts_left;
                expansions_left -= std::min(expansions_left, r.rep.expansions);
                detail::merge_report(res.report, r.rep);
                if (!(r.rep.cost_after < r.rep.cost_before)) continue;
                search::derivation_part dp;
                for (std::size_t v : sg.nodes) dp.operators.push_back(g.nodes[v].name);
                dp.steps = std::move(r.steps);
                parts_stage.parts.push_back(std::move(dp));
                subs.push_back(std::move(sg));
                optimized.push_back(std::move(r.best));
            }
            std::vector<search::replacement> reps;
            for (std::size_t i = 0; i < subs.size(); ++i) reps.push_back({&subs[i], &optimized[i]});
            if (!reps.empty()) {
                g = search::stitch(g, reps);
                stages.push_back(std::move(parts_stage));
            }
            // Rules spanning the cuts: a short search over the whole graph.
            if (o.cut_expansions > 0) {
                auto left = budget - (std::chrono::steady_clock::now() - started);
                if (left > decltype(left)::zero()) {
                    auto r = searcher(o.cut_expansions, left, 0).run(g, model);
                    detail::merge_report(res.report, r.rep);
                    g = std::move(r.best);
                    if (!r.steps.empty()) stages.push_back(search_stage(std::move(r.steps)));
                }
            }
            // Candidates for a caller that verifies on the board (top_k): the
            // final graph first, then the graph before the parts' search.
            if (keep_top_k && o.top_k > 1 && before_parts) {
                res.top_k = {g, std::move(*before_parts)};
                offered_stages = {stages, leaf_stages};
                for (auto& alt : leaf_alternatives) res.top_k.push_back(std::move(alt));
                for (auto& alt : leaf_alternatives_stages) offered_stages.push_back(std::move(alt));
            }
        }
        return {std::move(g), std::move(stages)};
    };

    auto budget_left = [&] { return o.budget - (std::chrono::steady_clock::now() - t0); };
    // What preprocessing took is part of the budget.
    auto [searched_g, stages] = rule_search(std::move(g), o.pet ? budget_left() / 2 : budget_left(), o.max_expansions, true);
    g = std::move(searched_g);

    // PET joint optimization: corrected mutants of the current best are
    // searched again with the rules; each round keeps the cheapest result.
    for (std::size_t round = 0; o.pet && round < o.pet_rounds && budget_left() > decltype(budget_left())::zero(); ++round) {
        pet::options po = o.pet_options;
        po.budget = std::min<std::chrono::duration<double>>(po.budget, budget_left() / 2);
        auto cands = pet::mutants(g, po);
        res.report.pet_candidates += cands.size();
        std::vector<std::pair<double, std::size_t>> by_cost;
        for (std::size_t i = 0; i < cands.size(); ++i) by_cost.push_back({static_cast<double>(model.graph_cost(cands[i].g)), i});
        std::sort(by_cost.begin(), by_cost.end());
        double best = static_cast<double>(model.graph_cost(g));
        std::optional<std::size_t> kept;
        graph kept_graph;
        stages_t kept_stages;
        const std::size_t seeds = std::min(o.pet_seeds, by_cost.size());
        for (std::size_t s = 0; s < seeds && budget_left() > decltype(budget_left())::zero(); ++s) {
            const auto share = budget_left() / static_cast<double>(seeds - s);
            auto [h, h_stages] =
                rule_search(cands[by_cost[s].second].g, share, std::max<std::size_t>(1, o.max_expansions / 4), false);
            double c = static_cast<double>(model.graph_cost(h));
            if (c < best) {
                best = c;
                kept = by_cost[s].second;
                kept_graph = std::move(h);
                kept_stages = std::move(h_stages);
            }
        }
        if (!kept) break;
        ++res.report.pet_uses[cands[*kept].family];
        g = std::move(kept_graph);
        search::derivation_stage mutant;
        mutant.k = search_kind::pet;
        mutant.pet_family = cands[*kept].family;
        mutant.pet_index = *kept;
        mutant.pet_hash = cands[*kept].g.hash_of_outputs(graph::weights_by::content);
        stages.push_back(std::move(mutant));
        for (auto& st : kept_stages) stages.push_back(std::move(st));
    }

    g.validate();
    // A derivation from the input: preprocessing, then the stages.
    auto derivation_with = [&](stages_t st) {
        search::derivation d;
        d.preprocessed = o.preprocess;
        d.layouts = o.layouts;
        d.fold_weights = o.preprocess;
        d.stages = std::move(st);
        return d;
    };
    double after = static_cast<double>(model.graph_cost(g));
    if (after < res.report.cost_before) {
        res.optimized = std::move(g);
        res.report.cost_after = after;
        res.report.improved = true;
        res.report.derivation = derivation_with(std::move(stages));
        res.report.rule_uses = res.report.derivation.uses();
    } else {
        res.optimized = input;
        res.report.cost_after = res.report.cost_before;
    }
    // Candidates for a caller that verifies on the board (top_k), distinct,
    // best first: the result; the result with its NHWC choices undone and
    // the preprocessed input (weights folded, nothing rewritten), the two
    // the cost model is most likely to have misjudged against it, since it
    // prices operators alone and not as they run together; then what the
    // search offered (its runner-ups, or the graph before the parts' search
    // and the other leaf-merge orders).
    if (o.top_k > 0) {
        std::vector<graph> offered = std::move(res.top_k);
        offered_stages.resize(offered.size());
        std::vector<graph> cands{res.optimized};
        std::vector<search::derivation> cands_derivations{res.report.derivation};
        if (o.top_k > 1) {
            // The NHWC choices undone: the rules stay, the layout moves go.
            cands.push_back(rewrite::without_nhwc(res.optimized));
            cands_derivations.push_back(res.report.improved ? res.report.derivation : derivation_with({}));
            cands_derivations.back().nhwc_undone = true;
            cands.push_back(preprocessed);
            cands_derivations.push_back(derivation_with({}));
        }
        for (std::size_t i = 0; i < offered.size(); ++i) {
            cands.push_back(std::move(offered[i]));
            cands_derivations.push_back(derivation_with(std::move(offered_stages[i])));
        }
        std::vector<std::uint64_t> seen;
        res.top_k.clear();
        res.top_k_derivations.clear();
        for (std::size_t i = 0; i < cands.size(); ++i) {
            const auto h = cands[i].structural_hash();
            if (std::find(seen.begin(), seen.end(), h) != seen.end()) continue;
            seen.push_back(h);
            res.top_k.push_back(std::move(cands[i]));
            res.top_k_derivations.push_back(std::move(cands_derivations[i]));
            if (res.top_k.size() == o.top_k) break;
        }
    }
    // Every derivation handed out is replayed from the input: it fills in
    // each step's cost before and after (on the whole graph, or the part it
    // applied to) and checks that the report names exactly the rewrites
    // that make the graph it describes.
    auto check = [&](search::derivation& d, const graph& made) {
        if (d.empty()) return;
        const graph again = search::replay(input, d, rules, model, {}, pet_mutants(o.pet_options));
        if (again.hash_of_outputs(graph::weights_by::content) != made.hash_of_outputs(graph::weights_by::content))
            throw error("optimize: internal error: the derivation replayed does not rebuild the graph it describes");
    };
    if (o.replay_derivations) {
        if (res.report.improved) check(res.report.derivation, res.optimized);
        for (std::size_t i = 0; i < res.top_k.size(); ++i) check(res.top_k_derivations[i], res.top_k[i]);
    }
    res.report.elapsed = std::chrono::steady_clock::now() - t0;
    return res;
}

}  // namespace tsopt
