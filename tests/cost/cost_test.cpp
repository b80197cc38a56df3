// Cost models: analytical sanity, sum / measured through the cache,
// multi-dimensional memory limit, AutoGraph's critical-path preference.
#include <doctest/doctest.h>

#include <map>
#include <random>

#include "tsopt/backend/reference/executor.hpp"
#include "tsopt/cost/analytical.hpp"
#include "tsopt/cost/critical_path.hpp"
#include "tsopt/cost/multi_dim.hpp"
#include "tsopt/cost/sum.hpp"

using namespace tsopt;

namespace {
// A measuring backend for tests: "times" an operator as 1 µs per output
// element and counts how often it is asked.
struct counting_backend {
    static constexpr std::string_view name = "counting";
    int calls = 0;
    std::vector<tensor<float>> execute(const graph& g, std::span<const tensor<float>> in) {
        return backend::reference{}.execute(g, in);
    }
    double measure(const graph& g, std::size_t i) {
        ++calls;
        return static_cast<double>(g.nodes[i].shapes[0].elements()) * 1e-3;
    }
};
static_assert(backend::measurer<counting_backend>);

using table_fn = std::function<double(const graph&, std::size_t)>;
table_fn by_name(std::map<std::string, double> t) {
    return [t = std::move(t)](const graph& g, std::size_t i) {
        auto it = t.find(g.nodes[i].name);
        if (it == t.end()) throw error("no time for " + g.nodes[i].describe());
        return it->second;
    };
}

double conv_cost(std::int64_t c, std::int64_t hw, std::int64_t k, spec::activation act = no_activation) {
    std::mt19937_64 rng(1);
    graph g;
    auto x = g.input("x", {1, c, hw, hw});
    auto w = g.weight("w", {c, c, k, k}, rng);
    g.mark_output(g.conv2d(x, w, {.act = act}));
    return cost::analytical{}.graph_cost(g);
}
}  // namespace

static_assert(cost::cost_model<cost::analytical>);
static_assert(cost::cost_model<cost::sum<table_fn>>);
static_assert(cost::cost_model<cost::measured<counting_backend>>);
static_assert(cost::cost_model<cost::multi_dim<>>);
static_assert(cost::cost_model<cost::critical_path<table_fn>>);
static_assert(cost::is_additive_v<cost::sum<table_fn>> && cost::is_additive_v<cost::measured<counting_backend>>);
static_assert(!cost::is_additive_v<cost::critical_path<>> && !cost::is_additive_v<cost::multi_dim<>>);

TEST_CASE("analytical: a bigger convolution costs more") {
    double small = conv_cost(16, 14, 3), wider = conv_cost(64, 14, 3), larger = conv_cost(16, 56, 3), kernel = conv_cost(16, 14, 5);
    CHECK(small > 0);
    CHECK(wider > small);
    CHECK(larger > small);
    CHECK(kernel > small);
}

TEST_CASE("analytical: a compute-bound operator is priced by FLOPs, a copy by bytes") {
    cost::machine m;
    cost::analytical a{m};
    graph g;
    auto x = g.input("x", {512, 512});
    auto y = g.input("y", {512, 512});
    auto mm = g.matmul(x, y);
    auto t = g.transpose(x, {1, 0});
    g.mark_output(mm);
    g.mark_output(t);
    double flops = 2.0 * 512 * 512 * 512;
    double expect_mm = flops / (m.cores * m.gflops_per_core * 1e9 * m.compute_efficiency) * 1e3 + m.launch_us / 1e3;
    CHECK(a.operator_cost(g, static_cast<std::size_t>(mm.node)) == doctest::Approx(expect_mm));
    double expect_t = 2.0 * 512 * 512 * 4 / (m.bandwidth_gbs * 1e9) * 1e3 + m.launch_us / 1e3;
    CHECK(a.operator_cost(g, static_cast<std::size_t>(t.node)) == doctest::Approx(expect_t));
    CHECK(a.graph_cost(g) == doctest::Approx(expect_mm + expect_t));
}

