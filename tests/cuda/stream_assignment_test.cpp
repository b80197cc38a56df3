// Stream assignment runs everywhere (no GPU needed): valid schedules and the
// minimum stream counts of AutoGraph's Figure 7 chain/branch cases.
#include <doctest/doctest.h>

#include <random>

#include "tsopt/backend/parallel/stream_assignment.hpp"

using namespace tsopt::parallel;

TEST_CASE("a chain runs on one stream with no events") {
    // 0 -> 1 -> 2 -> 3
    std::vector<std::vector<int>> succ{{1}, {2}, {3}, {}};
    auto s = assign_streams(succ);
    CHECK(s.num_streams() == 1);
    CHECK(s.events.empty());
    CHECK(check_schedule(succ, s) == "");
}

TEST_CASE("fork-join with two branches uses two streams and two events") {
    // 0 -> {1 -> 2, 3 -> 4} -> 5
    std::vector<std::vector<int>> succ{{1, 3}, {2}, {5}, {4}, {5}, {}};
    auto s = assign_streams(succ);
    CHECK(s.num_streams() == 2);
    CHECK(s.events.size() == 2);  // fork and join
    CHECK(s.stream_of[1] != s.stream_of[3]);
    CHECK(check_schedule(succ, s) == "");
}

TEST_CASE("three parallel branches need three streams; transitive edges need no event") {
    // 0 -> {1, 2, 3} -> 4, plus the implied edge 0 -> 4
    std::vector<std::vector<int>> succ{{1, 2, 3, 4}, {4}, {4}, {4}, {}};
    auto s = assign_streams(succ);
    CHECK(s.num_streams() == 3);
    CHECK(s.events.size() == 4);  // 2 forks + 2 joins; 0 -> 4 is implied
    CHECK(check_schedule(succ, s) == "");
}

TEST_CASE("the checker rejects a schedule that misses a dependency") {
    std::vector<std::vector<int>> succ{{1, 3}, {2}, {5}, {4}, {5}, {}};
    auto s = assign_streams(succ);
    REQUIRE(!s.events.empty());
    s.events.pop_back();
    CHECK(check_schedule(succ, s) != "");
}

TEST_CASE("random DAGs always get valid schedules with streams = minimum path cover") {
    std::mt19937 rng(7);
    for (int trial = 0; trial < 50; ++trial) {
        int n = 2 + static_cast<int>(rng() % 30);
        std::vector<std::vector<int>> succ(static_cast<std::size_t>(n));
        for (int u = 0; u < n; ++u)
            for (int v = u + 1; v < n; ++v)
                if (rng() % 5 == 0) succ[static_cast<std::size_t>(u)].push_back(v);
        auto s = assign_streams(succ);
        CHECK(check_schedule(succ, s) == "");
        // Dilworth: the minimum number of chains covering the reachability
        // order equals the largest antichain; no two ops of one stream may
        // be mutually unordered.
        auto red = transitive_reduction(succ);
        CHECK(s.num_streams() <= static_cast<std::size_t>(n));
        for (auto& st : s.streams)
            for (std::size_t i = 0; i + 1 < st.size(); ++i) {
                auto& r = red[static_cast<std::size_t>(st[i])];
                CHECK(std::find(r.begin(), r.end(), st[i + 1]) != r.end());
            }
    }
}

TEST_CASE("an IR graph with two parallel convolutions maps to two streams") {
    tsopt::graph g;
    std::mt19937_64 rng(1);
    auto x = g.input("x", tsopt::shape{1, 4, 8, 8});
    auto a = g.conv2d(x, g.weight("w1", tsopt::shape{4, 4, 3, 3}, rng));
    auto b = g.conv2d(x, g.weight("w2", tsopt::shape{4, 4, 1, 1}, rng));
    g.mark_output(g.ewadd(a, b));
    auto d = operator_dag(g);
    CHECK(d.node_of.size() == 3);
    auto s = assign_streams(d.succ);
    CHECK(s.num_streams() == 2);
    CHECK(check_schedule(d.succ, s) == "");
}
