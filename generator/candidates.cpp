// Bucketing by fingerprint, candidate pairs, float confirmation and TASO's
// pruning (§4): input renaming and common subgraphs (Figure 4).
#include <algorithm>
#include <mutex>
#include <numeric>
#include <thread>
#include <unordered_set>

#include "gen.hpp"
#include "tsopt/core/hash.hpp"

namespace tsopt::gen {

namespace {

// Combines the fingerprints at the two shapes. Kept with its constants
// for the reason of enumerate.cpp's combine (the fingerprints order the
// candidates); hashes that only test membership use hashing::combine.
std::uint64_t combine_shapes(std::uint64_t a, std::uint64_t b) {
    std::uint64_t x = a * 0x9e3779b97f4a7c15ull ^ (b + 0x7f4a7c159e3779b9ull + (a << 6) + (a >> 2));
    x = (x ^ (x >> 31)) * 0xbf58476d1ce4e5b9ull;
    return x ^ (x >> 29);
}

int first_output(const mgraph& g, int op) {
    for (int t = g.num_inputs; t < static_cast<int>(g.producer.size()); ++t)
        if (g.producer[t] == op) return t;
    return -1;
}

// Matches outputs by value hash; empty when no bijection exists.
std::vector<int> match_outputs(const mgraph& a, const mgraph& b) {
    if (a.outputs.size() != b.outputs.size()) return {};
    std::vector<int> perm(a.outputs.size(), -1);
    std::vector<bool> used(b.outputs.size(), false);
    for (std::size_t i = 0; i < a.outputs.size(); ++i) {
        for (std::size_t j = 0; j < b.outputs.size(); ++j)
            if (!used[j] && a.hash[a.outputs[i]] == b.hash[b.outputs[j]] &&
                a.shapes[a.outputs[i]] == b.shapes[b.outputs[j]]) {
                perm[i] = static_cast<int>(j);
                used[j] = true;
                break;
            }
        if (perm[i] < 0) return {};
    }
    return perm;
}

// modp evaluation where the operator with structural hash `target` produces
// fresh random values instead of its result.
// With o.two_shapes, at both shape configurations (hashes mixed).
std::vector<std::uint64_t> eval_replacing(const mgraph& g, std::uint64_t target, const options& o, bool second = false) {
    const auto& inputs = fingerprint_inputs(o, second);
    std::vector<tensor<modp>> v(inputs.begin(), inputs.end());
    std::vector<shape> sh;
    for (auto& x : inputs) sh.push_back(x.shape);
    v.resize(g.shapes.size());
    sh.resize(g.shapes.size());
    int t = g.num_inputs;
    for (auto& op : g.ops) {
        const auto& d = spec::decl(op.kind);
        auto p = second ? params_for_shapes(op, param_values(op.pidx), sh) : param_values(op.pidx);
        std::array<shape, 2> ins;
        std::array<const tensor<modp>*, 2> ip{};
        for (int i = 0; i < op.nin; ++i) { ip[i] = &v[op.in[i]]; ins[i] = sh[op.in[i]]; }
        auto os = std::span<shape>(sh.data() + t, static_cast<std::size_t>(d.num_outputs));
        if (!spec::infer_shapes(op.kind, p, std::span<const shape>(ins.data(), op.nin), os).empty())
            return std::vector<std::uint64_t>(g.outputs.size(), 0xdead);
        if (g.shash[t] == target) {
            std::mt19937_64 rng((o.seed ^ 0x5ca1ab1e) + (second ? 1 : 0));
            for (int j = 0; j < d.num_outputs; ++j) v[t + j] = random_modp(sh[t + j], rng);
        } else {
            std::vector<tensor<modp>> res;
            for (int j = 0; j < d.num_outputs; ++j) res.emplace_back(sh[t + j]);
            d.eval_modp(p, std::span<const tensor<modp>* const>(ip.data(), op.nin), res);
            for (int j = 0; j < d.num_outputs; ++j) v[t + j] = std::move(res[j]);
        }
        t += d.num_outputs;
    }
    std::vector<std::uint64_t> h;
    for (int x : g.outputs) h.push_back(tensor_hash(v[x]));
    if (o.two_shapes && !second) {
        auto h2 = eval_replacing(g, target, o, true);
        for (std::size_t i = 0; i < h.size(); ++i) h[i] = combine_shapes(h[i], h2[i]);
    }
    return h;
}

}  // namespace

std::vector<std::vector<int>> input_renamings(const options& o) {
    int I = static_cast<int>(o.inputs.size());
    std::vector<std::vector<int>> groups;
    std::vector<bool> done(I, false);
    for (int i = 0; i < I; ++i) {
        if (done[i]) continue;
        std::vector<int> g;
        for (int j = i; j < I; ++j)
            if (!done[j] && o.inputs[j].r == o.inputs[i].r && o.inputs[j].s == o.inputs[i].s) { g.push_back(j); done[j] = true; }
        groups.push_back(g);
    }
    std::vector<std::vector<int>> out{std::vector<int>(I)};
    std::iota(out[0].begin(), out[0].end(), 0);
    for (auto& g : groups) {
        if (g.size() < 2) continue;
        std::vector<std::vector<int>> next;
        auto perm = g;
        do {
            for (auto base : out) {
                for (std::size_t k = 0; k < g.size(); ++k) base[g[k]] = perm[k];
                next.push_back(base);
            }
        } while (std::next_permutation(perm.begin(), perm.end()));
        out = std::move(next);
    }
    return out;
}

std::uint64_t renaming_key(const pair& p, std::span<const std::vector<int>> renamings) {
    std::uint64_t best = ~0ull;
    for (auto& pi : renamings) {
        // Only renamings that touch used inputs matter, but all are cheap.
        std::uint64_t ka = structural_key(p.a, pi), kb = structural_key(p.b, pi);
        best = std::min(best, hashing::combine(std::min(ka, kb), std::max(ka, kb)));
    }
    return best;
}

bool decomposes(const pair& p) {
    if (p.a.outputs.size() < 2) return false;
    // Operators each output depends on, as bitmasks.
    auto anc = [](const mgraph& g, int t) {
        std::uint64_t m = 0;
        std::vector<int> stack{t};
        while (!stack.empty()) {
            int x = stack.back();
            stack.pop_back();
            if (x < g.num_inputs) continue;
            int op = g.producer[x];
            if (m >> op & 1) continue;
            m |= 1ull << op;
            for (int i = 0; i < g.ops[op].nin; ++i) stack.push_back(g.ops[op].in[i]);
        }
        return m;
    };
    std::size_t n = p.a.outputs.size();
    // Try every split of the outputs into two non-empty groups.
    for (std::uint32_t s = 1; s + 1 < (1u << n); ++s) {
        std::uint64_t a0 = 0, a1 = 0, b0 = 0, b1 = 0;
        for (std::size_t i = 0; i < n; ++i) {
            auto ma = anc(p.a, p.a.outputs[i]), mb = anc(p.b, p.b.outputs[static_cast<std::size_t>(p.perm[i])]);
            if (s >> i & 1) { a0 |= ma; b0 |= mb; } else { a1 |= ma; b1 |= mb; }
        }
        if (!(a0 & a1) && !(b0 & b1)) return true;
    }
    return false;
}

bool common_subgraph_at_inputs(const pair& p, const options& o) {
    std::unordered_set<std::uint64_t> in_b;
    for (int t = p.b.num_inputs; t < static_cast<int>(p.b.shash.size()); ++t)
        if (p.b.out_index[t] == 0) in_b.insert(p.b.shash[t]);
    for (int t = p.a.num_inputs; t < static_cast<int>(p.a.shash.size()); ++t) {
        if (p.a.out_index[t] != 0 || !in_b.count(p.a.shash[t])) continue;
        // The shared subgraph ending at t: the pair stays equivalent when it is
        // replaced by a fresh input, so the smaller pair implies this one.
        auto ha = eval_replacing(p.a, p.a.shash[t], o);
        auto hb = eval_replacing(p.b, p.a.shash[t], o);
        bool eq = true;
        for (std::size_t i = 0; i < ha.size() && eq; ++i) eq = ha[i] == hb[static_cast<std::size_t>(p.perm[i])];
        if (eq) return true;
    }
    return false;
}

bool common_subgraph_at_outputs(const pair& p) {
    const mgraph &a = p.a, &b = p.b;
    auto out_pos = [](const mgraph& g, int t) {
        for (std::size_t i = 0; i < g.outputs.size(); ++i)
            if (g.outputs[i] == t) return static_cast<int>(i);
        return -1;
    };
    for (std::size_t n1 = 0; n1 < a.ops.size(); ++n1) {
        const gop& o1 = a.ops[n1];
        int f1 = first_output(a, static_cast<int>(n1));
        int nout = spec::decl(o1.kind).num_outputs;
        bool all_out = true;
        for (int j = 0; j < nout; ++j) all_out &= out_pos(a, f1 + j) >= 0;
        if (!all_out) continue;
        for (std::size_t n2 = 0; n2 < b.ops.size(); ++n2) {
            const gop& o2 = b.ops[n2];
            if (o2.kind != o1.kind || o2.pidx != o1.pidx || o2.nin != o1.nin) continue;
            int f2 = first_output(b, static_cast<int>(n2));
            bool ok = true;
            for (int j = 0; j < nout && ok; ++j) {
                int pa = out_pos(a, f1 + j), pb = out_pos(b, f2 + j);
                ok = pb >= 0 && p.perm[static_cast<std::size_t>(pa)] == pb;
            }
            for (int i = 0; i < o1.nin && ok; ++i) {
                int t1 = o1.in[i], t2 = o2.in[i];
                ok = a.hash[t1] == b.hash[t2] && a.shapes[t1] == b.shapes[t2] &&
                     (t1 < a.num_inputs || a.uses[t1] == 1) && (t2 < b.num_inputs || b.uses[t2] == 1);
            }
            if (ok) return true;
        }
    }
    return false;
}

std::vector<packed_pair> candidates(const enumeration& e, const options& o, pipeline_stats& st,
                             const std::function<void(const char*, std::uint64_t, std::uint64_t)>& progress,
                             std::unordered_set<std::uint64_t>* renamed_so_far, process_team* team) {
    st.graphs = e.total_graphs;
    st.dfs_nodes = e.dfs_nodes;
    std::vector<std::uint32_t> idx(e.graphs.size());
    std::iota(idx.begin(), idx.end(), 0u);
    std::sort(idx.begin(), idx.end(), [&](auto x, auto y) {
        return e.graphs[x].fp != e.graphs[y].fp ? e.graphs[x].fp < e.graphs[y].fp : x < y;
    });
    std::vector<std::pair<std::size_t, std::size_t>> buckets;
    std::uint64_t n_fp = 0;
    for (std::size_t i = 0; i < idx.size();) {
        std::size_t j = i;
        while (j < idx.size() && e.graphs[idx[j]].fp == e.graphs[idx[i]].fp) ++j;
        ++n_fp;
        if (j - i > 1) buckets.emplace_back(i, j);
        i = j;
    }
    std::uint64_t n_buckets = buckets.size();

    const auto renamings = input_renamings(o);
    // Float test inputs for confirmation.
    std::vector<std::vector<tensor<float>>> tests;
    {
        std::mt19937_64 rng(o.seed + 17);
        for (int k = 0; k < o.float_tests; ++k) {
            std::vector<tensor<float>> in;
            for (auto& d : o.inputs) in.push_back(random_float(d.s, rng));
            tests.push_back(std::move(in));
        }
    }

    // Survivors of the local pruning, kept as record indices (a materialized
    // pair is kilobytes; N=4 keeps millions before renaming).
    struct kept {
        std::uint32_t a, b;
        std::vector<int> perm;
        std::uint64_t renaming;
    };
    std::vector<std::vector<kept>> per_bucket(buckets.size());
    std::atomic<std::size_t> next{0}, done{0};
    std::atomic<std::uint64_t> n_cand{0}, n_conf{0}, n_dec{0}, n_ci{0}, n_co{0};
    unsigned nt = o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency());
    // A team's process holds the buckets of its fingerprint range, whole
    // (shuffle_to_owners), and pairs them all.
    std::exception_ptr failure;
    std::atomic<bool> failed{false};
    std::mutex fm;
    auto work = [&] {
        try {
            for (std::size_t bi; (bi = next.fetch_add(1)) < buckets.size(); done.fetch_add(1)) {
                auto [lo, hi] = buckets[bi];
                // Graphs ordered by structure, not by record index: the record
                // order depends on thread scheduling, and the pair kept by the
                // renaming step (hence the emitted rule text) must not.
                // The enumeration's ordering rule (an operator independent of
                // the previous one comes in increasing hash order) lets a few
                // graphs be recorded in two operator orders; the order decides
                // how a constant's extents are written (patterns.cpp), so the
                // copy kept is the one with the smallest operator order (as
                // text: describe). Structure by text, not by structural_key:
                // which graph stands for the bucket, and so which pairs are
                // candidates, must not follow a hash.
                struct keyed_graph {
                    std::string key, order;
                    std::uint32_t rec;
                    mgraph g;
                };
                std::vector<keyed_graph> keyed;
                for (std::size_t k = lo; k < hi; ++k) {
                    auto g = materialize(e, e.graphs[idx[k]], o);
                    auto key = structural_text(g);
                    auto order = describe(g, o);
                    keyed.push_back({std::move(key), std::move(order), idx[k], std::move(g)});
                }
                std::sort(keyed.begin(), keyed.end(),
                          [](const keyed_graph& x, const keyed_graph& y) { return std::tie(x.key, x.order) < std::tie(y.key, y.order); });
                keyed.erase(std::unique(keyed.begin(), keyed.end(), [](const keyed_graph& x, const keyed_graph& y) { return x.key == y.key; }),
                            keyed.end());
                if (keyed.size() < 2) continue;
                std::vector<mgraph> gs;
                std::vector<std::uint32_t> rec;
                gs.reserve(keyed.size());
                for (auto& kg : keyed) {
                    rec.push_back(kg.rec);
                    gs.push_back(std::move(kg.g));
                }
                // Graphs whose outputs are computed by disjoint operators: a pair
                // of two such graphs always decomposes, so it is never formed.
                std::vector<char> split_graph(gs.size());
                for (std::size_t i = 0; i < gs.size(); ++i) {
                    std::vector<int> id(gs[i].outputs.size());
                    std::iota(id.begin(), id.end(), 0);
                    split_graph[i] = decomposes(pair{gs[i], gs[i], id});
                }
                std::vector<std::vector<std::vector<tensor<float>>>> fvals(gs.size());
                auto float_vals = [&](std::size_t i) -> auto& {
                    if (fvals[i].empty())
                        for (auto& t : tests) fvals[i].push_back(eval_float(gs[i], t));
                    return fvals[i];
                };
                // Output correspondence of two graphs confirmed on the float
                // tests; empty when they differ.
                auto confirmed = [&](std::size_t i, std::size_t j) {
                    auto perm = match_outputs(gs[i], gs[j]);
                    if (perm.empty()) return perm;
                    n_cand.fetch_add(1, std::memory_order_relaxed);
                    auto &fa = float_vals(i), &fb = float_vals(j);
                    bool ok = true;
                    for (std::size_t t = 0; t < tests.size() && ok; ++t)
                        for (std::size_t q = 0; q < perm.size() && ok; ++q)
                            ok = relative_error(fa[t][gs[i].outputs[q]], fb[t][gs[j].outputs[perm[q]]]) <= o.tolerance;
                    if (!ok) perm.clear();
                    return perm;
                };
                // Every pair of a bucket, or past o.all_pairs_limit graphs
                // (N=4 has buckets of thousands: the graphs computing x
                // itself through split/concat detours) each graph paired
                // with the smallest graph equal to it: pairs through that
                // representative compose to every other pair, in two rewrites.
                std::vector<std::tuple<std::size_t, std::size_t, std::vector<int>>> todo;
                if (gs.size() <= o.all_pairs_limit) {
                    for (std::size_t i = 0; i < gs.size(); ++i)
                        for (std::size_t j = i + 1; j < gs.size(); ++j)
                            if (!(split_graph[i] && split_graph[j]))
                                if (auto perm = confirmed(i, j); !perm.empty()) todo.emplace_back(i, j, std::move(perm));
                } else {
                    std::vector<std::size_t> order(gs.size()), reps;
                    std::iota(order.begin(), order.end(), 0);
                    std::stable_sort(order.begin(), order.end(),
                                     [&](auto x, auto y) { return gs[x].ops.size() < gs[y].ops.size(); });
                    // Pairs keep bucket order (first graph first), as in the all-pairs case.
                    auto joins_class = [&](std::size_t i, std::size_t j) {
                        if (split_graph[i] && split_graph[j]) return false;
                        auto perm = confirmed(std::min(i, j), std::max(i, j));
                        if (perm.empty()) return false;
                        todo.emplace_back(std::min(i, j), std::max(i, j), std::move(perm));
                        return true;
                    };
                    for (auto j : order)
                        if (std::none_of(reps.begin(), reps.end(), [&](std::size_t i) { return joins_class(i, j); }))
                            reps.push_back(j);
                }
                for (auto& [i, j, perm] : todo) {
                    n_conf.fetch_add(1, std::memory_order_relaxed);
                    pair p{gs[i], gs[j], perm};
                    // Local pruning here keeps memory bounded; the global
                    // renaming step follows.
                    if (decomposes(p)) continue;
                    n_dec.fetch_add(1, std::memory_order_relaxed);
                    if (common_subgraph_at_inputs(p, o)) continue;
                    n_ci.fetch_add(1, std::memory_order_relaxed);
                    if (common_subgraph_at_outputs(p)) continue;
                    n_co.fetch_add(1, std::memory_order_relaxed);
                    per_bucket[bi].push_back({rec[i], rec[j], std::move(p.perm), renaming_key(p, renamings)});
                }
            }
        } catch (...) {
            std::lock_guard lk(fm);
            failure = std::current_exception();
            failed = true;
            next = buckets.size();
        }
    };
    {
        std::vector<std::jthread> ts;
        for (unsigned i = 0; i < nt; ++i) ts.emplace_back(work);
        if (progress)
            while (done.load() < buckets.size() && !failed) {
                progress("confirm", done.load(), buckets.size());
                std::this_thread::sleep_for(std::chrono::milliseconds(200));
            }
    }
    // Renaming: global, in a deterministic order (buckets sorted by
    // fingerprint; a team's processes in rank order, which is fingerprint
    // order): the first pair of each renaming class is kept.
    if (progress) progress("rename", 0, 1);
    // Kept packed; a pair whose sides each read an input the other does not
    // has no direction a rule could take, and is left out.
    std::vector<packed_pair> ps;
    std::uint64_t renamed_kept = 0;
    auto keep = [&](pair&& p) {
        ++renamed_kept;
        if ((p.a.vars & ~p.b.vars) && (p.b.vars & ~p.a.vars)) return;
        ps.push_back(pack(p));
    };
    std::unordered_set<std::uint64_t> renamed_here;
    auto& renamed = renamed_so_far ? *renamed_so_far : renamed_here;
    if (!team) {
        if (failure) std::rethrow_exception(failure);
        for (auto& b : per_bucket) {
            for (auto& k : b)
                if (renamed.insert(k.renaming).second)
                    keep(pair{materialize(e, e.graphs[k.a], o), materialize(e, e.graphs[k.b], o), std::move(k.perm)});
            std::vector<kept>().swap(b);
        }
    } else {
        // Every process's counts and renaming keys (and failure, if any)
        // first: each process then knows which of its pairs the team keeps
        // and sends only those, as graphs.
        const auto rank = static_cast<std::size_t>(team->rank());
        byte_writer w;
        w.failure(failure);
        for (auto n : {n_fp, n_buckets, n_cand.load(), n_conf.load(), n_dec.load(), n_ci.load(), n_co.load()}) w.pod(n);
        std::uint64_t mine = 0;
        for (const auto& b : per_bucket) mine += b.size();
        w.pod(mine);
        for (const auto& b : per_bucket)
            for (const auto& k : b) w.pod(k.renaming);
        auto all = team->all_gather(w.out);
        std::string team_failure;
        std::uint64_t sums[7] = {};
        std::vector<char> keep_mine;
        for (std::size_t q = 0; q < all.size(); ++q) {
            byte_reader rd{all[q]};
            rd.failure(q, team_failure);
            if (!team_failure.empty()) continue;
            for (auto& n : sums) n += rd.pod<std::uint64_t>();
            const auto n = rd.pod<std::uint64_t>();
            for (std::uint64_t i = 0; i < n; ++i) {
                const bool first = renamed.insert(rd.pod<std::uint64_t>()).second;
                if (q == rank) keep_mine.push_back(first);
            }
        }
        if (!team_failure.empty()) throw team_error(team_failure);
        n_fp = sums[0];
        n_buckets = sums[1];
        n_cand = sums[2], n_conf = sums[3], n_dec = sums[4], n_ci = sums[5], n_co = sums[6];
        // Each process rebuilds the pairs it keeps; every process reads them all.
        byte_writer pw;
        std::size_t at = 0;
        for (auto& b : per_bucket) {
            for (auto& k : b)
                if (keep_mine[at++])
                    write_pair(pw, pair{materialize(e, e.graphs[k.a], o), materialize(e, e.graphs[k.b], o), std::move(k.perm)});
            std::vector<kept>().swap(b);
        }
        for (auto& bytes : team->all_gather(pw.out)) {
            byte_reader rd{bytes};
            while (!rd.in.empty()) keep(read_pair(rd, o));
            std::string().swap(bytes);
        }
    }
    st.fingerprints += n_fp;
    st.buckets += n_buckets;
    st.candidates += n_cand;
    st.confirmed += n_conf;
    st.after_decomposition += n_dec;
    st.after_common_inputs += n_ci;
    st.after_common_outputs += n_co;
    st.after_renaming += renamed_kept;
    st.with_direction += ps.size();
    if (progress) progress("rename", 1, 1);
    return ps;
}

}  // namespace tsopt::gen