TEST_CASE("analytical: a fused activation is cheaper than conv followed by relu") {
    std::mt19937_64 rng(2);
    graph fused, separate;
    for (graph* g : {&fused, &separate}) {
        auto x = g->input("x", {1, 32, 28, 28});
        auto w = g->weight("w", {32, 32, 3, 3}, rng);
        if (g == &fused) g->mark_output(g->conv2d(x, w, {.act = relu}));
        else g->mark_output(g->relu(g->conv2d(x, w)));
    }
    cost::analytical a;
    CHECK(a.graph_cost(fused) < a.graph_cost(separate));
    CHECK(a.graph_cost(fused) > conv_cost(32, 28, 3) - 1e-12);  // the epilogue is not free either
}

TEST_CASE("analytical: inputs, weights and weight-only operators cost nothing") {
    std::mt19937_64 rng(3);
    graph g;
    auto x = g.input("x", {1, 8, 16, 16});
    auto w1 = g.weight("w1", {8, 8, 3, 3}, rng);
    auto w2 = g.weight("w2", {8, 8, 3, 3}, rng);
    auto wsum = g.ewadd(w1, w2);                // folded at preprocessing
    auto wcat = g.concat(0, {wsum, w2});        // folded too
    auto y = g.conv2d(x, wcat);
    g.mark_output(y);
    cost::analytical a;
    CHECK(a.operator_cost(g, static_cast<std::size_t>(x.node)) == 0);
    CHECK(a.operator_cost(g, static_cast<std::size_t>(w1.node)) == 0);
    CHECK(a.operator_cost(g, static_cast<std::size_t>(wsum.node)) == 0);
    CHECK(a.operator_cost(g, static_cast<std::size_t>(wcat.node)) == 0);
    CHECK(a.raw_cost(g, static_cast<std::size_t>(wsum.node)) > 0);  // it would cost something if it ran
    CHECK(a.operator_cost(g, static_cast<std::size_t>(y.node)) > 0);
    CHECK(a.graph_cost(g) == doctest::Approx(a.operator_cost(g, static_cast<std::size_t>(y.node))));
    // The same with the mask precomputed.
    auto mask = g.constant_mask();
    CHECK(a.operator_cost(g, static_cast<std::size_t>(wsum.node), mask) == 0);
}

TEST_CASE("analytical: layouts change the cost") {
    std::mt19937_64 rng(4);
    auto conv_graph = [&](spec::layout in_layout, spec::layout out_layout) {
        graph g;
        auto x = g.input("x", {1, 32, 28, 28});
        g.nodes[static_cast<std::size_t>(x.node)].out_layout = in_layout;
        auto w = g.weight("w", {32, 32, 3, 3}, rng);
        auto y = g.conv2d(x, w);
        g.nodes[static_cast<std::size_t>(y.node)].out_layout = out_layout;
        g.mark_output(y);
        return cost::analytical{}.graph_cost(g);
    };
    const auto nchw = spec::layout::nchw, nhwc = spec::layout::nhwc;
    CHECK(conv_graph(nhwc, nhwc) < conv_graph(nchw, nchw));  // NHWC conv slightly cheaper
    CHECK(conv_graph(nhwc, nhwc) > 0.8 * conv_graph(nchw, nchw));
    CHECK(conv_graph(nchw, nhwc) > conv_graph(nhwc, nhwc));  // reordering the input costs

    auto mm_graph = [&](spec::layout a_layout, bool weight_operand, cost::machine m = {}) {
        graph g;
        auto a = weight_operand ? g.weight("a", {256, 256}, rng) : g.input("a", {256, 256});
        g.nodes[static_cast<std::size_t>(a.node)].out_layout = a_layout;
        auto b = g.input("b", {256, 256});
        g.mark_output(g.matmul(a, b));
        return cost::analytical{m}.graph_cost(g);
    };
    const auto row = spec::layout::row_major, col = spec::layout::col_major;
    CHECK(mm_graph(col, false) > mm_graph(row, false));              // a transpose first
    CHECK(mm_graph(col, true) == doctest::Approx(mm_graph(row, true)));  // constant: re-laid out once
    cost::machine fused;
    fused.fused_transpose = true;
    CHECK(mm_graph(col, false, fused) == doctest::Approx(mm_graph(row, false, fused)));
}

