#pragma once
// tsopt::backend::dnnl — the oneDNN CPU backend.
//
//   backend::dnnl b;                          // or dnnl({.cache_dir = "..."})
//   auto out = b.execute(g, inputs);          // compiled once per graph, then reused
//   double ms = b.measure(g, node);           // minimum ms of one node (cold weights), cached on disk
//   auto steps = b.profile(g, inputs);        // where the end-to-end time goes, step by step
//   double e2e = b.time_end_to_end(g, inputs, 20);
//   auto pick = b.pick_fastest(candidates, inputs);  // on-board verification of top-k
//
// Compilation (dnnl_impl::compile) walks the graph in topological order:
// weights are read in place, other constant operators are folded once with
// the reference semantics, every other node is lowered by its file in this
// folder (conv2d.hpp, matmul.hpp, pool.hpp, eltwise.hpp, binary.hpp,
// concat.hpp, reorder.hpp, softmax.hpp). A configuration oneDNN refuses, and
// any opaque node, runs on the reference semantics (or a registered
// opaque_impls entry) with a one-time warning naming the node; an opaque node
// without an implementation is an error naming it. Then buffers are planned
// by liveness (plan_stats: planned vs naive bytes).
//
// Not thread-safe: one backend object per thread.
#include <chrono>
#include <limits>

#include "tsopt/backend/arena.hpp"
#include "tsopt/backend/dnnl/binary.hpp"
#include "tsopt/backend/dnnl/cache.hpp"
#include "tsopt/backend/dnnl/concat.hpp"
#include "tsopt/backend/dnnl/conv2d.hpp"
#include "tsopt/backend/dnnl/denormals.hpp"
#include "tsopt/backend/dnnl/eltwise.hpp"
#include "tsopt/backend/dnnl/matmul.hpp"
#include "tsopt/backend/dnnl/pool.hpp"
#include "tsopt/backend/dnnl/reorder.hpp"
#include "tsopt/backend/dnnl/softmax.hpp"
#include "tsopt/backend/measure.hpp"
#include "tsopt/backend/plan_cache.hpp"
#include "tsopt/backend/reference/executor.hpp"

