// The verifier's shape facts (what the shape rules say about `dim` of an
// operator's output) and the deterministic resource limit. Queries here are
// bounded by Z3's rlimit, not the wall clock, so their outcome does not depend
// on machine load (the wall clock is only a generous hang guard).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tsopt/spec/axioms.hpp"
#include "verifier.hpp"

using namespace tsopt;
using namespace tsopt::spec;

namespace {
constexpr unsigned guard_ms = 120000, rlimit = 2000000;

std::vector<axiom> named(std::initializer_list<const char*> names) {
    std::vector<axiom> r;
    for (auto n : names) {
        const axiom* a = find_axiom(n);
        REQUIRE_MESSAGE(a != nullptr, "no axiom ", n);
        r.push_back(*a);
    }
    return r;
}
}  // namespace

TEST_CASE("shape facts: TASO's lemma avgpool-concat-batch follows from conv-cpool-avgpool and conv-concat-batch") {
    // avgpool(concat0(x, y)) = conv(concat0(x, y), cpool(dim(concat0(x, y), 1)))
    // needs dim(concat0(x, y), 1) == dim(x, 1) to continue with conv-concat-batch.
    auto others = named({"conv-cpool-avgpool", "conv-concat-batch"});
    const axiom& lemma = *find_axiom("avgpool-concat-batch");
    gen::verifier with(others, guard_ms, rlimit, true), without(others, guard_ms, rlimit, false);
    auto a = with.prove(lemma), b = without.prove(lemma);
    INFO("with: ", gen::to_string(a.v), " ", a.detail, "; without: ", gen::to_string(b.v), " ", b.detail);
    CHECK(a.v == gen::verdict::proven);
    CHECK(b.v != gen::verdict::proven);
    CHECK(a.rlimit_used > 0);
    CHECK(a.rlimit_used < rlimit);
}

TEST_CASE("shape facts do not prove wrong equations") {
    using namespace tsopt::spec::vars;
    gen::verifier v(all_axioms, guard_ms, rlimit, true);
    // The lemma over the wrong axis, and pooling that does not commute with a
    // channel split of its window.
    constexpr axiom wrong_axis = make_axiom(
        "avgpool-concat-wrong", concat(pconst(0), avgpool(p0, p1, p2, p3, p4, p5, x), avgpool(p0, p1, p2, p3, p4, p5, y)) ==
                                    avgpool(p0, p1, p2, p3, p4, p5, concat(pconst(1), x, y)));
    constexpr axiom swap = make_axiom("split-swap", split0(pconst(0), concat(pconst(0), x, y)) == y);
    for (const axiom& a : {wrong_axis, swap}) {
        auto r = v.prove(a);
        CHECK_MESSAGE(r.v != gen::verdict::proven, a.name, ": ", r.detail);
    }
}

TEST_CASE("rlimit: a query's resource count is reproducible and bounds it") {
    const axiom& lemma = *find_axiom("avgpool-concat-batch");
    auto others = named({"conv-cpool-avgpool", "conv-concat-batch"});
    gen::verifier v(others, guard_ms, rlimit, true);
    auto a = v.prove(lemma), b = v.prove(lemma);  // the second query runs in a fresh context too
    REQUIRE(a.v == gen::verdict::proven);
    CHECK(b.v == gen::verdict::proven);
    CHECK(a.rlimit_used == b.rlimit_used);
    // Just below what the proof needs, the same query is cut off by the rlimit.
    gen::verifier tight(others, guard_ms, unsigned(a.rlimit_used / 2), true);
    auto c = tight.prove(lemma);
    CHECK(c.v == gen::verdict::timeout);
    CHECK(c.detail.find("(rlimit)") != std::string::npos);
    // The instantiation cap is honoured the same way.
    REQUIRE(a.instances > 1);
    gen::verifier capped(others, guard_ms, rlimit, true);
    capped.limit_instances(unsigned(a.instances / 2));
    auto d = capped.prove(lemma);
    CHECK(d.v != gen::verdict::proven);
    CHECK(d.instances < a.instances);
}
