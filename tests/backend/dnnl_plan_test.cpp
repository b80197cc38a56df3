// The oneDNN backend as a whole: small graphs and zoo models equal the
// reference, plans are compiled once and reused, memory planning shares
// buffers, measure() is positive and cached in memory and on disk, corrupt
// cache files are ignored, end-to-end timing and pick_fastest work.
#include <fstream>
#include <map>

#include "check.hpp"
#include "tsopt/rewrite/layout.hpp"
#include "tsopt/zoo/zoo.hpp"

using namespace tsopt;
using test::check_against_reference;
using test::own_step;
using test::step_arg;

namespace {

// conv -> relu -> ... : a chain of n layers.
graph chain(int n, std::int64_t c = 16, std::int64_t hw = 16) {
    graph g;
    std::mt19937_64 rng(11);
    auto x = g.input("x", {1, c, hw, hw});
    for (int i = 0; i < n; ++i) x = g.relu(g.conv2d(x, g.weight("w" + std::to_string(i), {c, c, 3, 3}, rng)));
    g.mark_output(x);
    return g;
}

// A small inception-like block touching most operators at once.
graph block() {
    graph g;
    std::mt19937_64 rng(12);
    auto x = g.input("x", {2, 8, 12, 12});
    auto a = g.conv2d(x, g.weight("wa", {8, 8, 1, 1}, rng), {.act = relu});
    auto b = g.conv2d(x, g.weight("wb", {8, 8, 3, 3}, rng), {.act = relu});
    auto c = g.maxpool(x, {.kernel = 3, .stride = 1});
    auto d = g.conv2d(x, g.weight("wd", {8, 1, 3, 3}, rng), {.pad = same});
    auto bn = g.batchnorm(d, g.weight("s", {8}, rng), g.weight("t", {8}, rng));
    auto cat = g.concat(1, {a, b, c, bn});
    auto e = g.ewadd(g.avgpool(cat, {.kernel = 3, .stride = 2}), g.weight("bias", {32, 1, 1}, rng));
    auto [p, q] = g.split(1, 16, e);
    auto m = g.ewmul(g.sigmoid(p), g.tanh(q));
    auto f = g.reshape(m, {2, 16 * 6 * 6});
    auto logits = g.matmul(f, g.weight("fc", {16 * 6 * 6, 10}, rng));
    g.mark_output(g.softmax(logits, 1));
    g.mark_output(g.transpose(m, {0, 2, 3, 1}));
    return g;
}

// [1,512] x [512,512]: 1 MB of weight and 2 KB of activation, so the
// matmul's time is the weight's trip from wherever it is.
struct batch1_matmul {
    graph g;
    std::size_t node;
};
batch1_matmul make_batch1_matmul(std::mt19937_64& rng) {
    graph g;
    auto y = g.matmul(g.input("x", {1, 512}), g.weight("w", {512, 512}, rng));
    g.mark_output(y);
    return {std::move(g), static_cast<std::size_t>(y.node)};
}

namespace dn = backend::dnnl_impl::dn;

dn::memory::desc nhwc_md(const backend::dnnl_impl::dims& d) {
    return dn::memory::desc(d, backend::dnnl_impl::f32, dn::memory::format_tag::nhwc);
}

}  // namespace

TEST_CASE("dnnl whole graphs equal the reference") {
    check_against_reference(chain(4));
    check_against_reference(block());
    backend::dnnl b({.persist = false});
    CHECK(b.stats(block()).fallbacks == 0);
}

TEST_CASE("dnnl: contiguous split parts are views of their input, others are copied") {
    std::mt19937_64 rng(13);
    graph g;
    // Batch-1 channels, the columns of one row, the rows of a matrix: views.
    auto x = g.input("x", {1, 12, 5, 5});
    auto [a, b] = g.split(1, 4, g.relu(x));
    auto [a1, a2] = g.split(1, 1, a);  // a split of a view: a view at the sum of the offsets
    g.mark_output(g.ewadd(g.conv2d(b, g.weight("w", {8, 8, 3, 3}, rng)), g.weight("bias", {8, 1, 1}, rng)));
    g.mark_output(g.ewmul(a1, a1));
    g.mark_output(a2);  // a graph output that is a view
    auto h = g.input("h", {1, 24});
    auto hw = g.matmul(h, g.weight("u", {24, 24}, rng));
    auto [c, d] = g.split(1, 16, hw);
    g.mark_output(g.matmul(d, g.weight("v", {8, 3}, rng)));
    auto rows = g.matmul(g.input("r", {5, 6}), g.weight("wr", {6, 6}, rng));
    auto [r1, r2] = g.split(0, 2, rows);
    g.mark_output(g.ewadd(g.sigmoid(c), g.tanh(c)));
    g.mark_output(g.ewadd(r1, r1));
    g.mark_output(g.relu(r2));
    // Batch 2: channel parts are strided, so copied.
    auto y = g.input("y", {2, 6, 3, 3});
    auto [e, f] = g.split(1, 2, g.relu(y));
    g.mark_output(g.ewadd(e, e));
    g.mark_output(f);
    check_against_reference(g);
    backend::dnnl be({.persist = false});
    auto prof = be.profile(g, backend::random_inputs(g, 3), 1);
    int copies = 0;
    for (const auto& e : prof) copies += e.what.starts_with("split");
    CHECK(copies == 2);  // only the batch-2 split, one reorder per part
}

TEST_CASE("dnnl concat: in the layout its convolution inputs share, else copied row-major") {
    std::mt19937_64 rng(14);
    backend::dnnl b({.persist = false});
    // The steps of node n's own work and of the conversions feeding it.
    auto steps_of = [&](const graph& g, std::int32_t n) {
        std::vector<std::pair<std::string, bool>> r;
        const auto compiled = b.compile(g);  // held: the steps belong to it
        for (const auto& s : compiled->steps)
            if (s.node == n) r.push_back({s.what, s.conversion});
        return r;
    };
    SUBCASE("convolution outputs: no reorder before, in or after the concat") {
        graph g;
        auto x = g.input("x", {2, 16, 8, 8});
        auto a = g.conv2d(x, g.weight("wa", {32, 16, 1, 1}, rng), {.act = relu});
        auto c = g.conv2d(x, g.weight("wc", {16, 16, 3, 3}, rng), {.pad = same});
        auto cat = g.concat(1, {a, c, a});
        auto y = g.conv2d(cat, g.weight("wy", {16, 80, 1, 1}, rng));
        g.mark_output(y);
        g.mark_output(cat);  // read row-major too: one conversion for the graph output
        check_against_reference(g, 1e-4, 1, &b);
        auto cs = steps_of(g, cat.node);  // its primitive, then the graph output's row-major copy
        REQUIRE(cs.size() == 2);
        CHECK(cs[0] == std::pair<std::string, bool>{"concat", false});
        CHECK(cs[1] == std::pair<std::string, bool>{"reorder", true});
        auto ys = steps_of(g, y.node);  // no reorder of the concat before the conv (one of y after it, for the output)
        REQUIRE_FALSE(ys.empty());
        CHECK(ys[0] == std::pair<std::string, bool>{"convolution", false});
    }
    SUBCASE("mixed layouts, unaligned channels, other axes: copied row-major, still exact") {
        graph g;
        auto x = g.input("x", {2, 8, 6, 6});
        auto a = g.conv2d(x, g.weight("wa", {24, 8, 3, 3}, rng), {.pad = same});  // blocked, 24 channels
        auto cat1 = g.concat(1, {a, x, a});  // a conv output next to a row-major input
        auto cat0 = g.concat(0, {a, a});
        auto cat3 = g.concat(3, {x, g.relu(x)});
        g.mark_output(cat1);
        g.mark_output(cat0);
        g.mark_output(cat3);
        check_against_reference(g, 1e-4, 2, &b);
        CHECK(b.stats(g).fallbacks == 0);
        auto c1 = steps_of(g, cat1.node);
        REQUIRE_FALSE(c1.empty());
        CHECK(c1.back().first == "concat (copy)");
        auto c3 = steps_of(g, cat3.node);
        REQUIRE_FALSE(c3.empty());
        CHECK(c3.back().first == "concat (copy)");
    }
}

TEST_CASE("dnnl: a grouped convolution reading a channels-last input computes channels-last, without reorders") {
    // ResNeXt's block: 1x1 conv (brgconv, channels-last) -> 3x3 conv of 32
    // groups of 4 channels -> 1x1 conv. Left to `any`, the grouped conv took
    // a blocked aBcd4b form and a reorder on each side. (oneDNN's grouped
    // convolution: tsopt's own kernel for small groups, which is always
    // channel-blocked, is tested in dnnl_grouped_conv_test.cpp.)
    std::mt19937_64 rng(31);
    // The fixed rule (timed choices can take the blocked form where the CPU runs it faster: next test).
    backend::dnnl b({.persist = false, .small_groups = backend::dnnl_impl::kernel_use::never, .timed_choices = false});
    graph g;
    auto x = g.input("x", {1, 64, 28, 28});
    auto a = g.conv2d(x, g.weight("wa", {128, 64, 1, 1}, rng), {.act = relu});
    auto gc = g.conv2d(a, g.weight("wg", {128, 4, 3, 3}, rng), {.pad = same, .act = relu});
    auto y = g.conv2d(gc, g.weight("wy", {256, 128, 1, 1}, rng));
    g.mark_output(y);
    check_against_reference(g, 1e-4, 1, &b);
    const auto p = b.compile(g);  // held: the steps belong to it
    if (step_arg(own_step(*p, a.node), DNNL_ARG_DST).md != nhwc_md({1, 128, 28, 28})) {
        MESSAGE("the 1x1 convolution is not channels-last on this CPU (" << own_step(*p, a.node).impl << "): nothing to keep");
        return;
    }
    const auto& grouped = own_step(*p, gc.node);
    CHECK(step_arg(grouped, DNNL_ARG_SRC).md == nhwc_md({1, 128, 28, 28}));
    CHECK(step_arg(grouped, DNNL_ARG_DST).md == nhwc_md({1, 128, 28, 28}));
    // Neither the grouped conv's input nor its output is converted (the
    // graph's own input and output are, to and from NCHW).
    const int a_buf = step_arg(own_step(*p, a.node), DNNL_ARG_DST).buf, gc_buf = step_arg(grouped, DNNL_ARG_DST).buf;
    for (const auto& s : p->steps)
        if (s.conversion)
            for (const auto& [which, r] : s.args)
                if (which == DNNL_ARG_SRC) CHECK((r.buf != a_buf && r.buf != gc_buf));
    CHECK(step_arg(own_step(*p, y.node), DNNL_ARG_SRC).md == nhwc_md({1, 128, 28, 28}));
    CHECK(grouped.impl.find("ref") == std::string::npos);
}

