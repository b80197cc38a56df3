// Host-only tests of the cuDNN backend's planning (include/tsopt/backend/
// cudnn/compile.hpp): runs on every machine, no GPU and no CUDA library
// needed. For every case graph and both schedules (one stream; Nimble's
// multi-stream assignment) the plan must be valid (check_plan: schedule
// orders every dependency, buffers large enough, no two possibly-live arena
// buffers share bytes), and executing the plan's steps with their exact
// library semantics on the host (plan_emulator.hpp) must reproduce the
// reference backend — which checks the lowerings' index math (the
// transposed-operand GEMM trick, layouts, broadcasting, copies) without a GPU.
#include <doctest/doctest.h>

#include "graphs.hpp"
#include "plan_emulator.hpp"
#include "tsopt/backend/reference/executor.hpp"

using namespace tsopt;
using namespace tsopt::test::cuda;
namespace ci = tsopt::backend::cudnn_impl;

namespace {

ci::opaque_map opaque_impls() { return {{"Negate", negate_impl}}; }

backend::reference reference_with_opaque() {
    backend::reference r;
    r.opaque_impls["Negate"] = negate_impl;
    return r;
}

void check_case(const case_graph& c, bool multi) {
    INFO("graph '", c.name, "', ", multi ? "multi-stream" : "sequential");
    auto p = ci::compile_plan(c.g, multi, opaque_impls());
    CHECK(ci::check_plan(c.g, *p) == "");
    auto in = backend::random_inputs(c.g, 5);
    auto want = reference_with_opaque().execute(c.g, in);
    for (bool reorder : {false, true}) {
        INFO("emulated in ", reorder ? "last-stream-first order" : "topological order");
        plan_emulator emu(*p);
        auto got = emu.run(in, reorder);
        REQUIRE(got.size() == want.size());
        for (std::size_t k = 0; k < got.size(); ++k) {
            INFO("output ", k, " shape ", want[k].shape.str());
            CHECK(relative_error(got[k], want[k]) <= 1e-5);
        }
    }
}

}  // namespace

TEST_CASE("cudnn plan: every operator and layout case is valid and emulates to the reference") {
    for (const auto& c : op_cases())
        for (bool multi : {false, true}) check_case(c, multi);
}

TEST_CASE("cudnn plan: parallel graphs get several streams, events, and stay correct") {
    for (const auto& c : parallel_cases()) {
        for (bool multi : {false, true}) check_case(c, multi);
        auto seq = ci::compile_plan(c.g, false, {});
        auto par = ci::compile_plan(c.g, true, {});
        INFO("graph '", c.name, "'");
        CHECK(seq->stats.streams == 1);
        CHECK(seq->stats.events == 0);
        CHECK(par->stats.streams > 1);
        CHECK(par->stats.events > 0);
        // Concurrent streams may share less memory, never more.
        CHECK(par->stats.arena_bytes >= seq->stats.arena_bytes);
        CHECK(seq->stats.arena_bytes <= seq->stats.naive_bytes);
    }
}

TEST_CASE("cudnn plan: a long chain reuses memory on one stream") {
    graph g;
    std::mt19937_64 rng(3);
    value h = g.input("x", {16, 64});
    for (int l = 0; l < 8; ++l) h = g.matmul(h, g.weight("w" + std::to_string(l), {64, 64}, rng), {.act = relu});
    g.mark_output(h);
    auto p = ci::compile_plan(g, false, {});
    CHECK(ci::check_plan(g, *p) == "");
    CHECK(p->stats.steps == 8);
    CHECK(p->stats.conversions == 0);
    // 7 intermediate [16,64] buffers (the last is a dedicated output): two suffice.
    CHECK(p->stats.arena_bytes == 2 * 16 * 64 * sizeof(float));
    CHECK(p->stats.naive_bytes == 7 * 16 * 64 * sizeof(float));
}

TEST_CASE("cudnn plan: layouts — col-major matmul output makes the transpose a view, no conversion") {
    graph g;
    value a = g.input("a", {6, 5}), b = g.input("b", {5, 4});
    value c = g.matmul(a, b);
    g.nodes[static_cast<std::size_t>(c.node)].out_layout = spec::layout::col_major;
    g.mark_output(g.transpose(c, {1, 0}));
    auto p = ci::compile_plan(g, false, {});
    CHECK(ci::check_plan(g, *p) == "");
    CHECK(p->stats.views == 1);
    CHECK(p->stats.conversions == 0);
    CHECK(p->stats.steps == 1);  // the GEMM only
    auto* gemm = std::get_if<ci::gemm_step>(&p->steps[0].body);
    REQUIRE(gemm != nullptr);
    CHECK(gemm->c.layout == ci::phys::col);
    CHECK(gemm->m == 6);  // C = A B column-major: no transposed-operand trick
    CHECK(gemm->trans_a);
    CHECK(gemm->trans_b);
}

TEST_CASE("cudnn plan: NHWC convolutions read input and filter in NHWC, pools keep one format") {
    for (const auto& c : op_cases()) {
        if (c.name.find("nhwc") == std::string::npos) continue;
        auto p = ci::compile_plan(c.g, false, {});
        int nhwc_convs = 0;
        for (auto& st : p->steps) {
            if (auto* cv = std::get_if<ci::conv_step>(&st.body)) {
                CHECK(cv->x.layout == cv->y.layout);
                CHECK(cv->w.layout == cv->y.layout);
                nhwc_convs += cv->y.layout == ci::phys::nhwc;
            }
            if (auto* pl = std::get_if<ci::pool_step>(&st.body)) CHECK(pl->x.layout == pl->y.layout);
        }
        CHECK(nhwc_convs == 2);
    }
}

TEST_CASE("cudnn plan: explicit reorders are device conversions, never host steps") {
    for (const auto& c : op_cases()) {
        if (c.name.find("explicit reorders") == std::string::npos) continue;
        auto p = ci::compile_plan(c.g, false, {});
        CHECK(p->stats.host_steps == 0);
        CHECK(p->stats.views >= 1);  // the reorder into the layout the value already has
    }
}

TEST_CASE("cudnn plan: matmul batch runs collapse into one strided call where possible") {
    graph g;
    g.mark_output(g.matmul(g.input("a", {2, 3, 4, 5}), g.input("b", {5, 6})));
    g.mark_output(g.matmul(g.input("c", {2, 1, 4, 5}), g.input("d", {3, 5, 6})));
    auto p = ci::compile_plan(g, false, {});
    REQUIRE(p->steps.size() == 2);
    auto& g1 = std::get<ci::gemm_step>(p->steps[0].body);
    REQUIRE(g1.runs.size() == 1);
    CHECK(g1.runs[0].count == 6);
    CHECK(g1.runs[0].a_stride == 0);  // cuBLAS's first operand is B (shared)
    auto& g2 = std::get<ci::gemm_step>(p->steps[1].body);
    std::int64_t total = 0;
    for (auto& r : g2.runs) total += r.count;
    CHECK(total == 6);
    CHECK(g2.runs.size() <= 2);  // per outer batch of a, one run over b's batches
}

TEST_CASE("cudnn plan: opaque node without an implementation is an error naming it") {
    graph g;
    value x = g.input("x", {2});
    g.mark_output(g.opaque(negate_op(), {x}, {shape{2}}, "neg")[0]);
    CHECK_THROWS_WITH_AS(ci::compile_plan(g, false, {}), doctest::Contains("'neg'"), error);
}