namespace tsopt::backend {
namespace dnnl_impl {

inline void lower_node(lowering& L, std::size_t i) {
    if (L.absorbed[i]) return;  // runs inside its producer's primitive
    const node& n = L.at(i);
    auto m = L.checkpoint();
    // Opaque operators and an engine's own ones: what their type registered.
    if (const auto type = registered_type(n)) {
        auto it = L.native.find(*type);
        bool done = false;
        try {
            if (auto f = L.eltwise_of(i)) {
                // A form covering nodes after this one (GELU) ends at the last
                // of them, so no chain after this node's own value is fused.
                tref y = eltwise_step(L, i, L.in(i, 0), f->alg, f->alpha, f->beta, f->what, f->covers.empty());
                L.set(i, 0, y);
                for (std::size_t c : f->covers) L.absorb(c, i, y);
                return;
            }
        } catch (const dn::error&) {
            L.rollback(m, i);
        }
        if (it != L.native.end()) try {
                done = it->second(L, i);
            } catch (const dn::error&) {
            } catch (const refused&) {
            }
        if (!done) {
            L.rollback(m, i);
            L.fallback(i, n.kind == node_kind::opaque ? "opaque operator" : "an engine's operator with no native lowering");
        }
        return;
    }
    using K = spec::op_kind;
    try {
        switch (n.op) {
            case K::conv2d: return lower_conv2d(L, i);
            case K::matmul: return lower_matmul(L, i);
            case K::avgpool:
            case K::maxpool: return lower_pool(L, i);
            case K::relu: return lower_unary(L, i, 1);
            case K::sigmoid: return lower_unary(L, i, 2);
            case K::tanh: return lower_unary(L, i, 3);
            case K::ewadd:
            case K::ewmul: return lower_binary(L, i);
            case K::smul:
                if (leave_negation_to_sum(L, i)) return;
                if (!lower_smul_constant(L, i)) lower_smul_runtime(L, i);
                return;
            case K::batchnorm: return lower_batchnorm(L, i);
            case K::concat: return lower_concat(L, i);
            case K::split: return lower_split(L, i);
            case K::transpose: return lower_transpose(L, i);
            case K::enlarge: return lower_enlarge(L, i);
            case K::pad:
                if (!lower_pad_into_subsample(L, i) && !lower_pad_into_avgpool(L, i)) lower_pad(L, i);
                return;
            case K::reshape: return lower_reshape(L, i);
            case K::slice: return lower_slice(L, i);
            case K::overwrite: return lower_overwrite(L, i);
            case K::reorder: return lower_layout_reorder(L, i);
            case K::softmax: return lower_softmax(L, i);
            default: throw refused("no oneDNN lowering for this operator");  // constants are folded before
        }
    } catch (const dn::error& e) {
        L.rollback(m, i);
        compute_left_negations(L, i);
        L.fallback(i, std::string("oneDNN refused this configuration (") + e.what() + ")");
    } catch (const refused& e) {
        L.rollback(m, i);
        compute_left_negations(L, i);
        L.fallback(i, e.what());
    }
}

inline std::unique_ptr<plan> compile(const graph& given, const dn::engine& eng, const opaque_map& opaque,
                                     const opaque_lowering_map& native = {}, const opaque_eltwise_map& elementwise = {},
                                     shared_conversions* shared = nullptr, lowering_options lo = {}) {
    given.validate();
    // Explicit layout conversions are left to the readers (ids unchanged:
    // steps still name the given graph's nodes).
    const std::optional<graph> bypassed = bypass_layout_conversions(given);
    const graph& g = bypassed ? *bypassed : given;
    auto p = std::make_unique<plan>(eng);
    lowering L(*p, g, opaque, native, elementwise, shared, lo);
    const std::vector<bool> live = live_nodes(g);
    // A node nothing live reads (a bypassed conversion) keeps no operator
    // from fusing what it read.
    for (auto& readers : L.consumers)
        std::erase_if(readers, [&](const auto& r) { return !live[static_cast<std::size_t>(r.first)]; });
    // Weights and graph inputs first, so a node may read an operand that
    // comes later in topological order (a conv fusing a bias added after it,
    // a product fusing an attention mask).
    for (std::size_t i = 0; i < g.size(); ++i)
        if (live[i] && g.nodes[i].kind == node_kind::weight) {
            L.cvals[i] = {g.nodes[i].data};
            L.set(i, 0, L.constant_buffer(g.nodes[i].data));
        } else if (g.nodes[i].kind == node_kind::input)
            L.set(i, 0, L.fresh(plain_md(to_dims(g.nodes[i].shapes[0]))));
    // Constants and inputs first, then each operator after what it reads,
    // and after the operands its post-op chain fuses (graph::run_order).
    std::vector<bool> settled = L.constant;
    for (value v : g.inputs()) settled[static_cast<std::size_t>(v.node)] = true;
    const auto order = g.run_order(settled, [&](std::size_t i, const std::vector<bool>& placed) {
        return live[i] ? chain_operand_awaited(L, i, placed,
                                               [&](std::size_t h) {
                                                   return !g.nodes[h].is_op(spec::op_kind::conv2d) ||
                                                          conv2d_takes_full_size_operand(L, h);
                                               })
                       : std::nullopt;
    });
    for (std::size_t i : order) {
        const node& n = g.nodes[i];
        if (!live[i] || n.kind == node_kind::input) continue;
        if (n.kind == node_kind::weight) {
            continue;
        } else if (L.constant[i]) {
            std::vector<const tensor<float>*> args;
            for (value v : n.inputs) args.push_back(L.cvals[static_cast<std::size_t>(v.node)][static_cast<std::size_t>(v.output)].get());
            if (n.kind == node_kind::op) {
                auto res = spec::evaluate<float>(n.op, n.params, args);
                for (std::size_t o = 0; o < res.size(); ++o) {
                    L.cvals[i].push_back(std::make_shared<const tensor<float>>(std::move(res[o])));
                    L.set(i, static_cast<int>(o), L.constant_buffer(L.cvals[i].back()));
                }
            }
        } else {
            lower_node(L, i);
        }
    }
    for (value v : g.inputs()) p->inputs.push_back(L.vals[static_cast<std::size_t>(v.node)][0]);
    for (value v : g.outputs) {
        tref r = L.vals[static_cast<std::size_t>(v.node)][static_cast<std::size_t>(v.output)];
        p->outputs.push_back({L.plain(r, to_dims(g.shape_of(v)), static_cast<std::size_t>(v.node)), g.shape_of(v)});
    }
    p->finalize();
    return p;
}

}  // namespace dnnl_impl

class dnnl {
public:
    static constexpr std::string_view name = "dnnl";

