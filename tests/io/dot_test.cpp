// DOT pictures: labels, cost annotations, highlights, the structural diff
// that finds rewritten regions, and SVG through Graphviz when installed.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "tsopt/io/dot.hpp"
#include "samples.hpp"

using namespace tsopt;

namespace {

bool has(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

// conv -> relu -> add(x), and the same with the relu fused into the conv.
std::pair<graph, graph> before_after() {
    auto rng = io_samples::rng_for(3);
    graph a;
    value x = a.input("x", {1, 4, 6, 6});
    value w = a.weight("w", {4, 4, 3, 3}, rng);
    a.mark_output(a.ewadd(a.relu(a.conv2d(x, w, {.pad = same}, "conv"), "relu"), x, "sum"));
    graph b;
    value bx = b.input("x", {1, 4, 6, 6});
    value bw = b.weight("w", *a.nodes[1].data);
    b.mark_output(b.ewadd(b.conv2d(bx, bw, {.pad = same, .act = relu}, "conv_relu"), bx, "sum"));
    return {a, b};
}

}  // namespace

TEST_CASE("dot: labels carry name, operator, parameters and shape") {
    auto [a, b] = before_after();
    std::string d = io::to_dot(b, {.title = "fused"});
    CHECK(has(d, "digraph tsopt {"));
    CHECK(has(d, "conv_relu\\nconv2d\\nstride_h=1 stride_w=1 pad=same act=relu dil_h=1 dil_w=1\\n[1,4,6,6]"));
    CHECK(has(d, "label=\"fused\""));
    CHECK(has(d, "n1 -> n2;"));  // weight into conv
    CHECK(has(d, "-> out0"));
    CHECK(!has(d, "cost "));
    std::string nw = io::to_dot(b, {.show_weights = false});
    CHECK(!has(nw, "n1 -> n2;"));
}

TEST_CASE("dot: per-node costs and highlighted nodes") {
    auto [a, b] = before_after();
    std::string d = io::to_dot(b, {.costs = {0, 0, 1.25, 0.5}, .highlight = {2}});
    CHECK(has(d, "cost 1.25 ms"));
    CHECK(has(d, "cost 0.5 ms"));
    // Node 2 (the conv) is filled gold, node 3 is not.
    auto line = [&](const std::string& id) {
        auto p = d.find("  " + id + " [");
        return d.substr(p, d.find('\n', p) - p);
    };
    CHECK(has(line("n2"), "#ffd966"));
    CHECK(!has(line("n3"), "#ffd966"));
}

TEST_CASE("dot: changed_nodes finds exactly the rewritten region") {
    auto [a, b] = before_after();
    auto changed = io::changed_nodes(a, b);
    // b: x(0) w(1) conv_relu(2) sum(3): the fused conv and everything downstream of it.
    CHECK(changed == std::set<std::int32_t>{2, 3});
    CHECK(io::changed_nodes(a, a).empty());
    // Node order and names do not matter; content does.
    graph c = a.compacted();
    CHECK(io::changed_nodes(a, c).empty());
}

TEST_CASE("dot: a rewrite's picture shows the matched region, its replacement and one hop of context") {
    auto [a, b] = before_after();
    // The rewrite matched conv and relu; conv_relu replaced them ("relu"'s
    // name is not reused here, so the new node is found as a new name).
    const std::vector<std::string> where{"conv", "relu"};
    auto r = io::rewrite_regions(a, b, where);
    CHECK(r.before == std::set<std::int32_t>{2, 3});  // a: x(0) w(1) conv(2) relu(3) sum(4)
    CHECK(r.after == std::set<std::int32_t>{2});      // b: x(0) w(1) conv_relu(2) sum(3)
    std::string d = io::rewrite_to_dot(a, b, r, {.title = "1. relu-conv at conv, relu: cost 2 -> 1 ms (-1)"});
    CHECK(has(d, "digraph rewrite {"));
    CHECK(has(d, "size=\"15,15\""));  // at most 1080 pt: under 1,500 px
    CHECK(has(d, "subgraph cluster_b {"));
    CHECK(has(d, "subgraph cluster_a {"));
    CHECK(has(d, "label=\"1. relu-conv at conv, relu: cost 2 -> 1 ms (-1)\""));
    auto line = [&](const std::string& id) {
        auto p = d.find("    " + id + " [");
        REQUIRE(p != std::string::npos);
        return d.substr(p, d.find('\n', p) - p);
    };
    CHECK(has(line("b2"), "#ffd966"));  // conv, matched
    CHECK(has(line("b3"), "#ffd966"));  // relu, matched
    CHECK(!has(line("b4"), "#ffd966"));  // sum: context
    CHECK(has(line("a2"), "#ffd966"));  // conv_relu, the replacement
    CHECK(!has(line("a3"), "#ffd966"));
    CHECK(has(d, "b2 -> b3;"));
    // Context is bounded: with none, only the regions.
    std::string bare = io::rewrite_to_dot(a, b, r, {.context = 0});
    CHECK(!has(bare, "    b4 ["));
    CHECK(!has(bare, "    a3 ["));
    // A layout move: the operators whose layout changed are the region on both sides.
    graph c = b;
    c.nodes[2].out_layout = spec::layout::nhwc;
    auto lr = io::rewrite_regions(b, c, std::vector<std::string>{"conv_relu"});
    CHECK(lr.before == std::set<std::int32_t>{2});
    CHECK(lr.after == std::set<std::int32_t>{2});
}

TEST_CASE("dot: quotes in names are escaped") {
    graph g;
    value x = g.input("in \"quoted\" \\ name", {2});
    g.mark_output(g.relu(x));
    std::string d = io::to_dot(g);
    CHECK(has(d, "in \\\"quoted\\\" \\\\ name"));
}

TEST_CASE("dot: SVG via Graphviz when installed, DOT with a note otherwise") {
    auto [a, b] = before_after();
    auto dir = std::filesystem::temp_directory_path() / ("tsopt_dot_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    struct remove_at_exit {
        std::filesystem::path p;
        ~remove_at_exit() {
            std::error_code ec;
            std::filesystem::remove_all(p, ec);
        }
    } cleanup{dir};
    auto pic = io::write_picture(io_samples::conv_net(), (dir / "conv_net").string(), {.highlight = io::changed_nodes(a, b)});
    CHECK(std::filesystem::exists(pic.dot_path));
    if (io::have_dot()) {
        REQUIRE(!pic.svg_path.empty());
        std::ifstream f(pic.svg_path);
        std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        CHECK(has(s, "<svg"));
        CHECK(has(s, "c3_dilated"));
    } else {
        MESSAGE("Graphviz not installed: checked the DOT-only path");
        CHECK(pic.svg_path.empty());
        CHECK(has(pic.note, "not installed"));
    }
}
