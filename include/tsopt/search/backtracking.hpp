#pragma once
// Cost-based relaxed backtracking search over rule applications (MetaFlow
// Algorithm 1, TASO Algorithm 2), as a builder with explicit limits and a
// stop reason:
//
//   auto r = tsopt::search::backtracking{}
//                .rules(rs.rules()).alpha(1.05).budget(30s).max_expansions(10'000)
//                .run(g, cost::analytical{});
//   r.best; r.report.print(std::cout); r.report.stopped == stop_reason::saturated;
//
// The queue holds candidate graphs ordered by cost (ties broken by a
// seed-driven random key, then by discovery order, so a run is deterministic
// for a seed and an expansion budget). Expanding a graph applies every match
// of every rule (and, with layouts on, the layout moves of rewrite/layout.hpp
// and layout variants of new nodes); each result is folded (weight-only
// operators become weights, through one fold_cache so equal folds hash equal),
// de-duplicated by graph::structural_hash, priced, and enqueued when its cost
// is below alpha * best. alpha = 1 is greedy; alpha > 1 lets the search cross
// short stretches of worse graphs (MetaFlow Figure 1 needs this).
//
// The cost model is any cost::cost_model (cost/cost_model.hpp); the search
// calls graph_cost on each candidate and relies on it being deterministic.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <ostream>
#include <random>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tsopt/cost/cost_model.hpp"
#include "tsopt/rewrite/apply.hpp"
#include "tsopt/rewrite/layout.hpp"
#include "tsopt/rewrite/preprocess.hpp"
#include "tsopt/rewrite/rule_index.hpp"
#include "tsopt/search/derivation.hpp"

namespace tsopt::search {

enum class stop_reason : std::uint8_t {
    saturated,        // the queue ran empty: every candidate within alpha was expanded
    expansion_limit,  // max_expansions graphs expanded
    time_limit,       // the time budget ran out
};
inline std::string_view to_string(stop_reason r) {
    switch (r) {
        case stop_reason::saturated: return "saturated (queue empty)";
        case stop_reason::expansion_limit: return "expansion limit reached";
        case stop_reason::time_limit: return "time budget spent";
    }
    return "?";
}

struct report {
    double cost_before = 0, cost_after = 0;
    std::size_t expansions = 0;     // graphs taken from the queue and expanded
    std::size_t generated = 0;      // rewritten graphs produced (before de-duplication)
    std::size_t dedup_hits = 0;     // generated graphs already seen
    std::size_t rejected = 0;       // matches whose application failed (shape, cycle, constant size)
    std::size_t oversized_constants = 0;  // of those, refused for a constant above max_constant_bytes
    std::size_t enqueued = 0;       // candidates within alpha * best
    std::size_t pruned = 0;         // candidates dropped because the queue was full
    std::size_t max_queue_seen = 0;
    std::size_t max_queue_bytes = 0;  // most bytes queued: graph::footprint plus constants new to the search
    std::map<std::string, int> rule_uses;  // uses_of(result::steps): the best graph's derivation, by rule name
    stop_reason stopped = stop_reason::saturated;
    std::chrono::duration<double> elapsed{};

