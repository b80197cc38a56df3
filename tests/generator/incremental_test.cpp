// Incremental verification (docs/verification.md): a candidate joinable with
// proven rules is derived without Z3, one that is not joinable is not, a
// wrong one never is; constants no axiom reaches are settled before Z3.
#include <doctest/doctest.h>

#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "gen.hpp"
#include "tsopt/io/rule_listing.hpp"

using namespace tsopt;
using namespace tsopt::gen;
using spec::op_kind;

namespace {

gop op(op_kind k, std::initializer_list<int> in, spec::op_params p = {}) {
    gop g;
    g.kind = k;
    g.nin = static_cast<std::uint8_t>(in.size());
    int i = 0;
    for (int t : in) g.in[static_cast<std::size_t>(i++)] = static_cast<std::uint8_t>(t);
    g.pidx = intern_params(p);
    return g;
}

options acts() {
    options o;
    o.inputs = {{"x", shape{1, 4, 6, 8}, role::act}, {"y", shape{1, 4, 6, 8}, role::act}};
    return o;
}

pair pair_of(std::vector<gop> a, std::vector<gop> b, const options& o) {
    pair p{materialize(a, 0, o), materialize(b, 0, o), {}};
    REQUIRE(p.a.outputs.size() == 1);
    REQUIRE(p.b.outputs.size() == 1);
    p.perm = {0};
    return p;
}

// A verified run over two activations at N=2, far from Z3's limits.
run_config verified_run(std::vector<op_kind> ops) {
    run_config c;
    c.o.ops = std::move(ops);
    c.o.max_ops = 2;
    c.o.inputs = acts().inputs;
    c.o.threads = 2;
    c.quiet = true;
    c.timeout_ms = 5000;
    c.rlimit = 1000000;
    c.max_instances = 100000;
    return c;
}

io::listed_rule rule(const std::string& line) { return io::parse_rule_line(line, "test"); }

// x = 0, y = 1; tensor ids of operator outputs follow.
const gop add_xy = op(op_kind::ewadd, {0, 1}), add_yx = op(op_kind::ewadd, {1, 0});

}  // namespace

TEST_CASE("a candidate joinable with proven rules is derived; one needing a missing rule is not") {
    auto o = acts();
    rule_base base(o, 2);
    base.add(rule("comm: (ewadd ?x ?y) => (ewadd ?y ?x)"));
    // relu(x + y) == relu(y + x), (x + y) + x == x + (x + y): the operand
    // order of a commutative operator is no difference between graphs
    // (graph::node_hashes), so these join with no rule at all.
    auto p = pair_of({add_xy, op(op_kind::relu, {2})}, {add_yx, op(op_kind::relu, {2})}, o);
    auto q = pair_of({add_xy, op(op_kind::ewadd, {2, 0})}, {add_xy, op(op_kind::ewadd, {0, 2})}, o);
    rule_base shallow(o, 0);
    shallow.add(rule("relu-idem: (relu (relu ?x)) => (relu ?x)"));
    CHECK(shallow.derivable(p));
    CHECK(shallow.derivable(q));
    // (x + y) + x == (x + x) + y needs associativity: not derivable from commutativity.
    auto r = pair_of({add_xy, op(op_kind::ewadd, {2, 0})}, {op(op_kind::ewadd, {0, 0}), op(op_kind::ewadd, {2, 1})}, o);
    CHECK_FALSE(base.derivable(r));
    base.add(rule("assoc: (ewadd (ewadd ?x ?y) ?z) => (ewadd ?x (ewadd ?y ?z))"));
    base.add(rule("assoc-rev: (ewadd ?x (ewadd ?y ?z)) => (ewadd (ewadd ?x ?y) ?z)"));
    CHECK(base.derivable(r));
    // Depth 0: only identical sides join.
    shallow.add(rule("assoc: (ewadd (ewadd ?x ?y) ?z) => (ewadd ?x (ewadd ?y ?z))"));
    CHECK_FALSE(shallow.derivable(r));
}

