// The model zoo: every model builds small, validates, executes on the
// reference backend with finite outputs; at paper size the operator counts,
// output shapes and parameter counts match the published architectures
// (parameter counts are torchvision's where one exists: batchnorm scale and
// shift are its two affine parameters).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "tsopt/backend/reference/executor.hpp"
#include "tsopt/zoo/zoo.hpp"

using namespace tsopt;

namespace {

std::map<std::string, int> op_histogram(const graph& g) {
    std::map<std::string, int> h;
    for (const node& n : g.nodes)
        if (n.kind == node_kind::op) ++h[std::string(n.type_name())];
    return h;
}
std::int64_t parameters(const graph& g) {
    std::int64_t p = 0;
    for (const node& n : g.nodes)
        if (n.kind == node_kind::weight) p += n.shapes[0].elements();
    return p;
}
// Convs whose weight has fewer input channels than the conv's input.
int grouped_convs(const graph& g) {
    int k = 0;
    for (const node& n : g.nodes)
        if (n.is_op(spec::op_kind::conv2d) && g.shape_of(n.inputs[1])[1] != g.shape_of(n.inputs[0])[1]) ++k;
    return k;
}

// Small variants: a few seconds in all on the reference backend.
zoo::options small(std::string_view name) {
    zoo::options o;
    o.batch = 2;
    o.seed = 7;
    if (name == "resnet18") { o.image = 32; o.width_div = 8; }
    else if (name == "resnet50") { o.image = 32; o.width_div = 16; }
    else if (name == "resnext50") { o.image = 32; o.width_div = 8; o.depth_div = 2; }
    else if (name == "inception_v3") { o.image = 75; o.width_div = 16; }
    else if (name == "squeezenet") { o.image = 63; o.width_div = 8; }
    else if (name == "nasnet_a") { o.image = 16; o.width_div = 16; o.depth_div = 5; }
    else if (name == "nasnet_mobile") { o.image = 32; o.width_div = 4; o.depth_div = 4; }
    else if (name == "nasrnn") { o.width_div = 16; o.length = 3; }
    else if (name == "bert") { o.width_div = 16; o.length = 8; o.depth_div = 4; }
    else if (name == "rnntc") { o.width_div = 32; o.length = 4; o.depth_div = 2; }
    else if (name == "csrnet") { o.image = 32; o.width_div = 8; }
    else FAIL("no small options for model " << name);
    return o;
}

struct paper_facts {
    shape output;
    std::map<std::string, int> ops;  // counts that must match exactly (others unchecked)
    std::size_t op_count;
    std::int64_t params;  // -1: not checked against a published number
};

// At paper size with default options (batchnorm after every CNN conv).
const std::map<std::string, paper_facts, std::less<>>& facts() {
    static const std::map<std::string, paper_facts, std::less<>> f{
        // torchvision resnet18: 11,689,512 parameters, 20 convs (incl. 3 downsample)
        {"resnet18", {shape{1, 1000}, {{"conv2d", 20}, {"batchnorm", 20}, {"ewadd", 8 + 1}, {"matmul", 1}}, 70, 11689512}},
        // torchvision resnet50: 25,557,032 parameters, 53 convs, 16 residual adds
        {"resnet50", {shape{1, 1000}, {{"conv2d", 53}, {"batchnorm", 53}, {"ewadd", 16 + 1}, {"matmul", 1}}, 176, 25557032}},
        // torchvision resnext50_32x4d: 25,028,904 parameters
        {"resnext50", {shape{1, 1000}, {{"conv2d", 53}, {"batchnorm", 53}, {"ewadd", 17}}, 176, 25028904}},
        // torchvision inception_v3 without AuxLogits: 23,834,568 parameters, 94 convs, 15 concats
        {"inception_v3", {shape{1, 1000}, {{"conv2d", 94}, {"batchnorm", 94}, {"concat", 15}, {"maxpool", 4}}, 314, 23834568}},
        // torchvision squeezenet1_0 has 1,248,424 parameters, of which 3,976 are conv biases (omitted here)
        {"squeezenet", {shape{1, 1000}, {{"conv2d", 26}, {"concat", 8}, {"maxpool", 3}}, 39, 1248424 - 3976}},
        // TASO's NasNet-A: 3 x (5 normal + 1 reduction) cells of 12 convs = 216; 90 adds; 18 concats
        {"nasnet_a", {shape{1, 5120, 7, 7}, {{"conv2d", 216}, {"ewadd", 90}, {"concat", 18}, {"batchnorm", 126}}, 543, -1}},
        {"nasnet_mobile", {shape{1, 1000}, {{"conv2d", 357}, {"ewadd", 81}, {"concat", 20}}, 919, -1}},
        // 5 steps x (16 matmuls + 8 adds + 22 others) = 230
        {"nasrnn", {shape{1, 512}, {{"matmul", 80}, {"ewadd", 55}, {"ewmul", 20}, {"tanh", 40}, {"sigmoid", 25}, {"relu", 10}}, 230, 16 * 512 * 512}},
        // 8 layers x 27 ops; weights 8 x (4 H^2 + 8 H^2 + 9H + 1)
        {"bert", {shape{64, 1024}, {{"matmul", 64}, {"softmax", 8}, {"transpose", 32}, {"reshape", 32}}, 216,
                  8 * (12LL * 1024 * 1024 + 9 * 1024 + 1)}},
        // 4 SRU layers + classifier; forget gates at all 4 x 32 steps, reset gates
        // wherever h_t is used (3 x 32 + the last step of the top layer)
        {"rnntc", {shape{1, 2}, {{"matmul", 5}, {"softmax", 1}, {"sigmoid", 4 * 32 + 3 * 32 + 1}}, 1931, -1}},
        // CSRNet: 10 VGG convs + 6 dilated + 1 output conv
        {"csrnet", {shape{1, 1, 28, 28}, {{"conv2d", 17}, {"maxpool", 3}}, 20, -1}},
    };
    return f;
}

}  // namespace

