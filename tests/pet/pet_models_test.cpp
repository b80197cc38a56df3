// Corrected PET candidates equal the originals on zoo models at small sizes.
// Tolerance 1e-4 relative: the candidates compute the same sums in another
// order (concatenated/merged kernels, zero padding), float rounding only.
#include <doctest/doctest.h>

#include <chrono>
#include <iostream>

#include "tsopt/backend/reference/executor.hpp"
#include "tsopt/cost/analytical.hpp"
#include "tsopt/pet/optimizer.hpp"
#include "tsopt/zoo/zoo.hpp"

using namespace tsopt;

namespace {

double max_rel_error(const graph& g1, const graph& g2) {
    backend::reference ref;
    auto in = backend::random_inputs(g1, 7);
    auto a = ref.execute(g1, in), b = ref.execute(g2, in);
    double e = 0;
    for (std::size_t i = 0; i < a.size(); ++i) e = std::max(e, relative_error(b[i], a[i]));
    return e;
}

graph inception_block() {
    zoo::options o{.width_div = 8};
    zoo::net n(o, 9);
    zoo::detail::inception I{n};
    value x = n.g.input("data", shape{1, 24, 9, 9});
    return n.finish({I.a(x, "Mixed_5b", 32)});
}

void check_model(const std::string& name, const graph& g, std::size_t max_checked) {
    pet::stats st;
    auto t0 = std::chrono::steady_clock::now();
    pet::options o;
    o.budget = std::chrono::seconds(120);
    auto cs = pet::mutants(g, o, &st);
    double mt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::map<std::string, int> fam;
    std::size_t checked = 0;
    for (auto& c : cs) {
        ++fam[c.family];
        if (checked >= max_checked) continue;
        ++checked;
        CAPTURE(c.family);
        CHECK(c.correction.after.equivalent);
        CHECK(max_rel_error(g, c.g) <= 1e-4);
    }
    auto t1 = std::chrono::steady_clock::now();
    auto r = pet::optimize(g, cost::analytical{}, o);
    double ot = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    CHECK(max_rel_error(g, r.optimized) <= 1e-4);
    std::cout << "[pet] " << name << ": " << cs.size() << " candidates (" << st.subsets << " subprograms, " << st.mutants
              << " mutants, " << st.corrected << " corrected, " << st.verified_exact << " exact) in " << mt
              << " s; pet::optimize " << ot << " s, cost " << r.rep.cost_before << " -> " << r.rep.cost_after << "; families:";
    for (auto& [f, k] : fam) std::cout << " " << f << "=" << k;
    std::cout << "\n";
    CHECK(!cs.empty());
}

}  // namespace

TEST_CASE("ResNet-18 (small): corrected candidates equal the original") {
    check_model("resnet18", zoo::build("resnet18", {.image = 32, .width_div = 16, .depth_div = 2}), 12);
}

TEST_CASE("CSRNet (small, dilated convs): corrected candidates equal the original") {
    auto g = zoo::build("csrnet", {.image = 32, .width_div = 32});
    check_model("csrnet", g, 12);
}

TEST_CASE("Inception-v3 branch block (small): corrected candidates equal the original") {
    check_model("inception_block", inception_block(), 12);
}
