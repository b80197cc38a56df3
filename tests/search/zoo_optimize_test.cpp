// Every zoo model, built small, optimized with cost::analytical and checked
// equal to the original on the reference backend. The rules are derived from
// the axiom set (spec/axioms.hpp) with rewrite::rule_set, both directions
// where valid, with same-shape conditions on element-wise operands so no
// rule fires where broadcasting would make it unsound; the generator's rule
// tables are not available to this test yet.
#include "tsopt/cost/analytical.hpp"
#include "tsopt/optimize.hpp"
#include "tsopt/rewrite/from_axiom.hpp"
#include "tsopt/spec/axioms.hpp"
#include "tsopt/zoo/zoo.hpp"

#include "../rewrite/helpers.hpp"

using namespace tsopt;
using namespace rewrite_test;
using namespace std::chrono_literals;

TEST_CASE("zoo: every model, small, optimized with cost::analytical => cheaper or unchanged, and equal") {
    rewrite::rule_set rs;
    constexpr spec::value_ref X = spec::var_ref(0), Y = spec::var_ref(1), Z = spec::var_ref(2), W = spec::var_ref(3);
    auto shapes = rewrite::same_shape(X, Y);
    auto more = rewrite::same_shape(Z, W);
    shapes.insert(shapes.end(), more.begin(), more.end());
    auto yz = rewrite::same_shape(Y, Z);
    shapes.insert(shapes.end(), yz.begin(), yz.end());
    for (const auto& a : spec::all_axioms) {
        // Unsound for grouped convolutions (group assignment changes).
        if (a.name == "conv-concat-weight" || a.name == "conv-concat-sum") continue;
        // Grouped-conv merging: its own conditions keep it sound; equal-shape
        // conditions on a conv's input and weight would stop it matching.
        if (spec::outside_taso_model(a.name)) {
            rs.add(a);
            continue;
        }
        rs.add(a, shapes);
    }
    MESSAGE(rs.size(), " rules from ", spec::all_axioms.size(), " axioms");
    for (const auto& m : zoo::models()) {
        SUBCASE(std::string(m.name).c_str()) {
            // The smallest image the model's valid-padded layers accept.
            graph g;
            bool built = false;
            for (int image : {32, 80, 128, 227}) {
                try {
                    g = m.build({.batch = 1, .image = image, .width_div = 16, .depth_div = 8, .length = 2});
                    built = true;
                    break;
                } catch (const error&) {
                }
            }
            REQUIRE_MESSAGE(built, m.name, " builds at no small size");
            auto r = optimize(g, rs.rules(), cost::analytical{},
                              {.budget = 4s, .max_expansions = 40, .partition_threshold = 30, .cut_expansions = 2});
            std::ostringstream os;
            r.report.print(os);
            MESSAGE(m.name, ": ", g.op_count(), " ops -> ", r.optimized.op_count(), "\n", os.str());
            CHECK(r.report.cost_after <= r.report.cost_before);
            check_equivalent(g, r.optimized, 1e-4);
        }
    }
}