TEST_CASE("a deeper derivation (the last pass's) joins what the default depth does not") {
    auto o = acts();
    rule_base base(o, 2);
    base.add(rule("relu-idem: (relu (relu ?x)) => (relu ?x)"));
    base.add(rule("comm: (ewadd ?x ?y) => (ewadd ?y ?x)"));
    // relu(relu(relu(relu(x + y)))) == relu(y + x): three relu-idem steps on
    // one side (x + y and y + x are one graph: no commutativity step).
    const gop r = op(op_kind::relu, {2}), rr = op(op_kind::relu, {3}), rrr = op(op_kind::relu, {4}), rrrr = op(op_kind::relu, {5});
    auto p = pair_of({add_xy, r, rr, rrr, rrrr}, {add_yx, r}, o);
    CHECK_FALSE(base.derivable(p));
    std::vector<std::string> used;
    CHECK(base.derivable(p, &used, 3));
    CHECK(used == std::vector<std::string>{"relu-idem"});
}

TEST_CASE("a derivation gives up at its effort cap, counted, and the candidate is left to Z3") {
    auto o = acts();
    const gop r = op(op_kind::relu, {2}), rr = op(op_kind::relu, {3}), rrr = op(op_kind::relu, {4}), rrrr = op(op_kind::relu, {5});
    // Three relu-idem steps on one side, each an application previewed.
    auto p = pair_of({add_xy, r, rr, rrr, rrrr}, {add_yx, r}, o);
    for (std::size_t effort : {std::size_t{1}, std::size_t{2}}) {
        rule_base capped(o, 3, 256, effort);
        capped.add(rule("relu-idem: (relu (relu ?x)) => (relu ?x)"));
        CHECK_FALSE(capped.derivable(p));
        CHECK(capped.capped() == 1);
    }
    rule_base enough(o, 3, 256, 1000);
    enough.add(rule("relu-idem: (relu (relu ?x)) => (relu ?x)"));
    CHECK(enough.derivable(p));
    CHECK(enough.capped() == 0);
    // A pair no rule joins exhausts its search below the cap: not counted.
    auto q = pair_of({add_xy, r}, {op(op_kind::ewmul, {0, 1}), r}, o);
    CHECK_FALSE(enough.derivable(q));
    CHECK(enough.capped() == 0);

    // In a run, the capped candidates go to Z3, which proves what the
    // derivation would have: every candidate ends derived or proven as before.
    if (!verifier_available()) return;
    auto c = verified_run({op_kind::ewadd, op_kind::ewmul});
    auto uncapped = run(c);
    c.derive_effort = 1;
    auto cap = run(c);
    CHECK(uncapped.derive_capped == 0);
    CHECK(cap.derive_capped > 0);
    // The summary says so, and that the run was verified, capped or not.
    for (const auto* x : {&uncapped, &cap}) CHECK(x->summary_text().find("verification: skipped") == std::string::npos);
    CHECK(uncapped.summary_text().find("given up at --derive-effort") == std::string::npos);
    CHECK(cap.summary_text().find("given up at --derive-effort: " + std::to_string(cap.derive_capped)) != std::string::npos);
    CHECK(cap.derived < uncapped.derived);
    CHECK(cap.proven > uncapped.proven);
    CHECK(cap.proven + cap.derived == uncapped.proven + uncapped.derived);
    CHECK(cap.timeouts + cap.unproven == uncapped.timeouts + uncapped.unproven);
}

TEST_CASE("a multi-output candidate is derived only through graphs no larger than its larger side") {
    // relu(x), relu(y) == the two parts of split(relu(concat(x, y))): 2 and 3
    // operators, joined by these rules only through split(concat(relu(x),
    // relu(y))), 4. The optimizer applies a multi-output rule in one step
    // and does not climb through the larger graph, so such a candidate goes
    // to Z3 and is emitted (the fused products of the default set were lost
    // to this derivation before).
    auto o = acts();
    rule_base base(o, 4);
    base.add(rule("relu-concat: (relu (concat{axis=1} ?x ?y)) => (concat{axis=1} (relu ?x) (relu ?y))"));
    base.add(rule("split0-concat: (split.0{axis=1,at=dim(?x,1)} (concat{axis=1} ?x ?y)) => ?x"));
    base.add(rule("split1-concat: (split.1{axis=1,at=dim(?x,1)} (concat{axis=1} ?x ?y)) => ?y"));
    spec::op_params cat{}, cut{};
    cat[spec::concat_p::axis] = 1;
    cut[spec::split_p::axis] = 1;
    cut[spec::split_p::at] = 4;
    const std::vector<gop> apart{op(op_kind::relu, {0}), op(op_kind::relu, {1})};
    const std::vector<gop> fused{op(op_kind::concat, {0, 1}, cat), op(op_kind::relu, {2}), op(op_kind::split, {3}, cut)};
    pair p{materialize(apart, 0, o), materialize(fused, 0, o), {0, 1}};
    REQUIRE(p.a.outputs.size() == 2);
    REQUIRE(p.b.outputs.size() == 2);
    CHECK_FALSE(base.derivable(p));
    // The same two graphs join when the way may pass a larger graph.
    CHECK(base.joinable(to_graph(p.a, o), to_graph(p.b, o)));
    CHECK_FALSE(base.joinable(to_graph(p.a, o), to_graph(p.b, o), nullptr, -1, 3));
}