namespace {

// ResNeXt's stride-2 block: 1x1 conv (channels-last on AVX-512 / AVX2) ->
// 3x3 conv of 32 groups of 8 channels, stride 2 -> 1x1 conv.
struct resnext_down_block {
    graph g;
    value pointwise, grouped;
};
resnext_down_block make_resnext_down_block() {
    std::mt19937_64 rng(41);
    resnext_down_block b;
    auto x = b.g.input("x", {1, 64, 28, 28});
    b.pointwise = b.g.conv2d(x, b.g.weight("wa", {256, 64, 1, 1}, rng), {.act = relu});
    b.grouped = b.g.conv2d(b.pointwise, b.g.weight("wg", {256, 8, 3, 3}, rng), {.stride = 2, .pad = same, .act = relu});
    b.g.mark_output(b.g.conv2d(b.grouped, b.g.weight("wy", {128, 256, 1, 1}, rng)));
    return b;
}

}  // namespace

TEST_CASE("dnnl: a grouped convolution reading channels-last runs in the layout its timer finds faster") {
    // Channels-last or oneDNN's blocked form with reorders: which is faster
    // depends on the CPU (grouped_conv_choice.hpp), so the lowering asks the
    // timer, and follows it.
    const auto b = make_resnext_down_block();
    const auto in = backend::random_inputs(b.g, 3);
    const auto want = backend::reference{}.execute(b.g, in);
    const dn::engine eng(dn::engine::kind::cpu, 0);
    for (const std::size_t pick : {0, 1}) {
        INFO("the timer picks way ", pick);
        std::vector<std::string> asked;
        std::string key;
        backend::dnnl_impl::lowering_options lo{.small_groups = backend::dnnl_impl::kernel_use::never};
        lo.time_choices = [&](const std::string& k, std::span<const std::string> names, const std::function<void(std::size_t)>& run) {
            key = k;
            asked.assign(names.begin(), names.end());
            for (std::size_t w = 0; w < names.size(); ++w) run(w);
            return pick;
        };
        const auto p = backend::dnnl_impl::compile(b.g, eng, {}, {}, {}, nullptr, lo);
        if (step_arg(own_step(*p, b.pointwise.node), DNNL_ARG_DST).md != nhwc_md({1, 256, 28, 28})) {
            MESSAGE("the 1x1 convolution is not channels-last on this CPU (" << own_step(*p, b.pointwise.node).impl << "): no choice");
            return;
        }
        if (asked.empty()) {
            MESSAGE("oneDNN runs this grouped convolution channels-last under `any` on this CPU: no choice");
            return;
        }
        REQUIRE(asked.size() == 2);
        CHECK(asked[0].starts_with("oneDNN channels-last "));
        CHECK(asked[1].starts_with("oneDNN blocked "));
        CHECK(key.find("[256,8,3,3]") != std::string::npos);
        const auto& grouped = own_step(*p, b.grouped.node);
        CHECK((step_arg(grouped, DNNL_ARG_SRC).md == nhwc_md({1, 256, 28, 28})) == (pick == 0));
        CHECK((step_arg(grouped, DNNL_ARG_DST).md == nhwc_md({1, 256, 14, 14})) == (pick == 0));
        const auto got = p->run(in);
        REQUIRE(got.size() == 1);
        CHECK(relative_error(got[0], want[0]) <= 1e-4);
    }
    // Without a timer, nothing is asked: the channels-last rule.
    const auto p = backend::dnnl_impl::compile(b.g, eng, {}, {}, {}, nullptr, {.small_groups = backend::dnnl_impl::kernel_use::never});
    if (step_arg(own_step(*p, b.pointwise.node), DNNL_ARG_DST).md == nhwc_md({1, 256, 28, 28}))
        CHECK(step_arg(own_step(*p, b.grouped.node), DNNL_ARG_SRC).md == nhwc_md({1, 256, 28, 28}));
}

TEST_CASE("dnnl: the backend times a layout choice once per machine and compiles the faster way from then on") {
    const auto b = make_resnext_down_block();
    test::fresh_cache_dir dir("choice");
    // The ways' times as the cache file holds them, by way name.
    auto timed_ways = [&](const backend::dnnl& be) {
        std::map<std::string, double> ways;
        std::ifstream f(be.measurements().file());
        for (std::string line; std::getline(f, line);)
            if (const auto at = line.find("|way="); line.starts_with("choice|grouped conv|") && at != std::string::npos) {
                const auto tab = line.rfind('\t');
                ways[line.substr(at + 5, tab - at - 5)] = std::stod(line.substr(tab + 1));
            }
        return ways;
    };
    backend::dnnl first({.cache_dir = dir, .small_groups = backend::dnnl_impl::kernel_use::never});
    const auto p = first.compile(b.g);
    const auto ways = timed_ways(first);
    if (ways.empty()) {
        MESSAGE("no layout choice for this grouped convolution on this CPU (" << own_step(*p, b.grouped.node).impl << ")");
        return;
    }
    REQUIRE(ways.size() == 2);
    double channels_last = 0, blocked = 0;
    for (const auto& [name, ms] : ways) {
        INFO(name, ": ", ms, " ms");
        CHECK(ms > 0);
        (name.starts_with("oneDNN channels-last ") ? channels_last : blocked) = ms;
    }
    REQUIRE(channels_last > 0);
    REQUIRE(blocked > 0);
    const bool blocked_wins = blocked < channels_last * (1 - backend::dnnl::choice_margin);
    const auto grouped_in = [&](const backend::dnnl_impl::plan& q) { return step_arg(own_step(q, b.grouped.node), DNNL_ARG_SRC).md; };
    CHECK((grouped_in(*p) == nhwc_md({1, 256, 28, 28})) == !blocked_wins);
    check_against_reference(b.g, 1e-4, 5, &first);
    // Another backend on the same cache: found, not timed again; the same plan.
    backend::dnnl second({.cache_dir = dir, .small_groups = backend::dnnl_impl::kernel_use::never});
    const std::size_t entries = second.measurements().size();
    const auto q = second.compile(b.g);
    CHECK(second.measurements().hits == 2);
    CHECK(second.measurements().size() == entries);
    CHECK(grouped_in(*q) == grouped_in(*p));
    // Without timed choices: nothing timed, the channels-last rule.
    test::fresh_cache_dir untimed_dir("choice-untimed");
    backend::dnnl untimed({.cache_dir = untimed_dir, .small_groups = backend::dnnl_impl::kernel_use::never, .timed_choices = false});
    const auto r = untimed.compile(b.g);
    CHECK(untimed.measurements().size() == 0);
    CHECK(grouped_in(*r) == nhwc_md({1, 256, 28, 28}));
}

TEST_CASE("dnnl: a channels-last depthwise convolution below 512 channels runs in jit_dw, its bias and relu fused") {
    // MobileNetV2's block: 1x1 conv (channels-last) -> 3x3 depthwise + bias
    // + relu -> 1x1 conv. oneDNN 3.2 lists brdgmm_dw first; its jit_dw
    // runs such layers 1.05-1.85x as fast (conv2d.hpp,
    // jit_depthwise_below_channels). From 512 channels the first choice stays.
    for (const std::int64_t c : {96, 576}) {
        INFO(c, " channels");
        std::mt19937_64 rng(37);
        backend::dnnl b({.persist = false});
        graph g;
        auto x = g.input("x", {1, 32, 14, 14});
        auto a = g.conv2d(x, g.weight("wa", {c, 32, 1, 1}, rng), {.act = relu});
        auto dw = g.conv2d(a, g.weight("wd", {c, 1, 3, 3}, rng), {.pad = same});
        auto y = g.conv2d(g.relu(g.ewadd(dw, g.weight("bias", {c, 1, 1}, rng))), g.weight("wy", {32, c, 1, 1}, rng));
        g.mark_output(y);
        check_against_reference(g, 1e-4, 1, &b);
        const auto p = b.compile(g);
        if (step_arg(own_step(*p, a.node), DNNL_ARG_DST).md != nhwc_md({1, c, 14, 14})) {
            MESSAGE("the 1x1 convolution is not channels-last on this CPU (" << own_step(*p, a.node).impl << "): nothing to check");
            return;
        }
        const auto& depthwise = own_step(*p, dw.node);
        INFO(depthwise.impl, ": ", depthwise.what);
        CHECK(step_arg(depthwise, DNNL_ARG_SRC).md == nhwc_md({1, c, 14, 14}));
        CHECK(step_arg(depthwise, DNNL_ARG_DST).md == nhwc_md({1, c, 14, 14}));
        CHECK(depthwise.what == "grouped convolution + bias + 2 fused");
        CHECK(depthwise.impl.find("ref") == std::string::npos);
        if (c < backend::dnnl_impl::jit_depthwise_below_channels) CHECK_FALSE(depthwise.impl.starts_with("brdgmm_dw"));
    }
}

