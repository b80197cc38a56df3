// Rule generator: fingerprints, pruning, rediscovery of TASO's example
// rules, listing round trip. Runs with restricted operator sets and small N.
#include <doctest/doctest.h>

#include <algorithm>

#include "gen.hpp"
#include "tsopt/rules/generated_rules.hpp"
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
    for (int t : in) g.in[i++] = static_cast<std::uint8_t>(t);
    g.pidx = intern_params(p);
    return g;
}
mgraph mgraph_of(std::initializer_list<gop> ops, const options& o) { return materialize(std::vector<gop>(ops), 0, o); }

pair make_pair(mgraph a, mgraph b) {
    pair p{std::move(a), std::move(b), {}};
    p.perm.resize(p.a.outputs.size());
    std::vector<bool> used(p.b.outputs.size());
    for (std::size_t i = 0; i < p.a.outputs.size(); ++i)
        for (std::size_t j = 0; j < p.b.outputs.size(); ++j)
            if (!used[j] && p.a.hash[p.a.outputs[i]] == p.b.hash[p.b.outputs[j]]) { p.perm[i] = int(j); used[j] = true; break; }
    return p;
}

run_result generate(std::vector<op_kind> ops, int n, std::vector<input_decl> inputs, std::size_t all_pairs_limit = 256) {
    run_config c;
    c.o.all_pairs_limit = all_pairs_limit;
    c.o.ops = std::move(ops);
    c.o.max_ops = n;
    c.o.inputs = std::move(inputs);
    c.o.threads = 2;
    c.verify = false;
    c.quiet = true;
    return run(c);
}

bool has_rule(const run_result& r, std::vector<op_kind> src, std::vector<op_kind> dst) {
    auto kinds = [](const std::vector<spec::pattern_node>& ns) {
        std::vector<op_kind> k;
        for (auto& n : ns) k.push_back(n.op);
        std::sort(k.begin(), k.end());
        return k;
    };
    std::sort(src.begin(), src.end());
    std::sort(dst.begin(), dst.end());
    // generate() runs without Z3: the candidates are named but never emitted.
    for (auto* rs : {&r.rules, &r.not_proven})
        for (auto& e : *rs)
            if (kinds(e.r.src) == src && kinds(e.r.dst) == dst) return true;
    return false;
}

}  // namespace

TEST_CASE("fingerprint does not depend on the order of the outputs") {
    options o;
    // x, y are inputs 0 and 1; two outputs relu(x), relu(y), built in both orders.
    auto g1 = mgraph_of({op(op_kind::relu, {0}), op(op_kind::relu, {1})}, o);
    auto g2 = mgraph_of({op(op_kind::relu, {1}), op(op_kind::relu, {0})}, o);
    std::vector<std::uint64_t> h1, h2;
    for (int t : g1.outputs) h1.push_back(g1.hash[t]);
    for (int t : g2.outputs) h2.push_back(g2.hash[t]);
    CHECK(h1 != h2);  // outputs listed in a different order
    CHECK(fingerprint(h1) == fingerprint(h2));
    std::vector<std::uint64_t> one{h1[0]};
    CHECK(fingerprint(one) != fingerprint(h1));
    CHECK(structural_key(g1) == structural_key(g2));
}

TEST_CASE("a record materializes with the value hashes its graph evaluates to") {
    options o;
    o.ops = {op_kind::conv2d, op_kind::split, op_kind::concat, op_kind::matmul, op_kind::ewadd, op_kind::iconv};
    o.max_ops = 2;
    o.threads = 2;
    auto e = enumerate(o);
    REQUIRE(e.graphs.size() > 1000);
    std::size_t checked = 0;
    for (std::size_t i = 0; i < e.graphs.size(); i += 7) {
        const auto& r = e.graphs[i];
        auto stored = materialize(e, r, o);
        std::span<const gop> ops;
        if (r.nops) ops = std::span<const gop>(e.pools[r.pool].data() + r.off, r.nops);
        auto evaluated = materialize(ops, r.trivial, o);
        REQUIRE(stored.hash == evaluated.hash);
        std::vector<std::uint64_t> outs;
        for (int t : stored.outputs) outs.push_back(stored.hash[static_cast<std::size_t>(t)]);
        CHECK(fingerprint(outs) == r.fp);
        ++checked;
    }
    CHECK(checked > 100);
}

