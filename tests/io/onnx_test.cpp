// ONNX import/export: round trips (export -> import -> equal outputs on the
// reference backend, same operators), opaque nodes, and one test per kind of
// malformed input, each checking that the error names the node or field.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <unistd.h>

#include "tsopt/onnx.hpp"
#include "tsopt/rewrite/layout.hpp"
#include "samples.hpp"

using namespace tsopt;
using namespace io_samples;
namespace pb = ::onnx;
namespace ox = tsopt::onnx;  // (with `using namespace tsopt`, plain `onnx` is ambiguous with ::onnx)

namespace {

backend::reference reference_backend() {
    backend::reference r;
    ox::install_reference_ops(r);
    // A tiny opaque operator for the tests below.
    r.opaque_impls["LeakyRelu"] = [](const node& n, std::span<const tensor<float>* const> in) {
        auto a = ox::opaque_attributes(*n.opaque);
        float alpha = ox::detail::attributes(a, n.describe()).get_float("alpha", 0.01f);
        tensor<float> out = *in[0];
        for (auto& v : out.data) v = v < 0 ? v * alpha : v;
        return std::vector<tensor<float>>{out};
    };
    return r;
}

// Runs both graphs on the same random inputs; max relative error over outputs.
double max_error(const graph& a, const graph& b, std::uint64_t seed = 7) {
    auto ref = reference_backend();
    auto in = backend::random_inputs(a, seed);
    auto oa = ref.execute(a, in);
    auto ob = ref.execute(b, in);
    REQUIRE(oa.size() == ob.size());
    double e = 0;
    for (std::size_t i = 0; i < oa.size(); ++i) e = std::max(e, relative_error(ob[i], oa[i]));
    return e;
}

graph round_trip(const graph& g, ox::export_options o = {}) {
    std::string bytes = ox::to_bytes(g, o);
    return ox::import_model(bytes).graph;
}

// The operator sequence (kind, parameters) of a graph, for structural checks.
std::string ops_of(const graph& g) {
    std::string s;
    for (std::size_t i : g.topological_order()) {
        const node& n = g.nodes[i];
        if (n.kind == node_kind::op) {
            s += std::string(spec::name(n.op)) + "(";
            for (int k = 0; k < spec::decl(n.op).num_params; ++k) s += std::to_string(n.params[k]) + ",";
            s += ") ";
        } else if (n.kind == node_kind::opaque) {
            s += "opaque:" + n.opaque->type + " ";
        }
    }
    return s;
}

}  // namespace

TEST_CASE("round trip: convolution net keeps operators and outputs") {
    graph g = conv_net();
    graph h = round_trip(g);
    CHECK(ops_of(h) == ops_of(g));
    CHECK(max_error(g, h) <= 1e-6);
    CHECK(h.inputs().size() == 1);
    CHECK(h.at(h.inputs()[0]).name == "x");
}

TEST_CASE("round trip: matmul, transpose, reshape, softmax, smul") {
    graph g = matmul_net();
    graph h = round_trip(g, {.opset = 13});
    CHECK(ops_of(h) == ops_of(g));
    CHECK(max_error(g, h) <= 1e-6);
}

TEST_CASE("round trip: fused activations become separate ONNX activations") {
    auto rng = rng_for(3);
    graph g;
    value x = g.input("x", {1, 3, 6, 6});
    value a = g.conv2d(x, g.weight("w", {4, 3, 3, 3}, rng), {.pad = same, .act = relu});
    value b = g.maxpool(a, {.kernel = 3, .stride = 2, .pad = valid, .act = spec::activation::tanh});
    value c = g.matmul(g.reshape(b, {1, 16}), g.weight("fc", {16, 5}, rng), {.act = spec::activation::sigmoid});
    g.mark_output(c);
    auto m = ox::to_proto(g);
    int relus = 0, tanhs = 0, sigmoids = 0;
    for (const auto& n : m.graph().node()) {
        relus += n.op_type() == "Relu";
        tanhs += n.op_type() == "Tanh";
        sigmoids += n.op_type() == "Sigmoid";
    }
    CHECK(relus == 1);
    CHECK(tanhs == 1);
    CHECK(sigmoids == 1);
    graph h = round_trip(g);
    CHECK(max_error(g, h) <= 1e-6);
}

TEST_CASE("round trip: constant operators and enlarge are precomputed or become Pad") {
    auto rng = rng_for(4);
    graph g;
    value x = g.input("x", {1, 4, 5, 5});
    value kernel = g.input("k", {4, 4, 1, 1});  // a runtime kernel: enlarge must become Pad
    auto P = [](std::initializer_list<std::int32_t> v) {
        spec::op_params p;
        int i = 0;
        for (auto a : v) p[i++] = a;
        return p;
    };
    value big = g.add1(spec::op_kind::enlarge, P({3, 3}), {g.weight("w1", {4, 4, 1, 1}, rng)});
    value a = g.conv2d(x, big, {.pad = same});
    value b = g.conv2d(x, g.add1(spec::op_kind::enlarge, P({3, 3}), {kernel}), {.pad = same});
    value c = g.conv2d(x, g.add1(spec::op_kind::iconv, P({4, 4, 3}), {}), {.pad = same});
    value d = g.conv2d(x, g.add1(spec::op_kind::cpool, P({4, 3, 3}), {}), {.pad = same});  // depthwise
    value e = g.ewmul(g.ewadd(g.ewadd(a, b), g.ewadd(c, d)), g.add1(spec::op_kind::iewmul, P({4, 1, 4, 5, 5}), {}));
    g.mark_output(e);
    auto m = ox::to_proto(g);
    int pads = 0;
    for (const auto& n : m.graph().node()) pads += n.op_type() == "Pad";
    CHECK(pads == 1);
    graph h = round_trip(g);
    CHECK(max_error(g, h) <= 1e-6);
}

TEST_CASE("graph inputs with a non-positive extent: the error gives the value, not 'dynamic'") {
    auto model = [](std::int64_t first) {
        pb::ModelProto m;
        m.set_ir_version(8);
        m.add_opset_import()->set_version(17);
        auto* gp = m.mutable_graph();
        auto* in = gp->add_input();
        in->set_name("x");
        in->mutable_type()->mutable_tensor_type()->set_elem_type(pb::TensorProto::FLOAT);
        for (std::int64_t d : {first, std::int64_t(4)}) in->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
        auto* r = gp->add_node();
        r->set_op_type("Relu");
        r->add_input("x");
        r->add_output("y");
        auto* out = gp->add_output();
        out->set_name("y");
        out->mutable_type()->mutable_tensor_type()->set_elem_type(pb::TensorProto::FLOAT);
        return m.SerializeAsString();
    };
    for (std::int64_t bad : {-3, -1, 0}) {
        CAPTURE(bad);
        const std::string expected = "graph input 'x': dimension 0 has extent " + std::to_string(bad) + ", which is not positive";
        CHECK_THROWS_WITH_AS(ox::import_model(model(bad)), doctest::Contains(expected.c_str()), error);
        // A value given for the batch replaces it, as for a named dynamic dimension.
        auto mm = ox::import_model(model(bad), {.batch = 2});
        CHECK(mm.graph.shape_of(mm.graph.inputs()[0]) == shape{2, 4});
    }
}

TEST_CASE("round trip: opaque nodes keep type, domain, attributes and inputs") {
    graph g;
    value x = g.input("x", {2, 3});
    auto op = std::make_shared<opaque_op>();
    op->type = "LeakyRelu";
    pb::NodeProto blob;
    auto* a = blob.add_attribute();
    a->set_name("alpha");
    a->set_type(pb::AttributeProto::FLOAT);
    a->set_f(0.25f);
    op->attributes = blob.SerializeAsString();
    op->attribute_count = 1;
    value y = g.opaque(op, {g.relu(x)}, {{2, 3}}, "leaky")[0];
    g.mark_output(g.ewadd(y, x));
    graph h = round_trip(g);
    CHECK(ops_of(h) == ops_of(g));
    const node* leaky = nullptr;
    for (auto& n : h.nodes)
        if (n.kind == node_kind::opaque) leaky = &n;
    REQUIRE(leaky);
    CHECK(ox::opaque_attributes(*leaky->opaque).attribute(0).f() == 0.25f);
    CHECK(max_error(g, h) <= 1e-6);
}

