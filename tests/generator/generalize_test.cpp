// Rules over parameter variables (issue #19 part 2): which slots become
// variables, that Z3 alone decides which generalizations replace their
// instances, and that a generalized rule keeps a graph's meaning at values
// the enumeration never produced (stride 3, dilation 2, pool windows 2x2 and
// 5x5).
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "../rewrite/helpers.hpp"
#include "gen.hpp"
#include "tsopt/io/rule_listing.hpp"
#include "tsopt/rewrite/apply.hpp"
#include "tsopt/rewrite/match.hpp"
#include "tsopt/rules/generated_rules.hpp"

using namespace tsopt;
using namespace tsopt::gen;
using spec::op_kind;

namespace {
io::listed_rule rule(const std::string& text) { return io::parse_rule_line("r: " + text, "test"); }

// A rule of the committed snapshot, found by its text (the names' hash
// suffixes say nothing of what a rule does); null when it has none.
const rewrite::rule* snapshot_rule(std::string_view text) {
    for (const auto& r : tsopt::rules::generated())
        if (r.text == text) return &r;
    return nullptr;
}

}  // namespace

TEST_CASE("generalize_params: a slot with one value throughout becomes a variable; two values stay constants") {
    // relu fused into conv: act is 0 on one side and 1 on the other (the
    // rule relates them), so it stays; strides, padding and dilations become
    // variables, one per slot name.
    auto fused = generalize_params(rule(
        "(relu (conv2d{stride_h=2,stride_w=2,pad=1,act=0,dil_h=1,dil_w=1} ?x ?y)) => "
        "(conv2d{stride_h=2,stride_w=2,pad=1,act=1,dil_h=1,dil_w=1} ?x ?y)"));
    REQUIRE(fused);
    CHECK(fused->text ==
          "(relu (conv2d{stride_h=$3,stride_w=$4,pad=$2,act=0,dil_h=$0,dil_w=$1} ?x ?y)) => "
          "(conv2d{stride_h=$3,stride_w=$4,pad=$2,act=1,dil_h=$0,dil_w=$1} ?x ?y)");
    CHECK(fused->num_param_vars == 5);
    // Two convs of different strides: stride_h and stride_w stay as enumerated.
    auto mixed = generalize_params(rule(
        "(ewadd (conv2d{stride_h=1,stride_w=1,pad=1,act=0,dil_h=1,dil_w=1} ?x ?y) "
        "(conv2d{stride_h=2,stride_w=2,pad=1,act=0,dil_h=1,dil_w=1} ?x ?y)) => "
        "(ewadd (conv2d{stride_h=2,stride_w=2,pad=1,act=0,dil_h=1,dil_w=1} ?x ?y) "
        "(conv2d{stride_h=1,stride_w=1,pad=1,act=0,dil_h=1,dil_w=1} ?x ?y))"));
    REQUIRE(mixed);
    CHECK(mixed->text.find("stride_h=1") != std::string::npos);
    CHECK(mixed->text.find("stride_h=2") != std::string::npos);
    CHECK(mixed->text.find("pad=$") != std::string::npos);
    // `keep` holds a slot as enumerated; nothing left to generalize gives nullopt.
    const auto mixed_pool = rule(
        "(relu (maxpool{kh=3,kw=3,stride_h=1,stride_w=2,pad=1,act=0} ?x)) => "
        "(maxpool{kh=3,kw=3,stride_h=2,stride_w=1,pad=1,act=1} ?x)");
    std::string_view pad_and_window[] = {"pad", "kh", "kw"};
    CHECK_FALSE(generalize_params(mixed_pool, pad_and_window));
    // Pool windows are any_value slots: kh and kw become variables of their
    // own (non-square windows match too), and a cpool stands for the window
    // it averages, so it takes the same variables.
    std::string_view pad[] = {"pad"};
    auto windows = generalize_params(mixed_pool, pad);
    REQUIRE(windows);
    CHECK(windows->text ==
          "(relu (maxpool{kh=$0,kw=$1,stride_h=1,stride_w=2,pad=1,act=0} ?x)) => "
          "(maxpool{kh=$0,kw=$1,stride_h=2,stride_w=1,pad=1,act=1} ?x)");
    auto as_conv = generalize_params(rule(
        "(avgpool{kh=3,kw=3,stride_h=1,stride_w=1,pad=1,act=0} ?x) => "
        "(conv2d{stride_h=1,stride_w=1,pad=1,act=0,dil_h=1,dil_w=1} ?x (cpool{c=dim(?x,1),kh=3,kw=3}))"));
    REQUIRE(as_conv);
    CHECK(as_conv->text.find("cpool{c=dim(?x,1),kh=$0,kw=$1}") != std::string::npos);
    // No any_value slot: transpose permutations and concat axes are proven
    // for their domains only.
    CHECK_FALSE(generalize_params(rule("(relu (relu ?x)) => (relu ?x)")));
    CHECK_FALSE(generalize_params(rule("(transpose{perm=33554433} (transpose{perm=33554433} ?x)) => ?x")));
    CHECK_FALSE(generalize_params(rule("(relu (concat{axis=1} ?x ?y)) => (concat{axis=1} (relu ?x) (relu ?y))")));
    // A slot only the target reads would leave its variable unbound.
    CHECK_FALSE(generalize_params(
        rule("(ewadd ?x ?x) => (ewadd (maxpool{kh=3,kw=3,stride_h=1,stride_w=1,pad=1,act=0} ?x) ?x)")));
}

