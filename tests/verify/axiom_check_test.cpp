// Axiom validation by symbolic execution, and the redundancy check.
#include <doctest/doctest.h>

#include "axiom_check.hpp"
#include "tsopt/spec/axioms.hpp"

using namespace tsopt;
using namespace tsopt::spec;
using namespace tsopt::spec::vars;

TEST_CASE("axiom check: every axiom of spec::all_axioms validates") {
    gen::check_options opt;  // extents up to 4, 2 samples per parameter combination
    for (const auto& a : all_axioms) {
        auto r = gen::check_axiom(a, opt);
        INFO(r.name, ": ", r.failure);
        CHECK(r.ok);
        CHECK(r.instances > 0);
    }
}

TEST_CASE("axiom check: 'conv is linear for every activation' is caught") {
    constexpr axiom wrong = make_axiom(
        "conv-linear-any-act", conv2d(p0, p1, p2, p3, x, ewadd(y, z)) ==
                                   ewadd(conv2d(p0, p1, p2, p3, x, y), conv2d(p0, p1, p2, p3, x, z)));
    auto r = gen::check_axiom(wrong);
    CHECK_FALSE(r.ok);
    CHECK(r.failure.find("counterexample") != std::string::npos);
    // ... while the real axiom (activation none) passes.
    CHECK(gen::check_axiom(*find_axiom("conv-distrib-ewadd-weight")).ok);
}

TEST_CASE("axiom check: other wrong axioms are caught") {
    constexpr axiom wrong_distrib = make_axiom("wrong-distrib", ewmul(x, ewadd(y, z)) == ewadd(ewmul(x, y), z));
    constexpr axiom wrong_axis = make_axiom(
        "wrong-transpose-concat",
        transpose(pconst(pack_perm({1, 0})), concat(pconst(0), x, y)) ==
            concat(pconst(0), transpose(pconst(pack_perm({1, 0})), x), transpose(pconst(pack_perm({1, 0})), y)));
    constexpr axiom wrong_split = make_axiom("wrong-split", split0(p0, concat(p0, x, y)) == y);
    for (const axiom* a : {&wrong_distrib, &wrong_axis, &wrong_split}) {
        auto r = gen::check_axiom(*a);
        INFO(a->name, ": ", r.failure);
        CHECK_FALSE(r.ok);
    }
}

TEST_CASE("axiom check: TASO's restrictions matter under full broadcasting/grouped semantics") {
    gen::check_options full;
    full.typing = spec::full_semantics;
    full.samples = 6;
    // Channel-concatenated convs only sum for ungrouped convolutions.
    auto r = gen::check_axiom(*find_axiom("conv-concat-sum"), full);
    CHECK_FALSE(r.ok);
    CHECK(gen::check_axiom(*find_axiom("conv-concat-sum")).ok);
}

TEST_CASE("axiom check: exhaustive mode on a small bound") {
    gen::check_options opt;
    opt.exhaustive = true;
    opt.max_extent = 2;
    auto r = gen::check_axiom(*find_axiom("concat-geometry"), opt);
    INFO(r.failure);
    CHECK(r.ok);
    CHECK(r.instances > 20);
}

TEST_CASE("redundancy: a duplicated axiom is found redundant, an independent one is not") {
    constexpr std::array set{make_axiom("comm", ewadd(x, y) == ewadd(y, x)),
                             make_axiom("comm-copy", ewadd(y, x) == ewadd(x, y)),
                             make_axiom("relu-concat", relu(concat(p0, x, y)) == concat(p0, relu(x), relu(y)))};
    auto red = gen::find_redundant(set, 1000);
    REQUIRE(red.size() == 3);
    CHECK(red[0].result.v == gen::verdict::proven);
    CHECK(red[1].result.v == gen::verdict::proven);
    CHECK(red[2].result.v != gen::verdict::proven);
}

TEST_CASE("axiom check: spec::taso_model_only lists exactly the typing each axiom needs") {
    // Rules from an axiom are applied under exactly the restrictions listed
    // for it, so: with them it validates, and dropping any one of them (or,
    // for unlisted axioms, all of them) is either harmless (unlisted) or
    // breaks it (listed).
    gen::check_options opt;
    opt.samples = 8;
    for (const auto& a : all_axioms) {
        const std::uint8_t needs = typing_needed(a.name);
        opt.typing = needs;
        auto r = gen::check_axiom(a, opt);
        INFO(r.name, ": ", r.failure);
        CHECK(r.ok);
        for (std::uint8_t bit : {spec::no_broadcast, spec::ungrouped_conv, spec::matmul_2d}) {
            if (!(needs & bit)) continue;
            opt.typing = static_cast<std::uint8_t>(needs & ~bit);
            CHECK_MESSAGE(!gen::check_axiom(a, opt).ok, a.name, " validates without typing bit ", int(bit));
        }
    }
}