TEST_CASE("a wrong candidate is never derived") {
    auto o = acts();
    rule_base base(o, 3);
    for (auto* l : {"comm: (ewadd ?x ?y) => (ewadd ?y ?x)", "assoc: (ewadd (ewadd ?x ?y) ?z) => (ewadd ?x (ewadd ?y ?z))",
                    "assoc-rev: (ewadd ?x (ewadd ?y ?z)) => (ewadd (ewadd ?x ?y) ?z)",
                    "relu-idem: (relu (relu ?x)) => (relu ?x)"})
        base.add(rule(l));
    // relu(x + y) != relu(x) + relu(y), and x + y != x + x.
    auto w1 = pair_of({add_xy, op(op_kind::relu, {2})}, {op(op_kind::relu, {0}), op(op_kind::relu, {1}), op(op_kind::ewadd, {2, 3})}, o);
    CHECK_FALSE(base.derivable(w1));
    auto w2 = pair_of({add_xy}, {op(op_kind::ewadd, {0, 0})}, o);
    CHECK_FALSE(base.derivable(w2));
    // No rules: nothing but identical graphs joins.
    rule_base empty(o, 2);
    auto p = pair_of({add_xy, op(op_kind::relu, {2})}, {add_yx, op(op_kind::relu, {2})}, o);
    CHECK_FALSE(empty.derivable(p));
}

TEST_CASE("a rule fires only at parameter values of the domains it was proven for") {
    options o;
    o.inputs = {{"a", shape{4, 4}, role::matrix}, {"b", shape{4, 4}, role::matrix}};
    // act(a b) == (act(b^T a^T))^T holds for every activation, but a rule whose
    // variable fills matmul's act slot is proven for its domain {none, relu} only.
    rule_base base(o, 1);
    base.add(rule("t: (matmul{act=$0} ?x ?y) => (transpose{perm=33554433} (matmul{act=$0} (transpose{perm=33554433} ?y) "
                  "(transpose{perm=33554433} ?x)))"));
    spec::op_params t10{};
    t10[spec::transpose_p::perm] = spec::pack_perm({1, 0});
    auto at = [&](std::int32_t act) {
        spec::op_params m{};
        m[spec::matmul_p::act] = act;
        return pair_of({op(op_kind::matmul, {0, 1}, m)},
                       {op(op_kind::transpose, {1}, t10), op(op_kind::transpose, {0}, t10), op(op_kind::matmul, {2, 3}, m),
                        op(op_kind::transpose, {4}, t10)},
                       o);
    };
    CHECK(base.derivable(at(0)));
    CHECK(base.derivable(at(1)));
    CHECK_FALSE(base.derivable(at(2)));  // sigmoid: outside the rule's domain
}

TEST_CASE("a constant no axiom reaches is settled before Z3 only when the pair fails with any tensor in its place") {
    auto o = acts();
    // ewmul(x, iewmul{rank=4, d = x's extents}) == x: true (a tensor of ones), but
    // the axioms only know the one-element iewmul (rank 0).
    gop ones = op(op_kind::iewmul, {}, [] {
        spec::op_params p{};
        p[spec::iewmul_p::rank] = 4;
        std::int32_t d[] = {1, 4, 6, 8};
        for (int i = 0; i < 4; ++i) p[spec::iewmul_p::d0 + i] = d[i];
        return p;
    }());
    ones.tie[0] = 0;  // extents tied to x
    auto id = pair_of({ones, op(op_kind::ewmul, {0, 2})}, {op(op_kind::relu, {0})}, o);
    id.b = materialize(std::vector<gop>{}, 1, o);  // the trivial graph x
    REQUIRE(id.b.outputs.size() == 1);
    CHECK_FALSE(opaque_constants_refute(id, o).empty());
    // ewmul(x, K) == ewmul(K, x) holds for every tensor K: left to Z3.
    auto comm = pair_of({ones, op(op_kind::ewmul, {0, 2})}, {ones, op(op_kind::ewmul, {2, 0})}, o);
    CHECK(opaque_constants_refute(comm, o).empty());
    // No constant: nothing to settle.
    auto plain = pair_of({add_xy}, {add_yx}, o);
    CHECK(opaque_constants_refute(plain, o).empty());
}

