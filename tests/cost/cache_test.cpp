// op_key equality, hashing, text round trip; op_cache hits and persistence.
#include <doctest/doctest.h>

#include <random>
#include <sstream>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "tsopt/backend/measure_cache.hpp"
#include "tsopt/cost/cache.hpp"

using namespace tsopt;

namespace {
struct two_convs {
    graph g;
    value x, a, b, c, d;
    two_convs() {
        std::mt19937_64 rng(1);
        x = g.input("x", {1, 8, 16, 16});
        auto w1 = g.weight("w1", {8, 8, 3, 3}, rng);
        auto w2 = g.weight("w2", {8, 8, 3, 3}, rng);
        a = g.conv2d(x, w1);                  // same kind, params, shapes as b
        b = g.conv2d(x, w2);
        c = g.conv2d(x, w1, {.stride = 2});   // other parameters
        d = g.conv2d(x, w1, {.act = relu});
        g.mark_output(a);
    }
};
}  // namespace

TEST_CASE("op_key: equal for identical operator instances, different otherwise") {
    two_convs t;
    auto ka = cost::op_key::of(t.g, static_cast<std::size_t>(t.a.node));
    auto kb = cost::op_key::of(t.g, static_cast<std::size_t>(t.b.node));
    auto kc = cost::op_key::of(t.g, static_cast<std::size_t>(t.c.node));
    auto kd = cost::op_key::of(t.g, static_cast<std::size_t>(t.d.node));
    CHECK(ka == kb);
    CHECK(ka.hash() == kb.hash());
    CHECK_FALSE(ka == kc);
    CHECK_FALSE(ka == kd);
    CHECK(ka.hash() != kc.hash());
    CHECK(ka.hash() != kd.hash());

    // The output layout is part of the key, and so is an input's layout.
    t.g.nodes[static_cast<std::size_t>(t.b.node)].out_layout = spec::layout::nhwc;
    auto kb2 = cost::op_key::of(t.g, static_cast<std::size_t>(t.b.node));
    CHECK_FALSE(ka == kb2);
    t.g.nodes[static_cast<std::size_t>(t.x.node)].out_layout = spec::layout::nhwc;
    CHECK_FALSE(cost::op_key::of(t.g, static_cast<std::size_t>(t.a.node)) == ka);

    // Different input shapes.
    graph h;
    std::mt19937_64 rng(1);
    auto y = h.input("x", {1, 8, 32, 32});
    auto w = h.weight("w", {8, 8, 3, 3}, rng);
    auto e = h.conv2d(y, w);
    CHECK_FALSE(cost::op_key::of(h, static_cast<std::size_t>(e.node)) == ka);
}

// hash_of is what a cost model looks prices up by: it must be the key's
// hash for every operator, opaque ones and NHWC ones included.
TEST_CASE("op_key::hash_of(g, i) is op_key::of(g, i).hash() without building the key") {
    auto check_all = [](const graph& g) {
        std::size_t ops = 0;
        for (std::size_t i = 0; i < g.size(); ++i) {
            if (g.nodes[i].kind == node_kind::input || g.nodes[i].kind == node_kind::weight) continue;
            CAPTURE(g.nodes[i].name);
            CHECK(cost::op_key::hash_of(g, i) == cost::op_key::of(g, i).hash());
            ++ops;
        }
        return ops;
    };
    two_convs t;
    t.g.nodes[static_cast<std::size_t>(t.b.node)].out_layout = spec::layout::nhwc;
    t.g.nodes[static_cast<std::size_t>(t.x.node)].out_layout = spec::layout::nhwc;
    auto op = std::make_shared<opaque_op>(opaque_op{"Mystery", "com.example", "attrs", 1});
    auto o = t.g.opaque(op, {t.a, t.c}, {shape{1, 8, 16, 16}}, "mystery");
    t.g.mark_output(t.g.relu(o[0]));
    CHECK(check_all(t.g) == 6);
    // Hashes that differ where the keys do.
    CHECK(cost::op_key::hash_of(t.g, static_cast<std::size_t>(t.a.node)) !=
          cost::op_key::hash_of(t.g, static_cast<std::size_t>(t.c.node)));
    // Matrices, column-major producers, a multi-output split, a concat of many.
    graph m;
    std::mt19937_64 rng(3);
    auto x = m.input("x", {4, 6});
    auto y = m.matmul(x, m.weight("w", {6, 8}, rng));
    m.nodes[static_cast<std::size_t>(y.node)].out_layout = spec::layout::col_major;
    auto [left, right] = m.split(1, 3, m.relu(y));
    m.mark_output(m.concat(1, {left, right, left, right, left}));
    CHECK(check_all(m) == 4);
}

