#pragma once
// tsopt::backend::cudnn — the cuDNN/cuBLAS GPU backend, with AutoGraph's /
// Nimble's parallel runtime. Same public interface as backend::dnnl:
//
//   backend::cudnn b;                              // throws tsopt::error without a GPU
//   auto out = b.execute(g, inputs);               // compiled once per (graph, mode), then replayed
//   double ms = b.measure(g, node);                // median ms of one node (CUDA events), cached on disk
//   double e2e = b.time_end_to_end(g, inputs, 20); // median ms of whole replays (the golden metric)
//   auto pick = b.pick_fastest(candidates, inputs); // on-board verification of top-k
//
// Run modes (options::mode, or per call):
//   sequential          one stream, steps issued one by one
//   sequential_graph    one stream, captured once into a CUDA Graph, replayed
//   multi_stream        Nimble's stream assignment, events, issued eagerly
//   multi_stream_graph  the same captured into one CUDA Graph (the default)
//
// Layers: compile.hpp builds a host-only plan (lowering, stream schedule,
// memory plan; testable without a GPU), runtime.hpp instantiates it on the
// device. Inputs and outputs are copied per execute(); time_end_to_end
// times the device work only (inputs already resident), as TASO does.
// Numerics: exact fp32 by default (no TF32; options::allow_tf32).
//
// Not thread-safe: one backend object per thread.
#include "tsopt/backend/cudnn/cache.hpp"
#include "tsopt/backend/cudnn/runtime.hpp"
#include "tsopt/backend/measure.hpp"
#include "tsopt/backend/plan_cache.hpp"
#include "tsopt/backend/reference/executor.hpp"

namespace tsopt::backend {

enum class run_mode { sequential, sequential_graph, multi_stream, multi_stream_graph };

inline const char* to_string(run_mode m) {
    switch (m) {
        case run_mode::sequential: return "sequential";
        case run_mode::sequential_graph: return "sequential+graph";
        case run_mode::multi_stream: return "multi-stream";
        default: return "multi-stream+graph";
    }
}
inline bool is_multi_stream(run_mode m) { return m == run_mode::multi_stream || m == run_mode::multi_stream_graph; }
inline bool uses_graph(run_mode m) { return m == run_mode::sequential_graph || m == run_mode::multi_stream_graph; }

class cudnn {
public:
    static constexpr std::string_view name = "cudnn";

    struct options {
        // Where measured times persist. Empty: $TSOPT_CACHE_DIR, else
        // $XDG_CACHE_HOME/tsopt, else ~/.cache/tsopt.
        std::filesystem::path cache_dir{};
        bool persist = true;        // false: measurements live in memory only
        int warmup = 3;             // untimed runs before timing
        int min_reps = 7;           // timed rounds at least ...
        int max_reps = 200;         // ... and at most,
        double min_time_ms = 5;     // stopping once this much time was measured
        int launches_per_round = 10;  // measure(): launches between two events
        std::size_t max_plans = 16;   // device plans kept for execute()
        double verify_tolerance = 1e-2;  // pick_fastest: max relative error vs candidate 0
        run_mode mode = run_mode::multi_stream_graph;
        bool allow_tf32 = false;
        bool find_conv_algorithms = false;  // measured (cudnnFind...) instead of heuristic algorithms
        bool fuse_conv_relu = true;
        int device = 0;
    };

    // Implementations for opaque operators, by type name (as in the reference backend).
    cudnn_impl::opaque_map opaque_impls;
    std::size_t plan_compiles = 0, plan_reuses = 0;

    // True when a CUDA device is usable; otherwise unavailable_reason() says why.
    static bool available() { return cudnn_impl::device_count() > 0; }
    static std::string unavailable_reason() { return cudnn_impl::no_device_reason(); }

    // The host-only plan for g (no GPU needed): schedule, steps, buffers.
    static std::unique_ptr<cudnn_impl::plan> host_plan(const graph& g, run_mode m = run_mode::multi_stream_graph,
                                                      const cudnn_impl::opaque_map& opaque = {}) {
        return cudnn_impl::compile_plan(g, is_multi_stream(m), opaque);
    }

    cudnn() : cudnn(options{}) {}
    explicit cudnn(options o) : opt_(std::move(o)), machine_(init_device(opt_)), cache_(name, machine_, cache_file(opt_, machine_)) {}