TEST_CASE("dnnl: explicit layout conversions are left to their readers, as the written model runs") {
    // A layout move of the search marks operators NHWC and makes each
    // mismatch an explicit `reorder` node (rewrite::explicit_conversions).
    // The written model has none (the exporter writes an Identity, the
    // importer skips it); compiled as conversions through row-major, they
    // copied twice where a reader converts once and kept the ReLU after a
    // convolution out of its primitive: zoo_nasnet_a's search result ran
    // 329 ms in `tsopt optimize`'s pick and 285 ms as written.
    std::mt19937_64 rng(31);
    graph g;
    auto x = g.input("x", {1, 32, 14, 14});
    auto a = g.conv2d(x, g.weight("wa", {48, 32, 1, 1}, rng));
    auto y = g.conv2d(g.relu(a), g.weight("wy", {32, 48, 3, 3}, rng), {.pad = same});
    g.mark_output(g.ewadd(y, x));
    for (auto id : {a.node, y.node}) g.nodes[static_cast<std::size_t>(id)].out_layout = spec::layout::nhwc;
    const graph moved = rewrite::explicit_conversions(g);
    int conversions = 0;
    for (const node& n : moved.nodes) conversions += n.is_op(spec::op_kind::reorder);
    REQUIRE(conversions > 0);
    backend::dnnl b({.persist = false});
    check_against_reference(moved, 1e-4, 6, &b);
    const auto p = b.compile(moved);  // held: the steps belong to it
    for (const auto& st : p->steps)
        if (st.node >= 0) CHECK_FALSE(moved.nodes[static_cast<std::size_t>(st.node)].is_op(spec::op_kind::reorder));
    // The same plan as the graph without the conversion nodes.
    const auto with = b.stats(moved), without = b.stats(g);
    CHECK(with.primitives == without.primitives);
    CHECK(with.fused_ops == without.fused_ops);
    CHECK(with.conversions == without.conversions);
    CHECK(with.fused_ops >= 1);  // the ReLU in the first convolution
}

TEST_CASE("dnnl plans are compiled once per graph and reused") {
    backend::dnnl b({.persist = false});
    auto g = block();
    auto in = backend::random_inputs(g, 4);
    auto r1 = b.execute(g, in);
    auto r2 = b.execute(g, in);
    CHECK(b.plan_compiles == 1);
    CHECK(b.plan_reuses == 1);
    REQUIRE(r1.size() == r2.size());
    for (std::size_t k = 0; k < r1.size(); ++k) CHECK(r1[k] == r2[k]);  // same plan, same bits
    auto in2 = backend::random_inputs(g, 5);  // new inputs through the same plan
    auto want = backend::reference{}.execute(g, in2);
    auto got = b.execute(g, in2);
    for (std::size_t k = 0; k < got.size(); ++k) CHECK(relative_error(got[k], want[k]) <= 1e-4);
    CHECK(b.plan_compiles == 1);
    auto h = chain(2);
    b.execute(h, backend::random_inputs(h, 1));
    CHECK(b.plan_compiles == 2);
}

TEST_CASE("dnnl memory planning reuses buffers whose last consumer has run") {
    backend::dnnl b({.persist = false});
    auto g = chain(8);
    auto st = b.stats(g);
    MESSAGE("chain of 8 conv+relu: planned ", st.planned_bytes, " bytes vs naive ", st.naive_bytes, " bytes; ", st.primitives,
            " primitives, ", st.conversions, " conversions");
    // Each relu runs as its conv's post-op: 8 values of 16 KiB (plus blocked
    // copies); at most 3 are live at once.
    CHECK(st.fused_ops == 8);
    CHECK(st.naive_bytes >= 8u * 16 * 16 * 16 * 4);
    CHECK(st.planned_bytes * 4 <= st.naive_bytes);
    check_against_reference(g, 1e-4, 1, &b);  // reuse did not corrupt anything
    auto bs = b.stats(block());
    MESSAGE("block: planned ", bs.planned_bytes, " vs naive ", bs.naive_bytes);
    CHECK(bs.planned_bytes < bs.naive_bytes);
}

TEST_CASE("dnnl measure: positive, cached in memory and on disk, corrupt cache ignored") {
    auto dir = test::fresh_cache_dir("measure");
    auto g = block();
    std::size_t conv = 0;
    for (std::size_t i = 0; i < g.size(); ++i)
        if (g.nodes[i].is_op(spec::op_kind::conv2d)) conv = i;
    double t1 = 0;
    std::filesystem::path file;
    {
        backend::dnnl b({.cache_dir = dir, .min_reps = 3, .min_time_ms = 1});
        t1 = b.measure(g, conv);
        CHECK(t1 > 0);
        CHECK(b.measurements().misses == 1);
        CHECK(b.measure(g, conv) == t1);  // second call: cache hit, same answer
        CHECK(b.measurements().hits == 1);
        CHECK(b.measure(g, 0) == 0);  // the input costs nothing
        for (std::size_t i = 0; i < g.size(); ++i)
            if (g.nodes[i].kind == node_kind::op) CHECK(b.measure(g, i) >= 0);
        file = b.measurements().file();
        CHECK(std::filesystem::exists(file));
        CHECK(file.parent_path() == dir);
    }
    {
        backend::dnnl b({.cache_dir = dir});
        CHECK(b.measurements().loaded > 1);
        CHECK(b.measure(g, conv) == t1);  // reloaded from disk, not re-measured
        CHECK(b.measurements().misses == 0);
    }
    SUBCASE("corrupt file: warning, ignored, then replaced") {
        { std::ofstream(file) << "tsopt-measure-cache v1\nmachine\tnot this one\nconv2d\tfast\n"; }
        backend::dnnl b({.cache_dir = dir, .min_reps = 3, .min_time_ms = 1});
        CHECK(b.measurements().loaded == 0);
        CHECK(b.measure(g, conv) > 0);
        backend::dnnl again({.cache_dir = dir});
        CHECK(again.measurements().loaded == 1);
    }
    SUBCASE("garbage lines") {
        std::string head;
        {
            std::ifstream f(file);
            std::string l1, l2;
            std::getline(f, l1);
            std::getline(f, l2);
            head = l1 + "\n" + l2 + "\n";
        }
        { std::ofstream(file) << head << "conv2d|p=1\t12abc\n"; }
        backend::dnnl b({.cache_dir = dir});
        CHECK(b.measurements().loaded == 0);
        { std::ofstream(file, std::ios::binary) << std::string("\0\xff\x01garbage", 10); }
        backend::dnnl c({.cache_dir = dir});
        CHECK(c.measurements().loaded == 0);
    }
}

TEST_CASE("dnnl measure is keyed by the configuration") {
    backend::dnnl b({.persist = false, .min_reps = 3, .min_time_ms = 1});
    auto small = chain(1, 8, 8), large = chain(1, 32, 32);
    auto conv_of = [](const graph& g) {
        for (std::size_t i = 0; i < g.size(); ++i)
            if (g.nodes[i].is_op(spec::op_kind::conv2d)) return i;
        return std::size_t{0};
    };
    double s = b.measure(small, conv_of(small)), l = b.measure(large, conv_of(large));
    CHECK(b.measurements().misses == 2);
    MESSAGE("conv 8x8x8: ", s, " ms, conv 32x32x32: ", l, " ms");
    // 64x the work; only a warning, since on a loaded shared machine an OpenMP
    // thread preempted mid-barrier can cost a small op a whole time slice.
    WARN(l > s);
}

TEST_CASE("timing statistic: the minimum of the rounds") {
    CHECK(backend::minimum({3.0, 1.5, 2.0}) == 1.5);
    CHECK(backend::minimum({}) == 0);
}

TEST_CASE("end-to-end pick: a candidate replaces the original only when it wins enough paired rounds") {
    // Scripted times per round (candidate 0 is the original). Candidate 1's
    // median is the lowest, but it beat the original in 5 of 10 rounds: load
    // noise, not evidence. Candidate 2 won 9 of 10 with a higher median
    // than candidate 1: it is the one chosen.
    const std::vector<std::vector<double>> times{
        {10, 10, 10, 10, 10, 10, 10, 10, 10, 10},
        {5, 5, 5, 5, 5, 10, 10, 10, 10, 10},  // median 7.5, a tie is no win
        {9, 9, 9, 9, 9, 9, 9, 9, 9, 11},
    };
    auto pick = [&](std::vector<std::vector<double>> t, std::span<const std::optional<backend::known_timing>> known = {}) {
        std::vector<std::size_t> next(t.size(), 0);
        return backend::verify_and_time(
            t.size(), 0, 10, 1e-3, [](std::size_t) { return std::vector<tensor<float>>{tensor<float>(shape{1}, 1.f)}; },
            [](std::size_t) {}, [] {}, [&](std::size_t c) { return t[c][next[c]++]; }, known);
    };
    auto r = pick(times);
    CHECK(r.rounds == 10);
    CHECK(r.faster_rounds == std::vector<int>{0, 5, 9});
    CHECK(r.confirmed == std::vector<bool>{true, false, true});
    CHECK(r.best == 2);
    // Candidate 1 faster in every round: confirmed, and its median (8.5) wins.
    auto close = times;
    close[1] = {8.5, 8.5, 8.5, 8.5, 8.5, 8.5, 8.5, 8.5, 8.5, 8.5};
    CHECK(pick(close).best == 1);
    // No candidate confirmed: the original stays, whatever the medians.
    auto noisy = times;
    noisy[2] = {9, 9, 9, 9, 9, 9, 9, 11, 11, 11};  // 7 of 10
    auto kept = pick(noisy);
    CHECK(kept.ms[2] < kept.ms[0]);
    CHECK(kept.best == 0);
    // An earlier run's timings decide without timing (and decide the same way).
    std::vector<std::optional<backend::known_timing>> known{backend::known_timing{10, 0, 10}, backend::known_timing{9, 6, 10},
                                                            backend::known_timing{9.5, 9, 10}};
    auto again = pick({{}, {}, {}}, known);
    CHECK(again.reused);
    CHECK(again.best == 2);
    CHECK(again.confirmed == std::vector<bool>{true, false, true});
    // A deadline already past: the rounds that can confirm one of two
    // candidates run (6: 5 of 5 is 3.1 %, above Holm's first level of
    // 2.5 %), no more, and the choice is made on them (candidate 2 won all
    // six, candidate 1 five: its sixth round is a tie).
    std::vector<std::size_t> next(times.size(), 0);
    auto late = backend::verify_and_time(
        times.size(), 0, 10, 1e-3, [](std::size_t) { return std::vector<tensor<float>>{tensor<float>(shape{1}, 1.f)}; },
        [](std::size_t) {}, [] {}, [&](std::size_t c) { return times[c][next[c]++]; }, {},
        std::chrono::steady_clock::now() - std::chrono::seconds(1));
    CHECK(late.rounds == backend::rounds_to_confirm(2));
    CHECK(late.rounds == 6);
    CHECK(next == std::vector<std::size_t>(times.size(), 6));
    CHECK(late.faster_rounds == std::vector<int>{0, 5, 6});
    CHECK(late.confirmed == std::vector<bool>{true, false, true});  // 5 of 6 is 10.9 %
    CHECK(late.best == 2);
}