TEST_CASE("with incremental verification the derived and Z3-proven candidates are those Z3 proves alone") {
    if (!verifier_available()) return;
    auto c = verified_run({op_kind::ewadd, op_kind::ewmul});
    c.derive = false;
    auto all = run(c);
    c.derive = true;
    auto inc = run(c);
    CHECK(all.derived == 0);
    CHECK(inc.derived > 0);
    CHECK(inc.proven < all.proven);
    CHECK(inc.proven + inc.derived == all.proven);
    CHECK(inc.z3_queries + inc.derived + inc.settled == all.z3_queries + all.settled);
    // Derived rules are not emitted by default; every emitted rule is Z3-proven.
    for (auto& e : inc.rules) CHECK(e.provenance.find("proven by Z3") != std::string::npos);
    CHECK(!inc.derived_rules.empty());
    // At two operators every derived rule is a renamed copy of a proven one
    // (commutative_form); from three on some are not.
    c.o.max_ops = 3;
    inc = run(c);
    c.emit_derived = true;
    auto emit = run(c);
    CHECK(emit.rules.size() > inc.rules.size());
    std::size_t derived_emitted = 0;
    std::map<std::string, std::string> names;  // text -> name, Z3-proven rules of `inc`
    for (auto& e : inc.rules) names[e.r.text] = e.r.name;
    // Proven, left out of the emitted set as commutative duplicates, and
    // still sources of derivations.
    for (auto& e : inc.commutative_left_out) names[e.r.text] = e.r.name;
    for (auto& e : inc.dead_ends_left_out) names[e.r.text] = e.r.name;
    for (auto& e : inc.unchanged_outputs_left_out) names[e.r.text] = e.r.name;
    for (auto& e : inc.split_left_out) names[e.r.text] = e.r.name;
    for (auto& e : emit.rules) {
        if (e.provenance.find("derived from rules ") == std::string::npos) {
            CHECK_MESSAGE(e.provenance.find("proven by Z3 (rlimit ") != std::string::npos, e.provenance);
            continue;
        }
        ++derived_emitted;
        // Each derived rule names the proven rules it was derived from, all emitted.
        auto from = e.provenance.substr(e.provenance.find("derived from rules ") + 19);
        from = from.substr(0, from.find(" by rewriting"));
        for (std::size_t b = 0; b < from.size();) {
            auto end = std::min(from.find(", ", b), from.size());
            auto n = from.substr(b, end - b);
            bool known = false;
            for (auto& [t, name] : names) known |= name == n;
            CHECK_MESSAGE(known, n);
            b = end + 2;
        }
    }
    CHECK(derived_emitted > 0);
    // Rule names are a function of the rule alone: --emit-derived renames nothing.
    for (auto& e : emit.rules)
        if (auto it = names.find(e.r.text); it != names.end()) CHECK_MESSAGE(it->second == e.r.name, e.r.text);
    for (auto& e : inc.derived_rules) {
        bool same = false;
        for (auto* set : {&emit.rules, &emit.commutative_left_out, &emit.dead_ends_left_out, &emit.unchanged_outputs_left_out,
                          &emit.split_left_out})
            for (auto& x : *set) same |= x.r.text == e.r.text && x.r.name == e.r.name;
        CHECK_MESSAGE(same, e.r.text);
    }
    // The header takes the derived rules (their sources are proven).
    auto h = render_header(emit.rules, emit.spec_hash, "test", 0, true);
    CHECK(h.find("derived from rules ") != std::string::npos);
}

