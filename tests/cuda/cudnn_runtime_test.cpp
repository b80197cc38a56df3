// GPU: the parallel runtime (streams, events, CUDA Graph capture and
// replay), end-to-end timing, pick_fastest, and the measured cost model's
// cache in memory and on disk. Exits 77 (SKIPPED) without a CUDA device.
#include <filesystem>

#include "gpu_main.hpp"
#include "graphs.hpp"
#include "tsopt/backend/reference/executor.hpp"
#include "tsopt/cost/sum.hpp"
#include "tsopt/zoo/zoo.hpp"

using namespace tsopt;
using namespace tsopt::test::cuda;
using backend::run_mode;

namespace {
std::filesystem::path fresh_dir(const std::string& tag) {
    auto d = std::filesystem::temp_directory_path() / ("tsopt-cudnn-test-" + tag + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(d);
    return d;
}
}  // namespace

TEST_CASE("cudnn runtime: sequential and multi-stream CUDA Graph runs agree, and agree with the reference") {
    backend::cudnn b({.persist = false});
    for (const auto& c : parallel_cases()) {
        INFO("graph '", c.name, "'");
        auto in = backend::random_inputs(c.g, 4);
        auto seq = b.execute(c.g, in, run_mode::sequential);
        auto par = b.execute(c.g, in, run_mode::multi_stream_graph);
        auto want = backend::reference{}.execute(c.g, in);
        REQUIRE(seq.size() == par.size());
        for (std::size_t k = 0; k < seq.size(); ++k) {
            CHECK(relative_error(par[k], seq[k]) <= 1e-6);
            CHECK(relative_error(par[k], want[k]) <= 1e-4);
        }
        CHECK(b.stats(c.g, run_mode::multi_stream_graph).streams > 1);
        CHECK(b.stats(c.g, run_mode::sequential).streams == 1);
        for (auto m : {run_mode::sequential, run_mode::sequential_graph, run_mode::multi_stream, run_mode::multi_stream_graph}) {
            double ms = b.time_end_to_end(c.g, in, 5, m);
            INFO("mode ", backend::to_string(m), ": ", ms, " ms");
            CHECK(ms > 0);
            CHECK(ms < 1000);
        }
    }
}

TEST_CASE("cudnn runtime: a small zoo model on multi-stream CUDA Graphs matches the reference") {
    backend::cudnn b({.persist = false});
    // The smallest images each model's valid-padded layers accept (squeezenet's
    // last max pool needs 48: at 32 it gets a 2x2 input).
    for (const auto& [name, image] : {std::pair{"squeezenet", 48}, std::pair{"nasnet_a", 32}}) {
        INFO("model ", name);
        graph g = zoo::build(name, {.image = image, .width_div = 8, .depth_div = 4});
        auto in = backend::random_inputs(g, 9);
        auto got = b.execute(g, in, run_mode::multi_stream_graph);
        auto want = backend::reference{}.execute(g, in);
        for (std::size_t k = 0; k < got.size(); ++k) CHECK(relative_error(got[k], want[k]) <= 1e-3);  // deep nets: ~1e-4..1e-3 (NOTES.md)
    }
}

TEST_CASE("cudnn runtime: measure() is cached in memory and on disk, keyed by the device") {
    auto dir = fresh_dir("measure");
    const auto c = parallel_cases()[0];
    std::size_t conv = 0;
    for (std::size_t i = 0; i < c.g.size(); ++i)
        if (c.g.nodes[i].is_op(spec::op_kind::conv2d)) { conv = i; break; }
    double first = 0;
    {
        backend::cudnn b({.cache_dir = dir});
        first = b.measure(c.g, conv);
        CHECK(first > 0);
        CHECK(b.measurements().misses == 1);
        CHECK(b.measure(c.g, conv) == first);
        CHECK(b.measurements().hits == 1);
        CHECK(b.measure(c.g, 0) == 0);  // the input costs nothing
        CHECK(std::filesystem::exists(b.measurements().file()));
        CHECK(b.measurements().machine().find(backend::cudnn_impl::device_name()) != std::string::npos);
    }
    {
        backend::cudnn b({.cache_dir = dir});
        CHECK(b.measurements().loaded == 1);
        CHECK(b.measure(c.g, conv) == first);
        CHECK(b.measurements().misses == 0);
    }
    {
        backend::cudnn b({.cache_dir = dir});
        cost::measured<backend::cudnn> m{b};
        CHECK(m.graph_cost(c.g) > 0);
    }
    std::filesystem::remove_all(dir);
}

TEST_CASE("cudnn runtime: pick_fastest rejects a wrong candidate and times the others") {
    backend::cudnn b({.persist = false});
    auto cs = parallel_cases();
    const graph& good = cs[2].g;
    graph same = good;  // the same graph again: its plan is reused
    graph wrong = good;
    for (auto& n : wrong.nodes)
        if (n.is_op(spec::op_kind::matmul)) { n.params[spec::matmul_p::act] = 0; break; }
    std::vector<graph> cands{good, same, wrong};
    auto in = backend::random_inputs(good, 2);
    auto r = b.pick_fastest(cands, in, 5);
    CHECK(!r.rejected[0]);
    CHECK(!r.rejected[1]);
    CHECK(r.rejected[2]);
    CHECK(r.best < 2);
    CHECK(std::isfinite(r.ms[r.best]));
}