TEST_CASE("a packed candidate unpacks to the pair its operators evaluate to") {
    options o;
    o.ops = {op_kind::conv2d, op_kind::split, op_kind::concat, op_kind::matmul, op_kind::ewadd, op_kind::iconv};
    o.max_ops = 2;
    o.threads = 2;
    pipeline_stats st;
    const auto ps = candidates(enumerate(o), o, st);
    REQUIRE(ps.size() > 50);
    std::size_t two_outputs = 0;
    for (const auto& k : ps) {
        const pair p = unpack(k, o);
        two_outputs += p.perm.size() == 2;
        REQUIRE(p.perm.size() == k.outputs);
        for (const auto* g : {&p.a, &p.b}) {
            // The graph again from its operators alone, evaluated afresh.
            std::uint16_t trivial = 0;
            if (g->ops.empty())
                for (int t : g->outputs) trivial = static_cast<std::uint16_t>(trivial | 1u << t);
            const auto again = materialize(g->ops, trivial, o);
            CHECK(again.hash == g->hash);
            CHECK(again.outputs == g->outputs);
            CHECK(again.producer == g->producer);
            CHECK(again.uses == g->uses);
            CHECK(again.shash == g->shash);
            CHECK(again.vars == g->vars);
            REQUIRE(again.shapes.size() == g->shapes.size());
            for (std::size_t t = 0; t < again.shapes.size(); ++t) CHECK(again.shapes[t] == g->shapes[t]);
        }
        const auto k2 = pack(p);
        CHECK(k2.hashes == k.hashes);
        CHECK(k2.a_ops == k.a_ops);
        CHECK(k2.perm == k.perm);
        CHECK(k2.ops.size() == k.ops.size());
    }
    CHECK(two_outputs > 0);  // the output correspondence survives packing where there is one to keep
}

TEST_CASE("Figure 4: redundant pairs are recognised") {
    options o;
    const int x = 0, y = 1;
    // 4b, common subgraph at the inputs: relu(x) + y  vs  y + relu(x).
    {
        auto a = mgraph_of({op(op_kind::relu, {x}), op(op_kind::ewadd, {9, y})}, o);
        auto b = mgraph_of({op(op_kind::relu, {x}), op(op_kind::ewadd, {y, 9})}, o);
        auto p = make_pair(a, b);
        CHECK(common_subgraph_at_inputs(p, o));
    }
    // 4c, common subgraph at the outputs: relu(x + y)  vs  relu(y + x).
    {
        auto a = mgraph_of({op(op_kind::ewadd, {x, y}), op(op_kind::relu, {9})}, o);
        auto b = mgraph_of({op(op_kind::ewadd, {y, x}), op(op_kind::relu, {9})}, o);
        auto p = make_pair(a, b);
        CHECK(common_subgraph_at_outputs(p));
        CHECK_FALSE(common_subgraph_at_inputs(p, o));
    }
    // Not redundant: x + y  vs  y + x (commutativity itself).
    {
        auto p = make_pair(mgraph_of({op(op_kind::ewadd, {x, y})}, o), mgraph_of({op(op_kind::ewadd, {y, x})}, o));
        CHECK_FALSE(common_subgraph_at_outputs(p));
        CHECK_FALSE(common_subgraph_at_inputs(p, o));
    }
    // 4a, renaming: (x + y, y + x) is (y + x, x + y) with x and y swapped.
    {
        auto p = make_pair(mgraph_of({op(op_kind::ewadd, {x, y})}, o), mgraph_of({op(op_kind::ewadd, {y, x})}, o));
        auto q = make_pair(mgraph_of({op(op_kind::ewadd, {y, x})}, o), mgraph_of({op(op_kind::ewadd, {x, y})}, o));
        CHECK(renaming_key(p, input_renamings(o)) == renaming_key(q, input_renamings(o)));
    }
}