TEST_CASE("end-to-end pick: candidates are confirmed together (Holm), so more of them do not let more chance through") {
    // Four contenders, 20 rounds: Holm's levels are 5 %/4, 5 %/3, 5 %/2, 5 %.
    // 15 of 20 (2.07 %) passes a lone test at 5 % but not the first step.
    const std::vector<bool> none_rejected(5, false);
    auto confirmed = [&](std::vector<int> wins) { return backend::confirmed_against_original(wins, 20, none_rejected); };
    CHECK(confirmed({0, 15, 3, 2, 1}) == std::vector<bool>{true, false, false, false, false});
    // 16 of 20 (0.59 %) passes the first step; the next, 15 (2.07 %), fails 1.67 %.
    CHECK(confirmed({0, 15, 16, 2, 1}) == std::vector<bool>{true, false, true, false, false});
    // Step down: 16, 16, 15 (2.07 % <= 2.5 %), then 1 fails 5 %.
    CHECK(confirmed({0, 16, 1, 15, 16}) == std::vector<bool>{true, true, false, true, true});
    // A rejected candidate is not a contender: two left, 15 of 20 then
    // passes 2.5 % (the first step) and 14 (5.8 %) fails 5 %.
    CHECK(backend::confirmed_against_original(std::vector<int>{0, 15, 16, 14}, 20, {false, false, true, false}) ==
          std::vector<bool>{true, true, false, false});
    // One contender: the plain sign test at 5 %.
    CHECK(backend::confirmed_against_original(std::vector<int>{0, 15}, 20, {false, false}) == std::vector<bool>{true, true});
    CHECK(backend::confirmed_against_original(std::vector<int>{0, 14}, 20, {false, false}) == std::vector<bool>{true, false});
    // No rounds, nothing confirmed but the original.
    CHECK(backend::confirmed_against_original(std::vector<int>{0, 0}, 0, {false, false}) == std::vector<bool>{true, false});

    // Equally fast candidates, each round a fair coin per candidate: how
    // often does any of four replace the original? Holm keeps it at most
    // 5 %; testing each at 5 % alone lets it through about 8 % of the time
    // (1 - (1 - 0.0207)^4), which the same draws must show (so this test
    // can tell the two apart).
    std::mt19937_64 rng(2026);
    std::bernoulli_distribution coin(0.5);
    const int trials = 20000;
    int holm = 0, alone = 0;
    for (int t = 0; t < trials; ++t) {
        std::vector<int> wins(5, 0);
        for (int c = 1; c < 5; ++c)
            for (int k = 0; k < 20; ++k) wins[c] += coin(rng);
        const auto conf = backend::confirmed_against_original(wins, 20, none_rejected);
        holm += std::count(conf.begin() + 1, conf.end(), true) > 0;
        alone += std::any_of(wins.begin() + 1, wins.end(), [](int w) { return w >= backend::wins_needed(20); });
    }
    MESSAGE("equal candidates confirmed by chance: Holm ", 100.0 * holm / trials, " %, each alone at 5 % ", 100.0 * alone / trials, " %");
    CHECK(holm <= trials * backend::confirm_level);
    CHECK(alone > trials * 0.06);
}

TEST_CASE("end-to-end pick: the wins a candidate needs are a sign test at 5 %, whatever the rounds") {
    // P(X >= k) for X ~ Binomial(n, 1/2), exactly (n <= 60: the sums of
    // binomial coefficients are exact in a double).
    auto tail = [](int n, int k) {
        double sum = 0, c = 1;  // c = C(n, i)
        for (int i = 0; i <= n; ++i) {
            if (i >= k) sum += c;
            c = c * (n - i) / (i + 1);
        }
        return sum / std::pow(2.0, n);
    };
    for (int n = 1; n <= 60; ++n) {
        const int k = backend::wins_needed(n);
        INFO("rounds ", n, ", wins needed ", k);
        if (k <= n) CHECK(tail(n, k) <= backend::confirm_level);
        CHECK(tail(n, k - 1) > backend::confirm_level);  // the fewest such
        for (int w = 0; w <= n; ++w) CHECK(backend::sign_test_p(w, n) == doctest::Approx(tail(n, w)).epsilon(1e-9));
    }
    // Fewer rounds than min_pick_rounds confirm nothing; min_pick_rounds can.
    CHECK(backend::wins_needed(backend::min_pick_rounds - 1) > backend::min_pick_rounds - 1);
    CHECK(backend::wins_needed(backend::min_pick_rounds) <= backend::min_pick_rounds);
    // So for m candidates tested together, at Holm's first level 5 % / m.
    for (std::size_t m = 1; m <= 8; ++m) {
        const int n = backend::rounds_to_confirm(m);
        const double level = backend::confirm_level / static_cast<double>(m);
        INFO(m, " candidates: ", n, " rounds");
        CHECK(backend::wins_needed(n, level) == n);
        CHECK(backend::wins_needed(n - 1, level) > n - 1);
        CHECK(backend::sign_test_p(n, n) == doctest::Approx(tail(n, n)));
    }
    CHECK(backend::rounds_to_confirm(1) == 5);
    CHECK(backend::rounds_to_confirm(2) == 6);
    CHECK(backend::rounds_to_confirm(4) == 7);
    CHECK(backend::wins_needed(20, backend::confirm_level / 4) == 16);
    CHECK(backend::wins_needed(3) == 4);  // 3 of 3 happens to equal graphs 12.5 % of the time
    CHECK(backend::wins_needed(10) == 9);
    CHECK(backend::wins_needed(20) == 15);
    CHECK(backend::wins_needed(0) == 1);
}

TEST_CASE("dnnl measure prices a batch-1 matmul with its weight cold") {
    // Cache-hot the weight comes from L2/L3; end to end (and with
    // cold_weights) from memory.
    std::mt19937_64 rng(5);
    const auto [g, mm] = make_batch1_matmul(rng);
    backend::dnnl cold({.persist = false, .min_reps = 30, .max_reps = 30, .llc_share = 0});
    backend::dnnl hot({.persist = false, .min_reps = 30, .max_reps = 30, .cold_weights = false});
    double c = cold.measure(g, mm), h = hot.measure(g, mm);
    MESSAGE("batch-1 matmul 512x512: cold weights ", c, " ms, cache-hot ", h, " ms");
    CHECK(c > 0);
    CHECK(h > 0);
    // Different timing methods never share a cache file.
    CHECK(cold.measurements().machine() != hot.measurements().machine());
    // Nor do different thread counts: the key names them.
    CHECK(hot.measurements().machine().find(" | " + std::to_string(backend::dnnl_impl::compute_threads()) + " threads") != std::string::npos);
    if (!backend::can_evict_from_cache) return;
    if (h > 1.0) {
        // ~20 us of work taking over a millisecond: every round lost its
        // OpenMP thread to other processes; nothing to compare.
        MESSAGE("skipped the cold/hot comparison: the machine is too loaded (cache-hot ", h, " ms)");
        return;
    }
    CHECK(c > 1.2 * h);
}

TEST_CASE("dnnl measure: weights of a graph whose constants fit in the last-level cache are priced from there") {
    std::mt19937_64 rng(6);
    const auto [g, mm] = make_batch1_matmul(rng);
    // The same matmul in a graph that also reads 48 MB of other weights:
    // more than any last-level cache share here, so its weight comes from memory.
    graph big = g;
    auto z = big.matmul(big.input("x2", {1, 4096}), big.weight("huge", {4096, 3072}, rng));
    big.mark_output(z);
    const auto caches = backend::detect_cpu_caches();
    MESSAGE("L2 ", caches.l2 >> 10, " KiB, last level ", caches.llc >> 20, " MiB");
    if (!backend::can_evict_from_cache || caches.llc == 0 || caches.llc > (48u << 20)) {
        MESSAGE("skipped: no cache eviction or no known last-level cache smaller than the big graph's weights");
        return;
    }
    CHECK(backend::constant_bytes(g, g.constant_mask()) == 512 * 512 * 4);
    backend::dnnl be({.persist = false, .min_reps = 30, .max_reps = 30});
    double warm = be.measure(g, mm), cold = be.measure(big, mm);
    MESSAGE("batch-1 matmul 512x512: weight in the last-level cache ", warm, " ms, from memory ", cold, " ms");
    // Two entries: the residency is part of the key.
    CHECK(be.measurements().size() == 2);
    const std::string key = backend::measure_key(g, mm, g.constant_mask());
    CHECK(be.measurements().contains(key + "|weights=llc"));
    CHECK(be.measurements().contains(key));
    // A part of a model (what a search measures) is priced as the whole
    // model runs once the backend knows the model: here from memory.
    backend::dnnl part({.persist = false, .min_reps = 5, .max_reps = 5});
    part.price_for_model(big);
    part.measure(g, mm);
    CHECK(part.measurements().contains(key));
    CHECK_FALSE(part.measurements().contains(key + "|weights=llc"));
    if (warm > 1.0) {
        MESSAGE("skipped the comparison: the machine is too loaded");
        return;
    }
    CHECK(cold > 1.2 * warm);
}