    void print(std::ostream& os) const {
        os << "cost " << cost_before << " -> " << cost_after;
        if (cost_before > 0) os << " (" << 100.0 * (cost_before - cost_after) / cost_before << "% lower)";
        os << "\nstopped: " << to_string(stopped) << " after " << elapsed.count() << " s\n"
           << "expanded " << expansions << ", generated " << generated << ", duplicates " << dedup_hits << ", rejected "
           << rejected << ", enqueued " << enqueued << ", pruned " << pruned << ", largest queue " << max_queue_seen << " graphs / "
           << (max_queue_bytes + 1023) / 1024 << " KiB\n";
        if (rule_uses.empty()) os << "rules used: none\n";
        else {
            os << "rules used:\n";
            for (const auto& [name, n] : rule_uses) os << "  " << n << " x " << name << "\n";
        }
    }
};

struct result {
    graph best;
    report rep;
    std::vector<graph> top_k;  // distinct candidates, best first (best included), when asked for
    std::vector<rewrite_step> steps;                     // best's derivation from the start graph, in order
    std::vector<std::vector<rewrite_step>> top_k_steps;  // each top_k graph's
};

class backtracking {
public:
    backtracking& rules(std::span<const rewrite::rule> r) { rules_ = r; index_ = nullptr; return *this; }
    // The rules of an index built once by the caller (optimize searches many
    // parts with one set); it must outlive run().
    backtracking& rules(const rewrite::rule_index& index) { rules_ = index.rules(); index_ = &index; return *this; }
    // Relaxation: enqueue a candidate whose cost is below alpha * best (>= 1).
    backtracking& alpha(double a) {
        if (!(a >= 1.0)) throw error("search: alpha must be >= 1, got " + std::to_string(a));
        alpha_ = a;
        return *this;
    }
    template <class Rep, class Period>
    backtracking& budget(std::chrono::duration<Rep, Period> d) {
        budget_ = std::chrono::duration_cast<std::chrono::duration<double>>(d);
        return *this;
    }
    backtracking& max_expansions(std::size_t n) { max_expansions_ = n; return *this; }
    // Memory limits on the queue: at most this many graphs, and at most this
    // many bytes of them: their nodes (graph::footprint) plus the constants
    // they hold that the start graph does not (folded kernels, concatenated
    // weights: Inception-v3's queue held hundreds of MB of them), each
    // counted once however many queued graphs share it. Beyond either, the
    // most expensive queued graphs are dropped (`pruned`): the search goes on
    // with less backtracking room instead of stopping. The search's fold
    // cache is bounded by the same number of bytes.
    backtracking& max_queue(std::size_t n) {
        if (n == 0) throw error("search: max_queue must be positive");
        max_queue_ = n;
        return *this;
    }
    backtracking& max_memory(std::size_t bytes) {
        if (bytes == 0) throw error("search: max_memory must be positive (bytes of queued graphs)");
        max_memory_ = bytes;
        return *this;
    }
    // Candidates larger than this many nodes are not generated (0: no limit).
    backtracking& max_nodes(std::size_t n) { max_nodes_ = n; return *this; }
    backtracking& seed(std::uint64_t s) { seed_ = s; return *this; }
    backtracking& top_k(std::size_t k) { top_k_ = k; return *this; }
    // Layout moves and layout enumeration of new nodes (TASO §5).
    backtracking& layouts(bool on) { layouts_ = on; return *this; }
    // Fold weight-only operators after every rewrite (weight preprocessing).
    backtracking& fold_weights(bool on) { fold_ = on; return *this; }
    // Largest constant a rule application may create (rewrite::apply_options).
    backtracking& max_constant_bytes(std::size_t bytes) { max_constant_bytes_ = bytes; return *this; }