TEST_CASE("TASO Figure 2a: two convolutions sharing an input fuse via concat and split") {
    auto r = generate({op_kind::conv2d, op_kind::concat, op_kind::split}, 3,
                      {{"x", shape{1, 4, 6, 8}, role::act}, {"w", shape{4, 4, 3, 3}, role::weight},
                       {"v", shape{4, 4, 3, 3}, role::weight}});
    CHECK(has_rule(r, {op_kind::conv2d, op_kind::conv2d}, {op_kind::concat, op_kind::conv2d, op_kind::split}));
    // The split point is the first kernel's output-channel extent, not the constant 4.
    CHECK(r.rules.empty());  // not verified: nothing is emitted
    bool tied = false;
    for (auto& e : r.not_proven)
        for (auto& n : e.r.dst)
            if (n.op == op_kind::split) tied |= n.params[spec::split_p::at].k == spec::param_term::kind::dim_of;
    CHECK(tied);
}

TEST_CASE("TASO Figure 2b: two matmuls sharing an input fuse via concat and split") {
    auto r = generate({op_kind::matmul, op_kind::concat, op_kind::split}, 3,
                      {{"a", shape{4, 4}, role::matrix}, {"b", shape{4, 4}, role::matrix}, {"c", shape{4, 4}, role::matrix}});
    CHECK(has_rule(r, {op_kind::matmul, op_kind::matmul}, {op_kind::concat, op_kind::matmul, op_kind::split}));
    CHECK(has_rule(r, {op_kind::matmul, op_kind::matmul}, {op_kind::matmul, op_kind::matmul}));  // associativity
}

TEST_CASE("rules whose multi-output source shares nothing are not emitted: connected sources only") {
    auto rule = [](const char* text) { return io::parse_rule_line(text, "test"); };
    // Two relus of unrelated tensors: matches every pair of relus in a model.
    CHECK_FALSE(source_connected(rule("r: (tuple (relu ?x) (relu ?y)) => (tuple (split.0{axis=1,at=dim(?x,1)} (relu (concat{axis=1} ?x ?y))) "
                                      "(split.1{axis=1,at=dim(?x,1)} (relu (concat{axis=1} ?x ?y))))")));
    // TASO's fusions share an input; split halves share their split; one output is one pattern.
    CHECK(source_connected(rule("r: (tuple (matmul{act=0} ?x ?y) (matmul{act=0} ?x ?z)) => (tuple (matmul{act=0} ?x ?y) (matmul{act=0} ?x ?z))")));
    CHECK(source_connected(rule("r: (tuple (split.0{axis=0,at=dim(?x,0)} (concat{axis=0} ?x ?y)) (split.1{axis=0,at=dim(?x,0)} (concat{axis=0} ?x ?y))) => (tuple ?x ?y)")));
    CHECK(source_connected(rule("r: (relu (relu ?x)) => (relu ?x)")));
    // The committed table holds none.
    for (const auto& r : tsopt::rules::generated()) {
        auto l = rule((std::string(r.name) + ": " + std::string(r.text)).c_str());
        CHECK_MESSAGE(source_connected(l), r.name);
    }
}