TEST_CASE("dnnl: per-channel constant adds / multiplies and activations after a conv run as its post-ops") {
    std::mt19937_64 rng(31);
    // conv -> + bias[C,1,1] -> relu -> * scale[1,C,1,1] -> sigmoid: one primitive.
    graph g;
    auto x = g.input("x", {1, 16, 10, 10});
    auto c = g.conv2d(x, g.weight("w", {32, 16, 3, 3}, rng));
    auto a = g.ewadd(c, g.weight("bias", {32, 1, 1}, rng));
    auto r = g.relu(a);
    auto m = g.ewmul(g.weight("scale", {1, 32, 1, 1}, rng), r);  // constant first: either operand order
    g.mark_output(g.sigmoid(m));
    // oneDNN's post-ops (the grouped convolutions below too: tsopt's own
    // kernel for small groups fuses per-channel adds, dnnl_grouped_conv_test.cpp).
    backend::dnnl b({.persist = false, .small_groups = backend::dnnl_impl::kernel_use::never});
    test::check_against_reference(g, 1e-4, 1, &b);
    auto st = b.stats(g);
    CHECK(st.fused_ops == 4);
    CHECK(st.primitives == 1);
    CHECK(st.fallbacks == 0);

    // Not fused: the conv's value read twice, a graph output in the middle of
    // the chain, a broadcast along another axis ([10] aligns with the width),
    // a run-time operand. All still equal the reference.
    graph h;
    auto y = h.input("y", {1, 8, 10, 10});
    auto c1 = h.conv2d(y, h.weight("w1", {8, 8, 3, 3}, rng));
    auto s1 = h.ewadd(c1, h.weight("b1", {8, 1, 1}, rng));
    h.mark_output(h.relu(s1));
    h.mark_output(h.tanh(c1));  // c1 has two readers
    auto c2 = h.conv2d(y, h.weight("w2", {8, 8, 3, 3}, rng));
    auto r2 = h.relu(c2);  // fused: the only reader
    h.mark_output(r2);     // an output: the chain ends, the add below must not overwrite it
    h.mark_output(h.ewadd(r2, h.weight("b2", {8, 1, 1}, rng)));
    auto c3 = h.conv2d(y, h.weight("w3", {8, 8, 3, 3}, rng));
    h.mark_output(h.ewadd(c3, h.weight("b3", {10}, rng)));
    auto c4 = h.conv2d(y, h.weight("w4", {8, 8, 3, 3}, rng));
    h.mark_output(h.ewmul(c4, h.conv2d(y, h.weight("w5", {8, 8, 3, 3}, rng))));
    test::check_against_reference(h, 1e-4, 2, &b);
    // r2 into its conv, and the relu after s1 (c1's add, which runs alone
    // since c1 has two readers) into that add (fused_elementwise).
    CHECK(b.stats(h).fused_ops == 2);

    // A grouped conv (4 channels per group, as ResNeXt's) takes activations
    // but not the per-channel add: conv -> relu fused, the add separate.
    graph k;
    auto z = k.input("z", {1, 32, 12, 12});
    auto gc = k.conv2d(z, k.weight("wg", {32, 4, 3, 3}, rng));
    k.mark_output(k.ewadd(k.relu(gc), k.weight("bg", {32, 1, 1}, rng)));
    test::check_against_reference(k, 1e-4, 3, &b);
    CHECK(b.stats(k).fused_ops == 1);
    CHECK(b.stats(k).primitives == 2);

    // A per-channel add right after a conv is the conv's own bias (not a
    // post-op): grouped convs take it too, then the relu after it.
    graph q;
    auto u = q.input("u", {1, 32, 12, 12});
    auto qc = q.conv2d(u, q.weight("wq", {32, 4, 3, 3}, rng));
    q.mark_output(q.relu(q.ewadd(q.weight("bq", {32, 1, 1}, rng), qc)));  // bias first: either operand order
    test::check_against_reference(q, 1e-4, 4, &b);
    CHECK(b.stats(q).fused_ops == 2);
    CHECK(b.stats(q).primitives == 1);

    // Layouts asked for along the chain do not stop it (the search's layout
    // moves mark a conv NHWC and not the bias and ReLU after it, or the
    // other way round): one primitive either way, the same values.
    for (int marked = 0; marked < 3; ++marked) {
        graph l = g;
        for (std::size_t i = 0; i < l.size(); ++i)
            if (l.nodes[i].kind == node_kind::op &&
                (marked == 0 ? l.nodes[i].is_op(spec::op_kind::conv2d) : marked == 1 ? !l.nodes[i].is_op(spec::op_kind::conv2d)
                                                                                        : l.nodes[i].is_op(spec::op_kind::relu)))
                l.nodes[i].out_layout = spec::layout::nhwc;
        INFO("layout marks ", marked);
        test::check_against_reference(l, 1e-4, 5, &b);
        CHECK(b.stats(l).fused_ops == 4);
        CHECK(b.stats(l).primitives == 1);
    }
}

// The adds of g that run as post-ops (sum or binary) of another node's primitive, ascending.
static std::vector<std::int32_t> fused_adds(const backend::dnnl& b, const graph& g) {
    const auto compiled = b.compile(g);  // held: the range-for below reads its member
    std::vector<std::int32_t> adds;
    for (auto [n, into] : compiled->fused)
        if (g.nodes[static_cast<std::size_t>(n)].is_op(spec::op_kind::ewadd)) adds.push_back(n);
    std::sort(adds.begin(), adds.end());
    return adds;
}

TEST_CASE("dnnl: a conv's add of a full-size tensor computed before it accumulates into that tensor (sum post-op)") {
    std::mt19937_64 rng(32);
    backend::dnnl b({.persist = false});
    SUBCASE("a residual after the folded bias, then relu: one primitive per conv") {
        for (bool residual_first : {false, true}) {
            INFO("residual as operand ", residual_first ? 0 : 1);
            graph g;
            auto x = g.input("x", {1, 16, 10, 10});
            auto r = g.conv2d(x, g.weight("wr", {16, 16, 3, 3}, rng));  // lowered first
            auto c = g.conv2d(x, g.weight("wc", {16, 16, 1, 1}, rng));
            auto biased = g.ewadd(c, g.weight("bias", {16, 1, 1}, rng));
            auto sum = residual_first ? g.ewadd(r, biased) : g.ewadd(biased, r);
            g.mark_output(g.relu(sum));
            test::check_against_reference(g, 1e-4, 1, &b);
            auto st = b.stats(g);
            CHECK(st.fused_ops == 3);
            CHECK(st.primitives == 2);
        }
    }
    SUBCASE("never into a tensor something else still reads") {
        graph g;
        auto x = g.input("x", {1, 16, 8, 8});
        auto conv = [&](value in, const char* w) { return g.conv2d(in, g.weight(w, {16, 16, 1, 1}, rng)); };
        auto t1 = conv(x, "w1");
        g.mark_output(g.ewadd(conv(x, "w2"), t1));
        g.mark_output(t1);  // a graph output
        auto t2 = conv(x, "w3");
        auto s2 = g.ewadd(conv(x, "w4"), t2);
        g.mark_output(g.ewmul(s2, t2));  // a second reader, which runs after the add
        auto t3 = g.sigmoid(conv(x, "w5"));
        auto s3 = g.ewadd(conv(t3, "w6"), t3);  // the conv's own input
        g.mark_output(g.ewmul(s3, t3));
        auto [p, q] = g.split(1, 8, g.tanh(conv(x, "w7")));  // batch-1 channel halves: views of one buffer
        g.mark_output(g.ewadd(g.conv2d(x, g.weight("w8", {8, 16, 1, 1}, rng)), p));
        g.mark_output(q);
        g.mark_output(g.ewadd(conv(x, "w9"), x));  // a graph input
        auto t4 = g.tanh(conv(x, "w11"));
        auto fresh = g.ewmul(t4, t4);  // computed before, read once, its own buffer: this one is fused
        auto fused_add = g.ewadd(conv(x, "w10"), fresh);
        g.mark_output(fused_add);
        test::check_against_reference(g, 1e-4, 2, &b);
        CHECK(fused_adds(b, g) == std::vector<std::int32_t>{fused_add.node});
    }
    SUBCASE("into a residual branch's input once its other readers ran (ResNet's identity)") {
        graph g;
        auto x = g.input("x", {1, 16, 8, 8});
        auto conv = [&](value in, const char* w) { return g.conv2d(in, g.weight(w, {16, 16, 3, 3}, rng), {.pad = same}); };
        auto identity = g.relu(conv(x, "w1"));
        auto branch = conv(g.relu(conv(identity, "w2")), "w3");  // reads the identity first
        auto add = g.ewadd(branch, identity);
        g.mark_output(g.relu(add));
        test::check_against_reference(g, 1e-4, 3, &b);
        const auto compiled = b.compile(g);
        bool fused = false;
        for (auto [n, into] : compiled->fused) fused |= n == add.node;
        CHECK(fused);
    }
    SUBCASE("consecutive identity blocks each accumulate into the buffer the one before accumulated into") {
        graph g;
        auto x = g.input("x", {1, 16, 8, 8});
        auto conv = [&](value in, const char* w) { return g.conv2d(in, g.weight(w, {16, 16, 3, 3}, rng), {.pad = same}); };
        value y = g.relu(conv(x, "w0"));
        std::vector<std::int32_t> adds;
        const char* names[][2] = {{"a1", "b1"}, {"a2", "b2"}, {"a3", "b3"}};
        for (auto [wa, wb] : names) {
            auto add = g.ewadd(conv(g.relu(conv(y, wa)), wb), y);
            adds.push_back(add.node);
            y = g.relu(add);
        }
        g.mark_output(y);
        test::check_against_reference(g, 1e-4, 4, &b);
        CHECK(fused_adds(b, g) == adds);
    }
    SUBCASE("not into a buffer another value still to be read lives in") {
        graph g;
        auto x = g.input("x", {1, 16, 8, 8});
        auto conv = [&](value in, const char* w) { return g.conv2d(in, g.weight(w, {16, 16, 3, 3}, rng), {.pad = same}); };
        auto p = g.tanh(conv(x, "w0")), q = g.tanh(conv(x, "w1"));
        auto cat = g.concat(1, {p, q});  // its parts may be computed in place: p, q and cat in one buffer
        auto add = g.ewadd(g.conv2d(x, g.weight("w2", {32, 16, 3, 3}, rng), {.pad = same}), cat);
        g.mark_output(add);
        g.mark_output(g.ewmul(p, p));  // reads p after the add
        test::check_against_reference(g, 1e-4, 5, &b);
    }
}