TEST_CASE("import: opaque node with a non-float constant input and an empty optional input round-trips") {
    // Y = Resize-like custom op "Blur" in domain "com.example" taking
    // (x, "", int64 constant), plus a TopK-free check of output names.
    pb::ModelProto m;
    m.set_ir_version(8);
    auto* os = m.add_opset_import();
    os->set_version(17);
    auto* cs = m.add_opset_import();
    cs->set_domain("com.example");
    cs->set_version(3);
    auto* gp = m.mutable_graph();
    auto* in = gp->add_input();
    in->set_name("x");
    in->mutable_type()->mutable_tensor_type()->set_elem_type(pb::TensorProto::FLOAT);
    for (int d : {1, 2, 4, 4}) in->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
    in->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("N");
    ox::detail::fill_ints(*gp->add_initializer(), "radius", {2});
    auto* n = gp->add_node();
    n->set_op_type("Blur");
    n->set_domain("com.example");
    n->add_input("x");
    n->add_input("");
    n->add_input("radius");
    n->add_output("y");
    auto* at = n->add_attribute();
    at->set_name("mode");
    at->set_type(pb::AttributeProto::STRING);
    at->set_s("box");
    auto* r = gp->add_node();
    r->set_op_type("Relu");
    r->add_input("y");
    r->add_output("z");
    auto* vi = gp->add_value_info();
    vi->set_name("y");
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(pb::TensorProto::FLOAT);
    for (int d : {3, 2, 4, 4}) vi->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
    auto* out = gp->add_output();
    out->set_name("z");
    out->mutable_type()->mutable_tensor_type()->set_elem_type(pb::TensorProto::FLOAT);
    std::string bytes = m.SerializeAsString();

    // The batch is dynamic: without a value the error names input and dimension.
    auto no_batch = [&] { ox::import_model(bytes); };
    CHECK_THROWS_WITH_AS(no_batch(), doctest::Contains("graph input 'x': dimension 0 ('N') is dynamic"), error);

    auto mm = ox::import_model(bytes, {.batch = 3});
    CHECK(mm.graph.shape_of(mm.graph.inputs()[0]) == shape{3, 2, 4, 4});
    CHECK(mm.output_names == std::vector<std::string>{"z"});
    REQUIRE(mm.other_opsets.size() == 1);
    auto back = ox::to_proto(mm.graph, ox::options_for(mm));
    const pb::NodeProto* blur = nullptr;
    for (const auto& nd : back.graph().node())
        if (nd.op_type() == "Blur") blur = &nd;
    REQUIRE(blur);
    CHECK(blur->domain() == "com.example");
    REQUIRE(blur->input_size() == 3);
    CHECK(blur->input(0) == "x");
    CHECK(blur->input(1).empty());
    CHECK(blur->input(2) == "radius");
    REQUIRE(blur->attribute_size() == 1);
    CHECK(blur->attribute(0).s() == "box");
    bool radius_ok = false;
    for (const auto& t : back.graph().initializer())
        if (t.name() == "radius") radius_ok = ox::detail::to_ints(t, "radius") == std::vector<std::int64_t>{2};
    CHECK(radius_ok);
    CHECK(back.graph().output(0).name() == "z");
    bool domain_ok = false;
    for (const auto& o : back.opset_import()) domain_ok = domain_ok || (o.domain() == "com.example" && o.version() == 3);
    CHECK(domain_ok);
}

// ---------------------------------------------------------------------------
// Importing hand-written ONNX: semantics of the mappings.

namespace {

struct builder {
    pb::ModelProto m;
    pb::GraphProto* g;
    explicit builder(int opset = 17) {
        m.set_ir_version(8);
        m.add_opset_import()->set_version(opset);
        g = m.mutable_graph();
    }
    void input(const std::string& n, std::initializer_list<std::int64_t> dims) {
        auto* vi = g->add_input();
        vi->set_name(n);
        vi->mutable_type()->mutable_tensor_type()->set_elem_type(pb::TensorProto::FLOAT);
        for (auto d : dims) vi->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
    }
    void weight(const std::string& n, const shape& s, int seed) {
        auto rng = rng_for(seed);
        ox::detail::fill_tensor(*g->add_initializer(), n, random_float(s, rng));
    }
    void ints(const std::string& n, std::vector<std::int64_t> v) { ox::detail::fill_ints(*g->add_initializer(), n, v); }
    pb::NodeProto* node(const std::string& type, std::vector<std::string> in, std::vector<std::string> out, const std::string& name = {}) {
        auto* n = g->add_node();
        n->set_op_type(type);
        n->set_name(name);
        for (auto& s : in) n->add_input(s);
        for (auto& s : out) n->add_output(s);
        return n;
    }
    static void attr_ints(pb::NodeProto* n, const std::string& name, std::vector<std::int64_t> v) {
        auto* a = n->add_attribute();
        a->set_name(name);
        a->set_type(pb::AttributeProto::INTS);
        for (auto x : v) a->add_ints(x);
    }
    static void attr_int(pb::NodeProto* n, const std::string& name, std::int64_t v) {
        auto* a = n->add_attribute();
        a->set_name(name);
        a->set_type(pb::AttributeProto::INT);
        a->set_i(v);
    }
    static void attr_str(pb::NodeProto* n, const std::string& name, const std::string& v) {
        auto* a = n->add_attribute();
        a->set_name(name);
        a->set_type(pb::AttributeProto::STRING);
        a->set_s(v);
    }
    void output(const std::string& n) { g->add_output()->set_name(n); }
    std::string bytes() const { return m.SerializeAsString(); }
};

}  // namespace

TEST_CASE("import: asymmetric conv pads become pad + valid conv; Sub, Div, Gemm map exactly") {
    builder b;
    b.input("x", {1, 3, 7, 7});
    b.weight("w", {4, 3, 3, 3}, 5);
    b.weight("bias", {4}, 6);
    auto* c = b.node("Conv", {"x", "w", "bias"}, {"c"}, "conv");
    builder::attr_ints(c, "pads", {0, 1, 2, 1});
    builder::attr_ints(c, "strides", {2, 2});
    b.weight("k", {1}, 7);
    b.node("Sub", {"c", "k"}, {"s"});
    b.ints("quarter_shape", {1});
    auto* q = b.g->add_initializer();
    ox::detail::fill_tensor(*q, "four", tensor<float>(shape{1}, 4.f));
    b.node("Div", {"s", "four"}, {"d"});
    b.ints("flat", {1, -1});
    b.node("Reshape", {"d", "flat"}, {"f"});
    b.weight("gw", {3, 64}, 8);  // transB: B is [N, K]
    b.weight("gc", {3}, 9);
    auto* gm = b.node("Gemm", {"f", "gw", "gc"}, {"y"});
    builder::attr_int(gm, "transB", 1);
    b.output("y");
    auto m = ox::import_model(b.bytes());
    const graph& g = m.graph;
    std::string ops = ops_of(g);
    CHECK(ops.find("pad(0,2,1,1,)") != std::string::npos);
    CHECK(ops.find("conv2d(2,2,0,") != std::string::npos);
    CHECK(ops.find("opaque") == std::string::npos);  // Div by 4 is exact as a multiplication
    CHECK(g.shape_of(g.outputs[0]) == shape{1, 3});
    // Independent check of the conv output extent: (7 + 0 + 2 - 3) / 2 + 1 = 4.
    for (auto& n : g.nodes)
        if (n.is_op(spec::op_kind::conv2d)) CHECK(n.shapes[0] == shape{1, 4, 4, 4});
}

TEST_CASE("import: Div by a non-power-of-two stays opaque and runs on the reference backend") {
    builder b;
    b.input("x", {2, 3});
    auto* q = b.g->add_initializer();
    ox::detail::fill_tensor(*q, "three", tensor<float>(shape{1}, 3.f));
    b.node("Div", {"x", "three"}, {"y"});
    b.output("y");
    auto g = ox::import_model(b.bytes()).graph;
    CHECK(ops_of(g) == "opaque:Div ");
    auto ref = reference_backend();
    tensor<float> x(shape{2, 3}, std::vector<float>{3, 6, 9, -3, 1, 0});
    auto y = ref.execute(g, std::span<const tensor<float>>(&x, 1));
    CHECK(y[0].data == std::vector<float>{1, 2, 3, -1, 1.f / 3.f, 0});
}

