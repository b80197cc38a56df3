#pragma once
// PET's program optimizer (Algorithm 2) and the hook for joint optimization.
//
// ---- Hook contract: pet::mutants(g, options) ---------------------------
//   std::vector<pet::candidate> cs = pet::mutants(g, {});
// * g: any valid graph (opaque operators allowed; they are left alone).
// * Returns graphs that compute exactly what g computes: same inputs (same
//   names, shapes, order), same outputs (same order and shapes). Each is g
//   with one multi-linear subprogram (a convex set of at most `d` linear
//   operators, pet/subprogram.hpp) replaced by a mutant (pet/mutation.hpp)
//   whose non-equivalent output boxes were recomputed by correction kernels
//   (slice/pad/conv/overwrite, pet/correction.hpp), and re-verified: box
//   propagation + `verify.tests` exact modp random tests per box, with the
//   probability of a wrongly accepted box at most `check.error_bound`.
// * Activations fused in g are unfused for the analysis and fused back by the
//   post-optimizations; weight-only operators (the zero-padded, concatenated
//   or sliced kernels of a mutant) are computed once (rewrite::fold_constants)
//   when options::preprocess is set, so candidates are ready to execute.
// * Candidates are distinct (structural hash) and exclude g itself; they
//   are unordered (cost them with any cost::cost_model). No candidate shares
//   mutable state with g: weights are shared read-only (shared_ptr).
// * Throws tsopt::error only for an invalid g; a mutant that fails
//   verification after correction is dropped (counted in the stats).
//
// ---- Standalone optimizer ----------------------------------------------
//   auto r = pet::optimize(g, cost::analytical{}, {.budget = 10s});
//   r.optimized; r.report.print(std::cout);
// 1. unfuse activations; enumerate linear components and their subsets;
// 2. per subset, mutants -> verification -> correction; the top-K corrected
//    mutants by the cost of the whole graph after post-optimization
//    (any cost::cost_model; a measured model prices correction kernels too,
//    since they are ordinary graph nodes);
// 3. greedily apply the best improving candidate until none improves; then,
//    per mutation family, apply it to every subprogram where it applies at
//    once (the gains of some families appear only across subprogram
//    boundaries, e.g. consecutive dilated convs whose phase rearrangements
//    cancel) and keep the result if it is cheaper;
// 4. post-optimizations (post_optimize): move reshape/transpose past
//    element-wise non-linear operators, eliminate inverse pairs, fuse
//    consecutive reshapes and transposes, fuse activations into the preceding
//    conv/matmul, fold weight-only operators.
#include <chrono>
#include <limits>
#include <set>
#include <ostream>
#include <unordered_map>

#include "tsopt/cost/cost_model.hpp"
#include "tsopt/pet/mutation.hpp"
#include "tsopt/pet/subprogram.hpp"
#include "tsopt/rewrite/preprocess.hpp"