TEST_CASE("analytical: bad machine parameters are rejected") {
    cost::machine m;
    m.bandwidth_gbs = 0;
    CHECK_THROWS_WITH_AS(cost::analytical{m}, doctest::Contains("must be positive"), error);
}

TEST_CASE("sum over a time table and measured through the cache") {
    std::mt19937_64 rng(5);
    graph g;
    auto x = g.input("x", {1, 8, 16, 16});
    auto w = g.weight("w", {8, 8, 3, 3}, rng);
    auto w2 = g.relu(w, "wrelu");                    // weight-only
    auto a = g.conv2d(x, w2, {}, "a");
    auto b = g.conv2d(x, w2, {}, "b");                // same key as a
    auto c = g.ewadd(a, b, "c");
    g.mark_output(c);

    cost::sum s{by_name({{"a", 1.0}, {"b", 2.0}, {"c", 0.5}})};  // no entry for wrelu: never asked
    CHECK(s.graph_cost(g) == doctest::Approx(3.5));
    CHECK(s.operator_cost(g, static_cast<std::size_t>(w2.node)) == 0);

    cost::sum negative{[](const graph&, std::size_t) { return -1.0; }};
    CHECK_THROWS_WITH_AS(negative.graph_cost(g), doctest::Contains("non-negative"), error);

    counting_backend be;
    cost::measured<counting_backend> m{be};
    double total = m.graph_cost(g);
    CHECK(total == doctest::Approx(3 * 8 * 16 * 16 * 1e-3));
    CHECK(be.calls == 2);  // a and b share a key; the folded relu is not measured
    CHECK(m.graph_cost(g) == doctest::Approx(total));
    CHECK(be.calls == 2);  // all from the cache now
    // A second model sharing the cache measures nothing.
    cost::measured<counting_backend> m2{be, m.shared_cache()};
    CHECK(m2.operator_cost(g, static_cast<std::size_t>(b.node)) == doctest::Approx(8 * 16 * 16 * 1e-3));
    CHECK(be.calls == 2);
}

TEST_CASE("multi_dim: metrics, peak memory and a memory limit") {
    graph g;
    auto x = g.input("x", {1, 1024});     // 4 KiB
    auto y = g.relu(x);
    auto z = g.sigmoid(y);
    g.mark_output(z);
    // Live: x, then x+y (relu), then y+z (sigmoid): 8 KiB at most.
    CHECK(cost::peak_memory(g) == doctest::Approx(8192));

    cost::multi_dim<> unlimited;
    auto m = unlimited.evaluate(g);
    CHECK(m.launches == 2);
    CHECK(m.flops == doctest::Approx(2048));
    CHECK(m.memory_bytes == doctest::Approx(4 * 4096.0));
    CHECK(m.peak_bytes == doctest::Approx(8192));
    CHECK(std::isfinite(unlimited.graph_cost(g)));
    CHECK(unlimited.graph_cost(g) == doctest::Approx(cost::analytical{}.graph_cost(g)));  // default: time only

    cost::multi_dim<> tight{cost::analytical{}, cost::weights{}, 8000};
    CHECK(tight.graph_cost(g) == cost::infeasible);
    CHECK_FALSE(tight.feasible(g));
    cost::multi_dim<> enough{cost::analytical{}, cost::weights{}, 8192};
    CHECK(std::isfinite(enough.graph_cost(g)));

    // Weighting: one unit per kernel launch only.
    cost::multi_dim<> launches{cost::analytical{}, cost::weights{.time = 0, .launches = 1}};
    CHECK(launches.graph_cost(g) == doctest::Approx(2));
    CHECK(launches.operator_cost(g, static_cast<std::size_t>(y.node)) == doctest::Approx(1));

    // A branch that keeps x alive longer raises the peak.
    graph h;
    auto hx = h.input("x", {1, 1024});
    auto hy = h.relu(hx);
    auto hz = h.sigmoid(hy);
    h.mark_output(h.ewadd(hz, hx));
    CHECK(cost::peak_memory(h) > cost::peak_memory(g));

    // Weights that a running operator reads are resident.
    std::mt19937_64 rng(6);
    graph k;
    auto kx = k.input("x", {1, 256});
    auto kw = k.weight("w", {256, 256}, rng);
    k.mark_output(k.matmul(kx, kw));
    CHECK(cost::peak_memory(k) == doctest::Approx(4.0 * (256 * 256 + 256 + 256)));

    CHECK_THROWS_WITH_AS((cost::multi_dim<>{cost::analytical{}, cost::weights{.time = -1}}), doctest::Contains("non-negative"), error);
}

