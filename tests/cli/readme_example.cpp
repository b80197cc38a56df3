#include <tsopt/cost/analytical.hpp>
#include <tsopt/onnx.hpp>
#include <tsopt/optimize.hpp>
#include <tsopt/rules/default.hpp>
#include <iostream>
using namespace std::chrono_literals;

int main(int argc, char** argv) {
    auto model = tsopt::onnx::read_model(argc > 1 ? argv[1] : "models/demo.onnx");  // graph + interface
    auto r = tsopt::optimize(model.graph, tsopt::rules::default_rules(), tsopt::cost::analytical{}, {.budget = 2s});
    r.report.print(std::cout);  // cost before -> after, rules used, why the search stopped
    tsopt::onnx::save(r.optimized, argc > 2 ? argv[2] : "demo.opt.onnx", tsopt::onnx::options_for(model));
}