    struct options {
        // Where measured times persist. Empty: $TSOPT_CACHE_DIR, else
        // $XDG_CACHE_HOME/tsopt, else ~/.cache/tsopt.
        std::filesystem::path cache_dir{};
        bool persist = true;        // false: measurements live in memory only
        int warmup = 3;             // untimed runs before timing
        int min_reps = 7;           // timed runs at least ...
        int max_reps = 200;         // ... and at most,
        double min_time_ms = 5;     // stopping once this much time was measured
        // measure() evicts the operator's constant inputs (weights, in the
        // layout its primitive reads) from the caches before every timed
        // round. End to end, a weight is read once per inference after the
        // other operators' data went through the caches, so it comes from
        // memory; timed cache-hot, weight-heavy operators (batch-1 matmuls)
        // look several times cheaper than they run, and fusions that grow a
        // weight are mispriced. Activations stay warm, as they are when the
        // producer ran just before.
        bool cold_weights = true;
        // ... except in a graph whose constants fit in `llc_share` of the
        // last-level cache: inference after inference they stay there, so
        // its operators' weights are timed as found in that cache and not in
        // L1/L2 (leave_in_llc). Measured on NasRNN (16 MB of weights, a 32 MB
        // L3): a [1,512]x[512,512] matmul runs in 0.0098 ms in the plan,
        // 0.0093 timed so, 0.024 with its weight evicted; cold pricing made
        // fusing such matmuls look cheaper than it runs. 0: always cold.
        double llc_share = 0.75;
        std::size_t max_plans = 32; // compiled plans kept for execute()
        double verify_tolerance = 1e-2;  // pick_fastest: max relative error vs candidate 0
        // 3x3 stride-1 convolutions with enough channels by Winograd's minimal
        // filtering (dnnl/winograd.hpp): about 2x faster than oneDNN's direct
        // kernels where it applies, results equal up to rounding.
        bool winograd = true;
        // Grouped convolutions with 2 or 4 channels per group (ResNeXt) by
        // tsopt's own direct kernel (dnnl/grouped_conv.hpp): automatic takes
        // it on CPUs with AVX2 and without AVX-512, where oneDNN 3.2 runs them
        // as im2col + gemm, 3.5-7x slower; always / never force the choice.
        dnnl_impl::kernel_use small_groups = dnnl_impl::kernel_use::automatic;
        // Denormal floats flushed to zero while the backend runs (FTZ/DAZ on
        // its threads for each call, the caller's mode restored after:
        // dnnl/denormals.hpp). On: as TensorFlow does; values below 1.2e-38
        // become 0, and no FMA stalls on a microcode assist.
        bool flush_denormals = true;
        // Where how an operator runs best depends on the CPU (the form of a
        // grouped convolution reading channels-last: dnnl/grouped_conv_choice.hpp),
        // time the ways once per configuration and machine, keep the times in
        // the measurement cache, and compile the fastest from then on; false:
        // fixed rules decide.
        bool timed_choices = true;
    };

    // Implementations for opaque operators, by type name (as in the reference backend).
    dnnl_impl::opaque_map opaque_impls;
    // Native oneDNN lowerings of opaque types (onnx_ops.hpp installs the
    // ONNX ones); a node whose configuration they refuse runs opaque_impls.
    dnnl_impl::opaque_lowering_map opaque_lowerings;
    dnnl_impl::opaque_eltwise_map opaque_eltwise;  // opaque types that are one eltwise (fusable as post-ops)
    std::size_t plan_compiles = 0, plan_reuses = 0;

    dnnl() : dnnl(options{}) {}
    explicit dnnl(options o)
        : opt_(std::move(o)),
          eng_(::dnnl::engine::kind::cpu, 0),
          cache_(name, measuring_machine(),
                 opt_.persist ? dnnl_impl::measure_cache::file_for(opt_.cache_dir.empty() ? default_cache_dir() : opt_.cache_dir,
                                                                   name, measuring_machine())
                              : std::filesystem::path{}) {}

    // A fresh plan for g (execute() keeps and reuses them; this does not).
    // Converted weights are shared with the other plans of this backend
    // (dnnl_impl::shared_conversions).
    std::shared_ptr<dnnl_impl::plan> compile(const graph& g) const {
        dnnl_impl::lowering_options lo{.winograd = opt_.winograd, .small_groups = opt_.small_groups};
        if (opt_.timed_choices)
            lo.time_choices = [this](const std::string& key, std::span<const std::string> names, const std::function<void(std::size_t)>& run) {
                return time_choice(key, names, run);
            };
        return dnnl_impl::compile(g, eng_, opaque_impls, opaque_lowerings, opaque_eltwise, &conversions_, std::move(lo));
    }