TEST_CASE("op_key: inputs and weights have no key") {
    two_convs t;
    CHECK_THROWS_WITH_AS(cost::op_key::of(t.g, 0), doctest::Contains("is not an operator"), error);
    CHECK_THROWS_AS(cost::op_key::of(t.g, 999), error);
}

TEST_CASE("op_key: text form round-trips, malformed text is rejected with a reason") {
    two_convs t;
    for (value v : {t.a, t.c, t.d}) {
        auto k = cost::op_key::of(t.g, static_cast<std::size_t>(v.node));
        auto back = cost::op_key::parse(k.str());
        CHECK(back == k);
        CHECK(back.str() == k.str());
    }
    CHECK(cost::op_key::of(t.g, static_cast<std::size_t>(t.a.node)).str() ==
          "conv2d|p=1,1,1,0,1,1,0,0|in=[1,8,16,16]:0;[8,8,3,3]:0|out=0");
    // Opaque operators.
    graph h;
    auto x = h.input("x", {2, 3});
    auto op = std::make_shared<opaque_op>(opaque_op{"Erf", "", "attrs", 0});
    auto y = h.opaque(op, {x}, {shape{2, 3}});
    auto k = cost::op_key::of(h, static_cast<std::size_t>(y[0].node));
    CHECK(cost::op_key::parse(k.str()) == k);
    CHECK_THROWS_WITH_AS(cost::op_key::parse("nosuchop|p=0,0,0,0,0,0,0,0|in=|out=0"), doctest::Contains("unknown operator"), error);
    CHECK_THROWS_WITH_AS(cost::op_key::parse("relu|p=0,0|in=|out=0"), doctest::Contains("expected 8 parameters"), error);
    CHECK_THROWS_AS(cost::op_key::parse("relu"), error);
}

TEST_CASE("op_cache: computes once per key, saves and loads") {
    two_convs t;
    cost::op_cache<double> cache;
    int calls = 0;
    auto f = [&] { ++calls; return 1.5; };
    for (value v : {t.a, t.b, t.c}) cache.get_or(cost::op_key::of(t.g, static_cast<std::size_t>(v.node)), f);
    CHECK(calls == 2);  // a and b share a key
    CHECK(cache.hits() == 1);
    CHECK(cache.misses() == 2);
    std::stringstream ss;
    cache.save(ss);
    cost::op_cache<double> other;
    CHECK(other.load(ss) == 2);
    auto* v = other.find(cost::op_key::of(t.g, static_cast<std::size_t>(t.b.node)));
    REQUIRE(v);
    CHECK(*v == 1.5);
    std::stringstream bad("relu|p=0,0,0,0,0,0,0,0|in=[2]:0|out=0 no-tab\n");
    CHECK_THROWS_WITH_AS(other.load(bad), doctest::Contains("line 1"), error);
}

// backend/measure_cache.hpp (host-only): times outside 1 ns .. 1 hour in the
// file mean the file is corrupt (issue 20: 0 and 1e308 were accepted), and
// the file is rewritten atomically.
TEST_CASE("measure_cache: implausible times in the file are rejected; saves are atomic") {
    namespace fs = std::filesystem;
    auto dir = fs::temp_directory_path() / ("tsopt_measure_cache_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    auto file = dir / "m.tsv";
    for (const char* bad : {"0", "1e308", "-1", "nan"}) {
        {
            std::ofstream(file) << "tsopt-measure-cache v1\nmachine\tm\nconv2d|k\t" << bad << "\n";
        }
        backend::measure_cache c("test", "m", file);
        CHECK_MESSAGE(c.size() == 0, bad);
    }
    {
        std::ofstream(file) << "tsopt-measure-cache v1\nmachine\tm\nconv2d|k\t0.25\n";
    }
    backend::measure_cache c("test", "m", file);
    CHECK(c.size() == 1);
    c.put("relu|k", 0.0);  // below timer resolution: stored as 1 ns, so the file reloads
    backend::measure_cache again("test", "m", file);
    CHECK(again.size() == 2);
    CHECK(*again.find("relu|k") == backend::measure_cache::min_ms);
    std::size_t entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++entries;
    CHECK(entries == 1);  // no temporary left beside the file
    fs::remove_all(dir);
}