TEST_CASE("critical_path prefers two parallel branches where the sum cost fuses them (AutoGraph Figure 1)") {
    std::mt19937_64 rng(7);
    // Parallel: x -> conv_a, x -> conv_b (independent, can run concurrently).
    graph parallel;
    {
        auto x = parallel.input("x", {1, 16, 14, 14});
        auto wa = parallel.weight("wa", {16, 16, 3, 3}, rng);
        auto wb = parallel.weight("wb", {16, 16, 3, 3}, rng);
        parallel.mark_output(parallel.conv2d(x, wa, {}, "conv_a"));
        parallel.mark_output(parallel.conv2d(x, wb, {}, "conv_b"));
    }
    // Fused: one conv over the concatenated filters, then split (TASO's rewrite).
    graph fused;
    {
        auto x = fused.input("x", {1, 16, 14, 14});
        auto wa = fused.weight("wa", {16, 16, 3, 3}, rng);
        auto wb = fused.weight("wb", {16, 16, 3, 3}, rng);
        auto wcat = fused.concat(0, {wa, wb}, "wcat");
        auto y = fused.conv2d(x, wcat, {}, "conv_ab");
        auto [ya, yb] = fused.split(1, 16, y, "split");
        fused.mark_output(ya);
        fused.mark_output(yb);
    }
    // The fused conv costs less than both branches together but more than either.
    auto times = by_name({{"conv_a", 1.0}, {"conv_b", 1.0}, {"conv_ab", 1.5}, {"split", 0.05}});

    cost::sum total{times};
    CHECK(total.graph_cost(fused) < total.graph_cost(parallel));  // 1.55 < 2.0: fuse

    cost::critical_path<table_fn> cp{times};  // path_weight 1, sum_weight 0.25
    auto rp = cp.evaluate(parallel), rf = cp.evaluate(fused);
    CHECK(rp.critical_path_ms == doctest::Approx(1.0));
    CHECK(rp.total_ms == doctest::Approx(2.0));
    CHECK(rf.critical_path_ms == doctest::Approx(1.55));
    CHECK(rf.path.size() == 2);  // conv_ab -> split (the folded concat takes no time)
    CHECK(cp.graph_cost(parallel) < cp.graph_cost(fused));  // 1.5 < 1.9375: keep the branches

    // The brief's form alpha * T_cp + T_sum agrees once alpha is large enough...
    cost::critical_path<table_fn> alpha4{times, 4.0, 1.0};
    CHECK(alpha4.graph_cost(parallel) < alpha4.graph_cost(fused));
    // ...and degenerates to the sum cost when the path has no weight.
    cost::critical_path<table_fn> only_sum{times, 0.0, 1.0};
    CHECK(only_sum.graph_cost(fused) < only_sum.graph_cost(parallel));
    CHECK_THROWS_AS((cost::critical_path<table_fn>{times, 0.0, 0.0}), error);
}