TEST_CASE("dnnl: each operator runs after what it reads, and a conv after the operand its sum post-op adds") {
    std::mt19937_64 rng(33);
    backend::dnnl b({.persist = false});
    auto step_nodes = [&](const graph& g) {  // the node of each step, a node's consecutive steps once
        const auto p = b.compile(g);            // held: the steps belong to it
        std::vector<std::int32_t> nodes;
        for (const auto& st : p->steps)
            if (nodes.empty() || nodes.back() != st.node) nodes.push_back(st.node);
        return nodes;
    };
    auto right_after = [](const std::vector<std::int32_t>& nodes, value a, value b) {  // b's step right after a's
        const auto at = std::find(nodes.begin(), nodes.end(), a.node);
        return at != nodes.end() && at + 1 != nodes.end() && at[1] == b.node;
    };
    SUBCASE("a convolution whose weight a rewrite appended runs right after its input's producer") {
        // NASNet's separable convolutions once batch-norm folding replaced
        // the pointwise weights (appended after every operator): the order
        // over the node list ran every depthwise convolution of the cell,
        // then the pointwise ones, their inputs gone from the caches.
        graph g;
        auto x = g.input("x", {1, 16, 12, 12});
        std::vector<value> dw, pw;
        for (int k = 0; k < 3; ++k) {
            const std::string s = std::to_string(k);
            dw.push_back(g.conv2d(x, g.weight("dw" + s, {16, 1, 3, 3}, rng), {.pad = same}));
            pw.push_back(g.conv2d(dw.back(), g.weight("pw" + s, {16, 16, 1, 1}, rng)));
        }
        g.mark_output(g.concat(1, pw));
        for (std::size_t k = 0; k < 3; ++k)
            g.nodes[static_cast<std::size_t>(pw[k].node)].inputs[1] = g.weight("folded" + std::to_string(k), {16, 16, 1, 1}, rng);
        check_against_reference(g, 1e-4, 1, &b);
        const auto nodes = step_nodes(g);
        for (std::size_t k = 0; k < 3; ++k) {
            CAPTURE(k);
            CHECK(right_after(nodes, dw[k], pw[k]));
        }
    }
    SUBCASE("two convolution chains summed: each runs right after its input's producer, the sum inside the later") {
        // A NASNet cell once its batch norms are folded: add = (pw1 + b1) +
        // (pw2 + b2). Each pointwise convolution's chain reaches the add and
        // waited for the other's value, a mutual wait the order broke only
        // once nothing else was ready: after the other branches' depthwise
        // convolutions, their outputs gone from the caches.
        graph g;
        auto x = g.input("x", {1, 16, 12, 12});
        std::vector<value> dw, pw, biased;
        for (int k = 0; k < 4; ++k) {
            const std::string s = std::to_string(k);
            dw.push_back(g.conv2d(x, g.weight("dw" + s, {16, 1, 3, 3}, rng), {.pad = same}));
            pw.push_back(g.conv2d(dw.back(), g.weight("pw" + s, {16, 16, 1, 1}, rng)));
            biased.push_back(g.ewadd(pw.back(), g.weight("b" + s, {16, 1, 1}, rng)));
        }
        auto first = g.ewadd(biased[0], biased[1]);
        auto second = g.ewadd(biased[2], biased[3]);
        g.mark_output(g.concat(1, {first, second}));
        check_against_reference(g, 1e-4, 4, &b);
        const auto nodes = step_nodes(g);
        for (std::size_t k = 0; k < 4; ++k) {
            CAPTURE(k);
            CHECK(right_after(nodes, dw[k], pw[k]));
        }
        // Every add runs inside a convolution: the earlier of a pair its
        // bias, the later its bias and the sum.
        std::vector<std::int32_t> adds{first.node, second.node};
        for (value v : biased) adds.push_back(v.node);
        std::sort(adds.begin(), adds.end());
        CHECK(fused_adds(b, g) == adds);
    }
    SUBCASE("... the sum inside the one whose step can add it, where the other runs by Winograd") {
        // ResNet's downsampling block once folded: (conv3x3 + b) + (conv1x1
        // + b). Winograd's epilogue adds per-channel operands only, so the
        // 1x1 convolution waits, whichever comes first in the node list.
        for (bool shortcut_first : {true, false}) {
            INFO("shortcut built first: ", shortcut_first);
            graph g;
            auto x = g.input("x", {1, 32, 14, 14});
            auto shortcut = [&] { return g.ewadd(g.conv2d(x, g.weight("ws", {64, 32, 1, 1}, rng)), g.weight("bs", {64, 1, 1}, rng)); };
            auto main = [&] {
                auto h = g.conv2d(x, g.weight("w1", {64, 32, 3, 3}, rng), {.pad = same, .act = relu});
                return g.ewadd(g.conv2d(h, g.weight("w2", {64, 64, 3, 3}, rng), {.pad = same}), g.weight("b2", {64, 1, 1}, rng));
            };
            value s, m;
            if (shortcut_first) s = shortcut(), m = main();
            else m = main(), s = shortcut();
            auto add = g.ewadd(m, s);
            g.mark_output(g.relu(add));
            check_against_reference(g, 1e-4, 5, &b);
            const auto compiled = b.compile(g);
            std::size_t winograd = 0;
            for (const auto& st : compiled->steps) winograd += st.what.find("winograd") != std::string::npos;
            REQUIRE(winograd > 0);  // else this tests nothing
            const auto adds = fused_adds(b, g);
            CHECK(std::find(adds.begin(), adds.end(), add.node) != adds.end());
        }
    }
    SUBCASE("a pooling waits for the computed operand its add reads, and adds it as a post-op") {
        graph g;
        auto x = g.input("x", {1, 16, 12, 12});
        auto h = g.conv2d(x, g.weight("wh", {16, 16, 1, 1}, rng));  // blocked: the pooling takes post-ops
        auto pooled = g.avgpool(h);
        auto sum = g.ewadd(g.conv2d(h, g.weight("wu", {16, 16, 3, 3}, rng), {.pad = same}), g.maxpool(h));
        auto add = g.ewadd(pooled, sum);
        g.mark_output(add);
        check_against_reference(g, 1e-4, 6, &b);
        const auto adds = fused_adds(b, g);
        CHECK(std::find(adds.begin(), adds.end(), add.node) != adds.end());
    }
    SUBCASE("NASNet's first cell: one add of the pooled value left to a step, every other add fused") {
        // Two branches add one pooled value (each convolution would
        // accumulate into its buffer once the other had read it, so each
        // waited for the other), two more are summed and pooled, and the
        // pooled sum adds one of the first two sums.
        graph g;
        auto x = g.input("x", {1, 16, 12, 12});
        auto h = g.conv2d(x, g.weight("wh", {16, 16, 1, 1}, rng));
        auto branch = [&](const char* w) {
            return g.ewadd(g.conv2d(h, g.weight(w, {16, 16, 1, 1}, rng)), g.weight(std::string("b") + w, {16, 1, 1}, rng));
        };
        auto pooled = g.maxpool(h);
        auto fifth = g.ewadd(branch("w5"), pooled);
        auto second = g.ewadd(pooled, branch("w2"));
        auto first = g.ewadd(branch("wl"), branch("wr"));
        auto fourth = g.ewadd(g.avgpool(first), second);
        g.mark_output(g.concat(1, {fifth, fourth}));
        check_against_reference(g, 1e-4, 7, &b);
        const auto adds = fused_adds(b, g);
        auto fused = [&](value v) { return std::find(adds.begin(), adds.end(), v.node) != adds.end(); };
        CHECK(fused(first));
        CHECK(fused(fourth));
        CHECK(fused(fifth) != fused(second));
    }
    SUBCASE("a conv whose residual is a concat of other branches waits for it") {
        // The conv comes first in the node list and in Kahn's order; lowered
        // before the concat (which takes no post-ops), its add was a step.
        graph g;
        auto x = g.input("x", {1, 16, 10, 10});
        auto c = g.conv2d(x, g.weight("wc", {16, 16, 3, 3}, rng), {.pad = same});
        auto half = [&](const char* w) { return g.conv2d(x, g.weight(w, {8, 16, 1, 1}, rng)); };
        auto add = g.ewadd(c, g.concat(1, {half("wp"), half("wq")}));
        g.mark_output(g.relu(add));
        check_against_reference(g, 1e-4, 2, &b);
        CHECK(fused_adds(b, g) == std::vector<std::int32_t>{add.node});
    }
    SUBCASE("... and for the residual's other readers, so it accumulates into its buffer") {
        // A NASNet cell adds its input to a separable branch that the input
        // also feeds, and pools it: the add accumulates into the input's
        // buffer only once the pool has read it.
        graph g;
        auto x = g.input("x", {1, 16, 10, 10});
        auto in = g.conv2d(x, g.weight("win", {16, 16, 1, 1}, rng));
        auto branch = g.conv2d(g.conv2d(in, g.weight("wd", {16, 1, 3, 3}, rng), {.pad = same}), g.weight("wpw", {16, 16, 1, 1}, rng));
        auto add = g.ewadd(branch, in);
        auto pooled = g.avgpool(in, {.kernel = 3, .stride = 1});
        g.mark_output(g.concat(1, {add, pooled}));
        check_against_reference(g, 1e-4, 3, &b);
        CHECK(fused_adds(b, g) == std::vector<std::int32_t>{add.node});
    }
}

TEST_CASE("dnnl profile: one entry per plan step, on every operator that runs") {
    graph g = block();
    backend::dnnl b({.persist = false, .warmup = 1});
    auto in = backend::random_inputs(g, 3);
    auto prof = b.profile(g, in, 3);
    CHECK(prof.size() == b.stats(g).primitives + b.stats(g).conversions + b.stats(g).custom_steps);
    auto constant = g.constant_mask();
    std::vector<bool> seen(g.size(), false);
    for (const auto& st : prof) {
        REQUIRE(st.node >= 0);
        REQUIRE(static_cast<std::size_t>(st.node) < g.size());
        CHECK(std::isfinite(st.ms));
        CHECK(st.ms >= 0);
        CHECK(!st.what.empty());
        seen[static_cast<std::size_t>(st.node)] = true;
    }
    // Held: a range-for over a member of the temporary would read a freed plan.
    const auto compiled = b.compile(g);
    for (auto [n, into] : compiled->fused) seen[static_cast<std::size_t>(n)] = seen[static_cast<std::size_t>(into)];
    for (std::size_t i = 0; i < g.size(); ++i)
        if (g.nodes[i].kind == node_kind::op && !constant[i] && !g.nodes[i].is_op(spec::op_kind::reshape))
            CHECK_MESSAGE(seen[i], g.nodes[i].describe(), " has no step in the profile");
    // Profiling runs the plan execute() reuses: its outputs are still right after.
    test::check_against_reference(g, 1e-4, 3, &b);
}