    std::vector<tensor<float>> execute(const graph& g, std::span<const tensor<float>> in) { return execute(g, in, opt_.mode); }
    // Frees the plans execute() kept (device weights and buffers), as dnnl::drop_plans.
    void drop_plans() { plans_.clear(); }
    std::vector<tensor<float>> execute(const graph& g, std::span<const tensor<float>> in, run_mode m) {
        check_inputs(g, in);
        return plan_for(g, m).execute(in);
    }

    // Memory planning, step and stream counts of g's plan in mode m.
    cudnn_impl::plan_stats stats(const graph& g, run_mode m) { return plan_for(g, m).p->stats; }
    cudnn_impl::plan_stats stats(const graph& g) { return stats(g, opt_.mode); }

    // Median ms of whole runs (graph replays in the graph modes), timed with
    // CUDA events on the main stream, inputs already on the device.
    double time_end_to_end(const graph& g, std::span<const tensor<float>> in, int reps = 10) {
        return time_end_to_end(g, in, reps, opt_.mode);
    }
    double time_end_to_end(const graph& g, std::span<const tensor<float>> in, int reps, run_mode m) {
        check_inputs(g, in);
        auto& d = plan_for(g, m);
        d.load_inputs(in);
        for (int w = 0; w < opt_.warmup; ++w) d.run();
        d.sync("warm-up");
        timer t(d.main_stream());
        std::vector<double> ms;
        for (int r = 0; r < std::max(reps, 1); ++r) ms.push_back(t.time([&] { d.run(); }, [&] { d.sync("timed run"); }));
        return median(ms);
    }

    // Median ms of node i of g alone: its configuration (parameters, input
    // shapes and layouts, constant inputs) compiled in isolation on one
    // stream, its own steps (not layout conversions around it) launched
    // `launches_per_round` times between two CUDA events per round.
    // Inputs, weights and constant-folded nodes cost 0. Cached in memory and
    // on disk.
    double measure(const graph& g, std::size_t i) {
        if (i >= g.size())
            throw error("measure: node " + std::to_string(i) + " does not exist (graph has " + std::to_string(g.size()) + ")");
        const node& n = g.nodes[i];
        if (n.kind == node_kind::input || n.kind == node_kind::weight || g.constant_mask()[i]) return 0;
        std::string key = measure_key(g, i, g.constant_mask());
        if (auto hit = cache_.find(key)) return *hit;
        graph h = isolate(g, i);
        auto p = std::shared_ptr<const cudnn_impl::plan>(cudnn_impl::compile_plan(h, false, opaque_impls));
        cudnn_impl::device_plan d(p, device_settings(false));
        auto in = random_inputs(h, 7);
        d.execute(in);
        const int v = static_cast<int>(p->dag.node_of.size()) - 1;  // the node is the only (last) operator
        const int inner = std::max(opt_.launches_per_round, 1);
        auto body = [&] {
            for (int k = 0; k < inner; ++k) d.issue_vertex_on_main(v, false);
        };
        for (int w = 0; w < opt_.warmup; ++w) body();
        d.sync("measure warm-up");
        timer t(d.main_stream());
        std::vector<double> ms = timed_rounds(opt_, [&] { return t.time(body, [&] { d.sync("measure " + n.describe()); }); });
        for (double& x : ms) x /= inner;  // per launch
        double r = median(ms);
        cache_.put(key, r);
        return r;
    }

    using pick_result = backend::pick_result;
    // AutoGraph's on-board verification: runs each candidate, rejects those
    // whose outputs disagree with candidate 0, times the others end to end in
    // interleaved rounds and returns the fastest.
    pick_result pick_fastest(std::span<const graph> candidates, std::span<const tensor<float>> in, int reps = 10,
                             std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max()) {
        return pick_fastest(candidates, in, reps, opt_.mode, deadline);
    }
    pick_result pick_fastest(std::span<const graph> candidates, std::span<const tensor<float>> in, int reps, run_mode m,
                             std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max()) {
        if (candidates.empty()) throw error("pick_fastest: no candidates");
        std::vector<cudnn_impl::device_plan*> plans;
        for (std::size_t c = 0; c < candidates.size(); ++c) {  // every candidate compiled before any runs
            check_inputs(candidates[c], in);
            plans.push_back(&plan_for(candidates[c], m, candidates.size()));
        }
        return verify_and_time(
            candidates.size(), opt_.warmup, reps, opt_.verify_tolerance, [&](std::size_t c) { return plans[c]->execute(in); },
            [&](std::size_t c) { plans[c]->run(); },
            [&] {
                for (auto* p : plans) p->sync("warm-up");
            },
            [&](std::size_t c) {
                timer tm(plans[c]->main_stream());
                return tm.time([&] { plans[c]->run(); }, [&] { plans[c]->sync("timed run"); });
            },
            {}, deadline);
    }

