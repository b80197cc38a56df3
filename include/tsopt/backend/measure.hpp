#pragma once
// Timing helpers shared by the measuring backends (dnnl, cudnn): the median,
// the adaptive repetition loop of measure(), the graph a single node is
// measured in, and pick_fastest's on-board verification with interleaved
// timing rounds. Each backend supplies how it runs and times (a wall clock
// around a oneDNN stream, CUDA events around a stream); nothing here calls a
// library.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "tsopt/core/graph.hpp"
#include "tsopt/core/tensor.hpp"

namespace tsopt::backend {

// The median of v (the mean of the middle two for an even count); 0 when empty.
inline double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    std::size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// The smallest of v (0 when empty). Per-operator timings use it: on a shared
// machine a round is only ever slowed down (a descheduled thread, another
// process's cache traffic), so the minimum is the estimate least disturbed by
// load; a median of a few rounds follows whatever the load was meanwhile.
inline double minimum(const std::vector<double>& v) { return v.empty() ? 0 : *std::min_element(v.begin(), v.end()); }

// Writes back and evicts [p, p + bytes) from every cache level, so the next
// read comes from memory. x86 only (clflush); elsewhere a no-op, and timings
// are then cache-hot.
inline void evict_from_cache(const void* p, std::size_t bytes) {
#if defined(__x86_64__) || defined(__i386__)
    const auto* c = static_cast<const char*>(p);
    for (std::size_t o = 0; o < bytes; o += 64) _mm_clflush(c + o);
    if (bytes) _mm_clflush(c + bytes - 1);
    _mm_mfence();
#else
    (void)p;
    (void)bytes;
#endif
}
inline constexpr bool can_evict_from_cache =
#if defined(__x86_64__) || defined(__i386__)
    true;
#else
    false;
#endif

// Cache sizes of the CPU this thread runs on, in bytes (0 where unknown):
// the L2 and the last level shared with it. Read from sysfs, which gives the
// slice a core actually shares (sysconf's L3 on a multi-die EPYC is the sum
// over every die).
struct cpu_caches {
    std::size_t l2 = 0, llc = 0;
};
inline cpu_caches detect_cpu_caches() {
    cpu_caches c;
    for (int idx = 0; idx < 8; ++idx) {
        const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(idx) + "/";
        std::ifstream level(dir + "level"), type(dir + "type"), size(dir + "size");
        int lv = 0;
        std::string ty, sz;
        if (!(level >> lv) || !(type >> ty) || !(size >> sz) || ty == "Instruction") continue;
        std::size_t bytes = 0;
        try {
            bytes = std::stoull(sz);
        } catch (...) {
            continue;
        }
        if (!sz.empty() && (sz.back() == 'K' || sz.back() == 'k')) bytes <<= 10;
        if (!sz.empty() && (sz.back() == 'M' || sz.back() == 'm')) bytes <<= 20;
        if (lv == 2) c.l2 = bytes;
        if (lv >= 2) c.llc = std::max(c.llc, bytes);
    }
    return c;
}

// Leaves [p, p + bytes) in the last-level cache but not in L1/L2: read it,
// then stream through `sweep` (twice the L2). On CPUs whose last level is a
// victim cache of L2 (AMD Zen) the lines land there; elsewhere it is
// inclusive and they stay. This is how a constant is found by an operator
// of a graph whose constants fit in the last level: the graph's previous
// inference left it there, and the operators since went through L2.
inline void leave_in_llc(const void* p, std::size_t bytes, std::vector<char>& sweep) {
    const auto* c = static_cast<const volatile char*>(p);
    char acc = 0;
    for (std::size_t o = 0; o < bytes; o += 64) acc = static_cast<char>(acc ^ c[o]);
    for (std::size_t o = 0; o < sweep.size(); o += 64) sweep[o] = static_cast<char>(sweep[o] + 1 + acc);
}

// Bytes of the constants a graph reads at inference: weights and folded
// constant operators read by an operator that runs.
inline std::size_t constant_bytes(const graph& g, const std::vector<bool>& constant) {
    std::vector<bool> read(g.size(), false);
    for (std::size_t i = 0; i < g.size(); ++i)
        if (!constant[i] && (g.nodes[i].kind == node_kind::op || g.nodes[i].kind == node_kind::opaque))
            for (value v : g.nodes[i].inputs)
                if (constant[static_cast<std::size_t>(v.node)]) read[static_cast<std::size_t>(v.node)] = true;
    std::size_t bytes = 0;
    for (std::size_t i = 0; i < g.size(); ++i)
        if (read[i])
            for (const shape& s : g.nodes[i].shapes) bytes += static_cast<std::size_t>(s.elements()) * sizeof(float);
    return bytes;
}

// Calls round() (returning the ms it measured) at least o.min_reps and at
// most o.max_reps times, stopping once o.min_time_ms were measured in all;
// returns the times in order. `o` is a backend's options.
template <class Options, class Round>
std::vector<double> timed_rounds(const Options& o, Round&& round) {
    std::vector<double> t;
    double total = 0;
    while (static_cast<int>(t.size()) < o.max_reps && (static_cast<int>(t.size()) < o.min_reps || total < o.min_time_ms)) {
        t.push_back(round());
        total += t.back();
    }
    return t;
}

// Node i of g alone, as measure() times it: constant inputs stay weights
// (their data, or random data of their shape), the others become graph
// inputs; layouts are kept. The node is the last one of the result and all
// its outputs are graph outputs.
inline graph isolate(const graph& g, std::size_t i) {
    const node& n = g.nodes[i];
    graph h;
    auto constant = g.constant_mask();
    std::mt19937_64 rng(42);
    std::map<value, value> remap;
    for (value v : n.inputs) {
        if (remap.count(v)) continue;
        const node& src = g.at(v);
        if (src.kind == node_kind::weight) {
            node w = src;
            w.inputs.clear();
            h.nodes.push_back(std::move(w));
            remap[v] = {static_cast<std::int32_t>(h.nodes.size() - 1), 0};
        } else if (constant[static_cast<std::size_t>(v.node)]) {
            remap[v] = h.weight(src.name, g.shape_of(v), rng);
        } else {
            remap[v] = h.input(src.name + "." + std::to_string(v.output), g.shape_of(v));
        }
        h.nodes[static_cast<std::size_t>(remap[v].node)].out_layout = src.out_layout;
    }
    node copy = n;
    for (value& v : copy.inputs) v = remap[v];
    h.nodes.push_back(std::move(copy));
    const auto id = static_cast<std::int32_t>(h.nodes.size() - 1);
    for (int o = 0; o < h.nodes.back().num_outputs(); ++o) h.mark_output({id, o});
    return h;
}

// A hash of what g computes that is the same in every run of the program:
// structure, parameters, layouts, names of inputs, shapes and weight values
// (graph::structural_hash names weights by address). Keys pick_fastest's
// reuse of timings across runs.
inline std::uint64_t content_hash(const graph& g) { return g.hash_of_outputs(graph::weights_by::content); }

// What pick_fastest returns.
struct pick_result {
    std::size_t best = 0;
    std::vector<double> ms;      // median end-to-end time per candidate (+inf when rejected)
    std::vector<double> error;   // max relative error of its outputs vs candidate 0
    std::vector<bool> rejected;  // outputs disagreed with candidate 0 beyond verify_tolerance
    // Candidate 0's outputs on the device: what a caller checks against the
    // operators' definitions (the other candidates were checked against them).
    std::vector<tensor<float>> outputs;
    // Candidate c won enough of the rounds against candidate 0
    // (confirmed_against_original; candidate 0 itself: true). Only a
    // confirmed candidate can be chosen over candidate 0.
    std::vector<bool> confirmed;
    std::vector<int> faster_rounds;  // rounds in which c ran faster than candidate 0 (as timed now, or when first timed)
    int rounds = 0;                  // timed rounds behind ms (those of the earlier run when reused)
    bool reused = false;             // ms are an earlier run's times of the same candidates (nothing timed)
};

// An earlier run's timing of one candidate (pick_fastest's measurement cache).
struct known_timing {
    double ms = 0;
    int faster_rounds = 0, rounds = 0;
};

// A candidate replaces candidate 0 (the original) only when it beat it in
// enough of the paired rounds: a one-sided sign test, two equally fast graphs
// each winning a round with probability 1/2. Each round times every
// candidate back to back, so load that drifts between rounds moves both
// times of a pair alike, and a faster median alone is not evidence: on the
// loud 2-vCPU machine a SqueezeNet candidate whose median was 0.2 % below the
// original's was written and then ran 10 % slower. A fixed share (3/4 of the
// rounds, before) let chance decide where the budget left few rounds: 3 wins
// of 3 rounds, 12.5 % for equal graphs, wrote an SRU model's candidate that
// then ran 9 % slower. The candidates are tested together (Holm's step-down,
// confirmed_against_original), so the chance that any candidate no faster
// than the original replaces it stays at confirm_level however many are
// timed; tested one by one at 5 % each, one of four such candidates would
// pass up to 1 - 0.95^4 = 19 % of the time (8 % at 20 rounds, where 15 wins
// happen 2.1 % of the time).
inline constexpr double confirm_level = 0.05;

// P(X = k) for X ~ Binomial(rounds, 1/2): the terms of the sign test's tail.
struct fair_binomial {
    double n, log_n_factorial, log_total;
    explicit fair_binomial(int rounds) : n(rounds), log_n_factorial(std::lgamma(n + 1)), log_total(n * std::log(2.0)) {}
    double operator()(int k) const { return std::exp(log_n_factorial - std::lgamma(k + 1.0) - std::lgamma(n - k + 1) - log_total); }
};

// P(X >= wins) for X ~ Binomial(rounds, 1/2): how often an equally fast
// candidate wins at least that many of the rounds by chance.
inline double sign_test_p(int wins, int rounds) {
    if (wins <= 0) return 1;
    if (wins > rounds) return 0;
    const fair_binomial p(rounds);
    double tail = 0;
    for (int k = rounds; k >= wins; --k) tail += p(k);
    return std::min(tail, 1.0);
}

// The fewest of `rounds` rounds a candidate must win for the sign test at
// `level`: rounds + 1 when no count of wins is enough. At 5 %: 5 of 5,
// 9 of 10, 15 of 20 (--reps' default); at 1.25 % (Holm's first step over
// four candidates) 7 of 7, 9 of 10, 16 of 20.
inline int wins_needed(int rounds, double level = confirm_level) {
    if (rounds <= 0) return 1;
    // sign_test_p's sum, term by term from `rounds` wins down.
    const fair_binomial p(rounds);
    double tail = 0;
    for (int k = rounds; k >= 0; --k)
        if ((tail += p(k)) > level) return k + 1;
    return 0;
}

// The fewest rounds in which one of `contenders` candidates can be
// confirmed (winning every round: 2^-rounds at most Holm's first level,
// confirm_level / contenders): 5 for one, 6 for two or three, 7 for four to
// six.
inline constexpr int rounds_to_confirm(std::size_t contenders) {
    const double level = confirm_level / static_cast<double>(std::max<std::size_t>(contenders, 1));
    int rounds = 0;
    for (double p = 1; p > level; p /= 2) ++rounds;
    return rounds;
}
inline constexpr int min_pick_rounds = rounds_to_confirm(1);

// Which candidates won enough rounds against candidate 0 to replace it,
// tested together by Holm's step-down procedure: the m contenders (those not
// `rejected`; candidate 0 is not one) sorted by rounds won, most first, the
// i-th (from 0) confirmed when its sign test's p-value is at most
// confirm_level / (m - i) and every one before it was confirmed. The chance
// that any candidate no faster than the original is confirmed is at most
// confirm_level whatever m is (Holm 1979), and every candidate the plain
// split (each at confirm_level / m) would confirm is confirmed.
// Candidate 0 is always "confirmed" (it needs no test).
inline std::vector<bool> confirmed_against_original(std::span<const int> faster_rounds, int rounds,
                                                    const std::vector<bool>& rejected) {
    std::vector<bool> confirmed(faster_rounds.size(), false);
    if (confirmed.empty()) return confirmed;
    confirmed[0] = true;
    std::vector<std::size_t> contenders;
    for (std::size_t c = 1; c < faster_rounds.size(); ++c)
        if (c >= rejected.size() || !rejected[c]) contenders.push_back(c);
    std::stable_sort(contenders.begin(), contenders.end(),
                     [&](std::size_t a, std::size_t b) { return faster_rounds[a] > faster_rounds[b]; });
    for (std::size_t i = 0; i < contenders.size() && rounds > 0; ++i) {
        const double level = confirm_level / static_cast<double>(contenders.size() - i);
        if (sign_test_p(faster_rounds[contenders[i]], rounds) > level) break;
        confirmed[contenders[i]] = true;
    }
    return confirmed;
}

// AutoGraph's on-board verification over n candidates: outputs(c) runs
// candidate c once and returns its outputs (candidates are visited in order,
// so c == 0 comes first); a candidate whose outputs differ from candidate 0's
// by more than `tolerance` (relative error) is rejected. The others run
// `warmup` untimed interleaved rounds (run(c)), then settle() (waits for
// pending work), then max(reps, 1) interleaved rounds of an untimed run and a
// timed one (time(c): ms of one run), so drifting machine load hits all
// alike; the fastest median among candidate 0 and the candidates confirmed
// against it (confirmed_against_original) wins. `known`: the candidates'
// timings from an earlier run of the same set (one per candidate): when every
// accepted candidate has one, nothing is timed and they decide, so the same
// candidates give the same choice whatever the machine's load now.
// `deadline`: no round starts that would end after it, once the rounds in
// which one of the candidates not rejected can be confirmed are done
// (rounds_to_confirm; compiling the candidates' plans, which no estimate
// made before it can price, came on top of --budget's timing share:
// NASNet-A's five plans); r.rounds says how many ran.
template <class Outputs, class Run, class Settle, class Time>
pick_result verify_and_time(std::size_t n, int warmup, int reps, double tolerance, Outputs&& outputs, Run&& run,
                            Settle&& settle, Time&& time, std::span<const std::optional<known_timing>> known = {},
                            std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max()) {
    pick_result r;
    for (std::size_t c = 0; c < n; ++c) {
        auto out = outputs(c);
        double e = 0;
        if (c == 0) r.outputs = std::move(out);
        else if (out.size() != r.outputs.size()) e = 1e300;
        else
            for (std::size_t k = 0; k < out.size(); ++k) e = std::max(e, relative_error(out[k], r.outputs[k]));
        r.error.push_back(e);
        r.rejected.push_back(!(e <= tolerance));
    }
    auto choose = [&r, n] {
        r.confirmed = confirmed_against_original(r.faster_rounds, r.rounds, r.rejected);
        for (std::size_t c = 1; c < n; ++c)
            if (r.confirmed[c] && r.ms[c] < r.ms[r.best]) r.best = c;
    };
    bool reuse = known.size() == n && known[0].has_value();
    for (std::size_t c = 0; reuse && c < n; ++c)
        reuse = r.rejected[c] || (known[c].has_value() && known[c]->rounds == known[0]->rounds);
    if (reuse) {
        r.reused = true;
        r.rounds = known[0]->rounds;
        for (std::size_t c = 0; c < n; ++c) {
            r.ms.push_back(r.rejected[c] ? std::numeric_limits<double>::infinity() : known[c]->ms);
            r.faster_rounds.push_back(r.rejected[c] ? 0 : known[c]->faster_rounds);
        }
        choose();
        return r;
    }
    for (int w = 0; w < warmup; ++w)
        for (std::size_t c = 0; c < n; ++c)
            if (!r.rejected[c]) run(c);
    settle();
    std::vector<std::vector<double>> t(n);
    // Each timed run directly follows an untimed run of the same candidate:
    // steady-state inference, with the constants where the previous
    // inference left them (the last-level cache, for a model whose weights
    // fit), as an engine running one model sees. Timed right after another
    // candidate, whose own weights had evicted them, a weight-bound model
    // (NasRNN) measured 1.6x slower than it runs.
    const int wanted = std::max(reps, 1);
    std::size_t contenders = 0;
    for (std::size_t c = 1; c < n; ++c) contenders += !r.rejected[c];
    const int at_least = std::min(rounds_to_confirm(contenders), wanted);
    r.rounds = 0;
    for (const auto timed_from = std::chrono::steady_clock::now(); r.rounds < wanted; ++r.rounds) {
        const auto now = std::chrono::steady_clock::now();
        if (r.rounds >= at_least && deadline != std::chrono::steady_clock::time_point::max() &&
            now + (now - timed_from) / r.rounds > deadline)  // another round, as long as the mean
            break;
        for (std::size_t c = 0; c < n; ++c)
            if (!r.rejected[c]) {
                run(c);
                settle();
                t[c].push_back(time(c));
            }
    }
    for (std::size_t c = 0; c < n; ++c) {
        r.ms.push_back(r.rejected[c] ? std::numeric_limits<double>::infinity() : median(t[c]));
        int wins = 0;
        for (std::size_t k = 0; k < t[c].size() && c > 0; ++k) wins += t[c][k] < t[0][k];
        r.faster_rounds.push_back(wins);
    }
    choose();
    return r;
}

}  // namespace tsopt::backend