TEST_CASE("dnnl time_end_to_end and pick_fastest") {
    backend::dnnl b({.persist = false, .warmup = 1});
    auto fast = chain(1, 16, 16), slow = chain(6, 16, 16);
    auto in = backend::random_inputs(fast, 2);
    double tf = b.time_end_to_end(fast, in, 5), ts = b.time_end_to_end(slow, in, 5);
    CHECK(tf > 0);
    WARN(ts > tf);  // 6x the work (a warning for the same reason as above)
    // pick_fastest rejects a candidate whose outputs disagree (chain(6) is a
    // different function), and picks the fastest of the agreeing ones.
    std::vector<graph> cands{slow, chain(1, 16, 16), fast};
    auto r = b.pick_fastest(cands, in, 5);
    REQUIRE(r.ms.size() == 3);
    CHECK(r.rejected[0] == false);
    CHECK(r.rejected[1] == true);
    CHECK(r.rejected[2] == true);
    CHECK(r.best == 0);
    // Two equivalent candidates: the same chain, one with each conv+relu fused.
    graph fused;
    {
        std::mt19937_64 rng(11);
        auto x = fused.input("x", {1, 16, 16, 16});
        for (int i = 0; i < 6; ++i) x = fused.conv2d(x, fused.weight("w" + std::to_string(i), {16, 16, 3, 3}, rng), {.act = relu});
        fused.mark_output(x);
    }
    std::vector<graph> eq{slow, fused};
    auto r2 = b.pick_fastest(eq, in, 7);
    MESSAGE("unfused ", r2.ms[0], " ms, fused ", r2.ms[1], " ms, error ", r2.error[1]);
    CHECK(!r2.rejected[1]);
    CHECK(r2.error[1] <= 1e-4);
    // The fused one replaces the original only when it won most paired
    // rounds; then it is also the lower median.
    CHECK(r2.confirmed[0]);
    CHECK(r2.best == (r2.confirmed[1] && r2.ms[1] < r2.ms[0] ? 1u : 0u));
    CHECK(r2.confirmed[1] == (backend::sign_test_p(r2.faster_rounds[1], r2.rounds) <= backend::confirm_level));
    CHECK_THROWS_AS(b.pick_fastest(std::span<const graph>{}, in), tsopt::error);
}

TEST_CASE("dnnl pick_fastest times a candidate set once: a later run reuses the times and makes the same choice") {
    auto dir = test::fresh_cache_dir("pick");
    // Equivalent candidates (relu separate / fused), built twice: the same
    // set by weight values, not by address.
    auto cands = [] {
        graph fused;
        std::mt19937_64 rng(11);
        auto x = fused.input("x", {1, 8, 8, 8});
        fused.mark_output(fused.conv2d(x, fused.weight("w0", {8, 8, 3, 3}, rng), {.act = relu}));
        return std::vector<graph>{chain(1, 8, 8), fused};
    };
    auto in = backend::random_inputs(chain(1, 8, 8), 4);
    backend::pick_result first;
    {
        backend::dnnl b({.cache_dir = dir, .warmup = 1});
        first = b.pick_fastest(cands(), in, 3);
        CHECK(!first.reused);
    }
    backend::dnnl again({.cache_dir = dir, .warmup = 1});
    auto second = again.pick_fastest(cands(), in, 3);
    CHECK(second.reused);
    CHECK(second.best == first.best);
    CHECK(second.ms == first.ms);
    CHECK(second.faster_rounds == first.faster_rounds);
    CHECK(second.confirmed == first.confirmed);
    CHECK(second.rejected == first.rejected);  // verified again all the same
    // Another candidate set, or the same with another number of rounds: timed.
    CHECK(!again.pick_fastest(std::vector<graph>{chain(1, 8, 8)}, in, 3).reused);
    CHECK(!again.pick_fastest(cands(), in, 4).reused);
}

TEST_CASE("dnnl pick_fastest keeps every candidate's plan alive beyond max_plans") {
    // With room for one plan, compiling the second candidate must not free the
    // first while pick_fastest still times it (ASan catches a regression).
    backend::dnnl b({.persist = false, .warmup = 1, .max_plans = 1});
    std::vector<graph> cands{chain(1, 8, 8), chain(2, 8, 8), chain(3, 8, 8)};
    auto in = backend::random_inputs(cands[0], 3);
    auto r = b.pick_fastest(cands, in, 3);
    REQUIRE(r.ms.size() == 3);
    CHECK(r.best == 0);
    CHECK(r.rejected[1]);  // chain(n) differ from each other: rejected, but still run safely
}

TEST_CASE("dnnl plans of one backend share converted weights, only while their source lives") {
    backend::dnnl b({.persist = false});
    const graph g = chain(3, 32, 16);
    graph g2 = g;  // a candidate: the same weight tensors, one more operator
    const value last = g2.outputs[0];
    g2.outputs.clear();
    g2.mark_output(g2.tanh(last));
    auto p1 = b.compile(g);
    if (p1->stats.persistent_bytes == 0) {
        MESSAGE("oneDNN reads these weights in place on this CPU: nothing converted to share");
        return;
    }
    auto p2 = b.compile(g2);
    CHECK(p2->stats.shared_conversions == 3);
    // Other tensors of the same shapes and values are other sources: not shared.
    graph g3;
    {
        std::mt19937_64 rng(11);
        auto x = g3.input("x", {1, 32, 16, 16});
        for (int i = 0; i < 3; ++i) x = g3.relu(g3.conv2d(x, g3.weight("w" + std::to_string(i), {32, 32, 3, 3}, rng)));
        g3.mark_output(x);
    }
    CHECK(b.compile(g3)->stats.shared_conversions == 0);
    // The shared data outlives the plan that converted it.
    p1.reset();
    const auto in = backend::random_inputs(g2, 7);
    const auto got = p2->run(in);
    backend::reference ref;
    const auto want = ref.execute(g2, in);
    REQUIRE(got.size() == want.size());
    CHECK(relative_error(got[0], want[0]) < 1e-4);
}

TEST_CASE("dnnl: memory-bound primitives over a few kilobytes run on one thread, the rest on all") {
    // A fork and join of the OpenMP team costs more than a second thread
    // saves on an RNN time step's [1,256] elementwise work (plan.hpp,
    // serial_bytes); a 1 MB add keeps every thread, and so does a matmul.
    backend::dnnl b({.persist = false});
    std::mt19937_64 rng(29);
    graph g;
    auto small = g.input("small", {1, 256}), big = g.input("big", {1, 64, 64, 64});
    auto small_sum = g.ewadd(small, small), big_sum = g.ewadd(big, big);  // each with its activation fused
    auto y = g.matmul(g.sigmoid(small_sum), g.weight("w", {256, 256}, rng));
    g.mark_output(y);
    g.mark_output(g.relu(big_sum));
#ifdef _OPENMP
    const int threads = omp_get_max_threads();
    omp_set_num_threads(2);
#endif
    test::check_against_reference(g, 1e-5, 2, &b);
#ifdef _OPENMP
    CHECK(omp_get_max_threads() == 2);  // the caller's threads are back after every run
    omp_set_num_threads(threads);
#endif
    const auto p = b.compile(g);
    auto step_of = [&](std::int32_t node) {
        const auto s = std::find_if(p->steps.begin(), p->steps.end(), [&](const auto& st) { return st.node == node && !st.conversion; });
        REQUIRE(s != p->steps.end());
        return *s;
    };
    CHECK(step_of(small_sum.node).serial);
    CHECK_FALSE(step_of(y.node).serial);
    CHECK_FALSE(step_of(big_sum.node).serial);
}

TEST_CASE("dnnl flushes denormals while it runs, on every thread, and gives the caller its mode back") {
#ifndef TSOPT_HAVE_MXCSR
    MESSAGE("skipped: denormals are flushed only on x86 (MXCSR)");
#else
    // 2^-130 halved: a denormal in, a denormal out, unless flushed. A big
    // input so the multiply runs on every OpenMP thread.
    const float tiny = std::ldexp(1.0f, -130);
    graph g;
    auto x = g.input("x", {1, 64, 64, 64});
    g.mark_output(g.ewmul(x, g.weight("half", tensor<float>({64, 1, 1}, 0.5f))));
    tensor<float> in({1, 64, 64, 64});
    std::fill(in.data.begin(), in.data.end(), tiny);
    const std::vector<tensor<float>> inputs{in};
    auto nonzero = [](const tensor<float>& t) { return std::count_if(t.data.begin(), t.data.end(), [](float v) { return v != 0; }); };
#ifdef _OPENMP
    const int threads = omp_get_max_threads();
    omp_set_num_threads(2);
#endif
    backend::dnnl flushing({.persist = false});
    CHECK(nonzero(flushing.execute(g, inputs)[0]) == 0);
    backend::dnnl keeping({.persist = false, .flush_denormals = false});
    CHECK(nonzero(keeping.execute(g, inputs)[0]) == static_cast<std::ptrdiff_t>(in.data.size()));
    // The calling thread and the OpenMP workers compute with denormals again.
    volatile float v = tiny;
    CHECK(v * 0.5f != 0);
#ifdef _OPENMP
    int flushed_workers = 0;
#pragma omp parallel reduction(+ : flushed_workers)
    {
        volatile float w = tiny;
        flushed_workers += (w * 0.5f == 0);
    }
    CHECK(flushed_workers == 0);
    omp_set_num_threads(threads);
#endif
    // A host program that flushes already keeps flushing after the call.
    constexpr unsigned flush_bits = backend::dnnl_impl::denormals_flushed::mxcsr_bits;
    const unsigned before = _mm_getcsr();
    _mm_setcsr(before | flush_bits);
    keeping.execute(g, inputs);
    flushing.execute(g, inputs);
    CHECK((_mm_getcsr() & flush_bits) == flush_bits);
    _mm_setcsr(before);
#endif
}