TEST_CASE("a run that keeps no unemitted rules counts and lists what one that keeps them does") {
    if (!verifier_available()) return;
    auto c = verified_run({op_kind::ewadd, op_kind::ewmul});
    c.o.max_ops = 3;
    c.rlimit = 50000;  // some candidates Z3 does not prove within it
    const auto kept = run(c);
    c.keep_unemitted = false;  // tsopt-gen's setting
    const auto lean = run(c);
    CHECK(kept.derived_rules_not_emitted == kept.derived_rules.size());
    CHECK(kept.derived_rules_not_emitted > 0);
    CHECK(lean.derived_rules_not_emitted == kept.derived_rules_not_emitted);
    CHECK(kept.not_proven_rules == kept.not_proven.size());
    CHECK(kept.not_proven_rules > 0);
    CHECK(lean.not_proven_rules == kept.not_proven_rules);
    CHECK(lean.disconnected_sources == kept.disconnected_sources);
    CHECK(lean.unproven_listing == kept.unproven_listing);
    // The summary writes the listing into its text itself: it parses, and
    // holds every line; so does one with an empty listing.
    const auto summary = nlohmann::json::parse(lean.summary_json());
    CHECK(summary["unproven_listing"].get<std::vector<std::string>>() == lean.unproven_listing);
    CHECK(summary["not_proven_rules"] == lean.not_proven_rules);
    auto none = lean;
    none.unproven_listing.clear();
    CHECK(nlohmann::json::parse(none.summary_json())["unproven_listing"].empty());
    CHECK(lean.derived_rules.empty());
    CHECK(lean.not_proven.empty());
    // The rules left out are counted alike, and kept only by the run that keeps them.
    CHECK(kept.commutative_duplicates > 0);
    CHECK(kept.commutative_left_out.size() == kept.commutative_duplicates + kept.commutation_only);
    CHECK(lean.commutative_duplicates == kept.commutative_duplicates);
    CHECK(lean.commutation_only == kept.commutation_only);
    CHECK(lean.unchanged_outputs == kept.unchanged_outputs);
    CHECK(lean.cost_raising_dead_ends == kept.cost_raising_dead_ends);
    CHECK(lean.commutative_left_out.empty());
    CHECK(lean.unchanged_outputs_left_out.empty());
    CHECK(lean.dead_ends_left_out.empty());
    CHECK(lean.split_instances == kept.split_instances);
    CHECK(kept.split_left_out.size() == kept.split_instances);
    CHECK(lean.split_left_out.empty());
    REQUIRE(lean.rules.size() == kept.rules.size());
    for (std::size_t i = 0; i < lean.rules.size(); ++i) {
        CHECK(lean.rules[i].r.text == kept.rules[i].r.text);
        CHECK(lean.rules[i].provenance == kept.rules[i].provenance);
    }
}