TEST_CASE("tsopt-gen replaces proven instances by the rule over parameter variables Z3 proves, and only by it") {
    if (!verifier_available()) return;
    run_config c;
    c.o.ops = {op_kind::conv2d, op_kind::relu};
    c.o.max_ops = 2;
    c.o.inputs = {{"x", shape{1, 4, 6, 8}, role::act}, {"w", shape{4, 4, 3, 3}, role::weight}};
    c.o.threads = 2;
    c.quiet = true;
    auto general = run(c);
    c.generalize = false;
    auto enumerated = run(c);
    REQUIRE(general.verified);
    CHECK(general.generalized_rules > 0);
    CHECK(general.rules.size() < enumerated.rules.size());
    CHECK(enumerated.generalized_rules == 0);
    std::set<std::string> texts;
    for (const auto& e : general.rules) {
        texts.insert(e.r.text);
        bool has_var = e.r.text.find('$') != std::string::npos;
        CHECK_MESSAGE(has_var == (e.provenance.find("over parameter variables") != std::string::npos), e.provenance);
        CHECK(io::is_proof_record(e.provenance));
    }
    // Every enumerated rule is kept, or replaced by one of its own generalizations.
    for (const auto& e : enumerated.rules) {
        bool covered = texts.count(e.r.text) > 0;
        for (const auto& keep : generalization_levels())
            if (auto g = generalize_params(e.r, keep)) covered |= texts.count(g->text) > 0;
        CHECK_MESSAGE(covered, e.r.text);
    }
    // The relu fusion holds for every stride, padding and dilation.
    CHECK(texts.count("(relu (conv2d{stride_h=$3,stride_w=$4,pad=$2,act=0,dil_h=$0,dil_w=$1} ?x ?y)) => "
                      "(conv2d{stride_h=$3,stride_w=$4,pad=$2,act=1,dil_h=$0,dil_w=$1} ?x ?y)") == 1);
}

TEST_CASE("a generalized snapshot rule matches a stride and dilation the enumeration never used, and keeps the meaning") {
    // The committed snapshot's relu fusion, over parameter variables.
    const rewrite::rule* fusion = snapshot_rule(
        "(relu (conv2d{stride_h=$3,stride_w=$4,pad=$2,act=0,dil_h=$0,dil_w=$1} ?x ?y)) => "
        "(conv2d{stride_h=$3,stride_w=$4,pad=$2,act=1,dil_h=$0,dil_w=$1} ?x ?y)");
    REQUIRE_MESSAGE(fusion != nullptr, "the snapshot has no generalized relu-conv fusion");
    graph g;
    auto x = g.input("x", {1, 4, 13, 11});
    std::mt19937_64 rng(7);
    auto w = g.weight("w", shape{6, 4, 3, 3}, rng);
    g.mark_output(g.relu(g.conv2d(x, w, {.stride = 3, .pad = same, .dilation = 2})));
    CHECK(rewrite_test::count_ops(rewrite_test::rewritten_once(g, *fusion), op_kind::relu) == 0);
}

TEST_CASE("a generalized snapshot pool rule matches windows the enumeration never used (VGG's 2x2, a 5x5), and keeps the meaning") {
    // The enumeration builds 3x3 windows only; the snapshot's relu fusion
    // into a max pool is over window variables.
    const rewrite::rule* fusion = snapshot_rule(
        "(relu (maxpool{kh=$0,kw=$1,stride_h=$3,stride_w=$4,pad=$2,act=0} ?x)) => "
        "(maxpool{kh=$0,kw=$1,stride_h=$3,stride_w=$4,pad=$2,act=1} ?x)");
    REQUIRE_MESSAGE(fusion != nullptr, "the snapshot has no relu fusion into a max pool over window variables");
    struct window {
        int kernel, stride;
        spec::pad_mode pad;
    };
    for (window w : {window{2, 2, valid}, window{5, 1, same}, window{5, 3, valid}}) {
        CAPTURE(w.kernel);
        CAPTURE(w.stride);
        graph g;
        auto x = g.input("x", {1, 3, 12, 10});
        g.mark_output(g.relu(g.maxpool(x, {.kernel = w.kernel, .stride = w.stride, .pad = w.pad})));
        CHECK(rewrite_test::count_ops(rewrite_test::rewritten_once(g, *fusion), op_kind::relu) == 0);
    }
    // An average pool of any window is a convolution with a cpool kernel of
    // that window (conv-cpool-avgpool): the rule keeps the two tied.
    const rewrite::rule* as_conv = nullptr;
    for (const auto& r : tsopt::rules::generated())
        if (r.text.starts_with("(avgpool{kh=$0,kw=$1,") && r.text.find("act=0} ?x) => (conv2d{") != std::string::npos &&
            r.text.find("cpool{c=dim(?x,1),kh=$0,kw=$1}") != std::string::npos)
            as_conv = &r;
    REQUIRE_MESSAGE(as_conv != nullptr, "the snapshot has no average pool as a convolution over window variables");
    graph g;
    auto x = g.input("x", {1, 4, 11, 9});
    g.mark_output(g.avgpool(x, {.kernel = 2, .stride = 2, .pad = valid}));
    CHECK(rewrite_test::count_ops(rewrite_test::rewritten_once(g, *as_conv), op_kind::conv2d) == 1);
}
