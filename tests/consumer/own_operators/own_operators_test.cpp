// Issue #21: an engine's own operators and axioms, declared with tsopt's DSL
// outside tsopt (myengine_ops.hpp), rules generated and proven for them at
// this build's time by the engine's own generator (myengine_gen.cpp ->
// myengine_rules.hpp, namespace myengine::rules), used beside the shipped
// set by the optimizer and run by both backends.
#include <doctest/doctest.h>

#include <tsopt/backend/dnnl/executor.hpp>
#include <tsopt/cost/analytical.hpp>
#include <tsopt/io/rule_listing.hpp>
#include <tsopt/optimize.hpp>
#include <tsopt/rules/default.hpp>
#include <tsopt/rules/load.hpp>
#include <tsopt/spec/spec_hash.hpp>

#include <algorithm>
#include <chrono>

#ifdef TSOPT_OWN_OPS_ONNX
#include <tsopt/onnx.hpp>
#endif

#include "../../rewrite/helpers.hpp"
#include "myengine_ops.hpp"
#include "myengine_rules.hpp"

using namespace tsopt;
using namespace std::chrono_literals;

namespace {

struct registered {
    registered() { myengine::register_spec(); }
};
const registered once;

int count_kind(const graph& g, spec::op_kind k) {
    int n = 0;
    for (const node& x : g.nodes) n += x.is_op(k);
    return n;
}

bool has_rule(std::span<const rewrite::rule> rs, std::string_view text) {
    return std::ranges::any_of(rs, [&](const rewrite::rule& r) { return r.text == text; });
}

}  // namespace

TEST_CASE("the engine's operators are declared like tsopt's") {
    CHECK(spec::find_op("neg") == myengine::neg_decl.kind);
    CHECK(spec::find_op("sub") == myengine::sub_decl.kind);
    CHECK(spec::name(myengine::sub_decl.kind) == "sub");
    CHECK(spec::is_declared(myengine::neg_decl.kind));
    CHECK_FALSE(spec::is_declared(spec::extension_kind(2)));
    // The built-in set's hash is what the shipped rules carry; with the
    // engine's operators registered the whole set hashes differently.
    CHECK(spec::builtin_spec_hash() == rules::generated_spec_hash);
    CHECK(spec::spec_hash() != spec::builtin_spec_hash());
    CHECK(spec::spec_hash() == myengine::rules::generated_spec_hash);
    graph g;
    auto x = g.input("x", {3, 4});
    auto y = g.add1(myengine::sub_decl.kind, {}, {x, g.add1(myengine::neg_decl.kind, {}, {x})});
    CHECK(g.shape_of(y) == shape{3, 4});
    CHECK_THROWS_WITH_AS(g.add1(myengine::sub_decl.kind, {}, {x, g.input("z", {4, 3})}),
                         doctest::Contains("operands must have the same shape"), error);
}

TEST_CASE("registration refuses what would make kinds or names ambiguous") {
    myengine::register_spec();  // the same declarations again: nothing changes
    static constexpr spec::op_decl built_in_kind{.kind = spec::op_kind::relu, .name = "myrelu", .math = "max(x, 0)"};
    CHECK_THROWS_WITH_AS(spec::register_operator(built_in_kind), doctest::Contains("not an extension kind"), error);
    static constexpr spec::op_decl taken{.kind = spec::extension_kind(0), .name = "other", .math = "-x", .infer = myengine::ops::same_shape,
                                         .eval_float = myengine::ops::neg_eval<float>,
                                         .eval_modp = myengine::ops::neg_eval<modp>, .flops = myengine::ops::elements};
    CHECK_THROWS_WITH_AS(spec::register_operator(taken), doctest::Contains("already taken by operator 'neg'"), error);
    static constexpr spec::op_decl same_name{.kind = spec::extension_kind(5), .name = "ewadd", .math = "x + y",
                                             .infer = myengine::ops::same_shape, .eval_float = myengine::ops::neg_eval<float>,
                                             .eval_modp = myengine::ops::neg_eval<modp>, .flops = myengine::ops::elements};
    CHECK_THROWS_WITH_AS(spec::register_operator(same_name), doctest::Contains("already declared"), error);
    static constexpr spec::op_decl no_semantics{.kind = spec::extension_kind(6), .name = "nothing", .math = "?"};
    CHECK_THROWS_WITH_AS(spec::register_operator(no_semantics), doctest::Contains("reference semantics"), error);
    CHECK_FALSE(spec::is_declared(spec::extension_kind(5)));
    CHECK_THROWS_WITH_AS(spec::register_axioms(myengine::axioms), doctest::Contains("registered twice"), error);
    CHECK_THROWS_WITH_AS(spec::decl(spec::extension_kind(7)), doctest::Contains("not declared"), error);
    CHECK_THROWS_WITH_AS(spec::require_operator(myengine::neg_decl.kind, "negate"),
                         doctest::Contains("registered 'neg' there"), error);
}

TEST_CASE("the engine's generator proved rules over its operators from its axioms") {
    const auto own = myengine::rules::generated();
    REQUIRE(!own.empty());
    CHECK(myengine::rules::generated_verified);
    for (const auto& r : own) CHECK_MESSAGE(io::is_proof_record(r.provenance), r.name);
    // Facts only the engine's axioms give.
    CHECK(has_rule(own, "(neg (neg ?x)) => ?x"));
    CHECK(has_rule(own, "(ewadd ?x (neg ?y)) => (sub ?x ?y)"));
    CHECK(has_rule(own, "(neg (sub ?x ?y)) => (sub ?y ?x)"));
}