TEST_CASE("TASO's disciplines: representative parameters and distinct operands shrink the enumeration") {
    options full;
    full.ops = {op_kind::conv2d, op_kind::ewadd, op_kind::concat};
    full.max_ops = 2;
    full.threads = 1;
    full.inputs = {{"x", shape{1, 4, 6, 8}, role::act}, {"y", shape{1, 4, 6, 8}, role::act},
                   {"w", shape{4, 4, 3, 3}, role::weight}};
    auto restricted = full;
    restricted.representative_params = true;
    restricted.distinct_operands = true;
    auto all = enumerate(full), few = enumerate(restricted);
    CHECK(few.graphs.size() < all.graphs.size());
    auto scan = [](const enumeration& e, bool& stride2, bool& valid, bool& twice, bool& relu) {
        for (auto& pool : e.pools)
            for (auto& g : pool) {
                const auto& p = param_values(g.pidx);
                if (g.kind == op_kind::conv2d) {
                    stride2 |= p[spec::conv2d_p::stride_h] == 2;
                    valid |= p[spec::conv2d_p::pad] == static_cast<std::int32_t>(spec::pad_mode::valid);
                    relu |= p[spec::conv2d_p::act] == static_cast<std::int32_t>(spec::activation::relu);
                }
                if (g.kind == op_kind::concat) twice |= p[spec::concat_p::axis] > 1;
                if (g.nin == 2) twice |= g.in[0] == g.in[1];
            }
    };
    bool s2 = false, v = false, t = false, r = false;
    scan(all, s2, v, t, r);
    CHECK((s2 && v && t && r));  // the full enumeration has each of them
    s2 = v = t = r = false;
    scan(few, s2, v, t, r);
    CHECK_FALSE(s2);
    CHECK_FALSE(v);
    CHECK_FALSE(t);  // no concat on axes 2/3, no operator reading one tensor twice
    CHECK(r);        // activations are kept
}

TEST_CASE("large buckets pair each graph with the smallest equal one, and the fusion rules remain") {
    std::vector<input_decl> in{{"a", shape{4, 4}, role::matrix}, {"b", shape{4, 4}, role::matrix}, {"c", shape{4, 4}, role::matrix}};
    std::vector<op_kind> ops{op_kind::matmul, op_kind::concat, op_kind::split};
    auto all = generate(ops, 3, in), star = generate(ops, 3, in, 1);
    CHECK(star.st.confirmed < all.st.confirmed);
    CHECK(has_rule(star, {op_kind::matmul, op_kind::matmul}, {op_kind::concat, op_kind::matmul, op_kind::split}));
    CHECK(has_rule(star, {op_kind::matmul, op_kind::matmul}, {op_kind::matmul, op_kind::matmul}));
}

TEST_CASE("distinct values: no operator reads a detour, and the detour rules themselves remain") {
    std::vector<input_decl> in{{"a", shape{4, 4}, role::matrix}, {"b", shape{4, 4}, role::matrix}};
    options o;
    o.ops = {op_kind::transpose, op_kind::relu, op_kind::matmul, op_kind::concat, op_kind::split};
    o.max_ops = 3;
    o.threads = 2;
    o.inputs = in;
    auto dv = o;
    dv.distinct_values = true;
    auto all = enumerate(o), pruned = enumerate(dv);
    CHECK(pruned.graphs.size() < all.graphs.size());
    // relu(transpose(transpose(a))) reads a tensor equal to a (not computed
    // from it by an operator it depends on): enumerated without the
    // discipline, not with it. transpose(transpose(a)) itself stays.
    auto t = [](int in) { return op(op_kind::transpose, {in}); };
    auto contains = [](const enumeration& e, std::vector<gop> want) {
        for (auto& g : e.graphs) {
            if (g.nops != want.size()) continue;
            const auto* ops = e.pools[g.pool].data() + g.off;
            bool same = true;
            for (std::size_t i = 0; i < want.size() && same; ++i)
                same = ops[i].kind == want[i].kind && ops[i].nin == want[i].nin && ops[i].in == want[i].in;
            if (same) return true;
        }
        return false;
    };
    std::vector<gop> detour{t(0), t(2), op(op_kind::relu, {3})};
    std::vector<gop> rule_source{t(0), t(2)};
    CHECK(contains(all, detour));
    CHECK_FALSE(contains(pruned, detour));
    CHECK(contains(pruned, rule_source));

    run_config c;
    c.o = dv;
    c.verify = false;
    c.quiet = true;
    auto r = run(c);
    CHECK(has_rule(r, {op_kind::transpose, op_kind::transpose}, {}));
    CHECK(has_rule(r, {op_kind::concat, op_kind::split}, {}));
    CHECK(has_rule(r, {op_kind::matmul, op_kind::matmul}, {op_kind::concat, op_kind::matmul, op_kind::split}));
}