TEST_CASE("import: a Slice with constant parameters and step 1 is the spec's slice, and exports back as a Slice") {
    builder b;
    b.input("x", {1, 6, 4, 5});
    b.ints("minus3", {-3});
    b.ints("big", {std::numeric_limits<std::int64_t>::max()});
    b.ints("one", {1});
    b.ints("rows", {1, 0});
    b.ints("row_ends", {3, -1});
    b.ints("hw", {2, 3});
    b.ints("zero", {0});
    b.ints("six", {6});
    b.node("Slice", {"x", "minus3", "big", "one"}, {"upper"});     // x[:, 3:6]
    b.node("Slice", {"x", "rows", "row_ends", "hw"}, {"window"});  // x[:, :, 1:3, 0:4]
    b.node("Slice", {"x", "zero", "six", "one"}, {"whole"});       // all of axis 1: the identity
    b.output("upper");
    b.output("window");
    b.output("whole");
    graph g = ox::import_model(b.bytes()).graph;
    CHECK(ops_of(g) == "slice(0,3,0,0,0,6,0,0,) slice(0,0,1,0,0,0,3,4,) ");
    std::vector<float> v(120);
    for (std::size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>(k);
    tensor<float> x(shape{1, 6, 4, 5}, v);
    auto ref = reference_backend();
    auto y = ref.execute(g, std::span<const tensor<float>>(&x, 1));
    REQUIRE(y.size() == 3);
    CHECK(y[0].shape == shape{1, 3, 4, 5});
    CHECK(y[0].data.front() == 60.f);  // x[0, 3, 0, 0]
    CHECK(y[0].data.back() == 119.f);
    CHECK(y[1].shape == shape{1, 6, 2, 4});
    CHECK(y[1].data[0] == 5.f);   // x[0, 0, 1, 0]
    CHECK(y[1].data[4] == 10.f);  // x[0, 0, 2, 0]
    CHECK(y[2].data == v);
    graph back = round_trip(g);
    CHECK(ops_of(back) == ops_of(g));
    CHECK(max_error(g, back) == 0.0);

    SUBCASE("a step other than 1 stays opaque") {
        builder c;
        c.input("x", {1, 6, 4, 5});
        c.ints("zero", {0});
        c.ints("six", {6});
        c.ints("one", {1});
        c.ints("two", {2});
        c.node("Slice", {"x", "zero", "six", "one", "two"}, {"even"});
        c.output("even");
        CHECK(ops_of(ox::import_model(c.bytes()).graph) == "opaque:Slice ");
    }
    SUBCASE("an empty slice is refused by name") {
        builder c;
        c.input("x", {1, 6, 4, 5});
        c.ints("four", {4});
        c.ints("two", {2});
        c.ints("one", {1});
        c.node("Slice", {"x", "four", "two", "one"}, {"nothing"}, "empty_slice");
        c.output("nothing");
        CHECK_THROWS_WITH(ox::import_model(c.bytes()), doctest::Contains("empty_slice"));
        CHECK_THROWS_WITH(ox::import_model(c.bytes()), doctest::Contains("is empty"));
    }
}

TEST_CASE("import: a Gather of one constant index is a slice (and a reshape for a scalar index)") {
    auto model = [](bool with_pair) {
        builder b;
        b.input("x", {1, 3, 4});
        auto* zero = b.g->add_initializer();  // a scalar index: ViT's class token, x[:, 0]
        zero->set_name("zero");
        zero->set_data_type(pb::TensorProto::INT64);
        zero->add_int64_data(0);
        b.ints("last", {-1});
        b.ints("two", {0, 2});
        builder::attr_int(b.node("Gather", {"x", "zero"}, {"token"}), "axis", 1);
        builder::attr_int(b.node("Gather", {"x", "last"}, {"column"}), "axis", 2);
        b.output("token");
        b.output("column");
        if (with_pair) {  // two indices: opaque
            builder::attr_int(b.node("Gather", {"x", "two"}, {"pair"}), "axis", 1);
            b.output("pair");
        }
        return ox::import_model(b.bytes()).graph;
    };
    CHECK(ops_of(model(true)) == "slice(0,0,0,0,0,1,0,0,) reshape(2,1,4,0,0,0,0,0,) slice(0,0,3,0,0,0,4,0,) opaque:Gather ");
    graph g = model(false);
    std::vector<float> v(12);
    for (std::size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>(k);
    tensor<float> x(shape{1, 3, 4}, v);
    auto y = reference_backend().execute(g, std::span<const tensor<float>>(&x, 1));
    REQUIRE(y.size() == 2);
    CHECK(y[0].shape == shape{1, 4});
    CHECK(y[0].data == std::vector<float>{0, 1, 2, 3});
    CHECK(y[1].shape == shape{1, 3, 1});
    CHECK(y[1].data == std::vector<float>{3, 7, 11});
    CHECK(max_error(g, round_trip(g)) == 0.0);
}

TEST_CASE("import: 3-way Split (opset 13 input form and opset 11 attribute form) is a chain of splits") {
    for (int opset : {11, 13}) {
        builder b(opset);
        b.input("x", {2, 6});
        pb::NodeProto* s;
        if (opset >= 13) {
            b.ints("parts", {1, 2, 3});
            s = b.node("Split", {"x", "parts"}, {"a", "b", "c"});
        } else {
            s = b.node("Split", {"x"}, {"a", "b", "c"});
            builder::attr_ints(s, "split", {1, 2, 3});
        }
        builder::attr_int(s, "axis", 1);
        b.output("c");
        b.output("a");
        b.output("b");
        auto g = ox::import_model(b.bytes()).graph;
        CHECK(ops_of(g) == "split(1,1,) split(1,2,) ");
        CHECK(g.shape_of(g.outputs[0]) == shape{2, 3});
        CHECK(g.shape_of(g.outputs[1]) == shape{2, 1});
        CHECK(g.shape_of(g.outputs[2]) == shape{2, 2});
    }
}

// ---------------------------------------------------------------------------
// Malformed input: one test each; the message names the node or field.

TEST_CASE("malformed: truncated file") {
    std::string bytes = ox::to_bytes(conv_net());
    std::string cut = bytes.substr(0, bytes.size() / 2);
    CHECK_THROWS_WITH_AS(ox::import_model(cut), doctest::Contains("does not parse as an onnx.ModelProto"), error);
}

TEST_CASE("malformed: not protobuf") {
    CHECK_THROWS_WITH_AS(ox::import_model(std::string("\xff\xff\xff\xff this is not a model")),
                         doctest::Contains("not a valid ONNX model"), error);
    CHECK_THROWS_WITH_AS(ox::read_model("/nonexistent/model.onnx"), doctest::Contains("cannot open ONNX file '/nonexistent/model.onnx'"), error);
}

TEST_CASE("malformed: missing initializer") {
    builder b;
    b.input("x", {1, 3, 4, 4});
    b.node("Conv", {"x", "conv1.weight"}, {"y"}, "conv1");
    b.output("y");
    CHECK_THROWS_WITH_AS(ox::import_model(b.bytes()),
                         "node 'conv1' (Conv): input 'conv1.weight' is not produced by any node, graph input or initializer",
                         error);
}

TEST_CASE("malformed: invalid graphs are rejected by name, never repaired (issue #20)") {
    SUBCASE("extra input beyond the operator's arity") {
        builder b;
        b.input("x", {1, 4});
        b.input("z", {1, 4});
        b.node("Relu", {"x", "z"}, {"y"}, "act");
        b.output("y");
        CHECK_THROWS_WITH_AS(ox::import_model(b.bytes()), "node 'act' (Relu): has 2 inputs; Relu (opset 17) takes 1", error);
    }
    SUBCASE("an Add with a third input") {
        builder b;
        b.input("x", {1, 4});
        b.node("Add", {"x", "x", "x"}, {"y"}, "add");
        b.output("y");
        CHECK_THROWS_WITH_AS(ox::import_model(b.bytes()), "node 'add' (Add): has 3 inputs; Add (opset 17) takes 2", error);
    }
    SUBCASE("too few inputs") {
        builder b;
        b.input("x", {1, 4});
        b.node("Mul", {"x"}, {"y"}, "mul");
        b.output("y");
        CHECK_THROWS_WITH_AS(ox::import_model(b.bytes()), "node 'mul' (Mul): has 1 inputs; Mul (opset 17) takes 2", error);
    }
    SUBCASE("an input that is the node's own output") {
        builder b;
        b.input("x", {1, 4});
        b.node("Add", {"x", "y"}, {"y"}, "loop");
        b.output("y");
        CHECK_THROWS_WITH_AS(ox::import_model(b.bytes()), "node 'loop' (Add): input 'y' is the node's own output (a cycle)", error);
    }
    SUBCASE("an undefined input of an optional slot the mapping ignores") {
        builder b;
        b.input("x", {1, 4});
        b.node("Dropout", {"x", "nowhere"}, {"y"}, "drop");
        b.output("y");
        CHECK_THROWS_WITH_AS(ox::import_model(b.bytes()),
                             "node 'drop' (Dropout): input 'nowhere' is not produced by any node, graph input or initializer", error);
    }
    SUBCASE("an undefined input of an opaque operator") {
        builder b;
        b.input("x", {1, 4});
        b.node("Celu", {"ghost"}, {"y"}, "celu");
        b.output("y");
        CHECK_THROWS_WITH_AS(ox::import_model(b.bytes()),
                             "node 'celu' (Celu): input 'ghost' is not produced by any node, graph input or initializer", error);
    }
    SUBCASE("a graph input listed twice") {
        builder b;
        b.input("x", {1, 4});
        b.input("x", {1, 4});
        b.node("Relu", {"x"}, {"y"});
        b.output("y");
        CHECK_THROWS_WITH_AS(ox::import_model(b.bytes()), "graph input 'x' is listed twice", error);
    }
    SUBCASE("an initializer listed as a graph input stays valid (IR < 4)") {
        builder b;
        b.input("x", {1, 4});
        b.weight("w", shape{1, 4}, 3);
        b.input("w", {1, 4});
        b.node("Add", {"x", "w"}, {"y"});
        b.output("y");
        CHECK(ox::import_model(b.bytes()).graph.inputs().size() == 1);
    }
}

TEST_CASE("import: integer shape arithmetic is folded (Shape, Gather, Unsqueeze, Slice, Mul, Concat, Reshape)") {
    // What PyTorch exports for x.reshape(x.shape[0], -1) and x.flatten(1).
    builder b;
    b.input("x", {2, 3, 4});
    b.ints("zero", {0});
    b.ints("one", {1});
    b.ints("big", {std::int64_t{1} << 40});
    b.ints("minus1", {-1});
    b.node("Shape", {"x"}, {"s"});
    b.node("Gather", {"s", "zero"}, {"n"});  // [1]: index tensor of rank 1
    b.node("Slice", {"s", "one", "big"}, {"tail"});
    b.node("Gather", {"tail", "zero"}, {"t0"});
    b.node("Gather", {"tail", "one"}, {"t1"});
    b.node("Mul", {"t0", "t1"}, {"prod"});
    builder::attr_int(b.node("Concat", {"n", "prod"}, {"target"}), "axis", 0);
    b.node("Reshape", {"x", "target"}, {"flat"});
    b.node("Shape", {"flat"}, {"fs"});
    b.node("Squeeze", {"n"}, {"n0"});
    b.node("Unsqueeze", {"n0", "zero"}, {"n1"});
    builder::attr_int(b.node("Concat", {"n1", "minus1"}, {"t2"}), "axis", 0);
    b.node("Reshape", {"flat", "t2"}, {"y"});
    b.output("y");
    graph g = ox::import_model(b.bytes()).graph;
    CHECK(ops_of(g) == ops_of([] {
              graph h;
              value x = h.input("x", {2, 3, 4});
              h.mark_output(h.reshape(h.reshape(x, {2, 12}), {2, 12}));
              return h;
          }()));
    CHECK(g.shape_of(g.outputs[0]) == shape{2, 12});

    // A Gather index out of range is named.
    builder c;
    c.input("x", {2, 3});
    c.ints("nine", {9});
    c.node("Shape", {"x"}, {"s"});
    c.node("Gather", {"s", "nine"}, {"bad"}, "pick");
    c.node("Reshape", {"x", "bad"}, {"y"});
    c.output("y");
    CHECK_THROWS_WITH_AS(ox::import_model(c.bytes()), doctest::Contains("node 'pick' (Gather): index 9 is out of range for extent 2"), error);
}

TEST_CASE("import: what PyTorch exports for chunk, window padding and shared parameters") {
    // x.chunk(2, dim=1): a Slice whose ends come from Shape -> Gather -> Div;
    // whole-model ONNX inference cannot give its shape, the node alone with
    // the folded constants can.
    builder b;
    b.input("x", {1, 6, 4, 4});
    b.ints("zero", {0});
    b.ints("one", {1});
    b.ints("two", {2});
    b.ints("seven", {7});
    b.ints("three", {3});
    b.node("Shape", {"x"}, {"s"});
    b.node("Gather", {"s", "one"}, {"c"});
    b.node("Div", {"c", "two"}, {"half"});
    b.node("Slice", {"x", "zero", "half", "one"}, {"lo"}, "chunk");
    // Swin's window padding: (window - W % window) % window, in int64.
    b.node("Gather", {"s", "three"}, {"w"});
    b.node("Mod", {"w", "seven"}, {"rem"});
    b.node("Sub", {"seven", "rem"}, {"gap"});
    b.node("Mod", {"gap", "seven"}, {"pad"});
    b.node("Concat", {"zero", "zero", "zero", "zero", "zero", "zero", "zero", "pad"}, {"pads"});
    builder::attr_int(b.g->mutable_node(b.g->node_size() - 1), "axis", 0);
    b.node("Pad", {"lo", "pads"}, {"y"});
    // A BatchNormalization whose mean is an Identity of its bias (equal
    // tensors, deduplicated by the exporter): still a constant.
    b.weight("gamma", {3}, 4);
    b.weight("beta", {3}, 5);
    ox::detail::fill_tensor(*b.g->add_initializer(), "ones", tensor<float>(shape{3}, 1.f));
    b.node("Identity", {"beta"}, {"mean"});
    b.node("Identity", {"ones"}, {"var"});
    b.node("BatchNormalization", {"y", "gamma", "beta", "mean", "var"}, {"z"}, "bn");
    b.output("z");
    graph g = ox::import_model(b.bytes()).graph;
    CHECK(g.shape_of(g.outputs[0]) == shape{1, 3, 4, 7});  // 4 + (7 - 4 % 7) % 7 = 7
    bool declared_bn = false;
    for (const node& n : g.nodes) declared_bn = declared_bn || n.is_op(spec::op_kind::batchnorm);
    CHECK(declared_bn);
}

TEST_CASE("import: more shape arithmetic folded (ConstantOfShape, Equal, Where, Expand, Range, Transpose) and Einsum's shape") {
    // What PyTorch exports for class_token.expand(n, -1, -1) (ViT): the -1s
    // become the input's extents through ConstantOfShape, Equal and Where.
    builder b;
    b.input("x", {2, 3, 4});
    b.weight("token", {1, 1, 4}, 6);
    b.ints("target", {2, -1, -1});
    b.ints("three", {3});
    b.ints("minus1", {-1});
    auto* cos = b.node("ConstantOfShape", {"three"}, {"ones"});
    auto* v = cos->add_attribute();
    v->set_name("value");
    v->set_type(pb::AttributeProto::TENSOR);
    ox::detail::fill_ints(*v->mutable_t(), "", {1});
    b.node("Mul", {"ones", "minus1"}, {"negs"});
    b.node("Equal", {"target", "negs"}, {"is_neg"});
    b.node("Where", {"is_neg", "ones", "target"}, {"shape"});
    b.node("Expand", {"token", "shape"}, {"tokens"});
    // Range and an integer Transpose (Swin's relative position index).
    b.ints("zero", {0});
    b.ints("six", {6});
    b.ints("one", {1});
    b.node("Squeeze", {"zero"}, {"z0"});
    b.node("Squeeze", {"six"}, {"s0"});
    b.node("Squeeze", {"one"}, {"o0"});
    b.node("Range", {"z0", "s0", "o0"}, {"r"});  // [0..5]
    b.ints("two_three", {2, 3});
    b.node("Reshape", {"r", "two_three"}, {"r23"});
    b.node("Transpose", {"r23"}, {"r32"});
    b.node("Shape", {"r32"}, {"s32"});  // [3, 2]
    b.node("Reshape", {"x", "s32"}, {"bad"}, "not_reached");  // 24 elements into [3,2]: an error names it
    // Einsum with an ellipsis: its shape from the equation.
    b.weight("k", {2, 5, 4}, 7);
    auto* ein = b.node("Einsum", {"tokens", "k"}, {"y"});
    builder::attr_str(ein, "equation", "...ij,...kj->...ik");
    b.output("y");
    CHECK_THROWS_WITH_AS(ox::import_model(b.bytes()), doctest::Contains("node 'not_reached' (Reshape): node 'bad' (reshape): cannot reshape [2,3,4] (24 elements) to [3,2]"), error);
    b.g->mutable_node()->erase(b.g->mutable_node()->begin() + (b.g->node_size() - 2));  // drop the failing Reshape
    graph g = ox::import_model(b.bytes()).graph;
    CHECK(g.shape_of(g.outputs[0]) == shape{2, 1, 5});  // tokens [2,1,4] (Expand to [2,1,1]) x k [2,5,4]
}

TEST_CASE("reference Einsum: a broadcast ellipsis and a summed letter") {
    builder b;
    b.input("a", {2, 3, 2});  // ... = [2], i = 3, j = 2
    b.input("k", {1, 4, 2});  // ... = [1] (broadcast), k = 4, j = 2
    builder::attr_str(b.node("Einsum", {"a", "k"}, {"y"}), "equation", "...ij, ...kj -> ...ik");
    b.output("y");
    graph g = ox::import_model(b.bytes()).graph;
    REQUIRE(g.shape_of(g.outputs[0]) == shape{2, 3, 4});
    tensor<float> a(shape{2, 3, 2}), k(shape{1, 4, 2});
    for (std::size_t i = 0; i < a.data.size(); ++i) a.data[i] = static_cast<float>(i) - 5;
    for (std::size_t i = 0; i < k.data.size(); ++i) k.data[i] = static_cast<float>(i % 3) + 1;
    std::vector<tensor<float>> in{a, k};
    auto y = reference_backend().execute(g, in);
    for (int e = 0; e < 2; ++e)
        for (int i = 0; i < 3; ++i)
            for (int kk = 0; kk < 4; ++kk) {
                float want = 0;
                for (int j = 0; j < 2; ++j) want += a.data[static_cast<std::size_t>((e * 3 + i) * 2 + j)] * k.data[static_cast<std::size_t>(kk * 2 + j)];
                CHECK(y[0].data[static_cast<std::size_t>((e * 3 + i) * 4 + kk)] == want);
            }
}

TEST_CASE("import: float and bool constant subgraphs are folded (Swin's attention mask)") {
    builder b;
    b.input("x", {2, 3});
    b.ints("shape", {2, 3});
    b.ints("where", {0, 2, 1, 0});  // two index tuples: (0, 2) and (1, 0)
    b.g->mutable_initializer(b.g->initializer_size() - 1)->clear_dims();
    b.g->mutable_initializer(b.g->initializer_size() - 1)->add_dims(2);
    b.g->mutable_initializer(b.g->initializer_size() - 1)->add_dims(2);
    ox::detail::fill_tensor(*b.g->add_initializer(), "updates", tensor<float>(shape{2}, std::vector<float>{5, 7}));
    ox::detail::fill_tensor(*b.g->add_initializer(), "zero", tensor<float>(shape{}, 0.f));
    b.node("ConstantOfShape", {"shape"}, {"zeros"});
    b.node("ScatterND", {"zeros", "where", "updates"}, {"m"});
    b.node("Equal", {"m", "zero"}, {"empty"});  // bool
    b.node("Not", {"empty"}, {"full"});
    builder::attr_int(b.node("Cast", {"full"}, {"ones"}), "to", pb::TensorProto::FLOAT);
    b.node("Add", {"m", "ones"}, {"mask"});
    b.node("Add", {"x", "mask"}, {"y"});
    b.output("y");
    graph g = ox::import_model(b.bytes()).graph;
    CHECK(ops_of(g) == "ewadd() ");
    tensor<float> x(shape{2, 3}, 0.f);
    auto y = reference_backend().execute(g, std::span<const tensor<float>>(&x, 1));
    CHECK(y[0].data == std::vector<float>{0, 0, 6, 8, 0, 0});
}

TEST_CASE("import: a Dropout that drops nothing is the identity, its unread mask no output") {
    for (bool training : {false, true}) {
        // training_mode false, or true with ratio 0 (torchvision 0.14's Swin).
        builder b;
        b.input("x", {2, 3});
        auto* r = b.g->add_initializer();
        ox::detail::fill_tensor(*r, "ratio", tensor<float>(shape{}, training ? 0.f : 0.1f));
        auto* m = b.g->add_initializer();
        m->set_name("mode");
        m->set_data_type(pb::TensorProto::BOOL);
        m->set_raw_data(std::string(1, training ? '\1' : '\0'));
        b.node("Dropout", {"x", "ratio", "mode"}, {"y", "mask"});
        b.node("Relu", {"y"}, {"z"});
        b.output("z");
        INFO("training_mode ", training);
        graph g = ox::import_model(b.bytes()).graph;
        CHECK(ops_of(g) == "relu() ");
    }
}

TEST_CASE("import: integer Mod follows the divisor's sign unless fmod=1") {
    for (int fmod : {0, 1}) {
        // Reshape x [2, 3, 4] to [(-7 mod 3) + 2, -1]: -7 mod 3 is 2 (Python's
        // %, fmod=0) or -1 (C's %, fmod=1).
        builder b;
        b.input("x", {2, 3, 4});
        b.ints("a", {-7});
        b.ints("m", {3});
        b.ints("two", {2});
        b.ints("minus1", {-1});
        auto* mod = b.node("Mod", {"a", "m"}, {"r"});
        if (fmod) builder::attr_int(mod, "fmod", 1);
        b.node("Add", {"r", "two"}, {"rows"});
        builder::attr_int(b.node("Concat", {"rows", "minus1"}, {"target"}), "axis", 0);
        b.node("Reshape", {"x", "target"}, {"y"});
        b.output("y");
        INFO("fmod=", fmod);
        graph g = ox::import_model(b.bytes()).graph;
        CHECK(g.shape_of(g.outputs[0]) == (fmod ? shape{1, 24} : shape{4, 6}));
    }
}

TEST_CASE("malformed: wrong opset") {
    builder b(9);
    b.input("x", {1});
    b.node("Relu", {"x"}, {"y"});
    b.output("y");
    CHECK_THROWS_WITH_AS(ox::import_model(b.bytes()), doctest::Contains("opset_import: default-domain opset 9 is outside the supported range 11..17"), error);
    builder c(18);
    c.input("x", {1});
    c.output("x");
    CHECK_THROWS_WITH_AS(ox::import_model(c.bytes()), doctest::Contains("opset 18"), error);
    builder d;
    d.m.mutable_opset_import(0)->set_domain("com.other");
    CHECK_THROWS_WITH_AS(ox::import_model(d.bytes()), doctest::Contains("no entry for the default ONNX domain"), error);
}

// Found by the importer's fuzz target: opsets 5 and 14 for the default
// domain let a dead Div of [3,4,5] by [3,36,5] through the strict check
// (ONNX Runtime reads the model at opset 5 and rejects it), and the model
// tsopt wrote at opset 14 then failed it.
TEST_CASE("malformed: a domain listed twice in opset_import") {
    builder b(14);
    b.input("x", {3, 4, 5});
    b.input("y", {3, 36, 5});
    b.node("Div", {"x", "y"}, {"z"});
    b.output("y");
    b.m.add_opset_import()->set_version(13);
    CHECK_THROWS_WITH_AS(ox::import_model(b.bytes()),
                         doctest::Contains("opset_import: the domain ai.onnx is listed twice (opsets 14 and 13)"), error);
    builder c;
    c.input("x", {1});
    c.output("x");
    for (int k = 0; k < 2; ++k) {
        auto* o = c.m.add_opset_import();
        o->set_domain("com.example");
        o->set_version(1 + k);
    }
    CHECK_THROWS_WITH_AS(ox::import_model(c.bytes()), doctest::Contains("the domain com.example is listed twice (opsets 1 and 2)"),
                         error);
    builder d;  // "" and "ai.onnx" are one domain
    d.input("x", {1});
    d.output("x");
    auto* o = d.m.add_opset_import();
    o->set_domain("ai.onnx");
    o->set_version(17);
    CHECK_THROWS_WITH_AS(ox::import_model(d.bytes()), doctest::Contains("the domain ai.onnx is listed twice"), error);
}

// Also found by the fuzz target: the same dead Div, the graph output
// declared [3,?,5] for the input y it names. libonnx's strict inference
// then took [3,?,5] for y and passed the Div; tsopt wrote y as [3,36,5],
// and its own output failed the check.
TEST_CASE("malformed: an opaque element-wise operator whose inputs do not broadcast") {
    builder b;
    b.input("x", {3, 4, 5});
    b.input("y", {3, 36, 5});
    b.node("Div", {"x", "y"}, {"z"});
    b.output("y");
    CHECK_THROWS_WITH_AS(ox::import_model(b.bytes()), doctest::Contains("shapes [3,4,5] and [3,36,5] do not broadcast"), error);
    builder c;  // broadcasting ones import, opaque
    c.input("x", {3, 4, 5});
    c.input("y", {4, 1});
    c.node("Div", {"x", "y"}, {"z"});
    c.output("z");
    graph g = ox::import_model(c.bytes()).graph;
    CHECK(g.shape_of(g.outputs[0]) == shape{3, 4, 5});
}

TEST_CASE("malformed: shape conflict between value_info and the operator") {
    builder b;
    b.input("x", {1, 3, 8, 8});
    b.weight("w", {4, 3, 3, 3}, 1);
    b.node("Conv", {"x", "w"}, {"y"}, "conv1");
    auto* vi = b.g->add_value_info();
    vi->set_name("y");
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(pb::TensorProto::FLOAT);
    for (int d : {1, 4, 8, 8}) vi->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
    b.node("Relu", {"y"}, {"z"});
    b.output("z");
    CHECK_THROWS_WITH_AS(ox::import_model(b.bytes()),
                         "node 'conv1' (Conv): output 'y' is declared with shape [1,4,8,8] in the model but is [1,4,6,6]",
                         error);
    // A graph output naming a graph input with another shape: ONNX shape
    // inference reads the declaration, so an opaque node on that input got
    // a shape its re-import refused (fuzzer find).
    builder o;
    o.input("x", {1, 3, 28, 28});
    o.output("x");
    for (int d : {1, 3, 30, 30}) {
        auto* t = o.g->mutable_output(0)->mutable_type()->mutable_tensor_type();
        t->set_elem_type(pb::TensorProto::FLOAT);
        t->mutable_shape()->add_dim()->set_dim_value(d);
    }
    CHECK_THROWS_WITH_AS(ox::import_model(o.bytes()),
                         "graph input 'x' is declared with shape [1,3,30,30] in the model but is [1,3,28,28]", error);
    // And an operator whose inputs do not fit at all.
    builder c;
    c.input("a", {2, 3});
    c.input("b", {4, 5});
    c.node("MatMul", {"a", "b"}, {"y"}, "mm");
    c.output("y");
    CHECK_THROWS_WITH_AS(ox::import_model(c.bytes()), doctest::Contains("node 'mm' (MatMul): "), error);
}

TEST_CASE("malformed: unknown attribute values") {
    builder b;
    b.input("x", {1, 3, 8, 8});
    b.weight("w", {4, 3, 3, 3}, 1);
    auto* c = b.node("Conv", {"x", "w"}, {"y"}, "conv1");
    builder::attr_str(c, "auto_pad", "SAME_MIDDLE");
    b.output("y");
    CHECK_THROWS_WITH_AS(ox::import_model(b.bytes()),
                         "node 'conv1' (Conv): attribute 'auto_pad' has unknown value 'SAME_MIDDLE' (NOTSET, SAME_UPPER, SAME_LOWER or VALID)",
                         error);
    builder p;
    p.input("x", {1, 3, 8, 8});
    p.ints("pads", {0, 0, 1, 1, 0, 0, 1, 1});
    builder::attr_str(p.node("Pad", {"x", "pads"}, {"y"}, "pad1"), "mode", "mirror");
    p.output("y");
    CHECK_THROWS_WITH_AS(ox::import_model(p.bytes()), doctest::Contains("node 'pad1' (Pad): attribute 'mode' has unknown value 'mirror'"), error);
    builder t;
    t.input("x", {2, 3});
    builder::attr_ints(t.node("Transpose", {"x"}, {"y"}, "tr"), "perm", {0, 0});
    t.output("y");
    CHECK_THROWS_WITH_AS(ox::import_model(t.bytes()), "node 'tr' (Transpose): attribute 'perm' is not a permutation of 2 axes", error);
    builder g;
    g.input("x", {1, 4, 8, 8});
    g.weight("w", {4, 3, 3, 3}, 1);
    builder::attr_int(g.node("Conv", {"x", "w"}, {"y"}, "gconv"), "group", 2);
    g.output("y");
    CHECK_THROWS_WITH_AS(ox::import_model(g.bytes()), doctest::Contains("node 'gconv' (Conv): attribute 'group' is 2"), error);
}

TEST_CASE("malformed: a required attribute missing or an attribute of the wrong type is named (found by the fuzzer)") {
    // libonnx's Scan shape inference dereferences num_scan_inputs unchecked:
    // such a node must be rejected before inference sees it, not crash it.
    builder s;
    s.input("x", {2, 3});
    s.node("Scan", {"x"}, {"y"}, "scan1");
    s.output("y");
    CHECK_THROWS_WITH_AS(ox::import_model(s.bytes()), doctest::Contains("node 'scan1' (Scan): needs the attribute 'body'"), error);
    builder t;
    t.input("x", {2, 3});
    builder::attr_str(t.node("Softmax", {"x"}, {"y"}, "sm"), "axis", "1");
    t.output("y");
    CHECK_THROWS_WITH_AS(ox::import_model(t.bytes()), doctest::Contains("node 'sm' (Softmax): attribute 'axis' is STRING; Softmax"),
                         error);
}

TEST_CASE("malformed: initializer data does not match its shape; unknown opaque output shape") {
    builder b;
    b.input("x", {2});
    auto* t = b.g->add_initializer();
    t->set_name("w");
    t->set_data_type(pb::TensorProto::FLOAT);
    t->add_dims(2);
    t->set_raw_data(std::string(4, '\0'));
    b.node("Add", {"x", "w"}, {"y"}, "add");
    b.output("y");
    // Checked for every initializer up front, whether or not a node reads it.
    CHECK_THROWS_WITH_AS(ox::import_model(b.bytes()), doctest::Contains("initializer 'w': raw_data holds 4 bytes, its shape and type (float32) need 8"), error);

    builder c;
    c.input("x", {2});
    auto* n = c.node("Mystery", {"x"}, {"y"}, "m1");
    n->set_domain("com.unknown");
    c.output("y");
    CHECK_THROWS_WITH_AS(ox::import_model(c.bytes()), doctest::Contains("node 'm1' (Mystery): the shape of output 'y' is unknown"), error);
}

TEST_CASE("export: a conv whose only reader adds a per-channel constant is one Conv with a bias input") {
    std::mt19937_64 rng(3);
    graph g;
    auto x = g.input("x", {1, 3, 8, 8});
    auto b = g.weight("b", {1, 4, 1, 1}, rng);
    auto y = g.ewadd(g.conv2d(x, g.weight("w", {4, 3, 3, 3}, rng), {.pad = spec::pad_mode::same}), b, "y");
    // Its output read twice: this conv keeps its Add, and so "b" stays an initializer.
    auto c2 = g.conv2d(y, g.weight("w2", {4, 4, 3, 3}, rng), {.pad = spec::pad_mode::same});
    // A bias through a reshape of a [4] weight read by nothing else: absorbed with it.
    auto c3 = g.conv2d(c2, g.weight("w3", {4, 4, 1, 1}, rng));
    auto z = g.ewadd(c3, g.reshape(g.weight("b3", {4}, rng), {1, 4, 1, 1}));
    g.mark_output(g.ewadd(g.ewadd(c2, b), g.ewadd(z, c2)));
    pb::ModelProto m;
    REQUIRE(m.ParseFromString(ox::to_bytes(g)));
    int convs_with_bias = 0, adds = 0, reshapes = 0;
    for (const auto& n : m.graph().node()) {
        convs_with_bias += n.op_type() == "Conv" && n.input_size() == 3;
        adds += n.op_type() == "Add";
        reshapes += n.op_type() == "Reshape";
    }
    CHECK(convs_with_bias == 2);
    CHECK(adds == 3);
    CHECK(reshapes == 0);
    bool b_kept = false, b3_kept = false;
    for (const auto& t : m.graph().initializer()) {
        b_kept |= t.name() == "b";
        b3_kept |= t.name() == "b3";
    }
    CHECK(b_kept);
    CHECK_FALSE(b3_kept);
    graph h = ox::import_model(m.SerializeAsString()).graph;
    CHECK(max_error(g, h) <= 1e-6);
}

TEST_CASE("export: options are checked") {
    graph g = matmul_net();
    CHECK_THROWS_WITH_AS(ox::to_proto(g, {.opset = 11}), doctest::Contains("export_options::opset is 11"), error);
    CHECK_THROWS_WITH_AS(ox::to_proto(g, {.output_names = {"a", "b"}}), doctest::Contains("has 2 names for 1 graph outputs"), error);
    auto m = ox::to_proto(g, {.output_names = {"logits"}});
    CHECK(m.graph().output(0).name() == "logits");
}

TEST_CASE("export: a graph input or initializer that is also an output keeps its name (issue 20: no x -> x_1)") {
    graph g;
    value x = g.input("x", {3});
    std::mt19937_64 rng(3);
    value w = g.weight("w", {3}, rng);
    g.mark_output(x);
    g.mark_output(g.relu(x));
    g.mark_output(w);
    g.mark_output(x);  // listed twice: the second needs its own name
    auto m = ox::to_proto(g, {.output_names = {"x", "y", "w", "x_again"}});
    REQUIRE(m.graph().output_size() == 4);
    CHECK(m.graph().output(0).name() == "x");
    CHECK(m.graph().output(1).name() == "y");
    CHECK(m.graph().output(2).name() == "w");
    CHECK(m.graph().output(3).name() == "x_again");
    auto back = ox::import_model(m.SerializeAsString());
    CHECK(back.output_names == std::vector<std::string>{"x", "y", "w", "x_again"});
    CHECK(max_error(g, back.graph) == 0);
    // Exported again with the imported model's options: the same names.
    auto again = ox::to_proto(back.graph, ox::options_for(back));
    for (int k = 0; k < 4; ++k) CHECK(again.graph().output(k).name() == m.graph().output(k).name());
}

TEST_CASE("export: node names are unique even where the graph's are not (ONNX Runtime refuses duplicates)") {
    // A graph built with one name twice, and a layout pair named after a
    // node whose name another node already has: every ONNX node named apart.
    graph g;
    value x = g.input("x", {1, 4, 5, 5});
    std::mt19937_64 rng(5);
    value a = g.relu(x, "twice");
    value b = g.sigmoid(a, "twice");
    value c = g.conv2d(b, g.weight("w", {4, 4, 1, 1}, rng), {}, "c");
    g.nodes[static_cast<std::size_t>(c.node)].out_layout = spec::layout::nhwc;
    g.mark_output(g.tanh(c, "c/nhwc"));
    auto m = ox::to_proto(g);
    std::set<std::string> names;
    for (const auto& n : m.graph().node()) CHECK_MESSAGE(names.insert(n.name()).second, "node name written twice: " << n.name());
    CHECK(names.count("twice") == 1);
    CHECK(names.count("twice_1") == 1);
    CHECK(max_error(g, ox::import_model(m.SerializeAsString()).graph) == 0);
}

TEST_CASE("round trip: every zoo model at test size (export -> import -> equal outputs)") {
    for (const auto& zm : zoo::models()) {
        CAPTURE(zm.name);
        for (bool bn : {true, false}) {
            CAPTURE(bn);
            auto o = zoo_small(zm.name);
            o.batchnorm = bn;
            graph g = zm.build(o);
            graph h = round_trip(g);
            // Same operators, except that fused activations come back unfused.
            std::size_t fused = 0;
            for (auto& n : g.nodes)
                if (n.kind == node_kind::op && (n.op == spec::op_kind::conv2d || n.op == spec::op_kind::matmul ||
                                                 n.op == spec::op_kind::avgpool || n.op == spec::op_kind::maxpool))
                    fused += n.params[n.op == spec::op_kind::conv2d ? int(spec::conv2d_p::act)
                                      : n.op == spec::op_kind::matmul ? int(spec::matmul_p::act)
                                                                      : int(spec::pool_p::act)] != 0;
            CHECK(h.op_count() == g.op_count() + fused);
            CHECK(max_error(g, h) <= 1e-5);
        }
    }
}

TEST_CASE("the bundled demo model imports, runs, and is small") {
    auto m = ox::read_model(TSOPT_DEMO_MODEL);
    CHECK(std::filesystem::file_size(TSOPT_DEMO_MODEL) < 2'000'000);
    CHECK(m.output_names == std::vector<std::string>{"output"});
    auto ref = reference_backend();
    auto out = ref.execute(m.graph, backend::random_inputs(m.graph, 3));
    REQUIRE(out.size() == 1);
    bool finite = true;
    for (float v : out[0].data) finite = finite && std::isfinite(v);
    CHECK(finite);
    // Drift from the zoo is worth knowing, not a failure: regenerate with make_demo_model.
    graph fresh = zoo::build("nasnet_a", {.batch = 1, .image = 16, .width_div = 16, .depth_div = 5, .seed = 2024});
    WARN_MESSAGE(max_error(fresh, m.graph) <= 1e-5, "models/demo.onnx differs from a fresh zoo build: regenerate it with make_demo_model");
}

TEST_CASE("round trip: smul of a rank-0 tensor by a [1] scalar keeps rank 0 (found by the fuzzer)") {
    graph g;
    value x = g.input("x", shape{});
    value y = g.smul(x, g.weight("s", tensor<float>(shape{1}, -2.f)));
    CHECK(g.shape_of(y).rank == 0);
    g.mark_output(y);
    graph h = round_trip(g);
    CHECK(h.shape_of(h.outputs[0]).rank == 0);
    CHECK(max_error(g, h) == 0);
}

namespace {
// A fresh, empty directory for one test's files.
std::filesystem::path fresh_directory(const std::string& name) {
    auto d = std::filesystem::temp_directory_path() / ("tsopt_onnx_test_" + name + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d;
}
void write_bytes(const std::filesystem::path& p, const std::string& bytes) {
    std::ofstream f(p, std::ios::binary);
    f << bytes;
}
}  // namespace

TEST_CASE("external data: weights written beside the model are read back; the locations are checked") {
    const auto dir = fresh_directory("external");
    const graph g = conv_net();
    ox::export_options o;
    o.max_embedded_bytes = 0;  // as if the model were over 2 GiB
    const std::string path = (dir / "net.onnx").string();
    ox::save(g, path, o);
    REQUIRE(std::filesystem::exists(dir / "net.onnx.data"));
    CHECK(std::filesystem::file_size(dir / "net.onnx.data") > 0);
    graph h = ox::read_model(path).graph;
    CHECK(ops_of(h) == ops_of(g));
    CHECK(max_error(g, h) == 0);
    // From memory: the exported bytes and the data they name.
    const ox::model_files f = ox::to_files(g, "w.bin", o);
    CHECK(f.data_location == "w.bin");
    CHECK(max_error(g, ox::import_model(f.model, {}, ox::external_bytes("w.bin", f.data)).graph) == 0);
    // Without a place to read it from, the weight at fault is named.
    CHECK_THROWS_WITH_AS(ox::import_model(f.model), doctest::Contains("external tensor data, and no place to read it from"), error);
    // A model that fits keeps its weights inside and writes no data file.
    ox::save(g, (dir / "small.onnx").string());
    CHECK_FALSE(std::filesystem::exists(dir / "small.onnx.data"));

    // Edited locations: outside the directory, absolute, missing, truncated.
    auto with_location = [&](const std::string& location, const std::string& file) {
        pb::ModelProto m;
        REQUIRE(m.ParseFromString(f.model));
        for (auto& t : *m.mutable_graph()->mutable_initializer())
            for (auto& kv : *t.mutable_external_data())
                if (kv.key() == "location") kv.set_value(location);
        write_bytes(dir / file, m.SerializeAsString());
        return (dir / file).string();
    };
    CHECK_THROWS_WITH_AS(ox::read_model(with_location("../net.onnx.data", "up.onnx")), doctest::Contains("leaves the model's directory"), error);
    CHECK_THROWS_WITH_AS(ox::read_model(with_location("/etc/passwd", "abs.onnx")), doctest::Contains("is not a relative path inside the model's directory"), error);
    CHECK_THROWS_WITH_AS(ox::read_model(with_location("gone.bin", "gone.onnx")), doctest::Contains("does not exist"), error);
    write_bytes(dir / "short.bin", f.data.substr(0, f.data.size() / 2));
    CHECK_THROWS_WITH_AS(ox::read_model(with_location("short.bin", "short.onnx")), doctest::Contains("truncated data file"), error);
    std::filesystem::remove_all(dir);
}

TEST_CASE("import: a Transpose undoing the Transpose it reads is the identity; other pairs stay") {
    auto model_with = [](std::vector<std::int64_t> first, std::vector<std::int64_t> second) {
        pb::ModelProto m;
        m.set_ir_version(8);
        m.add_opset_import()->set_version(17);
        auto* g = m.mutable_graph();
        g->set_name("pair");
        auto io = [](pb::ValueInfoProto* v, const char* name, std::vector<std::int64_t> dims) {
            v->set_name(name);
            auto* t = v->mutable_type()->mutable_tensor_type();
            t->set_elem_type(pb::TensorProto::FLOAT);
            for (auto d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
        };
        io(g->add_input(), "x", {1, 2, 3, 4});
        auto transpose = [&](const char* in, const char* out, const std::vector<std::int64_t>& perm) {
            auto* n = g->add_node();
            n->set_op_type("Transpose");
            n->set_name(out);
            n->add_input(in);
            n->add_output(out);
            auto* a = n->add_attribute();
            a->set_name("perm");
            a->set_type(pb::AttributeProto::INTS);
            for (auto p : perm) a->add_ints(p);
        };
        transpose("x", "t1", first);
        transpose("t1", "y", second);
        std::vector<std::int64_t> out_dims;
        for (auto p : second) out_dims.push_back(std::vector<std::int64_t>{1, 2, 3, 4}[static_cast<std::size_t>(first[static_cast<std::size_t>(p)])]);
        io(g->add_output(), "y", out_dims);
        return ox::import_model(m.SerializeAsString()).graph;
    };
    auto transposes = [](const graph& g) {
        int k = 0;
        for (std::size_t i : g.topological_order()) k += g.nodes[i].is_op(spec::op_kind::transpose);
        return k;
    };
    // NCHW -> NHWC -> NCHW, as the exporter writes an NHWC-stored value.
    const graph undone = model_with({0, 2, 3, 1}, {0, 3, 1, 2});
    CHECK(transposes(undone) == 0);
    CHECK(undone.shape_of(undone.outputs[0]) == shape{1, 2, 3, 4});
    // Two transposes that do not undo each other both run.
    const graph kept = model_with({0, 2, 3, 1}, {0, 2, 3, 1});
    CHECK(transposes(kept) == 2);
    CHECK(kept.shape_of(kept.outputs[0]) == shape{1, 4, 2, 3});
}

TEST_CASE("import: the layout pairs the exporter writes give their layouts back, so a written model runs as it was timed") {
    // A conv stored NHWC and a matmul stored column-major, each written as
    // its ONNX computation and a Transpose pair (`<name>/nhwc`,
    // `<name>/col_major`): read back, the pair is gone and the operator
    // keeps its layout.
    std::mt19937_64 rng(3);
    graph g;
    auto x = g.input("x", {1, 8, 6, 6});
    auto c = g.conv2d(x, g.weight("w", {8, 8, 3, 3}, rng), {}, "conv");
    auto p = g.pool(spec::op_kind::avgpool, c, {.kernel = 3, .stride = 2}, "pool");
    g.nodes[static_cast<std::size_t>(c.node)].out_layout = spec::layout::nhwc;
    auto a = g.input("a", {4, 5});
    auto m = g.matmul(a, g.weight("b", {5, 3}, rng), {}, "mm");
    g.nodes[static_cast<std::size_t>(m.node)].out_layout = spec::layout::col_major;
    g.mark_output(p);
    g.mark_output(g.relu(m));
    const graph back = round_trip(g);
    auto layout_of = [&](spec::op_kind k) {
        for (const node& n : back.nodes)
            if (n.is_op(k)) return n.out_layout;
        FAIL("no " << spec::name(k));
        return spec::layout::row_major;
    };
    CHECK(layout_of(spec::op_kind::conv2d) == spec::layout::nhwc);
    CHECK(layout_of(spec::op_kind::matmul) == spec::layout::col_major);
    CHECK(layout_of(spec::op_kind::avgpool) == spec::layout::row_major);
    CHECK(layout_of(spec::op_kind::relu) == spec::layout::row_major);
    // With a fused activation the exporter writes the operator and then the
    // activation (`<name>/pre_act`): both take the layout, so the backend
    // fuses them again as it did before the model was written.
    graph f;
    auto fx = f.input("x", {1, 8, 6, 6});
    auto fc = f.conv2d(fx, f.weight("w", {8, 8, 3, 3}, rng), {.act = relu}, "conv");
    f.nodes[static_cast<std::size_t>(fc.node)].out_layout = spec::layout::nhwc;
    f.mark_output(f.pool(spec::op_kind::maxpool, fc, {.kernel = 3, .stride = 2}, "pool"));
    const graph f_back = round_trip(f);
    int nhwc_ops = 0;
    for (const node& n : f_back.nodes) {
        if (n.is_op(spec::op_kind::conv2d) || n.is_op(spec::op_kind::relu)) CHECK(n.out_layout == spec::layout::nhwc);
        nhwc_ops += n.out_layout == spec::layout::nhwc;
    }
    CHECK(nhwc_ops == 2);
    CHECK(max_error(f, f_back) <= 1e-6);
    CHECK(ops_of(back).find("transpose") == std::string::npos);
    CHECK(ops_of(back) == ops_of(g));
    CHECK(max_error(g, back) <= 1e-6);
    // A layout conversion (a `reorder`, written as an Identity and a pair)
    // is the conversion's layout, not its input's producer's: read back, no
    // reorder (the backends convert where a reader needs it) and the pool
    // before it keeps its own layout.
    graph e;
    auto ex = e.input("x", {1, 8, 9, 9});
    auto ep = e.pool(spec::op_kind::maxpool, e.conv2d(ex, e.weight("w", {8, 8, 3, 3}, rng), {}, "conv"),
                     {.kernel = 3, .stride = 2}, "pool");
    auto ec = e.conv2d(ep, e.weight("v", {8, 8, 1, 1}, rng), {}, "conv_nhwc");
    e.nodes[static_cast<std::size_t>(ec.node)].out_layout = spec::layout::nhwc;
    e.mark_output(ec);
    const graph converted = rewrite::explicit_conversions(e);
    REQUIRE(ops_of(converted).find("reorder") != std::string::npos);
    const graph e_back = round_trip(converted);
    CHECK(ops_of(e_back).find("reorder") == std::string::npos);
    CHECK(ops_of(e_back).find("transpose") == std::string::npos);
    for (const node& n : e_back.nodes)
        if (n.kind == node_kind::op) {
            INFO(n.describe());  // the written value's node is named `conv_nhwc/computed`
            CHECK(n.out_layout == (n.name.starts_with("conv_nhwc") ? spec::layout::nhwc : spec::layout::row_major));
        }
    CHECK(max_error(e, e_back) <= 1e-6);
    // The same transposes written by someone else (other names) cancel, but
    // set no layout: only the exporter's pairs say where a value is stored.
    graph h;
    auto y = h.input("y", {1, 8, 6, 6});
    auto k = h.conv2d(y, h.weight("k", {8, 8, 3, 3}, rng), {}, "conv");
    spec::op_params to{}, from{};
    const int nhwc[] = {0, 2, 3, 1}, nchw[] = {0, 3, 1, 2};
    to[spec::transpose_p::perm] = 4 << 24;
    from[spec::transpose_p::perm] = 4 << 24;
    for (int i = 0; i < 4; ++i) {
        to[spec::transpose_p::perm] |= nhwc[i] << (3 * i);
        from[spec::transpose_p::perm] |= nchw[i] << (3 * i);
    }
    h.mark_output(h.add1(spec::op_kind::transpose, from, {h.add1(spec::op_kind::transpose, to, {k}, "to_channels_last")}, "back"));
    const graph h_back = round_trip(h);
    CHECK(ops_of(h_back).find("transpose") == std::string::npos);
    for (const node& n : h_back.nodes) CHECK(n.out_layout == spec::layout::row_major);
}
