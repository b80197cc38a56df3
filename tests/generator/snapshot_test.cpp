// The committed rule snapshot: compiles, is usable as constexpr data, and was
// generated against the current operator spec and axioms.
#include <doctest/doctest.h>

#include "gen.hpp"
#include "tsopt/io/rule_listing.hpp"
#include "tsopt/rules/generated_rules.hpp"

static_assert(std::size(tsopt::rules::generated_rules) > 0, "the rule snapshot is empty");
static_assert(!tsopt::rules::generated_rules[0].name.empty());
static_assert(tsopt::rules::generated_rules[0].src.size() > 0);

static_assert(tsopt::rules::generated_verified, "the rule snapshot was generated without verification");
static_assert(tsopt::rules::generated_rule_count == std::size(tsopt::rules::generated_rules));

TEST_CASE("generated() holds only proven rules, each saying how") {
    for (const auto& r : tsopt::rules::generated()) {
        // "proven by Z3 (rlimit USED / LIMIT)" or "derived from rules A, B by rewriting".
        CHECK_MESSAGE((r.provenance.find("proven by Z3 (rlimit ") != std::string_view::npos ||
                       r.provenance.find("derived from rules ") != std::string_view::npos),
                      r.name);
        CHECK_MESSAGE(r.provenance.find("NOT PROVEN") == std::string_view::npos, r.name);
        CHECK_MESSAGE(r.provenance.find("not proven") == std::string_view::npos, r.name);
        CHECK(r.needs == tsopt::spec::taso_typing);  // proven under TASO's typing (axiom validation)
    }
}

TEST_CASE("the snapshot was generated against the current spec") {
    CHECK(tsopt::rules::generated_spec_hash == tsopt::gen::spec_hash());
}

TEST_CASE("the snapshot header and listing agree") {
    auto l = tsopt::io::load_rule_listing(TSOPT_SOURCE_ROOT "/include/tsopt/rules/rules.txt");
    auto rules = tsopt::rules::generated();
    REQUIRE(l.rules.size() == rules.size());
    CHECK(l.spec_hash == tsopt::rules::generated_spec_hash);
    for (std::size_t i = 0; i < rules.size(); ++i) {
        CHECK(l.rules[i].name == rules[i].name);
        CHECK(l.rules[i].text == rules[i].text);
        CHECK(std::equal(l.rules[i].src.begin(), l.rules[i].src.end(), rules[i].src.begin(), rules[i].src.end()));
        CHECK(std::equal(l.rules[i].dst.begin(), l.rules[i].dst.end(), rules[i].dst.begin(), rules[i].dst.end()));
    }
}
