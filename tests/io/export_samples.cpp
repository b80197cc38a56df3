// Writes the io sample graphs and every zoo model (test size) as ONNX files
// with reference-backend inputs and outputs, for tests/io/ort_check.py:
//   export_samples DIR  ->  DIR/<model>.onnx, DIR/<model>/input_i.pb, output_i.pb
// (one model keeps its weights in external data, DIR/<model>.onnx.data)
#include <filesystem>
#include <fstream>
#include <iostream>

#include "tsopt/onnx.hpp"
#include "samples.hpp"

namespace fs = std::filesystem;
using namespace tsopt;

static void write_tensor(const fs::path& p, const std::string& name, const tensor<float>& t) {
    ::onnx::TensorProto tp;
    tsopt::onnx::detail::fill_tensor(tp, name, t);
    std::ofstream f(p, std::ios::binary);
    if (!f || !tp.SerializeToOstream(&f)) throw error("cannot write " + p.string());
}

int main(int argc, char** argv) try {
    if (argc != 2) {
        std::cerr << "usage: export_samples DIR\n";
        return 2;
    }
    fs::path dir = argv[1];
    fs::create_directories(dir);
    std::vector<std::pair<std::string, graph>> models = {{"conv_net", io_samples::conv_net()},
                                                         {"matmul_net", io_samples::matmul_net()},
                                                         // weights in conv_net_external_data.onnx.data
                                                         {"conv_net_external_data", io_samples::conv_net()}};
    for (const auto& zm : zoo::models()) models.push_back({std::string(zm.name), zm.build(io_samples::zoo_small(zm.name))});
    backend::reference ref;
    for (auto& [name, g] : models) {
        tsopt::onnx::export_options o{.opset = name == "matmul_net" ? 13 : 17};
        if (name.ends_with("_external_data")) o.max_embedded_bytes = 0;
        tsopt::onnx::save(g, (dir / (name + ".onnx")).string(), o);
        auto in = backend::random_inputs(g, 11);
        auto out = ref.execute(g, in);
        fs::create_directories(dir / name);
        auto ids = g.inputs();
        for (std::size_t i = 0; i < in.size(); ++i) write_tensor(dir / name / ("input_" + std::to_string(i) + ".pb"), g.at(ids[i]).name, in[i]);
        for (std::size_t i = 0; i < out.size(); ++i) write_tensor(dir / name / ("output_" + std::to_string(i) + ".pb"), "out", out[i]);
        std::cout << name << ": " << g.op_count() << " operators\n";
    }
    return 0;
} catch (const std::exception& e) {
    std::cerr << "export_samples: " << e.what() << "\n";
    return 1;
}