TEST_CASE("rules equal up to the operand order of commutative operators are emitted once, commutation alone never") {
    // The keys: operands of ewadd/ewmul sorted, of anything else kept in order.
    auto key = [](const char* text) { return commutative_form(canonical_rule(text)); };
    const auto a = key("(ewadd (relu ?x) (relu ?y)) => (relu (ewadd ?x ?y))");
    CHECK(a == key("(ewadd (relu ?x) (relu ?y)) => (relu (ewadd ?y ?x))"));
    CHECK(a == key("(ewadd (relu ?y) (relu ?x)) => (relu (ewadd ?x ?y))"));
    CHECK_FALSE(a == key("(ewadd (relu ?x) (relu ?y)) => (relu (ewadd ?x ?x))"));
    const auto swap = key("(ewadd ?x ?y) => (ewadd ?y ?x)");
    CHECK(swap.src == swap.dst);
    const auto m = key("(matmul{act=0} ?x ?y) => (matmul{act=0} ?y ?x)");
    CHECK_FALSE(m.src == m.dst);  // matmul is not commutative
    // A renaming the source is blind to (x <-> y in x + y): the matcher binds
    // both ways round, so the renamed rule builds the same graphs.
    const auto f = key("(ewadd ?x ?y) => (matmul{act=0} (concat{axis=1} ?x ?y) (concat{axis=0} ?y ?x))");
    CHECK(f == key("(ewadd ?x ?y) => (matmul{act=0} (concat{axis=1} ?y ?x) (concat{axis=0} ?x ?y))"));
    CHECK(key("(ewadd ?x (ewadd ?y ?z)) => (ewadd (ewadd ?x ?y) ?z)") ==
          key("(ewadd ?x (ewadd ?y ?z)) => (ewadd (ewadd ?x ?z) ?y)"));  // y <-> z
    // Not one the source sees: x + relu(y) has no renaming but the identity.
    CHECK_FALSE(key("(ewadd ?x (relu ?y)) => (matmul{act=0} (concat{axis=1} ?x ?y) (concat{axis=0} ?y ?x))") ==
                key("(ewadd ?x (relu ?y)) => (matmul{act=0} (concat{axis=1} ?y ?x) (concat{axis=0} ?x ?y))"));
    // One rule numbered two ways: variables are numbered where they first
    // appear in the printed source, which a commutative operator's operand
    // order decides. x + (y + z) => (x + y) + z is (x + y) + z => (x + z) + y
    // with x, y, z renamed z, x, y.
    CHECK(key("(ewadd ?x (ewadd ?y ?z)) => (ewadd (ewadd ?x ?y) ?z)") ==
          key("(ewadd (ewadd ?x ?y) ?z) => (ewadd (ewadd ?x ?z) ?y)"));
    CHECK(key("(concat{axis=1} (ewadd ?x ?y) (ewadd ?y ?z)) => (ewadd (concat{axis=1} ?x ?y) (concat{axis=1} ?y ?z))") ==
          key("(concat{axis=1} (ewadd ?x ?y) (ewadd ?z ?x)) => (ewadd (concat{axis=1} ?x ?z) (concat{axis=1} ?y ?x))"));
    // A renaming that changes the source is no match: relu(x) + y is not relu(y) + x.
    CHECK_FALSE(key("(ewadd (relu ?x) ?y) => (matmul{act=0} ?x ?y)") == key("(ewadd (relu ?x) ?y) => (matmul{act=0} ?y ?x)"));
    // Nor without a commutative source operator.
    CHECK_FALSE(key("(concat{axis=0} ?x ?y) => (matmul{act=0} ?x ?y)") == key("(concat{axis=0} ?x ?y) => (matmul{act=0} ?y ?x)"));
    if (!verifier_available()) return;
    auto c = verified_run({op_kind::ewadd, op_kind::ewmul});
    auto r = run(c);
    CHECK(r.commutation_only >= 2);  // x + y => y + x, x * y => y * x
    CHECK(r.commutative_duplicates > 0);
    CHECK(r.commutative_left_out.size() == r.commutation_only + r.commutative_duplicates);
    std::set<commutative_key> keys;
    for (const auto& e : r.rules) {
        const auto k = commutative_form(e.r);
        CHECK_MESSAGE(k.src != k.dst, e.r.text);
        CHECK_MESSAGE(keys.insert(k).second, e.r.text);
    }
    // Each rule left out is covered: its key is an emitted rule's, or it only reorders.
    for (const auto& e : r.commutative_left_out) {
        const auto k = commutative_form(e.r);
        CHECK_MESSAGE((k.src == k.dst || keys.count(k) == 1), e.r.text);
    }
    // The summary counts both.
    const std::string j = r.summary_json();
    CHECK(j.find("\"commutative_duplicates\": " + std::to_string(r.commutative_duplicates)) != std::string::npos);
    CHECK(j.find("\"commutation_only\": " + std::to_string(r.commutation_only)) != std::string::npos);
}

