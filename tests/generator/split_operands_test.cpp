// Shared operands split (issue #19): a rule whose source reads one tensor
// in several places is replaced by a variant with a variable per read where
// the variant agrees on random inputs and Z3 proves it; a sharing the
// equation needs (a matmul distributed over an add) stays.
#include <doctest/doctest.h>

#include <random>
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
io::listed_rule rule(const std::string& text) { return canonical_rule(text); }

std::vector<input_decl> matrices() {
    return {{"a", shape{4, 4}, role::matrix}, {"b", shape{4, 6}, role::matrix}};
}

std::vector<std::string> variant_texts(const std::string& text, std::uint64_t* refuted = nullptr) {
    options o;
    std::vector<std::string> out;
    for (const auto& v : split_shared_operands(rule(text), matrices(), o, 32, refuted)) out.push_back(v.rule.text);
    return out;
}
}  // namespace

TEST_CASE("split_shared_operands: an incidental sharing splits, with the target reads bound where the equation holds") {
    // A^T A^T = (A A)^T holds as B^T A^T = (A B)^T for any A, B: the target's
    // matmul reads the copies swapped.
    std::uint64_t refuted = 0;
    auto v = variant_texts(
        "(matmul{act=0} (transpose{perm=33554433} ?x) (transpose{perm=33554433} ?x)) => "
        "(transpose{perm=33554433} (matmul{act=0} ?x ?x))",
        &refuted);
    REQUIRE(v.size() == 1);
    CHECK(v[0] ==
          "(matmul{act=0} (transpose{perm=33554433} ?x) (transpose{perm=33554433} ?y)) => "
          "(transpose{perm=33554433} (matmul{act=0} ?y ?x))");
    CHECK(refuted == 3);  // (x, x), (y, y) and (x, y) in the target differ
}

TEST_CASE("split_shared_operands: a sharing the equation needs gives no variant") {
    // x A + x B = x (A + B) needs both products to read the same x.
    std::uint64_t refuted = 0;
    CHECK(variant_texts("(ewadd (matmul{act=0} ?x ?y) (matmul{act=0} ?x ?z)) => (matmul{act=0} ?x (ewadd ?y ?z))", &refuted)
              .empty());
    CHECK(refuted == 2);
    // Nothing read twice: nothing to split.
    CHECK(variant_texts("(transpose{perm=33554433} (transpose{perm=33554433} ?x)) => ?x").empty());
}

TEST_CASE("split_shared_operands: two shared variables split at once, each alone after") {
    // (x + y) + (x * y) commuted holds for any four tensors: the full split
    // comes first, then x alone and y alone.
    auto v = variant_texts("(ewadd (ewadd ?x ?y) (ewmul ?x ?y)) => (ewadd (ewmul ?y ?x) (ewadd ?y ?x))");
    REQUIRE(v.size() == 3);
    CHECK(v[0] == "(ewadd (ewadd ?x ?y) (ewmul ?z ?w)) => (ewadd (ewmul ?w ?z) (ewadd ?y ?x))");
}

TEST_CASE("tsopt-gen replaces a rule with shared operands by its proven split, and every other rule stays") {
    if (!verifier_available()) return;
    run_config c;
    c.o.ops = {op_kind::matmul, op_kind::transpose};
    c.o.max_ops = 3;
    c.o.inputs = matrices();
    c.o.threads = 2;
    c.quiet = true;
    auto split = run(c);
    c.split_operands = false;
    auto whole = run(c);
    REQUIRE(split.verified);
    CHECK(split.split_rules > 0);
    CHECK(split.split_instances >= split.split_rules);
    CHECK(whole.split_rules == 0);
    std::set<std::string> texts;
    for (const auto& e : split.rules) {
        texts.insert(e.r.text);
        CHECK(io::is_proof_record(e.provenance));
    }
    // Every rule of the unsplit run is emitted, replaced by one of its own
    // variants, or (generalized, deduplicated) absent from both in that form.
    std::size_t replaced = 0;
    for (const auto& e : whole.rules) {
        if (texts.count(e.r.text)) continue;
        bool by_variant = false;
        for (const auto& v : split_shared_operands(e.r, c.o.inputs, c.o)) by_variant |= texts.count(v.rule.text) > 0;
        CHECK_MESSAGE(by_variant, e.r.text);
        replaced += by_variant;
    }
    CHECK(replaced > 0);
    bool provenance_seen = false;
    for (const auto& e : split.rules) provenance_seen |= e.provenance.find("with shared operands split") != std::string::npos;
    CHECK(provenance_seen);
}

TEST_CASE("a split snapshot rule matches four distinct tensors and the one it was enumerated on, and keeps the meaning") {
    // TASO's matmul of concatenations, in the snapshot over four operands
    // (enumerated over two matrices, read twice each).
    const rewrite::rule* sum = nullptr;
    for (const auto& r : tsopt::rules::generated())
        if (r.text == "(matmul{act=0} (concat{axis=1} ?x ?y) (concat{axis=0} ?z ?w)) => "
                      "(ewadd (matmul{act=0} ?x ?z) (matmul{act=0} ?y ?w))")
            sum = &r;
    REQUIRE_MESSAGE(sum != nullptr, "the snapshot has no split matmul-of-concatenations rule");
    CHECK(sum->provenance.find("with shared operands split") != std::string::npos);
    std::mt19937_64 rng(11);
    {
        graph g;  // four tensors of different shapes
        auto a = g.input("a", {4, 3});
        auto b = g.input("b", {4, 5});
        auto c = g.weight("c", shape{3, 6}, rng);
        auto d = g.weight("d", shape{5, 6}, rng);
        g.mark_output(g.matmul(g.concat(1, {a, b}), g.concat(0, {c, d})));
        CHECK(rewrite_test::count_ops(rewrite_test::rewritten_once(g, *sum), op_kind::concat) == 0);
    }
    {
        graph g;  // one tensor in both places, as enumerated
        auto a = g.input("a", {4, 4});
        auto b = g.weight("b", shape{4, 4}, rng);
        g.mark_output(g.matmul(g.concat(1, {a, b}), g.concat(0, {a, b})));
        CHECK(rewrite_test::count_ops(rewrite_test::rewritten_once(g, *sum), op_kind::concat) == 0);
    }
}