TEST_CASE("the optimizer uses the engine's rules beside the shipped ones, and both backends run the result") {
    std::vector<rewrite::rule> rs(rules::default_rules().begin(), rules::default_rules().end());
    rs.insert(rs.end(), myengine::rules::generated().begin(), myengine::rules::generated().end());
    std::mt19937_64 rng(3);
    const graph g = myengine::negated_product();
    const auto neg = myengine::neg_decl.kind, sub = myengine::sub_decl.kind;
    auto r = optimize(g, rs, cost::analytical{}, {.budget = 10s});
    MESSAGE("operators ", g.op_count(), " -> ", r.optimized.op_count());
    CHECK(count_kind(r.optimized, neg) == 0);
    CHECK(count_kind(r.optimized, sub) == 1);
    CHECK(r.optimized.op_count() <= 2);
    rewrite_test::check_equivalent(g, r.optimized);
    // oneDNN runs the engine's operators on the host (its reference semantics).
    backend::dnnl d({.persist = false});
    std::map<std::string, tensor<float>> by_name;
    for (value v : g.inputs()) by_name[g.at(v).name] = random_float(g.shape_of(v), rng);
    auto want = backend::reference{}.execute(g, rewrite_test::inputs_for(g, by_name));
    auto got = d.execute(r.optimized, rewrite_test::inputs_for(r.optimized, by_name));
    REQUIRE(got.size() == 1);
    CHECK(relative_error(got[0], want[0]) <= 1e-4);
    auto got_original = d.execute(g, rewrite_test::inputs_for(g, by_name));
    CHECK(relative_error(got_original[0], want[0]) <= 1e-4);
    CHECK(d.stats(g).fallbacks == 3);
}

TEST_CASE("the engine gives its operators native oneDNN lowerings and host kernels by name") {
    namespace dd = backend::dnnl_impl;
    std::mt19937_64 rng(5);
    graph g;
    const auto neg = myengine::neg_decl.kind, sub = myengine::sub_decl.kind;
    auto x = g.input("x", {8, 16});
    auto b = g.input("b", {8, 12});
    auto m = g.matmul(x, g.weight("w", {16, 12}, rng));
    g.mark_output(g.add1(sub, {}, {g.add1(neg, {}, {m}), b}));
    backend::dnnl d({.persist = false});
    // neg is one eltwise (-1 * x): a post-op of the product before it.
    d.opaque_eltwise["neg"] = [](const dd::lowering&, std::size_t) {
        return std::optional<dd::eltwise_form>(dd::eltwise_form{::dnnl::algorithm::eltwise_linear, -1.f, 0.f, "neg"});
    };
    // sub runs the engine's own host kernel.
    int sub_calls = 0;
    d.opaque_impls["sub"] = [&sub_calls](const node&, std::span<const tensor<float>* const> in) {
        ++sub_calls;
        tensor<float> r = *in[0];
        for (std::size_t i = 0; i < r.data.size(); ++i) r.data[i] -= in[1]->data[i];
        return std::vector<tensor<float>>{std::move(r)};
    };
    const auto st = d.stats(g);
    CHECK(st.fallbacks == 1);  // sub, on its registered kernel (not the reference)
    CHECK(st.fused_ops == 1);  // neg inside the matmul
    std::map<std::string, tensor<float>> by_name{{"x", random_float({8, 16}, rng)}, {"b", random_float({8, 12}, rng)}};
    auto want = backend::reference{}.execute(g, rewrite_test::inputs_for(g, by_name));
    auto got = d.execute(g, rewrite_test::inputs_for(g, by_name));
    CHECK(relative_error(got[0], want[0]) <= 1e-5);
    CHECK(sub_calls >= 1);
}

TEST_CASE("a listing of the engine's rules loads at run time with its operators registered") {
    auto loaded = rules::load_listing(MYENGINE_LISTING);
    CHECK(loaded.rules().size() == myengine::rules::generated().size());
    CHECK(has_rule(loaded.rules(), "(neg (neg ?x)) => ?x"));
#ifdef TSOPT_SHIPPED_LISTING
    // The shipped listing (built-in operators only) still loads beside them.
    CHECK(rules::load_listing(TSOPT_SHIPPED_LISTING).rules().size() == rules::generated_rule_count);
#endif
}

#ifdef TSOPT_OWN_OPS_ONNX
TEST_CASE("the engine's operators go through ONNX in their own domain") {
    const auto neg = myengine::neg_decl.kind, sub = myengine::sub_decl.kind;
    graph g;
    auto x = g.input("x", {4, 6});
    g.mark_output(g.add1(sub, {}, {g.add1(neg, {}, {x}), x}));
    auto proto = tsopt::onnx::to_proto(g);
    int engine_nodes = 0;
    for (const auto& n : proto.graph().node())
        engine_nodes += n.domain() == tsopt::onnx::engine_domain && (n.op_type() == "neg" || n.op_type() == "sub");
    CHECK(engine_nodes == 2);
    CHECK(std::any_of(proto.opset_import().begin(), proto.opset_import().end(),
                      [](const auto& o) { return o.domain() == tsopt::onnx::engine_domain; }));
    auto back = tsopt::onnx::import_model(tsopt::onnx::to_bytes(g));
    CHECK(count_kind(back.graph, neg) == 1);
    CHECK(count_kind(back.graph, sub) == 1);
    rewrite_test::check_equivalent(g, back.graph);
    // An attribute the declaration does not know is refused by name.
    for (auto& n : *proto.mutable_graph()->mutable_node())
        if (n.op_type() == "neg") {
            auto* a = n.add_attribute();
            a->set_name("alpha");
            a->set_type(tsopt::onnx::pb::AttributeProto::INT);
            a->set_i(2);
        }
    CHECK_THROWS_WITH_AS(tsopt::onnx::import_model(proto), doctest::Contains("attribute 'alpha' is not a parameter of operator 'neg'"),
                         error);
}
#endif