// Issue 20: pricing every node of a graph walked each node's ancestors, with a
// graph-sized memo per call: quadratic (a 20k-node chain took 6.5 s to
// inspect). Whole-graph pricing now computes graph::constant_mask once and
// passes it down; the single-node walk must not run at all.
TEST_CASE("whole-graph pricing is linear: no per-node ancestor walk on a 20k-node chain") {
    graph g;
    value v = g.input("x", {1, 16});
    for (int i = 0; i < 20000; ++i) v = i % 3 == 0 ? g.relu(v) : i % 3 == 1 ? g.tanh(v) : g.sigmoid(v);
    g.mark_output(v);
    const auto walks = cost::detail::inference_walks.load();
    cost::analytical a;
    cost::multi_dim<cost::analytical> md;
    cost::critical_path<cost::analytical> cp(a);
    cost::sum s([](const graph& h, std::size_t i) { return static_cast<double>(h.nodes[i].shapes[0].elements()); });
    const double t = a.graph_cost(g);
    CHECK(t > 0);
    CHECK(md.evaluate(g).launches == doctest::Approx(20000));
    CHECK(cp.graph_cost(g) > 0);
    CHECK(s.graph_cost(g) == doctest::Approx(20000 * 16));
    CHECK(cost::detail::inference_walks.load() == walks);
    // The single-node question still answers, with one walk.
    CHECK(cost::runs_at_inference(g, g.size() - 1));
    CHECK(cost::detail::inference_walks.load() == walks + 1);
}

TEST_CASE("measured: past its measuring deadline, uncached operators are estimated, scaled, and kept out of the cache") {
    std::mt19937_64 rng(5);
    graph g;
    auto x = g.input("x", {1, 8, 16, 16});
    auto w = g.weight("w", {8, 8, 3, 3}, rng);
    auto a = g.conv2d(x, w, {}, "a");
    auto r = g.relu(a, "r");
    auto t = g.tanh(r, "t");
    g.mark_output(t);
    const auto ai = static_cast<std::size_t>(a.node), ri = static_cast<std::size_t>(r.node), ti = static_cast<std::size_t>(t.node);

    counting_backend be;
    cost::measured<counting_backend> m{be};
    const double conv_ms = m.operator_cost(g, ai);  // measured before the deadline
    CHECK(be.calls == 1);
    // The estimator prices the conv at 2 and the others at 1: the conv's
    // measured time over 2 is the scale.
    int asked = 0;
    m.measure_until(std::chrono::steady_clock::now() - std::chrono::seconds(1),
                    [&](const graph& h, std::size_t i, const std::vector<bool>&) {
                        ++asked;
                        return h.nodes[i].is_op(spec::op_kind::conv2d) ? 2.0 : 1.0;
                    });
    CHECK(m.operator_cost(g, ai) == conv_ms);  // cached: still the measurement
    const double relu_est = m.operator_cost(g, ri);
    CHECK(relu_est == doctest::Approx(conv_ms / 2));
    CHECK(m.operator_cost(g, ti) == doctest::Approx(conv_ms / 2));
    CHECK(be.calls == 1);  // nothing measured past the deadline
    CHECK(m.estimated() == 2);
    CHECK(m.cache().size() == 1);  // estimates never enter the (persisted) cache
    const int asked_before = asked;
    CHECK(m.operator_cost(g, ri) == relu_est);  // fixed at first use
    CHECK(asked == asked_before);
    // A deadline still ahead measures as before.
    cost::measured<counting_backend> fresh{be, m.shared_cache()};
    fresh.measure_until(std::chrono::steady_clock::now() + std::chrono::hours(1),
                        [](const graph&, std::size_t, const std::vector<bool>&) { return 1.0; });
    (void)fresh.operator_cost(g, ri);
    CHECK(be.calls == 2);
    CHECK(fresh.estimated() == 0);
    CHECK_THROWS_AS(fresh.measure_until(std::chrono::steady_clock::now(), {}), error);
}