TEST_CASE("dnnl: elementwise operators after an elementwise operator run as its post-ops, with run-time operands") {
    // An RNN cell's gates (post_chain.hpp, fused_elementwise): adds and
    // multiplies by tensors computed earlier, full-size or broadcast,
    // activations and a constant smul, one primitive per chain.
    backend::dnnl b({.persist = false});
    std::mt19937_64 rng(23);
    graph g;
    auto x = g.input("x", {1, 256}), h = g.input("h", {1, 256}), c = g.input("c", {1, 256});
    auto cand = g.tanh(g.ewmul(x, g.weight("u", {1, 256}, rng)));
    auto gate = g.sigmoid(g.ewadd(g.ewadd(x, h), g.weight("bias", {256}, rng)));
    auto next = g.smul(g.ewadd(g.ewmul(gate, c), cand), g.weight("half", tensor<float>({1}, {0.5f})));
    auto late = g.ewadd(g.relu(g.ewadd(x, c)), g.ewmul(h, c));
    g.mark_output(next);
    g.mark_output(late);
    test::check_against_reference(g, 1e-5, 2, &b);
    const auto st = b.stats(g);
    // Twelve operators in four primitives: a chain stops only at an operand
    // the plan's order computes later (graph inputs, c among them, have
    // their buffers from the start, so no chain stops at c).
    CHECK(st.fused_ops == 8);
    CHECK(st.primitives == 4);
    CHECK(st.fallbacks == 0);

    // A recurrent state's chain through 40 steps: at most 32 post-ops a primitive.
    graph r;
    auto s = r.input("s", {1, 64}), in = r.input("in", {1, 64});
    auto state = r.ewadd(s, in);
    for (int t = 0; t < 40; ++t) state = t % 2 ? r.ewmul(state, in) : r.ewadd(in, state);
    r.mark_output(state);
    test::check_against_reference(r, 1e-4, 2, &b);
    CHECK(b.stats(r).fused_ops == 39);  // 1 + 32 + 8 steps of 41 operators
    CHECK(b.stats(r).primitives == 2);
}

TEST_CASE("dnnl: a negation read only by a sum runs inside it as a subtraction") {
    // An SRU cell (zoo/rnntc.hpp) as its model writes subtraction: c - u_x
    // and tanh(c) - x as sums with a smul by -1 of a product's slice and of
    // the input, which have no producer whose primitive could run them.
    backend::dnnl b({.persist = false});
    std::mt19937_64 rng(29);
    graph g;
    auto x = g.input("x", {4, 64}), c = g.input("c", {4, 64});
    auto neg = g.weight("minus_one", tensor<float>({1}, {-1.f}));
    auto u = g.matmul(x, g.weight("w", {64, 192}, rng));
    auto [ux, rest] = g.split(1, 64, u);
    auto [uf, ur] = g.split(1, 64, rest);
    auto f = g.sigmoid(g.ewadd(uf, g.weight("bf", {64}, rng)));
    auto r = g.sigmoid(g.ewadd(ur, g.weight("br", {64}, rng)));
    auto d = g.ewadd(c, g.smul(ux, neg));            // c - u_x: a step of its own
    auto c1 = g.ewadd(ux, g.ewmul(f, d));
    auto e = g.ewadd(g.smul(x, neg), g.tanh(c1));     // -x + tanh(c1): the negation first
    auto h = g.ewadd(x, g.ewmul(r, e));
    auto s = g.ewadd(g.ewmul(h, c1), g.smul(c, neg)); // h * c1 - c: a post-op of the product
    g.mark_output(h);
    g.mark_output(c1);
    g.mark_output(s);
    check_against_reference(g, 1e-5, 3, &b);
    auto smul_steps = [&](const graph& gr) {
        const auto p = b.compile(gr);  // held: the steps belong to it
        int n = 0;
        for (const auto& st : p->steps) n += st.node >= 0 && gr.nodes[static_cast<std::size_t>(st.node)].is_op(spec::op_kind::smul);
        return n;
    };
    CHECK(smul_steps(g) == 0);
    const auto st = b.stats(g);
    CHECK(st.fallbacks == 0);
    CHECK(st.fused_ops >= 3);  // the three negations, at least

    // Negations that stay steps: one the graph outputs, one beside a
    // broadcast operand (binary_sub broadcasts only its second source), and
    // of -a + -b the second.
    graph k;
    auto a = k.input("a", {4, 64}), bb = k.input("b", {4, 64});
    auto m1 = k.weight("minus_one", tensor<float>({1}, {-1.f}));
    auto na = k.smul(a, m1);
    k.mark_output(na);
    k.mark_output(k.ewadd(k.weight("bias", {64}, rng), k.smul(bb, m1)));
    k.mark_output(k.ewadd(k.smul(a, m1), k.smul(bb, m1)));
    check_against_reference(k, 1e-5, 4, &b);
    CHECK(smul_steps(k) == 3);
    CHECK(b.stats(k).fallbacks == 0);
}

TEST_CASE("dnnl: a constant matmul weight lies where gemm:jit reads it fastest, computing the same") {
    // [rows, 1024] x [1024, 1024]: rows 4 KiB apart (backend/dnnl/matmul.hpp,
    // gemm_weight_placement): 16 bytes into a cache line for 128 rows, on a
    // 32-byte boundary for 1 (2 to 64 rows run as an inner product where
    // oneDNN has a brgemm one: prefer_inner_product).
    backend::dnnl b({.persist = false});
    for (const auto& [rows, past] : {std::pair{128, 16}, std::pair{1, 0}}) {
        CAPTURE(rows);
        std::mt19937_64 rng(21);
        graph g;
        g.mark_output(g.matmul(g.input("x", {rows, 1024}), g.weight("w", {1024, 1024}, rng)));
        auto p = b.compile(g);
        const auto mm = std::find_if(p->steps.begin(), p->steps.end(), [](const auto& s) { return s.what == "matmul"; });
        REQUIRE(mm != p->steps.end());
        if (!mm->impl.starts_with("gemm")) {
            MESSAGE("oneDNN runs this matmul with ", mm->impl, ", not gemm: no placement to check");
            continue;
        }
        const auto w = std::find_if(mm->args.begin(), mm->args.end(), [](const auto& a) { return a.first == DNNL_ARG_WEIGHTS; });
        REQUIRE(w != mm->args.end());
        CHECK(reinterpret_cast<std::uintptr_t>(p->ptr(w->second)) % (past ? 64 : 32) == past);
        const auto in = backend::random_inputs(g, 3);
        backend::reference ref;
        CHECK(relative_error(p->run(in)[0], ref.execute(g, in)[0]) < 1e-4);
        // Another plan of the same weight tensor reads the same copy, if one was made.
        graph g2 = g;
        g2.outputs[0] = g2.relu(g2.outputs[0]);
        auto p2 = b.compile(g2);
        CHECK(p2->stats.shared_conversions == p->stats.shared_conversions + (p->stats.persistent_bytes ? 1 : 0));
    }
}

TEST_CASE("dnnl: a weight matmul of a few rows runs as a brgemm inner product where oneDNN has one, computing the same") {
    // backend/dnnl/matmul.hpp, prefer_inner_product: 2 to 64 rows, or up to
    // 128 with 2048 columns or more, k up to 2048; with the bias add and the
    // activation fused into the one step, and for a rank-3 input flattened to rows.
    backend::dnnl b({.persist = false});
    struct product { std::int64_t m, k, n; bool bias, relu; };
    for (const product s : {product{8, 1024, 1024, false, false}, product{64, 512, 768, true, false},
                            product{3, 300, 200, false, true}, product{64, 4096, 256, true, false},
                            product{128, 256, 2048, true, false}, product{128, 256, 512, true, false}}) {
        CAPTURE(s.m);
        CAPTURE(s.k);
        std::mt19937_64 rng(22);
        graph g;
        value y = g.matmul(g.input("x", {1, s.m, s.k}), g.weight("w", {s.k, s.n}, rng), {.act = s.relu ? relu : no_activation});
        if (s.bias) y = g.ewadd(y, g.weight("b", {s.n}, rng));
        g.mark_output(y);
        auto p = b.compile(g);
        const auto mm = std::find_if(p->steps.begin(), p->steps.end(), [](const auto& st) { return st.what.starts_with("matmul"); });
        REQUIRE(mm != p->steps.end());
        CHECK(mm->what == (s.bias ? "matmul + bias" : "matmul"));
        const bool inner_product = backend::dnnl_impl::prefer_inner_product(s.m, s.k, s.n);
        CHECK(inner_product == (s.k <= 2048 && (s.m <= 64 || s.n >= 2048)));
        if (inner_product && !mm->impl.starts_with("brgemm"))
            MESSAGE("oneDNN runs this product with ", mm->impl, ": no brgemm inner product here");
        if (!inner_product) CHECK_FALSE(mm->impl.starts_with("brgemm:avx2"));
        const auto in = backend::random_inputs(g, 3);
        backend::reference ref;
        CHECK(relative_error(p->run(in)[0], ref.execute(g, in)[0]) < 1e-4);
    }
}

TEST_CASE("dnnl runs every zoo model at a small size like the reference") {
    backend::dnnl b({.persist = false});
    for (const auto& m : zoo::models()) {
        INFO(m.name);
        zoo::options o{.batch = 1, .image = 32, .width_div = 16, .depth_div = 4, .length = 4};
        graph g;
        try {
            g = m.build(o);
        } catch (const tsopt::error& e) {
            // Some nets need a larger image (inception's stride-2 valid stem).
            MESSAGE(m.name, ": cannot build at image 32 (", std::string(e.what()), "), using image 96");
            o.image = 96;
            g = m.build(o);
        }
        double e = check_against_reference(g, 1e-4, 1, &b);
        MESSAGE(m.name, ": ", g.op_count(), " operators, relative error ", e, ", fallbacks ", b.stats(g).fallbacks);
        CHECK(b.stats(g).fallbacks == 0);
    }
}
