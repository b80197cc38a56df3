// Test helper: writes a copy of an ONNX model whose first weight tensor is
// doubled, so it has the same interface but different outputs (the CLI test
// expects `tsopt bench` to report the mismatch with exit code 3).
//   perturb_model IN.onnx OUT.onnx
#include <iostream>

#include "tsopt/onnx.hpp"

int main(int argc, char** argv) {
    if (argc != 3) {
        std::cerr << "usage: perturb_model IN.onnx OUT.onnx\n";
        return 1;
    }
    auto m = tsopt::onnx::read_model(argv[1]);
    for (auto& n : m.graph.nodes) {
        if (n.kind != tsopt::node_kind::weight || !n.data || n.data->data.size() < 4) continue;
        auto t = std::make_shared<tsopt::tensor<float>>(*n.data);
        for (auto& x : t->data) x = 2 * x + 0.5f;
        n.data = t;
        tsopt::onnx::save(m.graph, argv[2], tsopt::onnx::options_for(m));
        return 0;
    }
    std::cerr << "perturb_model: no weight to change in " << argv[1] << "\n";
    return 1;
}
