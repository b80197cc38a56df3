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
        // Axioms about grouped convolutions have no instance in TASO's model.
        opt.typing = outside_taso_model(a.name) ? spec::full_semantics : spec::taso_typing;
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

TEST_CASE("axiom check: conv-concat-grouped needs its conditions, and TASO's typing has no instance of it") {
    const axiom& grouped = *find_axiom("conv-concat-grouped");
    REQUIRE(grouped.num_where == 2);
    gen::check_options full;
    full.typing = spec::full_semantics;
    full.samples = 8;
    auto ok = gen::check_axiom(grouped, full);
    INFO(ok.failure);
    CHECK(ok.ok);
    // Under TASO's typing the merged conv is always grouped: nothing type-checks.
    auto taso = gen::check_axiom(grouped);
    CHECK_FALSE(taso.ok);
    CHECK(taso.instances == 0);
    // The same equation with fewer conditions is caught. Without "equal
    // output channels" (y0 == w0): two ungrouped convs of 1 and 3 output
    // channels become a 2-group conv of 2 per group. Without any condition,
    // different group counts mix too. (Dropping only "equal input channels"
    // keeps the equation true for every shape with extents <= 4: conv's
    // divisibility rules out the counterexamples there, the smallest needs 6
    // output channels, so this bound cannot show that one.)
    constexpr axiom no_conditions = make_axiom(
        "grouped-no-conditions",
        concat(pconst(1), conv2d(p0, p1, p2, p3, x, y), conv2d(p0, p1, p2, p3, z, w)) ==
            conv2d(p0, p1, p2, p3, concat(pconst(1), x, z), concat(pconst(0), y, w)));
    constexpr axiom same_inputs_only = make_axiom(
        "grouped-same-input-channels-only",
        concat(pconst(1), conv2d(p0, p1, p2, p3, x, y), conv2d(p0, p1, p2, p3, z, w)) ==
            conv2d(p0, p1, p2, p3, concat(pconst(1), x, z), concat(pconst(0), y, w)),
        {equal(pdim(x.root, 1), pdim(z.root, 1))});
    for (const axiom* a : {&no_conditions, &same_inputs_only}) {
        auto r = gen::check_axiom(*a, full);
        INFO(a->name, ": ", r.failure);
        CHECK_FALSE(r.ok);
        CHECK(r.failure.find("counterexample") != std::string::npos);
    }
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