    // A way replaces the first one only when this much faster: closer times
    // are within what these machines' noise moves a minimum of rounds.
    static constexpr double choice_margin = 0.03;
    static constexpr int choice_rounds = 20;  // at least, each way

    // The lowering's timer (dnnl_impl::lowering_timer): each way not in the
    // measurement cache yet runs alone, the ways in alternation so that load
    // drift hits them alike, the minimum over rounds kept in the cache under
    // `key` + the way's name. The index of the fastest, 0 unless another is
    // faster by choice_margin.
    std::size_t time_choice(const std::string& key, std::span<const std::string> names, const std::function<void(std::size_t)>& run) const {
        auto key_of = [&](std::size_t k) {
            std::string s = key + "|way=" + names[k];
            for (char& c : s)
                if (c == '\t' || c == '\n' || c == '\r') c = ' ';
            return s;
        };
        std::vector<double> best(names.size(), std::numeric_limits<double>::infinity());
        std::vector<std::size_t> missing;
        for (std::size_t k = 0; k < names.size(); ++k)
            if (auto hit = cache_.find(key_of(k))) best[k] = *hit;
            else missing.push_back(k);
        if (!missing.empty()) {
            dnnl_impl::denormals_flushed mode(opt_.flush_denormals);
            for (int w = 0; w < opt_.warmup; ++w)
                for (std::size_t k : missing) run(k);
            double total = 0;
            for (int r = 0; r < opt_.max_reps && (r < std::max(opt_.min_reps, choice_rounds) || total < opt_.min_time_ms); ++r)
                for (std::size_t k : missing) {
                    const double t = timed([&] { run(k); });
                    best[k] = std::min(best[k], t);
                    total += t;
                }
            for (std::size_t k : missing) cache_.put(key_of(k), best[k]);
        }
        std::size_t pick = 0;
        for (std::size_t k = 1; k < names.size(); ++k)
            if (best[k] < best[pick] && best[k] < best[0] * (1 - choice_margin)) pick = k;
        return pick;
    }

    std::vector<tensor<float>> execute(const graph& g, std::span<const tensor<float>> in) {
        check_inputs(g, in);
        dnnl_impl::denormals_flushed mode(opt_.flush_denormals);
        return plan_for(g).run(in);
    }

    // Frees the plans execute() kept. Each holds the model's weights in
    // oneDNN's layouts, so a caller done with a set of graphs (the candidates
    // after pick_fastest) releases them before running others: ResNet-50's
    // `tsopt optimize` peaked at 1.1 GB keeping six.
    void drop_plans() { plans_.clear(); }

    // Memory planning and step counts of g's plan.
    dnnl_impl::plan_stats stats(const graph& g) { return plan_for(g).stats; }

    // Median wall time in ms of whole executions (input copy + every step).
    double time_end_to_end(const graph& g, std::span<const tensor<float>> in, int reps = 10) {
        check_inputs(g, in);
        dnnl_impl::denormals_flushed mode(opt_.flush_denormals);
        dnnl_impl::plan& p = plan_for(g);
        for (int w = 0; w < opt_.warmup; ++w) p.run(in);
        std::vector<double> t;
        for (int r = 0; r < std::max(reps, 1); ++r) t.push_back(timed([&] { p.load_inputs(in); p.run_steps(); }));
        return median(t);
    }