    const cudnn_impl::measure_cache& measurements() const { return cache_; }
    const options& settings() const { return opt_; }
    const std::string& machine() const { return cache_.machine(); }

private:
    // CUDA-event timing on one stream.
    class timer {
    public:
        explicit timer(cudaStream_t s) : s_(s) {
            cudnn_impl::check(cudaEventCreate(&a_), "cudaEventCreate");
            if (cudaEventCreate(&b_) != cudaSuccess) {
                cudaEventDestroy(a_);
                throw error("cudnn backend: cudaEventCreate failed");
            }
        }
        ~timer() {
            cudaEventDestroy(a_);
            cudaEventDestroy(b_);
        }
        timer(const timer&) = delete;
        timer& operator=(const timer&) = delete;
        template <class F, class S>
        double time(F&& body, S&& sync) {
            cudnn_impl::check(cudaEventRecord(a_, s_), "cudaEventRecord (timer start)");
            body();
            cudnn_impl::check(cudaEventRecord(b_, s_), "cudaEventRecord (timer stop)");
            sync();
            cudnn_impl::check(cudaEventSynchronize(b_), "cudaEventSynchronize");
            float ms = 0;
            cudnn_impl::check(cudaEventElapsedTime(&ms, a_, b_), "cudaEventElapsedTime");
            return ms;
        }

    private:
        cudaStream_t s_;
        cudaEvent_t a_ = nullptr, b_ = nullptr;
    };

    static std::string init_device(const options& o) {
        if (int n = cudnn_impl::device_count(); n <= o.device)
            throw error("cudnn backend: " + (n == 0 ? cudnn_impl::no_device_reason() : "device " + std::to_string(o.device) +
                                                                                         " requested, " + std::to_string(n) + " present"));
        cudnn_impl::check(cudaSetDevice(o.device), "cudaSetDevice");
        return std::string(name) + " | " + cudnn_impl::library_versions() + " | " + cudnn_impl::device_name(o.device) +
               (o.allow_tf32 ? " | tf32" : "");
    }
    static std::filesystem::path cache_file(const options& o, const std::string& machine) {
        if (!o.persist) return {};
        return cudnn_impl::measure_cache::file_for(o.cache_dir.empty() ? default_cache_dir() : o.cache_dir, name, machine);
    }
    cudnn_impl::settings device_settings(bool graph) const {
        cudnn_impl::settings s;
        s.allow_tf32 = opt_.allow_tf32;
        s.find_conv_algorithms = opt_.find_conv_algorithms;
        s.fuse_conv_relu = opt_.fuse_conv_relu;
        s.cuda_graph = graph;
        return s;
    }

    // Device plans keyed by the structural hash (which names weights by their
    // address; the plan holds them) with every node's shapes, and the mode.
    // `keep`: plans that must stay alive together (pick_fastest holds one per
    // candidate), so the cache never evicts below that.
    cudnn_impl::device_plan& plan_for(const graph& g, run_mode m, std::size_t keep = 0) {
        std::uint64_t key = plan_key(g, hashing::combine(g.structural_hash(), static_cast<std::uint64_t>(m) + 1));
        if (cudnn_impl::device_plan* p = plans_.find(key)) {
            ++plan_reuses;
            return *p;
        }
        auto hp = std::shared_ptr<const cudnn_impl::plan>(cudnn_impl::compile_plan(g, is_multi_stream(m), opaque_impls));
        cudnn_impl::device_plan& d =
            plans_.insert(key, std::make_unique<cudnn_impl::device_plan>(hp, device_settings(uses_graph(m))), std::max(opt_.max_plans, keep));
        ++plan_compiles;
        return d;
    }

    options opt_;
    std::string machine_;  // backend, library versions, device: keys the measurement file
    cudnn_impl::measure_cache cache_;
    plan_cache<std::unique_ptr<cudnn_impl::device_plan>> plans_;
};

static_assert(measurer<cudnn>);

}  // namespace tsopt::backend