TEST_CASE("the registry lists every model once, and unknown names are refused with the list") {
    std::set<std::string_view> names;
    for (const auto& m : zoo::models()) {
        CHECK(names.insert(m.name).second);
        CHECK(facts().count(m.name) == 1);
    }
    CHECK(names.size() == 11);
    CHECK_THROWS_WITH_AS(zoo::build("resnet51"), doctest::Contains("no model called 'resnet51' (known: resnet18, resnet50"),
                         tsopt::error);
}

TEST_CASE("bad options are refused with a message") {
    CHECK_THROWS_WITH_AS(zoo::resnet18({.width_div = 0}), doctest::Contains("width_div must be >= 1"), tsopt::error);
    CHECK_THROWS_WITH_AS(zoo::resnet18({.batch = 0}), doctest::Contains("batch must be >= 1"), tsopt::error);
    CHECK_THROWS_WITH_AS(zoo::bert({.width_div = 3}), doctest::Contains("does not split into 5 heads"), tsopt::error);
    // Too small an image: the shape rule's complaint names the node.
    CHECK_THROWS_WITH_AS(zoo::inception_v3({.image = 40, .width_div = 16}), doctest::Contains("node '"), tsopt::error);
}

TEST_CASE("every model at paper size: op counts, output shape, parameters") {
    for (const auto& m : zoo::models()) {
        CAPTURE(m.name);
        zoo::options o;
        o.random_weights = false;  // zeros: shape-only build, fast
        graph g = m.build(o);
        const paper_facts& f = facts().find(m.name)->second;
        REQUIRE(g.outputs.size() == 1);
        CHECK(g.shape_of(g.outputs[0]) == f.output);
        CHECK(g.op_count() == f.op_count);
        auto h = op_histogram(g);
        for (auto& [op, count] : f.ops) {
            CAPTURE(op);
            CHECK(h[op] == count);
        }
        if (f.params >= 0) CHECK(parameters(g) == f.params);
        // No dead nodes: everything reaches the output.
        CHECK(g.compacted().size() == g.size());
    }
}

TEST_CASE("ResNeXt-50 has 16 grouped convs of 32 groups; NasNet's separable convs are depthwise") {
    graph g = zoo::resnext50({.random_weights = false});
    CHECK(grouped_convs(g) == 16);
    for (const node& n : g.nodes)
        if (n.is_op(spec::op_kind::conv2d) && n.name.ends_with("conv2")) {
            CAPTURE(n.name);
            CHECK(g.shape_of(n.inputs[0])[1] / g.shape_of(n.inputs[1])[1] == 32);
        }
    graph a = zoo::nasnet_a({.random_weights = false});
    CHECK(grouped_convs(a) == 90);  // 15 normal x 5 + 3 reduction x 5
}

TEST_CASE("batchnorm = false gives TASO's graphs: activation fused, no batchnorm") {
    graph r = zoo::resnet50({.batchnorm = false, .random_weights = false});
    auto h = op_histogram(r);
    CHECK(h["batchnorm"] == 0);
    CHECK(h["conv2d"] == 53);
    CHECK(h["relu"] == 16);  // only after the residual adds
    CHECK(r.op_count() == 90);
    graph n = zoo::nasnet_a({.batchnorm = false, .random_weights = false});
    CHECK(op_histogram(n)["batchnorm"] == 0);
    CHECK(n.op_count() == 381);
}