TEST_CASE("rules that only add operators and enable no other rule are left out; one that may enable a rule stays") {
    auto r = [](const char* text) { return canonical_rule(text); };
    const auto add_relu = r("(relu ?x) => (relu (relu ?x))");
    const auto drop_relu = r("(relu (relu ?x)) => (relu ?x)");
    const auto fuse = r("(relu (matmul{act=0} ?x ?y)) => (matmul{act=1} ?x ?y)");
    const auto relu_after = r("(matmul{act=1} ?x ?y) => (relu (matmul{act=1} ?x ?y))");
    CHECK(only_adds_operators(add_relu));
    CHECK(only_adds_operators(relu_after));
    CHECK_FALSE(only_adds_operators(drop_relu));
    CHECK_FALSE(only_adds_operators(fuse));
    CHECK_FALSE(only_adds_operators(r("(ewadd ?x ?y) => (ewadd ?y ?x)")));  // nothing added
    // More operators, but the source's sum is gone (its operands changed): a cost model may prefer it.
    CHECK_FALSE(only_adds_operators(r("(relu (ewadd ?x ?y)) => (ewadd (relu ?x) (relu ?y))")));
    // What the added relu may enable: a source with a relu over anything,
    // or over a matmul{act=1}; not one that needs a relu over act=0, and
    // not a source with no relu.
    CHECK(may_enable(add_relu, r("(transpose{perm=33554433} (relu ?x)) => (relu (transpose{perm=33554433} ?x))")));
    CHECK(may_enable(relu_after, r("(ewadd ?z (relu (matmul{act=1} ?x ?y))) => (ewadd (relu (matmul{act=1} ?x ?y)) ?z)")));
    CHECK_FALSE(may_enable(relu_after, fuse));
    CHECK_FALSE(may_enable(add_relu, relu_after));
    // Commutative operands unify in either order (syntax only: the sources'
    // relu and transpose are kept, so the sum or concat alone is added).
    const std::string both = "(concat{axis=0} (relu ?x) (transpose{perm=33554433} ?x)) => ";
    CHECK(may_enable(r((both + "(ewadd (transpose{perm=33554433} ?x) (relu ?x))").c_str()),
                     r("(ewadd (relu ?a) (transpose{perm=33554433} ?b)) => (ewadd (transpose{perm=33554433} ?b) (relu ?a))")));
    CHECK_FALSE(may_enable(r((both + "(concat{axis=1} (transpose{perm=33554433} ?x) (relu ?x))").c_str()),
                           r("(concat{axis=1} (relu ?a) (transpose{perm=33554433} ?b)) => (relu ?a)")));
    // The added relu could sit under a relu already in the graph, where the
    // reverse of adding it applies: the context above is left open.
    CHECK(may_enable(relu_after, drop_relu));

    auto dead_ends = [](std::vector<const io::listed_rule*> rules) { return cost_raising_dead_ends(rules); };
    // add_relu enables only its reverse: a dead end; fuse only removes.
    CHECK(dead_ends({&add_relu, &drop_relu, &fuse}) == std::vector<bool>{true, false, false});
    // relu_after may enable drop_relu (not its own reverse): kept.
    CHECK(dead_ends({&add_relu, &drop_relu, &relu_after}) == std::vector<bool>{true, false, false});
    // Without drop_relu, relu_after enables only add_relu, itself a dead end: both are.
    CHECK(dead_ends({&add_relu, &relu_after}) == std::vector<bool>{true, true});
    // A rule whose added operator another rule's source reads is kept.
    const auto through = r("(transpose{perm=33554433} (relu ?x)) => (relu (transpose{perm=33554433} ?x))");
    CHECK(dead_ends({&add_relu, &drop_relu, &through}) == std::vector<bool>{false, false, false});

    if (!verifier_available()) return;
    auto run_result = run(verified_run({op_kind::relu}));
    CHECK(run_result.cost_raising_dead_ends == run_result.dead_ends_left_out.size());
    CHECK(run_result.cost_raising_dead_ends > 0);
    std::set<std::string> emitted, left_out;
    for (const auto& e : run_result.rules) emitted.insert(e.r.text);
    for (const auto& e : run_result.dead_ends_left_out) {
        CHECK_MESSAGE(only_adds_operators(e.r), e.r.text);
        left_out.insert(e.r.text);
    }
    // relu(x) => relu(relu(x)) is proven, and left out; its reverse is emitted.
    CHECK(left_out.count(add_relu.text) == 1);
    CHECK(emitted.count(drop_relu.text) == 1);
    // No emitted rule is a dead end among the emitted set.
    std::vector<const io::listed_rule*> ptrs;
    for (const auto& e : run_result.rules) ptrs.push_back(&e.r);
    for (bool d : cost_raising_dead_ends(ptrs)) CHECK_FALSE(d);
    const std::string j = run_result.summary_json();
    CHECK(j.find("\"cost_raising_dead_ends\": " + std::to_string(run_result.cost_raising_dead_ends)) != std::string::npos);
}

