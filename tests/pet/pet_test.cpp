// PET's building blocks on the paper's examples: box propagation, exact modp
// verification, correction kernels, the three figure mutants, and a
// deliberately wrong mutant that must be caught.
#include <doctest/doctest.h>

#include <iostream>

#include "tsopt/backend/reference/executor.hpp"
#include "tsopt/cost/analytical.hpp"
#include "tsopt/pet/optimizer.hpp"

using namespace tsopt;

namespace {

std::mt19937_64 rng(42);

// Every output of g2 equals g1's on random float inputs (relative error).
double max_rel_error(const graph& g1, const graph& g2, std::uint64_t seed = 1) {
    backend::reference ref;
    auto in = backend::random_inputs(g1, seed);
    auto a = ref.execute(g1, in), b = ref.execute(g2, in);
    REQUIRE(a.size() == b.size());
    double e = 0;
    for (std::size_t i = 0; i < a.size(); ++i) e = std::max(e, relative_error(b[i], a[i]));
    return e;
}

const pet::mutant* find_family(const std::vector<pet::mutant>& ms, std::string_view f) {
    for (auto& m : ms)
        if (m.family == f) return &m;
    return nullptr;
}

int count(const graph& g, spec::op_kind k) {
    int n = 0;
    for (auto& nd : g.nodes) n += nd.is_op(k);
    return n;
}

// Figure 1: two images, one shared 3x3 kernel.
graph figure1() {
    graph g;
    value a = g.input("a", shape{1, 4, 8, 8}), b = g.input("b", shape{1, 4, 8, 8});
    value w = g.weight("w", shape{6, 4, 3, 3}, rng);
    g.mark_output(g.conv2d(a, w, {}, "conv_a"));
    g.mark_output(g.conv2d(b, w, {}, "conv_b"));
    return g;
}

}  // namespace