TEST_CASE("fingerprint partitions: each holds a share of the graphs, together they give the candidates of one pass") {
    std::vector<input_decl> in{{"a", shape{4, 4}, role::matrix}, {"b", shape{4, 4}, role::matrix}, {"s", shape{1}, role::scalar}};
    options o;
    o.ops = {op_kind::ewadd, op_kind::matmul, op_kind::smul, op_kind::transpose};
    o.max_ops = 3;
    o.threads = 2;
    o.inputs = in;
    auto whole = enumerate(o);
    std::size_t held = 0;
    for (unsigned k = 0; k < 3; ++k) {
        auto part = o;
        part.partitions = 3;
        part.partition = k;
        auto e = enumerate(part);
        CHECK(e.total_graphs == whole.graphs.size());
        CHECK(e.graphs.size() < whole.graphs.size());
        CHECK(std::all_of(e.graphs.begin(), e.graphs.end(), [&](const graph_rec& g) { return partition_of(g.fp, 3) == k; }));
        held += e.graphs.size();
    }
    CHECK(held == whole.graphs.size());

    run_config one, three;
    one.o = o;
    one.verify = three.verify = false;
    one.quiet = three.quiet = true;
    three.o = o;
    three.o.partitions = 3;
    auto r1 = run(one), r3 = run(three);
    CHECK(r3.st.graphs == r1.st.graphs);
    CHECK(r3.st.fingerprints == r1.st.fingerprints);
    CHECK(r3.st.buckets == r1.st.buckets);
    CHECK(r3.st.candidates == r1.st.candidates);
    CHECK(r3.st.after_common_outputs == r1.st.after_common_outputs);
    CHECK(r3.st.after_renaming == r1.st.after_renaming);  // renaming pruned across partitions too
    REQUIRE(r1.not_proven.size() > 10);
    auto texts = [](const run_result& r) {
        std::vector<std::string> t;
        for (auto& e : r.not_proven) t.push_back(e.r.text);
        return t;
    };
    CHECK(texts(r3) == texts(r1));  // the same rules, in the same order

    auto bad = o;
    bad.partitions = 2;
    bad.partition = 2;
    CHECK_THROWS_WITH(enumerate(bad), doctest::Contains("partition"));
}

TEST_CASE("the listing round-trips through the parser") {
    auto r = generate({op_kind::ewadd, op_kind::relu, op_kind::concat, op_kind::split, op_kind::imatmul, op_kind::matmul}, 2,
                      {{"a", shape{4, 4}, role::matrix}, {"b", shape{4, 4}, role::matrix}});
    CHECK(r.rules.empty());  // not verified: nothing is emitted
    const auto& rules = r.not_proven;
    REQUIRE(!rules.empty());
    auto text = render_listing(rules, r.spec_hash, "test");
    auto l = io::parse_rule_listing(text, "test.txt");
    CHECK(l.spec_hash == r.spec_hash);
    REQUIRE(l.rules.size() == rules.size());
    for (std::size_t i = 0; i < l.rules.size(); ++i) {
        CHECK(l.rules[i].name == rules[i].r.name);
        CHECK(l.rules[i].text == rules[i].r.text);
        CHECK(l.rules[i].src == rules[i].r.src);
        CHECK(l.rules[i].dst == rules[i].r.dst);
        CHECK(l.rules[i].src_out == rules[i].r.src_out);
        CHECK(l.rules[i].dst_out == rules[i].r.dst_out);
    }
    // Both directions of a two-way equivalence.
    bool rev = false;
    for (auto& e : rules) rev |= e.r.name.ends_with("-rev");
    CHECK(rev);
}