TEST_CASE("a multi-output rule that leaves some outputs unchanged is left out where the rule of its other outputs is emitted") {
    auto rest = [](const char* text) { return changed_outputs_only(canonical_rule(text)); };
    // The sum is the same up to operand order on both sides: what the rule
    // does is (relu (relu ?x)) => (relu ?x), in a context.
    const auto r = rest("(tuple (ewadd (relu ?x) ?y) (relu (relu ?x))) => (tuple (ewadd ?y (relu ?x)) (relu ?x))");
    REQUIRE(r.has_value());
    CHECK(r->text == canonical_rule("(relu (relu ?x)) => (relu ?x)").text);
    CHECK(r->num_tensor_vars == 1);
    // Two of three unchanged; the one left reads ?y, renumbered.
    const auto r2 = rest("(tuple (relu ?x) (relu (relu ?y)) (ewmul ?x ?y)) => (tuple (relu ?x) (relu ?y) (ewmul ?y ?x))");
    REQUIRE(r2.has_value());
    CHECK(r2->text == canonical_rule("(relu (relu ?x)) => (relu ?x)").text);
    // One output, or every output changed: nothing to drop.
    CHECK_FALSE(rest("(relu (relu ?x)) => (relu ?x)").has_value());
    CHECK_FALSE(rest("(tuple (relu (relu ?x)) (relu (relu ?y))) => (tuple (relu ?x) (relu ?y))").has_value());
    // The output that changes needs ?y, which only the unchanged one binds: no rule of its own.
    CHECK_FALSE(rest("(tuple (relu ?y) (relu ?x)) => (tuple (relu ?y) (ewadd (relu ?x) (ewmul ?y ?x)))").has_value());
    // Operand order is not a change, another operand is.
    CHECK_FALSE(rest("(tuple (ewadd ?x ?y) (relu (relu ?x))) => (tuple (ewadd ?x ?x) (relu ?x))").has_value());

    if (!verifier_available()) return;
    // Pools with a fused relu feeding a sum and a max pool: the N=3 set had
    // such rules restating avgpool-maxpool's act fusion beside a sum.
    auto c = verified_run({op_kind::maxpool, op_kind::avgpool, op_kind::ewadd});
    c.o.max_ops = 3;
    c.o.inputs = default_inputs();
    c.o.representative_params = c.o.distinct_operands = c.o.distinct_values = true;
    c.o.all_pairs_limit = 1;
    auto result = run(c);
    CHECK(result.unchanged_outputs > 0);
    CHECK(result.unchanged_outputs == result.unchanged_outputs_left_out.size());
    std::set<commutative_key> emitted;
    for (const auto& e : result.rules) emitted.insert(commutative_form(e.r));
    // Each rule left out is covered by an emitted one; no emitted rule is.
    for (const auto& e : result.unchanged_outputs_left_out) {
        const auto k = changed_outputs_only(e.r);
        REQUIRE_MESSAGE(k.has_value(), e.r.text);
        CHECK_MESSAGE(emitted.count(commutative_form(*k)) == 1, e.r.text);
    }
    for (const auto& e : result.rules)
        if (const auto k = changed_outputs_only(e.r)) CHECK_MESSAGE(emitted.count(commutative_form(*k)) == 0, e.r.text);
    CHECK(result.summary_json().find("\"unchanged_outputs\": " + std::to_string(result.unchanged_outputs)) != std::string::npos);
}

TEST_CASE("a reused solver decides the candidates a fresh one does here, and reruns give the same rules") {
    if (!verifier_available()) return;
    auto c = verified_run({op_kind::ewadd, op_kind::ewmul, op_kind::transpose});
    auto fresh = run(c);
    c.reuse_solver = true;
    auto reused = run(c), again = run(c);
    auto texts = [](const run_result& r) {
        std::vector<std::string> t;
        for (auto& e : r.rules) t.push_back(e.r.text);
        return t;
    };
    CHECK(fresh.proven > 0);
    // Far from the limits the verdicts agree; the rerun is identical.
    CHECK(texts(reused) == texts(fresh));
    CHECK(texts(again) == texts(reused));
    CHECK(reused.proven == fresh.proven);
    CHECK(reused.derived == fresh.derived);
}

TEST_CASE("without the derivations after Z3 a run emits the same rules, its non-proofs left unproven") {
    // Only Z3-proven rules are emitted and join the rule base: deriving a
    // Z3 non-proof again (its chunk's proofs added, or in the final pass
    // against every rule) changes how it is listed, never a rule. Here one
    // matrix candidate Z3 leaves at its limit is derived afterwards.
    if (!verifier_available()) return;
    run_config c;
    c.o.ops = {op_kind::matmul, op_kind::transpose, op_kind::ewadd};
    c.o.max_ops = 2;
    c.o.threads = 2;
    c.quiet = true;
    auto with = run(c);
    c.rederive = false;
    auto without = run(c);
    REQUIRE(with.derived_after_z3 > 0);
    CHECK(without.derived_after_z3 == 0);
    CHECK(without.derived + with.derived_after_z3 == with.derived);
    CHECK(without.unproven + without.timeouts == with.unproven + with.timeouts + with.derived_after_z3);
    CHECK(without.proven == with.proven);
    auto texts = [](const run_result& r) {
        std::vector<std::string> t;
        for (const auto& e : r.rules) t.push_back(e.r.text + " | " + e.provenance);
        return t;
    };
    CHECK(texts(without) == texts(with));
    CHECK(without.rules.size() > 0);
}