TEST_CASE("every model builds small, validates, has readable unique names, and runs with finite outputs") {
    backend::reference ref;
    for (const auto& m : zoo::models()) {
        CAPTURE(m.name);
        zoo::options o = small(m.name);
        graph g = m.build(o);
        g.validate();
        std::set<std::string> names;
        for (const node& n : g.nodes) {
            CAPTURE(n.name);
            CHECK(!n.name.empty());
            CHECK(names.insert(n.name).second);
            // builder auto-names look like "conv2d_17": every zoo node is named by hand
            CHECK(n.name.rfind(std::string(n.type_name()) + "_", 0) != 0);
        }
        CHECK(g.compacted().size() == g.size());
        auto out = ref.execute(g, backend::random_inputs(g, 1));
        REQUIRE(out.size() == g.outputs.size());
        CHECK(out[0].shape == g.shape_of(g.outputs[0]));
        CHECK(out[0].shape[0] == (m.name == "bert" ? o.batch * o.length : o.batch));
        float lo = out[0].data[0], hi = lo;
        bool finite = true;
        for (float v : out[0].data) {
            finite = finite && std::isfinite(v);
            lo = std::min(lo, v);
            hi = std::max(hi, v);
        }
        CHECK(finite);
        CHECK(hi - lo > 1e-6f);  // not a degenerate (constant) output
    }
}

TEST_CASE("no layer of a small model is dead: every operator output has a non-zero element") {
    // Equivalence checks of optimized graphs compare outputs; a layer that is
    // all zeros would make them vacuous downstream of it.
    backend::reference ref;
    for (const auto& m : zoo::models()) {
        CAPTURE(m.name);
        graph g = m.build(small(m.name));
        std::vector<std::size_t> ops;
        g.outputs.clear();
        for (std::size_t i = 0; i < g.size(); ++i)
            if (g.nodes[i].kind == node_kind::op)
                for (int k = 0; k < g.nodes[i].num_outputs(); ++k) {
                    g.outputs.push_back({static_cast<std::int32_t>(i), k});
                    ops.push_back(i);
                }
        auto out = ref.execute(g, backend::random_inputs(g, 2));
        for (std::size_t k = 0; k < out.size(); ++k) {
            bool any = false;
            for (float v : out[k].data) any = any || v != 0.f;
            CAPTURE(g.nodes[ops[k]].name);
            CHECK(any);
        }
    }
}

TEST_CASE("builds are deterministic in the seed") {
    auto weights = [](const graph& g) {
        std::vector<float> w;
        for (const node& n : g.nodes)
            if (n.kind == node_kind::weight) w.insert(w.end(), n.data->data.begin(), n.data->data.end());
        return w;
    };
    zoo::options o = small("resnet18");
    graph a = zoo::resnet18(o), b = zoo::resnet18(o);
    CHECK(weights(a) == weights(b));
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(a.nodes[i].name == b.nodes[i].name);
    o.seed = 8;
    CHECK(weights(zoo::resnet18(o)) != weights(a));
}

TEST_CASE("RNNTC's output is a probability distribution per example") {
    graph g = zoo::rnntc(small("rnntc"));
    auto out = backend::reference{}.execute(g, backend::random_inputs(g, 3));
    for (std::int64_t b = 0; b < out[0].shape[0]; ++b) CHECK(out[0].at(b, 0) + out[0].at(b, 1) == doctest::Approx(1.0));
}

// The table in docs/models.md: build/tests/zoo/test_zoo -tc="*table*" --no-skip
TEST_CASE("print the model zoo table for docs/models.md" * doctest::skip()) {
    std::printf("| model | input | output | ops | ops (batchnorm = false) | convs | matmuls | parameters | GFLOPs |\n");
    std::printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for (const auto& m : zoo::models()) {
        graph g = m.build({.random_weights = false});
        graph t = m.build({.batchnorm = false, .random_weights = false});
        auto h = op_histogram(g);
        double flops = 0;
        for (const node& n : g.nodes) {
            if (n.kind != node_kind::op) continue;
            std::vector<shape> in;
            for (value v : n.inputs) in.push_back(g.shape_of(v));
            flops += static_cast<double>(spec::decl(n.op).flops(n.params, in, n.shapes));
        }
        std::string inputs;
        auto ins = g.inputs();
        inputs = g.shape_of(ins[0]).str() + (ins.size() > 1 ? " x" + std::to_string(ins.size()) : "");
        std::printf("| %s | %s | %s | %zu | %zu | %d | %d | %.2fM | %.2f |\n", std::string(m.name).c_str(), inputs.c_str(),
                    g.shape_of(g.outputs[0]).str().c_str(), g.op_count(), t.op_count(), h["conv2d"], h["matmul"],
                    static_cast<double>(parameters(g)) / 1e6, flops / 1e9);
    }
}