namespace tsopt::pet {

struct options {
    mutation_options mutation{};
    verify_options verify{};
    int d = 4;                               // PET's subset size bound
    std::size_t max_subsets = 64;            // per linear component
    std::size_t top_k = 4;                   // corrected mutants kept per subprogram
    double max_corrected_fraction = 0.5;     // drop mutants needing more of an output corrected
    bool post_optimize = true;
    bool preprocess = true;                  // fold weight-only operators in the results
    std::chrono::duration<double> budget = std::chrono::seconds(60);
    int max_rounds = 16;                     // greedy improvements applied
    // mutants(): stop once this many are found (mutant_at: the one asked
    // for and those before it).
    std::size_t max_candidates = std::numeric_limits<std::size_t>::max();
};

struct candidate {
    graph g;                  // the whole graph, equivalent to the input
    std::string family;       // mutation family
    verification check;       // of the subprogram mutant before correction
    correction_report correction;
    std::size_t subprogram_ops = 0;
};

struct stats {
    std::size_t components = 0, subsets = 0, mutants = 0, verified_exact = 0, corrected = 0, rejected = 0,
                correction_failures = 0;
    double max_error_bound = 0;
    std::map<std::string, int> families;
    std::vector<std::string> failures;  // the first few reasons a mutant was dropped
    void fail(const std::string& why) {
        ++correction_failures;
        if (failures.size() < 8) failures.push_back(why);
    }
};

// ---- post-optimizations -------------------------------------------------

namespace detail {

inline bool redirect(graph& g, value from, value to) {
    bool any = false;
    for (auto& n : g.nodes)
        for (value& v : n.inputs)
            if (v == from) { v = to; any = true; }
    for (value& v : g.outputs)
        if (v == from) { v = to; any = true; }
    return any;
}

inline std::int32_t compose_perm(std::int32_t inner, std::int32_t outer) {
    int r = spec::perm_rank(inner);
    std::int32_t v = r << 24;
    for (int i = 0; i < r; ++i) v |= spec::perm_axis(inner, spec::perm_axis(outer, i)) << (3 * i);
    return v;
}
inline bool identity_perm(std::int32_t p) {
    for (int i = 0; i < spec::perm_rank(p); ++i)
        if (spec::perm_axis(p, i) != i) return false;
    return true;
}

// One rewrite step; true when something changed.
inline bool post_step(graph& g) {
    using K = spec::op_kind;
    auto cons = g.consumers();
    auto single_use = [&](std::size_t i) {
        if (cons[i].size() != 1) return false;
        for (value v : g.outputs)
            if (std::size_t(v.node) == i) return false;
        return true;
    };
    for (std::size_t i = 0; i < g.size(); ++i) {
        node& n = g.nodes[i];
        if (n.kind != node_kind::op) continue;
        value self{std::int32_t(i), 0};
        // identity reshape / transpose
        if ((n.op == K::reshape && n.shapes[0] == g.shape_of(n.inputs[0])) ||
            (n.op == K::transpose && identity_perm(n.params[spec::transpose_p::perm]))) {
            if (redirect(g, self, n.inputs[0])) return true;
            continue;
        }
        if (n.op == K::reshape || n.op == K::transpose) {
            const node& p = g.at(n.inputs[0]);
            // reshape(reshape(x)) -> reshape(x)
            if (n.op == K::reshape && p.is_op(K::reshape)) { n.inputs[0] = p.inputs[0]; return true; }
            // transpose(transpose(x)) -> transpose(x)
            if (n.op == K::transpose && p.is_op(K::transpose)) {
                n.params[spec::transpose_p::perm] = compose_perm(p.params[spec::transpose_p::perm], n.params[spec::transpose_p::perm]);
                n.inputs[0] = p.inputs[0];
                return true;
            }
        }
        // act(T(x)) -> T(act(x)) for reshape/transpose T read only here
        if ((n.op == K::relu || n.op == K::sigmoid || n.op == K::tanh) && g.at(n.inputs[0]).kind == node_kind::op) {
            std::size_t t = std::size_t(n.inputs[0].node);
            const node& tn = g.nodes[t];
            if ((tn.op == K::reshape || tn.op == K::transpose) && single_use(t)) {
                // new act on x, new T on act; consumers of n read the new T
                value x = tn.inputs[0];
                spec::op_kind ak = n.op, tk = tn.op;
                spec::op_params tp = tn.params;
                std::string an = n.name, tnm = tn.name;
                value a = g.add1(ak, {}, {x}, an + ".moved");
                value t2 = g.add1(tk, tp, {a}, tnm + ".moved");
                redirect(g, self, t2);
                g.nodes[std::size_t(t2.node)].inputs[0] = a;  // redirect must not touch the new node's own input
                return true;
            }
        }
        // act(conv/matmul/avgpool(x)) -> fused
        if (n.op == K::relu || n.op == K::sigmoid || n.op == K::tanh) {
            std::size_t p = std::size_t(n.inputs[0].node);
            node& pn = g.nodes[p];
            int slot = pn.is_op(K::conv2d) ? spec::conv2d_p::act : pn.is_op(K::matmul) ? spec::matmul_p::act
                     : pn.is_op(K::avgpool) ? spec::pool_p::act : -1;
            if (slot >= 0 && pn.params[slot] == 0 && single_use(p)) {
                pn.params[slot] = n.op == K::relu ? 1 : n.op == K::sigmoid ? 2 : 3;
                if (redirect(g, self, {std::int32_t(p), 0})) return true;
                pn.params[slot] = 0;
            }
        }
    }
    return false;
}

}  // namespace detail

// See the header comment (step 4). The result computes what g computes.
inline graph post_optimize(graph g, bool fold = true) {
    g = std::move(g).compacted();
    for (int guard = 0; guard < 10000 && detail::post_step(g); ++guard) g = std::move(g).compacted();
    if (fold) g = rewrite::fold_constants(std::move(g));
    g.validate();
    return g;
}

// ---- candidates per subprogram -----------------------------------------

struct sub_candidate {
    graph replacement;  // over the subprogram's leaves
    std::string family;
    verification check;
    correction_report correction;
};

// Verified, corrected mutants of one subprogram.
inline std::vector<sub_candidate> corrected_mutants(const subprogram& sp, const options& o, stats* st = nullptr) {
    std::vector<sub_candidate> r;
    const std::size_t L = sp.leaves();
    auto ms = mutate(sp.g, L, o.mutation);
    if (st) st->mutants += ms.size();
    for (auto& m : ms) {
        try {
            verification v = verify(sp.g, m.g, L, o.verify);
            if (st) st->max_error_bound = std::max(st->max_error_bound, v.error_bound);
            if (v.equivalent) {
                if (st) ++st->verified_exact;
                r.push_back({m.g, m.family, v, {0, 0, v}});
                continue;
            }
            bool too_much = false;
            for (std::size_t k = 0; k < sp.g.outputs.size(); ++k)
                too_much = too_much || static_cast<double>(v.differing_volume[k]) >
                                           o.max_corrected_fraction * static_cast<double>(sp.g.shape_of(sp.g.outputs[k]).elements());
            if (too_much) {
                if (st) ++st->rejected;
                continue;
            }
            correction_report cr;
            graph fixed = correct(sp.g, m.g, L, v, &cr, o.verify);
            if (st) ++st->corrected;
            r.push_back({std::move(fixed), m.family, v, cr});
        } catch (const error& e) {
            if (st) st->fail(m.family + ": " + e.what());
        }
    }
    return r;
}

namespace detail {

inline std::uint64_t sub_key(const subprogram& sp) {
    std::uint64_t h = sp.g.structural_hash();
    for (std::size_t i = 0; i < sp.leaves(); ++i)
        for (auto d : sp.g.nodes[i].shapes[0]) h = hashing::combine(h, static_cast<std::uint64_t>(d));
    return h;
}

// Calls f(subprogram) for every candidate subset of g.
template <class F>
void for_each_subprogram(const graph& g, const options& o, stats* st, F&& f) {
    auto comps = linear_components(g);
    if (st) st->components += comps.size();
    for (auto& c : comps)
        for (auto& s : subsets(g, c, o.d, o.max_subsets)) {
            if (st) ++st->subsets;
            if (!f(extract(g, s))) return;
        }
}

}  // namespace detail

namespace detail {
// g with every node but the inputs named as no earlier node is: a repeated name (a
// correction's "pet.correction.slice", two DFS operators' "pet.dfs") gets
// the first free ".2", ".3", ... in node order, so the rules' steps on a
// mutant name each operator once (search::replay locates steps by name).
inline graph with_unique_names(graph g) {
    std::set<std::string> taken;
    for (const node& n : g.nodes) taken.insert(n.name);
    std::set<std::string> seen;
    for (node& n : g.nodes) {
        if (seen.insert(n.name).second || n.kind == node_kind::input) continue;  // inputs keep their names
        std::string fresh;
        for (int k = 2; fresh.empty() || taken.count(fresh); ++k) fresh = n.name + "." + std::to_string(k);
        taken.insert(fresh);
        seen.insert(fresh);
        n.name = std::move(fresh);
    }
    return g;
}
}  // namespace detail

// The hook (see the header comment). The candidates come in an order that
// depends on g and o alone; o.budget (checked after each subprogram) and
// o.max_candidates only cut the list short, so a longer run's list starts
// with a shorter one's (mutant_at relies on it).
inline std::vector<candidate> mutants(const graph& g, const options& o = {}, stats* st = nullptr) {
    g.validate();
    graph u = unfuse_activations(g);
    std::vector<candidate> out;
    std::set<std::uint64_t> seen{post_optimize(u, o.preprocess).structural_hash()};
    const auto t0 = std::chrono::steady_clock::now();
    detail::for_each_subprogram(u, o, st, [&](const subprogram& sp) {
        for (auto& c : corrected_mutants(sp, o, st)) {
            if (out.size() >= o.max_candidates) break;
            try {
                graph full = splice(u, sp, c.replacement);
                full = o.post_optimize ? post_optimize(full, o.preprocess) : full;
                if (!seen.insert(full.structural_hash()).second) continue;
                if (st) ++st->families[c.family];
                out.push_back({detail::with_unique_names(std::move(full)), c.family, c.check, c.correction, sp.ops.size()});
            } catch (const error& e) {
                if (st) st->fail(c.family + ": " + e.what());
            }
        }
        return out.size() < o.max_candidates && std::chrono::steady_clock::now() - t0 < o.budget;
    });
    return out;
}

// Candidate `index` of mutants(g, o) as a run with no time limit lists it:
// what search::replay needs to rebuild a derivation's PET stage
// (derivation_stage::pet_index). Throws tsopt::error when g has fewer.
inline graph mutant_at(const graph& g, options o, std::size_t index) {
    o.budget = std::chrono::duration<double>::max();
    o.max_candidates = index + 1;
    auto all = mutants(g, o);
    if (all.size() <= index)
        throw error("pet: the graph has " + std::to_string(all.size()) + " corrected mutants with these options, not " +
                    std::to_string(index + 1));
    return std::move(all[index].g);
}

struct report {
    double cost_before = 0, cost_after = 0;
    std::vector<std::string> applied;  // families, in order
    stats st;
    std::chrono::duration<double> elapsed{};
    bool improved = false;
    void print(std::ostream& os) const {
        os << "pet::optimize: cost " << cost_before << " -> " << cost_after << (improved ? "" : " (kept the input)") << "\n"
           << "components " << st.components << ", subsets " << st.subsets << ", mutants " << st.mutants << ", exact "
           << st.verified_exact << ", corrected " << st.corrected << ", rejected " << st.rejected << ", failed "
           << st.correction_failures << ", max error bound " << st.max_error_bound << "\n"
           << "applied:";
        for (auto& a : applied) os << " " << a;
        os << (applied.empty() ? " none" : "") << "\nsearch time " << elapsed.count() << " s\n";
        for (auto& f : st.failures) os << "  dropped: " << f << "\n";
    }
};

struct result {
    graph optimized;
    report rep;
};

// The standalone PET optimizer (see the header comment).
template <cost::cost_model Cost>
result optimize(const graph& input, Cost&& model, const options& o = {}) {
    const auto t0 = std::chrono::steady_clock::now();
    auto left = [&] { return std::chrono::steady_clock::now() - t0 < o.budget; };
    input.validate();
    result res;
    res.rep.cost_before = static_cast<double>(model.graph_cost(input));
    auto finish = [&](const graph& g) { return post_optimize(g, o.preprocess); };
    graph cur = unfuse_activations(input);
    graph best = finish(cur);
    double best_cost = static_cast<double>(model.graph_cost(best));
    std::unordered_map<std::uint64_t, std::vector<sub_candidate>> cache;
    auto cands = [&](const subprogram& sp) -> const std::vector<sub_candidate>& {
        auto key = detail::sub_key(sp);
        auto it = cache.find(key);
        if (it == cache.end()) it = cache.emplace(key, corrected_mutants(sp, o, &res.rep.st)).first;
        return it->second;
    };
    // 3a. greedy: the best improving (subprogram, mutant) at a time.
    for (int round = 0; round < o.max_rounds && left(); ++round) {
        graph round_best;
        double round_cost = best_cost;
        std::string fam;
        detail::for_each_subprogram(cur, o, round == 0 ? &res.rep.st : nullptr, [&](const subprogram& sp) {
            // Top-K of this subprogram by whole-graph cost.
            std::vector<std::pair<double, std::pair<graph, std::string>>> top;
            for (auto& c : cands(sp)) {
                try {
                    graph full = splice(cur, sp, c.replacement);
                    double cost = static_cast<double>(model.graph_cost(finish(full)));
                    top.push_back({cost, {std::move(full), c.family}});
                } catch (const error&) {
                }
            }
            std::sort(top.begin(), top.end(), [](auto& a, auto& b) { return a.first < b.first; });
            if (top.size() > o.top_k) top.resize(o.top_k);
            if (!top.empty() && top[0].first < round_cost) {
                round_cost = top[0].first;
                round_best = std::move(top[0].second.first);
                fam = top[0].second.second;
            }
            return left();
        });
        if (!(round_cost < best_cost)) break;
        cur = std::move(round_best);
        best_cost = round_cost;
        res.rep.applied.push_back(fam);
    }
    best = finish(cur);
    best_cost = static_cast<double>(model.graph_cost(best));
    // 3b. one family everywhere at once.
    std::set<std::string> fams;
    for (auto& [k, v] : cache)
        for (auto& c : v) fams.insert(c.family);
    for (const auto& f : fams) {
        if (!left()) break;
        graph g = cur;
        std::vector<std::string> used;
        for (int guard = 0; guard < 256 && left(); ++guard) {
            bool applied = false;
            detail::for_each_subprogram(g, o, nullptr, [&](const subprogram& sp) {
                for (auto& c : cands(sp))
                    if (c.family == f) {
                        try {
                            g = splice(g, sp, c.replacement);
                            applied = true;
                            used.push_back(f);
                            return false;
                        } catch (const error&) {
                        }
                    }
                return left();
            });
            if (!applied) break;
        }
        if (used.empty()) continue;
        graph fg = finish(g);
        double c = static_cast<double>(model.graph_cost(fg));
        if (c < best_cost) {
            best_cost = c;
            best = std::move(fg);
            cur = std::move(g);
            res.rep.applied.insert(res.rep.applied.end(), used.begin(), used.end());
        }
    }
    if (best_cost < res.rep.cost_before) {
        res.optimized = std::move(best);
        res.rep.cost_after = best_cost;
        res.rep.improved = true;
    } else {
        res.optimized = input;
        res.rep.cost_after = res.rep.cost_before;
        res.rep.applied.clear();
    }
    res.rep.elapsed = std::chrono::steady_clock::now() - t0;
    return res;
}

}  // namespace tsopt::pet