    template <cost::cost_model Cost>
    result run(const graph& start, Cost&& model) const {
        const auto t0 = std::chrono::steady_clock::now();
        start.validate();
        auto price = [&](const graph& g) {
            double c = static_cast<double>(model.graph_cost(g));
            if (std::isnan(c)) throw error("search: the cost model returned NaN");
            return c;
        };
        rewrite::fold_cache cache(std::min(max_memory_, rewrite::fold_cache::default_max_bytes));
        std::mt19937_64 rng(seed_);
        // Per expansion only the rules whose root can match some node are tried.
        std::optional<rewrite::rule_index> own_index;
        const rewrite::rule_index& index = index_ ? *index_ : own_index.emplace(rules_);
        rewrite::rule_index::candidate_memo memo;

        // How each graph was made: from which, by which rule (index; -1
        // start, -2 layout move) at which match (its nodes in the parent),
        // taking which of the application's results. Ids, not names: the
        // names are read only along the derivations asked for (rebuilt at
        // the end). The ids of all matches share one array (`matched`): a
        // step costs 24 bytes plus its ids, not a vector of its own.
        struct step {
            std::int64_t parent;
            int rule;
            std::uint32_t variant;
            std::uint64_t at;  // the match's ids: matched[at, at + size)
            std::uint32_t size;
            std::uint32_t swapped;  // the match's exchanged operands
        };
        std::vector<step> history{{-1, -1, 0, 0, 0, 0}};
        std::vector<std::int32_t> matched;
        struct cand { graph g; std::int64_t hist; };
        std::vector<cand> pool;  // queued graphs by slot (moved out when expanded)
        using key = std::tuple<double, std::uint64_t, std::size_t>;  // cost, random tie-break, slot
        std::set<key> queue;

        result res;
        res.rep.cost_before = price(start);
        double best_cost = res.rep.cost_before;
        std::int64_t best_hist = 0;
        res.best = start;
        std::unordered_set<std::uint64_t> seen{start.structural_hash()};
        // top-k: (cost, hash) ordered, distinct hashes, with their history entry
        std::vector<std::tuple<double, std::uint64_t, graph, std::int64_t>> top;
        auto offer_top = [&](double c, std::uint64_t h, const graph& g, std::int64_t hist) {
            if (top_k_ == 0) return;
            if (top.size() == top_k_ && !(c < std::get<0>(top.back()))) return;
            auto it = std::lower_bound(top.begin(), top.end(), c, [](const auto& e, double v) { return std::get<0>(e) < v; });
            // ties keep discovery order
            while (it != top.end() && std::get<0>(*it) == c) ++it;
            top.insert(it, {c, h, g, hist});
            if (top.size() > top_k_) top.pop_back();
        };
        offer_top(best_cost, *seen.begin(), start, 0);
        std::size_t queued_bytes = 0;
        // Constants of queued graphs that the start graph does not hold, by
        // how many queued graphs hold each: its bytes count while one does.
        std::unordered_set<const tensor<float>*> start_constants;
        for (const node& n : start.nodes)
            if (n.data) start_constants.insert(n.data.get());
        std::unordered_map<const tensor<float>*, std::size_t> new_constants;
        // Counts g in (a graph queued) or out (one taken or dropped).
        auto account = [&](const graph& g, bool queued) {
            std::size_t b = g.footprint();
            for (const node& n : g.nodes) {
                if (!n.data || start_constants.count(n.data.get())) continue;
                auto it = new_constants.try_emplace(n.data.get(), 0).first;
                if (queued ? it->second++ == 0 : --it->second == 0) b += n.data->data.size() * sizeof(float);
                if (it->second == 0) new_constants.erase(it);
            }
            if (queued) queued_bytes += b;
            else queued_bytes -= b;
        };
        auto push = [&](graph g, double c, std::int64_t hist) {
            account(g, true);
            pool.push_back({std::move(g), hist});
            queue.insert({c, rng(), pool.size() - 1});
            ++res.rep.enqueued;
            res.rep.max_queue_seen = std::max(res.rep.max_queue_seen, queue.size());
            res.rep.max_queue_bytes = std::max(res.rep.max_queue_bytes, queued_bytes);
            // The newest entry may be the one dropped; one graph always stays.
            while (queue.size() > 1 && (queue.size() > max_queue_ || queued_bytes > max_memory_)) {
                auto last = std::prev(queue.end());
                graph& dropped = pool[std::get<2>(*last)].g;
                account(dropped, false);
                dropped = graph{};
                queue.erase(last);
                ++res.rep.pruned;
            }
        };
        push(start, best_cost, 0);
        res.rep.enqueued = 0;

        auto consider = [&](graph g, std::int64_t parent, int rule_idx, std::size_t variant, const std::vector<std::int32_t>& at,
                            std::uint32_t swapped) {
            ++res.rep.generated;
            if (fold_) g = rewrite::fold_constants(std::move(g), cache);
            if (max_nodes_ && g.size() > max_nodes_) return;
            std::uint64_t h = g.structural_hash();
            if (!seen.insert(h).second) { ++res.rep.dedup_hits; return; }
            double c = price(g);
            history.push_back({parent, rule_idx, static_cast<std::uint32_t>(variant), matched.size(),
                               static_cast<std::uint32_t>(at.size()), swapped});
            matched.insert(matched.end(), at.begin(), at.end());
            auto hist = static_cast<std::int64_t>(history.size() - 1);
            offer_top(c, h, g, hist);
            if (c < best_cost) {
                best_cost = c;
                best_hist = hist;
                res.best = g;
            }
            if (c < alpha_ * best_cost) push(std::move(g), c, hist);
        };

        // The budget bounds wall time, so a step that cannot be interrupted
        // (matching one rule over the graph, or applying one match with its
        // layout variants and weight folding: over a second on VGG-sized
        // kernels) is started only when one as long as the longest so far
        // still fits; checking only after it let a 30 s budget run 31.5 s.
        using clock = std::chrono::steady_clock;
        clock::duration longest_step{};
        auto out_of_time = [&] { return clock::now() - t0 + longest_step > budget_; };
        auto timed = [&](auto&& step) {
            const auto s0 = clock::now();
            step();
            longest_step = std::max(longest_step, clock::now() - s0);
        };

        res.rep.stopped = stop_reason::saturated;
        while (!queue.empty()) {
            if (res.rep.expansions >= max_expansions_) { res.rep.stopped = stop_reason::expansion_limit; break; }
            if (out_of_time()) { res.rep.stopped = stop_reason::time_limit; break; }
            auto first = queue.begin();
            std::size_t slot = std::get<2>(*first);
            double c = std::get<0>(*first);
            queue.erase(first);
            account(pool[slot].g, false);
            graph g = std::move(pool[slot].g);
            std::int64_t hist = pool[slot].hist;
            pool[slot].g = graph{};
            // Candidates that fell out of the window since they were queued.
            if (!(c < alpha_ * best_cost) && hist != 0) continue;
            ++res.rep.expansions;
            rewrite::graph_index ix(g);
            // Checked per match, not only per rule: on a whole model one rule
            // can match hundreds of times, each a full graph copy to price,
            // and that overran a 30 s budget by 2 s.
            index.for_each_candidate(ix, [&](std::size_t ri, std::span<const std::int32_t> anchors) {
                if (out_of_time()) return false;
                const rewrite::rule& r = rules_[ri];
                std::vector<rewrite::match> ms;
                timed([&] { ms = rewrite::find_matches(ix, r, std::numeric_limits<std::size_t>::max(), anchors, index.plan(ri)); });
                for (const auto& m : ms) {
                    if (out_of_time()) break;
                    timed([&] {
                        auto outs = rewrite::apply_all(ix, r, m,
                                                       {.layouts = layouts_,
                                                        .max_constant_bytes = max_constant_bytes_,
                                                        .oversized_constants = &res.rep.oversized_constants});
                        if (outs.empty()) { ++res.rep.rejected; return; }
                        for (std::size_t k = 0; k < outs.size(); ++k)
                            consider(layouts_ ? rewrite::explicit_conversions(std::move(outs[k])) : std::move(outs[k]), hist,
                                     static_cast<int>(ri), k, m.nodes, m.swapped);
                    });
                }
                return true;
            }, &memo);
            if (layouts_ && !out_of_time()) {
                std::vector<graph> moves;
                timed([&] { moves = rewrite::layout_moves(g); });
                static const std::vector<std::int32_t> none;
                for (std::size_t k = 0; k < moves.size(); ++k) {
                    if (out_of_time()) break;
                    timed([&] { consider(std::move(moves[k]), hist, -2, k, none, 0); });
                }
            }
        }
        if (res.rep.stopped == stop_reason::saturated && !queue.empty()) res.rep.stopped = stop_reason::time_limit;

        res.rep.cost_after = best_cost;
        // A derivation with names: the steps from the start graph again,
        // each located by the ids it was recorded with, checked to end at
        // the graph the search kept.
        auto steps_along = [&](std::int64_t to, const graph& end) {
            std::vector<std::int64_t> path;
            for (std::int64_t h = to; h > 0; h = history[static_cast<std::size_t>(h)].parent) path.push_back(h);
            std::reverse(path.begin(), path.end());
            std::vector<rewrite_step> steps;
            rewrite::fold_cache replay_cache(std::min(max_memory_, rewrite::fold_cache::default_max_bytes));
            graph g = start;
            double cost = res.rep.cost_before;
            for (std::int64_t h : path) {
                const step& s = history[static_cast<std::size_t>(h)];
                rewrite_step rs;
                rs.variant = s.variant;
                std::optional<graph> next;
                if (s.rule == -2) {
                    // Recorded as replay locates it (by the operators it
                    // changes), and rebuilt through that same lookup, so a
                    // step the search took is a step replay finds.
                    auto moves = rewrite::layout_moves(g);
                    rs.rule = std::string(layout_move_name);
                    if (s.variant < moves.size()) {
                        rs.where = layout_changes(g, moves[s.variant]);
                        moves.clear();
                        if (auto moved = locate_layout_move(g, rs.where, s.variant, nullptr))
                            next = fold_ ? rewrite::fold_constants(*moved, replay_cache) : std::move(*moved);
                    }
                } else {
                    const rewrite::rule& r = rules_[static_cast<std::size_t>(s.rule)];
                    rs.rule = std::string(r.name);
                    rewrite::graph_index ix(g);
                    const std::span<const std::int32_t> at(matched.data() + s.at, s.size);
                    const std::int32_t anchor = at.back();
                    std::optional<rewrite::match> m;
                    rewrite::for_each_match(
                        ix, r,
                        [&](const rewrite::match& x) {
                            if (x.swapped != s.swapped || !std::ranges::equal(x.nodes, at)) return true;
                            m = x;
                            return false;
                        },
                        std::span<const std::int32_t>(&anchor, 1));
                    if (m) {
                        rs.where = where_of(g, *m);
                        rs.swapped = m->swapped;
                        next = detail::apply_step(ix, r, *m, s.variant, layouts_, fold_, replay_cache, nullptr);
                    }
                }
                if (!next) throw error("search: internal error: step '" + rs.rule + "' of the derivation does not apply again");
                g = std::move(*next);
                rs.cost_before = cost;
                rs.cost_after = cost = price(g);
                steps.push_back(std::move(rs));
            }
            if (g.hash_of_outputs(graph::weights_by::content) != end.hash_of_outputs(graph::weights_by::content))
                throw error("search: internal error: the derivation rebuilt does not end at the graph it derived");
            return steps;
        };
        res.steps = steps_along(best_hist, res.best);
        res.rep.rule_uses = uses_of(res.steps);
        for (auto& [c, h, gg, hist] : top) {
            res.top_k_steps.push_back(steps_along(hist, gg));
            res.top_k.push_back(std::move(gg));
        }
        res.rep.elapsed = std::chrono::steady_clock::now() - t0;
        return res;
    }

private:
    std::span<const rewrite::rule> rules_{};
    const rewrite::rule_index* index_ = nullptr;
    double alpha_ = 1.05;
    std::chrono::duration<double> budget_{std::chrono::seconds(30)};
    std::size_t max_expansions_ = 100'000;
    std::size_t max_queue_ = 10'000;
    std::size_t max_memory_ = std::size_t(2) << 30;
    std::size_t max_nodes_ = 0;
    std::uint64_t seed_ = 0x7a50;
    std::size_t top_k_ = 0;
    bool layouts_ = true;
    bool fold_ = true;
    std::size_t max_constant_bytes_ = rewrite::default_max_constant_bytes;
};

}  // namespace tsopt::search