TEST_CASE("a corrupt listing is rejected with its line number") {
    auto bad = [](const char* text, const char* what) {
        try {
            io::parse_rule_listing(text, "r.txt");
            FAIL("accepted: " << text);
        } catch (const error& e) {
            std::string m = e.what();
            CHECK_MESSAGE(m.find(what) != std::string::npos, m);
        }
    };
    bad("# c\nok: (relu ?x) => (relu ?x)\nbad: (bogus ?x) => ?x\n", "r.txt:3: unknown operator 'bogus'");
    bad("r: (relu ?x) => (relu ?y)\n", "r.txt:1: target uses variable ?y");
    bad("r: (relu ?x ?y) => ?x\n", "relu takes 1 inputs, got 2");
    bad("r: (split{axis=0} ?x) => ?x\n", "write split.0 or split.1");
    bad("r: (relu{axis=1} ?x) => ?x\n", "relu has no parameter 'axis'");
    bad("r: (tuple (relu ?x) (relu ?y)) => (relu ?x)\n", "source has 2 outputs but target has 1");
    bad("r: (relu ?x) => ?x\nr: (relu ?y) => ?y\n", "r.txt:2: rule name 'r' already used on line 1");
    bad("r: (relu ?x => ?x\n", "r.txt:1:");
}

// ---- only proven rules are ever emitted ---------------------------------

TEST_CASE("without verification no rule reaches the header or the listing") {
    run_config c;
    c.o.ops = {op_kind::ewadd, op_kind::ewmul};
    c.o.max_ops = 2;
    c.o.inputs = {{"x", shape{1, 4, 6, 8}, role::act}, {"y", shape{1, 4, 6, 8}, role::act}, {"z", shape{1, 4, 6, 8}, role::act}};
    c.o.threads = 2;
    c.verify = false;
    c.quiet = true;
    auto r = run(c);
    CHECK(r.rules.empty());
    REQUIRE(!r.not_proven.empty());  // e.g. ewadd commutativity / associativity candidates
    CHECK(r.skipped == r.st.with_direction);
    for (auto& e : r.not_proven) {
        CHECK_FALSE(e.proven);
        CHECK(e.provenance.find("NOT PROVEN") != std::string::npos);
    }
    auto h = render_header(r.rules, r.spec_hash, "test", r.skipped, false);
    CHECK(h.find("std::array<rewrite::rule, 0> generated_rules") != std::string::npos);
    CHECK(h.find("generated_verified = false") != std::string::npos);
    // The header refuses an unproven rule outright.
    CHECK_THROWS_AS(render_header(r.not_proven, r.spec_hash, "test"), error);
    // An engine's own set in its own namespace (tests/consumer compiles one
    // beside the shipped set); anything but a namespace name is refused.
    auto own = render_header(r.rules, r.spec_hash, "test", r.skipped, false, "myengine::rules");
    CHECK(own.find("namespace myengine::rules {") != std::string::npos);
    CHECK(own.find("namespace spec = ::tsopt::spec;") != std::string::npos);
    CHECK(own.find("}  // namespace myengine::rules") != std::string::npos);
    CHECK(h.find("namespace spec =") == std::string::npos);  // the shipped header's text is unchanged
    for (const char* bad : {"", "my engine", "a::", "::a", "1a::b", "a:::b", "a;b"}) {
        CAPTURE(bad);
        CHECK_FALSE(valid_namespace(bad));
        CHECK_THROWS_AS(render_header(r.rules, r.spec_hash, "test", 0, false, bad), error);
    }
    CHECK(valid_namespace("myengine::rules_v2"));
    // The inspection listing holds the candidates commented out: a loader reads no rule.
    auto u = render_unproven_listing(r.unproven_listing, r.spec_hash, "test");
    CHECK(u.find("NOT PROVEN") != std::string::npos);
    CHECK(io::parse_rule_listing(u, "unproven.txt").rules.empty());
}

// ewadd and ewmul at N=2 over two activations: a verified run of seconds.
run_config two_activations() {
    run_config c;
    c.o.ops = {op_kind::ewadd, op_kind::ewmul};
    c.o.max_ops = 2;
    c.o.inputs = {{"x", shape{1, 4, 6, 8}, role::act}, {"y", shape{1, 4, 6, 8}, role::act}};
    return c;
}