TEST_CASE("slice and overwrite: semantics in both number systems") {
    tensor<float> x(shape{2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
    spec::op_params p;
    p[spec::slice_p::b1] = 1;  // x[:, 1:]
    const tensor<float>* in[] = {&x};
    auto s = spec::evaluate<float>(spec::op_kind::slice, p, in);
    CHECK(s[0] == tensor<float>(shape{2, 2}, std::vector<float>{2, 3, 5, 6}));
    tensor<modp> xm(shape{2, 3});
    for (int i = 0; i < 6; ++i) xm[i] = modp(i + 1);
    tensor<modp> patch(shape{1, 2}, std::vector<modp>{modp(-1), modp(-2)});
    spec::op_params q;
    q[spec::overwrite_p::o0] = 1;
    q[spec::overwrite_p::o1] = 1;
    const tensor<modp>* in2[] = {&xm, &patch};
    auto o = spec::evaluate<modp>(spec::op_kind::overwrite, q, in2);
    CHECK(o[0][4] == modp(-1));
    CHECK(o[0][5] == modp(-2));
    CHECK(o[0][3] == modp(4));
    CHECK_THROWS_WITH_AS(spec::evaluate<modp>(spec::op_kind::overwrite, [] { spec::op_params r; r[1] = 2; return r; }(), in2),
                         doctest::Contains("does not fit"), tsopt::error);
    p[spec::slice_p::e1] = 1;  // [1, 1): empty
    CHECK_THROWS_WITH_AS(spec::evaluate<float>(spec::op_kind::slice, p, in), doctest::Contains("empty or outside"), tsopt::error);
}

TEST_CASE("box propagation: conv splits at padding borders and at concat seams") {
    graph g;
    value a = g.input("a", shape{1, 2, 6, 6}), b = g.input("b", shape{1, 2, 6, 6});
    value w = g.weight("w", shape{3, 2, 3, 3}, rng);
    value c = g.concat(3, {a, b});
    value y = g.conv2d(c, w);
    g.mark_output(y);
    auto sp = pet::propagate(g);
    const auto& s = sp[std::size_t(y.node)][0];
    CHECK(s.dims[2] == std::vector<std::int64_t>{0, 1, 5, 6});
    CHECK(s.dims[3] == std::vector<std::int64_t>{0, 1, 5, 6, 7, 11, 12});
    CHECK(s.dims[1] == std::vector<std::int64_t>{0, 3});
    // reshape merging two axes: a split at every row of the inner axis.
    graph h;
    value x = h.input("x", shape{2, 3});
    value r = h.reshape(x, shape{6});
    h.mark_output(r);
    CHECK(pet::propagate(h)[std::size_t(r.node)][0].dims[0] == std::vector<std::int64_t>{0, 3, 6});
}

TEST_CASE("figure 1: two convs sharing a weight batched along width; seam columns detected and corrected") {
    graph g = figure1();
    auto sp = pet::extract(g, {3, 4});  // the two convs (nodes after a, b, w)
    REQUIRE(sp.g.op_count() == 2);
    const std::size_t L = sp.leaves();
    auto ms = pet::mutate(sp.g, L, {.dfs = false});
    const pet::mutant* width = find_family(ms, "batch_convs(width)");
    const pet::mutant* batch = find_family(ms, "batch_convs(batch)");
    REQUIRE(width);
    REQUIRE(batch);
    CHECK(pet::verify(sp.g, batch->g, L).equivalent);

    auto v = pet::verify(sp.g, width->g, L, {.tests = 3});
    MESSAGE(v.summary());
    CHECK_FALSE(v.equivalent);
    CHECK(v.error_bound < 1e-12);
    // Only the seam columns differ: the last column of image a, the first of b.
    REQUIRE(!v.differing[0].empty());
    REQUIRE(!v.differing[1].empty());
    for (auto& b : v.differing[0]) CHECK((b.lo[3] == 7 && b.hi[3] == 8));
    for (auto& b : v.differing[1]) CHECK((b.lo[3] == 0 && b.hi[3] == 1));
    CHECK(v.differing_volume[0] == 6 * 8);
    CHECK(v.differing_volume[1] == 6 * 8);

    pet::correction_report cr;
    graph fixed = pet::correct(sp.g, width->g, L, v, &cr);
    CHECK(cr.after.equivalent);
    CHECK(cr.kernels == 2);  // one merged box per output
    CHECK(cr.corrected_elements == 2 * 6 * 8);
    graph full = pet::post_optimize(pet::splice(g, sp, fixed));
    CHECK(count(full, spec::op_kind::concat) == 1);
    CHECK(count(full, spec::op_kind::overwrite) == 2);
    CHECK(max_rel_error(g, full) <= 1e-5);
}

TEST_CASE("a deliberately wrong mutant is detected") {
    graph g = figure1();
    auto sp = pet::extract(g, {3, 4});
    const std::size_t L = sp.leaves();
    auto ms = pet::mutate(sp.g, L, {.dfs = false});
    const pet::mutant* width = find_family(ms, "batch_convs(width)");
    REQUIRE(width);
    // Uncorrected: caught above. Corrected on one output only: still caught.
    auto v = pet::verify(sp.g, width->g, L);
    pet::verification half = v;
    half.differing[1].clear();
    CHECK_THROWS_WITH_AS(pet::correct(sp.g, width->g, L, half), doctest::Contains("still differs"), tsopt::error);
    // A mutant whose conv reads the images in swapped order: wrong everywhere.
    graph bad = width->g;
    for (auto& n : bad.nodes)
        if (n.is_op(spec::op_kind::concat)) std::swap(n.inputs[0], n.inputs[1]);
    auto vb = pet::verify(sp.g, bad, L);
    CHECK_FALSE(vb.equivalent);
    CHECK(vb.differing_volume[0] == 6 * 8 * 8);
    // A one-element error in a corner box is found too.
    graph corner = sp.g;
    spec::op_params p;  // overwrite element (0,0,0,0) of output 0 with output 1's
    value y0 = corner.outputs[0], y1 = corner.outputs[1];
    spec::op_params s;
    s[spec::slice_p::e0] = 1; s[spec::slice_p::e1] = 1; s[spec::slice_p::e2] = 1; s[spec::slice_p::e3] = 1;
    value one = corner.add1(spec::op_kind::slice, s, {y1});
    corner.outputs[0] = corner.add1(spec::op_kind::overwrite, p, {y0, one});
    auto vc = pet::verify(sp.g, corner, L);
    CHECK_FALSE(vc.equivalent);
    CHECK(vc.differing_volume[0] == 1);
}

TEST_CASE("figure 3: dilated conv to a regular conv on rearranged phases") {
    graph g;
    value x = g.input("x", shape{1, 4, 8, 8});
    value w = g.weight("w", shape{5, 4, 3, 3}, rng);
    g.mark_output(g.conv2d(x, w, {.dilation = 2}, "dilated"));
    auto sp = pet::extract(g, {2});
    const std::size_t L = sp.leaves();
    auto ms = pet::mutate(sp.g, L, {.dfs = false});
    const pet::mutant* batch = find_family(ms, "dilated_conv(batch)");
    const pet::mutant* tiled = find_family(ms, "dilated_conv(tiled)");
    REQUIRE(batch);
    REQUIRE(tiled);
    // Phases in the batch axis: exact (H, W divisible by the dilation).
    auto vb = pet::verify(sp.g, batch->g, L);
    CHECK(vb.equivalent);
    // Phases tiled in space: the rows/columns next to the tile seams differ
    // (output rows 1 and 6, columns 1 and 6 for d = 2, H = W = 8).
    auto vt = pet::verify(sp.g, tiled->g, L);
    MESSAGE(vt.summary());
    CHECK_FALSE(vt.equivalent);
    for (auto& b : vt.differing[0]) {
        bool row = b.hi[2] - b.lo[2] == 1 && (b.lo[2] == 1 || b.lo[2] == 6);
        bool col = b.hi[3] - b.lo[3] == 1 && (b.lo[3] == 1 || b.lo[3] == 6);
        CHECK((row || col));
    }
    CHECK(vt.differing_volume[0] == 5 * (8 * 8 - 6 * 6));
    pet::correction_report cr;
    graph fixed = pet::correct(sp.g, tiled->g, L, vt, &cr);
    CHECK(cr.after.equivalent);
    CHECK(count(fixed, spec::op_kind::conv2d) >= 2);  // the regular conv + correction convs (dilated, on slices)
    CHECK(max_rel_error(g, pet::post_optimize(pet::splice(g, sp, fixed))) <= 1e-5);
    CHECK(max_rel_error(g, pet::post_optimize(pet::splice(g, sp, batch->g))) <= 1e-5);
}

TEST_CASE("figure 10: two convs with different output channels and kernels become one conv") {
    graph g;
    value x = g.input("x", shape{1, 4, 8, 8});
    value w1 = g.weight("w1", shape{6, 4, 1, 1}, rng), w2 = g.weight("w2", shape{10, 4, 3, 3}, rng);
    g.mark_output(g.conv2d(x, w1, {}, "c1"));
    g.mark_output(g.conv2d(x, w2, {}, "c2"));
    auto sp = pet::extract(g, {3, 4});
    const std::size_t L = sp.leaves();
    auto ms = pet::mutate(sp.g, L, {.dfs = false});
    const pet::mutant* m = find_family(ms, "merge_convs(shared input)");
    REQUIRE(m);
    CHECK(pet::verify(sp.g, m->g, L).equivalent);
    graph full = pet::post_optimize(pet::splice(g, sp, m->g));
    CHECK(count(full, spec::op_kind::conv2d) == 1);
    CHECK(count(full, spec::op_kind::enlarge) == 0);  // folded into the weight
    CHECK(max_rel_error(g, full) <= 1e-5);

    // Two inputs: one grouped conv, the smaller weight zero-padded.
    graph h;
    value a = h.input("a", shape{1, 4, 8, 8}), b = h.input("b", shape{1, 4, 8, 8});
    value v1 = h.weight("v1", shape{6, 4, 3, 3}, rng), v2 = h.weight("v2", shape{10, 4, 3, 3}, rng);
    h.mark_output(h.conv2d(a, v1));
    h.mark_output(h.conv2d(b, v2));
    auto sq = pet::extract(h, {4, 5});
    auto mq = pet::mutate(sq.g, sq.leaves(), {.dfs = false});
    const pet::mutant* gm = find_family(mq, "merge_convs(grouped)");
    REQUIRE(gm);
    CHECK(pet::verify(sq.g, gm->g, sq.leaves()).equivalent);
    graph hf = pet::post_optimize(pet::splice(h, sq, gm->g));
    CHECK(count(hf, spec::op_kind::conv2d) == 1);
    CHECK(max_rel_error(h, hf) <= 1e-5);
}

TEST_CASE("the DFS generator finds mutants of a small program") {
    graph g;
    value x = g.input("x", shape{1, 2, 4, 4});
    value w = g.weight("w", shape{2, 2, 3, 3}, rng);
    g.mark_output(g.conv2d(x, w));
    auto sp = pet::extract(g, {2});
    auto ms = pet::dfs_mutants(sp.g, sp.leaves(), {.depth = 3, .dfs_budget = 3000});
    CHECK(!ms.empty());
    int ok = 0;
    for (auto& m : ms) {
        auto v = pet::verify(sp.g, m.g, sp.leaves());
        if (v.equivalent) { ++ok; continue; }
        graph f = pet::correct(sp.g, m.g, sp.leaves(), v);
        CHECK(max_rel_error(g, pet::splice(g, sp, f)) <= 1e-4);
        ++ok;
    }
    CHECK(ok == static_cast<int>(ms.size()));
}

TEST_CASE("post-optimizations: inverse rearrangements cancel across a relu, activations fuse") {
    graph g;
    value x = g.input("x", shape{1, 4, 8, 8});
    value w1 = g.weight("w1", shape{4, 4, 3, 3}, rng), w2 = g.weight("w2", shape{4, 4, 3, 3}, rng);
    value y = g.relu(g.conv2d(x, w1, {.dilation = 2}));
    g.mark_output(g.relu(g.conv2d(y, w2, {.dilation = 2})));
    auto r = pet::optimize(g, cost::analytical{}, {.budget = std::chrono::seconds(20)});
    r.rep.print(std::cout);
    CHECK(max_rel_error(g, r.optimized) <= 1e-4);
    // Both dilated convs moved to phases-in-batch form: one rearrangement on
    // each side remains, the inner pair cancelled, relus fused.
    graph all = pet::unfuse_activations(g);
    for (int i = 0; i < 2; ++i) {
        for (auto& c : pet::linear_components(all)) {
            auto sp = pet::extract(all, c);
            auto ms = pet::mutate(sp.g, sp.leaves(), {.dfs = false});
            if (auto m = find_family(ms, "dilated_conv(batch)")) { all = pet::splice(all, sp, m->g); break; }
        }
    }
    graph p = pet::post_optimize(all);
    CHECK(count(p, spec::op_kind::transpose) == 2);
    CHECK(count(p, spec::op_kind::relu) == 0);
    CHECK(max_rel_error(g, p) <= 1e-4);
}