    // Minimum ms over timed rounds of node `i` of g alone: its configuration
    // (parameters, input shapes and layouts, constant inputs) compiled in
    // isolation, its own steps timed (not the layout conversions around it),
    // with its weights evicted from the caches first (options::cold_weights),
    // or left in the last-level cache where g's constants fit there
    // (options::llc_share).
    // Inputs, weights and constant-folded nodes cost 0. Cached in memory and
    // on disk (the file is keyed by the timing method too).
    double measure(const graph& g, std::size_t i) {
        if (i >= g.size()) throw error("measure: node " + std::to_string(i) + " does not exist (graph has " + std::to_string(g.size()) + ")");
        const node& n = g.nodes[i];
        if (n.kind == node_kind::input || n.kind == node_kind::weight) return 0;
        auto constant = g.constant_mask();
        if (constant[i]) return 0;
        const bool llc_warm = opt_.cold_weights && can_evict_from_cache &&
                              (model_fits_llc_ ? *model_fits_llc_ : constants_fit_llc(constant_bytes(g, constant)));
        // Both pricings of one configuration can live in one cache file.
        std::string key = measure_key(g, i, constant) + (llc_warm ? "|weights=llc" : "");
        if (auto hit = cache_.find(key)) return *hit;
        dnnl_impl::denormals_flushed mode(opt_.flush_denormals);
        graph h = isolate(g, i);
        const auto id = static_cast<std::int32_t>(h.nodes.size() - 1);  // the node is the last one
        auto p = compile(h);
        p->run(random_inputs(h, 7));
        std::vector<dnnl_impl::step*> mine;
        for (auto& s : p->steps)
            if (s.node == id && !s.conversion) mine.push_back(&s);
        std::vector<std::pair<const float*, std::size_t>> weights;
        for (auto* s : mine)
            for (auto& [arg, r] : s->args)
                if (p->bufs[static_cast<std::size_t>(r.buf)].persistent)
                    weights.push_back({p->ptr(r), p->bufs[static_cast<std::size_t>(r.buf)].bytes});
        auto body = [&] {
            for (auto* s : mine) p->run_step(*s);
            p->strm.wait();
        };
        std::vector<char> sweep(llc_warm ? 2 * std::max<std::size_t>(caches_.l2, 1 << 20) : 0);
        auto evict = [&] {
            if (!opt_.cold_weights) return;
            for (auto [w, bytes] : weights) {
                if (llc_warm) leave_in_llc(w, bytes, sweep);
                else evict_from_cache(w, bytes);
            }
        };
        for (int w = 0; w < opt_.warmup; ++w) body();
        double ms = minimum(timed_rounds(opt_, [&] {
            evict();
            return timed(body);
        }));
        cache_.put(key, ms);
        return ms;
    }

    // From now on, price constants as they are found when `model` runs: in
    // the last-level cache if its constants fit in llc_share of it, else in
    // memory. A search measures operators inside parts of the model, whose
    // own constants would fit where the whole model's do not; without this
    // call each measured graph decides for itself.
    void price_for_model(const graph& model) { model_fits_llc_ = constants_fit_llc(constant_bytes(model, model.constant_mask())); }
    // Whether a graph with `bytes` of constants keeps them in the last-level cache.
    bool constants_fit_llc(std::size_t bytes) const {
        return caches_.llc > 0 && static_cast<double>(bytes) <= opt_.llc_share * static_cast<double>(caches_.llc);
    }

    // Where g's end-to-end time goes: every step of its plan timed on its own
    // (the stream waited after each), over `reps` whole runs on `in`; a
    // step's figure is its minimum over the runs, which a descheduled thread
    // on a loaded machine inflates least. Steps appear in execution order.
    struct step_time {
        std::int32_t node = -1;   // graph node the step belongs to
        std::string what;         // the step's description ("matmul", "reorder", ...)
        bool conversion = false;  // a layout conversion feeding the node
        double ms = 0;
        std::string impl;  // oneDNN's implementation (e.g. "brg:avx2"); empty for custom steps
    };
    std::vector<step_time> profile(const graph& g, std::span<const tensor<float>> in, int reps = 10) {
        check_inputs(g, in);
        dnnl_impl::denormals_flushed mode(opt_.flush_denormals);
        dnnl_impl::plan& p = plan_for(g);
        for (int w = 0; w < opt_.warmup; ++w) p.run(in);
        std::vector<step_time> r;
        for (auto& s : p.steps) r.push_back({s.node, s.what, s.conversion, std::numeric_limits<double>::infinity(), s.impl});
        for (int k = 0; k < std::max(reps, 1); ++k) {
            p.load_inputs(in);
            for (std::size_t s = 0; s < p.steps.size(); ++s)
                r[s].ms = std::min(r[s].ms, timed([&] {
                                       p.run_step(p.steps[s]);
                                       p.strm.wait();
                                   }));
        }
        return r;
    }