TEST_CASE("a candidate Z3 does not prove is not emitted") {
    if (!verifier_available()) return;
    auto c = two_activations();
    c.o.threads = 2;
    c.quiet = true;
    auto check_run = [](const run_result& r) {
        CHECK(r.verified);
        CHECK(r.unproven + r.timeouts + r.skipped + r.proven + r.derived == r.st.with_direction);
        CHECK(r.unproven_listing.size() == r.not_proven.size());
        for (auto& e : r.rules) {
            CHECK(e.proven);
            // Exact: what this rule's own proof spent, of the limit.
            CHECK_MESSAGE(e.provenance.find("proven by Z3 (rlimit ") != std::string::npos, e.provenance);
            CHECK_MESSAGE(e.provenance.find(" / " + std::to_string(r.rlimit) + ")") != std::string::npos, e.provenance);
        }
        CHECK(r.max_proof_rlimit <= r.rlimit);
        CHECK(r.near_limit <= r.proven);
        auto h = render_header(r.rules, r.spec_hash, "test", r.unproven + r.timeouts, true);
        CHECK(h.find("generated_verified = true") != std::string::npos);
        CHECK(h.find("NOT PROVEN") == std::string::npos);
        // A candidate the verifier did not prove never appears in the header.
        for (auto& n : r.not_proven) {
            CHECK_FALSE(n.proven);
            CHECK_MESSAGE(h.find(n.r.text) == std::string::npos, n.r.text);
            for (auto& e : r.rules) CHECK(n.r.text != e.r.text);
        }
    };
    // An rlimit below Z3's cost of taking in the axioms: every query stops
    // at it (deterministically, whatever the machine's load).
    c.rlimit = 1000;
    auto tight = run(c);
    check_run(tight);
    CHECK(tight.timeouts + tight.unproven > 0);
    CHECK(!tight.not_proven.empty());
    // The build's limit: commutativity and associativity are proven and emitted.
    c.rlimit = 500000;
    auto normal = run(c);
    check_run(normal);
    CHECK(normal.proven > 0);
    CHECK(normal.rules.size() >= tight.rules.size());
}

TEST_CASE("a query the wall clock ends aborts the run with a named error") {
    if (!verifier_available()) return;
    auto c = two_activations();
    c.o.threads = 1;
    c.quiet = true;
    c.timeout_ms = 1;          // ends queries long before
    c.rlimit = 2000000000;     // the deterministic limits
    c.max_instances = 0;
    try {
        run(c);
        FAIL("a run whose queries hit the 1 ms guard completed");
    } catch (const error& e) {
        std::string m = e.what();
        CHECK_MESSAGE(m.find("wall-clock guard") != std::string::npos, m);
        CHECK_MESSAGE(m.find("--timeout-ms 1,") != std::string::npos, m);
    }
}

TEST_CASE("an engine's axiom is sampled on random tensors before it proves anything") {
    using namespace spec::vars;
    // Declared with tsopt's operators here; cli.cpp samples an engine's
    // registered axioms the same way (tests/consumer/own_operators).
    using spec::make_axiom;
    constexpr auto comm = make_axiom("comm", spec::ewadd(x, y) == spec::ewadd(y, x));
    constexpr auto mm = make_axiom("mm", spec::matmul(none, x, spec::ewadd(y, z)) ==
                                             spec::ewadd(spec::matmul(none, x, y), spec::matmul(none, x, z)));
    CHECK(sample_axiom(comm) == "");
    CHECK(sample_axiom(mm) == "");
    // relu does not distribute over a sum: some instance tells the sides apart.
    constexpr auto relu_sum = make_axiom("relu-sum", spec::relu(spec::ewadd(x, y)) == spec::ewadd(spec::relu(x), spec::relu(y)));
    CHECK(sample_axiom(relu_sum).starts_with("false: the two sides differ"));
    // matmul does not commute.
    constexpr auto mm_comm = make_axiom("mm-comm", spec::matmul(none, x, y) == spec::matmul(none, y, x));
    CHECK(sample_axiom(mm_comm).starts_with("false"));
    // Split points come from concat history, which sampling does not model.
    constexpr auto split = make_axiom("split", spec::split0(spec::pconst(0), spec::concat(spec::pconst(0), x, y)) == x);
    CHECK(sample_axiom(split).starts_with("not sampled"));
}
