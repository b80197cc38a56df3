// Runs an ONNX file on tsopt's reference backend, with the reference
// implementations of the operators the importer keeps opaque, for
// tests/io/ort_ops_check.py:
//   run_model MODEL.onnx DIR   reads DIR/input_i.pb (graph input order),
//                              writes DIR/output_i.pb (graph output order)
#include <filesystem>
#include <fstream>
#include <iostream>

#include "tsopt/onnx.hpp"

namespace fs = std::filesystem;
using namespace tsopt;

int main(int argc, char** argv) try {
    if (argc != 3) {
        std::cerr << "usage: run_model MODEL.onnx DIR\n";
        return 2;
    }
    graph g = tsopt::onnx::load(argv[1]);
    fs::path dir = argv[2];
    std::vector<tensor<float>> in;
    for (std::size_t i = 0; i < g.inputs().size(); ++i) {
        ::onnx::TensorProto t;
        std::ifstream f(dir / ("input_" + std::to_string(i) + ".pb"), std::ios::binary);
        if (!f || !t.ParseFromIstream(&f)) throw error("cannot read input " + std::to_string(i));
        in.push_back(tsopt::onnx::detail::to_float_tensor(t, "input " + std::to_string(i)));
    }
    backend::reference ref;
    tsopt::onnx::install_reference_ops(ref);
    auto out = ref.execute(g, in);
    for (std::size_t i = 0; i < out.size(); ++i) {
        ::onnx::TensorProto t;
        tsopt::onnx::detail::fill_tensor(t, "output_" + std::to_string(i), out[i]);
        std::ofstream f(dir / ("output_" + std::to_string(i) + ".pb"), std::ios::binary);
        if (!f || !t.SerializeToOstream(&f)) throw error("cannot write output " + std::to_string(i));
    }
    return 0;
} catch (const std::exception& e) {
    std::cerr << "run_model: " << e.what() << "\n";
    return 1;
}