    using pick_result = backend::pick_result;
    // AutoGraph's on-board verification: runs each candidate on `in`, rejects
    // those whose outputs disagree with candidate 0 (the original, for
    // `tsopt optimize`), times the others end to end in interleaved rounds (so
    // drifting machine load hits all alike) and returns the fastest of
    // candidate 0 and those that beat it in enough rounds (confirmed_against_original). The
    // times of a candidate set are kept in the measurement cache (keyed by
    // the candidates' content hashes and the reps): the same set, in a later
    // run too, is verified again but not re-timed, so it gets the same choice.
    pick_result pick_fastest(std::span<const graph> candidates, std::span<const tensor<float>> in, int reps = 10,
                             std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max()) {
        if (candidates.empty()) throw error("pick_fastest: no candidates");
        std::uint64_t set = static_cast<std::uint64_t>(reps);
        for (const graph& g : candidates) set = hashing::combine(set, content_hash(g));
        // Per candidate: its median, and the rounds it won against candidate 0 out of how many.
        auto key = [&](std::size_t c, const char* what) { return "pick|" + hashing::hex(set) + "|" + std::to_string(c) + what; };
        std::vector<std::optional<known_timing>> known;
        for (std::size_t c = 0; c < candidates.size(); ++c) {
            const auto ms = cache_.find(key(c, "")), wins = cache_.find(key(c, "|faster")), rounds = cache_.find(key(c, "|rounds"));
            known.push_back(ms && wins && rounds ? std::optional<known_timing>(known_timing{*ms, static_cast<int>(*wins), static_cast<int>(*rounds)})
                                                 : std::nullopt);
        }
        std::vector<dnnl_impl::plan*> plans;
        dnnl_impl::denormals_flushed mode(opt_.flush_denormals);
        auto r = verify_and_time(
            candidates.size(), opt_.warmup, reps, opt_.verify_tolerance,
            [&](std::size_t c) {  // each candidate is compiled just before its verification run
                check_inputs(candidates[c], in);
                plans.push_back(&plan_for(candidates[c], candidates.size()));
                return plans.back()->run(in);
            },
            [&](std::size_t c) { plans[c]->run(in); }, [] {},
            [&](std::size_t c) { return timed([&] { plans[c]->load_inputs(in); plans[c]->run_steps(); }); }, known, deadline);
        for (std::size_t c = 0; c < candidates.size() && !r.reused; ++c)
            if (!r.rejected[c]) {
                cache_.put(key(c, ""), r.ms[c]);
                cache_.put(key(c, "|faster"), r.faster_rounds[c]);
                cache_.put(key(c, "|rounds"), r.rounds);
            }
        return r;
    }

    const dnnl_impl::measure_cache& measurements() const { return cache_; }
    const options& settings() const { return opt_; }

private:
    // The machine and how it was timed: times taken another way (median,
    // cache-hot) live in another file and are never mixed with these.
    std::string measuring_machine() const {
        return dnnl_impl::machine_id(name) + " | lowering " + std::to_string(dnnl_impl::lowering_revision) + (opt_.winograd ? "" : " without winograd") +
               (opt_.small_groups == dnnl_impl::kernel_use::automatic ? ""
                : opt_.small_groups == dnnl_impl::kernel_use::always ? " with small-group kernel"
                                                                       : " without small-group kernel") +
               (opt_.timed_choices ? "" : " without timed choices") +
               " | minimum of rounds" +
               (opt_.cold_weights && can_evict_from_cache ? ", cold weights" : ", cache-hot") +
               (opt_.flush_denormals && dnnl_impl::denormals_flushed::flushing() ? ", denormals flushed" : "");
    }

    template <class F>
    static double timed(F&& f) {
        auto t0 = std::chrono::steady_clock::now();
        f();
        return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }

    // Plans are keyed by the structural hash (which names weights by their
    // address; the plan holds them, so an address is not reused meanwhile)
    // together with every node's shapes.
    // `keep`: plans that must stay alive together (pick_fastest holds one per
    // candidate), so the cache never evicts below that.
    dnnl_impl::plan& plan_for(const graph& g, std::size_t keep = 0) {
        std::uint64_t key = plan_key(g, g.structural_hash());
        if (dnnl_impl::plan* p = plans_.find(key)) {
            ++plan_reuses;
            return *p;
        }
        dnnl_impl::plan& p = plans_.insert(key, compile(g), std::max(opt_.max_plans, keep));
        ++plan_compiles;
        return p;
    }

    options opt_;
    ::dnnl::engine eng_;
    mutable dnnl_impl::measure_cache cache_;  // compile() is const: it times choices into the cache (time_choice)
    cpu_caches caches_ = detect_cpu_caches();
    std::optional<bool> model_fits_llc_;  // price_for_model
    plan_cache<std::shared_ptr<dnnl_impl::plan>> plans_;
    mutable dnnl_impl::shared_conversions conversions_;  // compile() is const: a cache, not state
};

static_assert(measurer<dnnl>);

}  // namespace tsopt::backend
