// Writes the bundled demo model, models/demo.onnx: the zoo's NasNet-A (the
// cells TASO's evaluation is built around: separable convolutions, pools,
// many adds and concats, so plenty to rewrite) at a small size (image 16, widths/16, one cell per stage), exported by
// tsopt's own ONNX exporter.
//   make_demo_model [OUT.onnx]     (default: models/demo.onnx)
#include <filesystem>
#include <iostream>

#include "tsopt/onnx.hpp"
#include "tsopt/zoo/zoo.hpp"

int main(int argc, char** argv) try {
    std::string out = argc > 1 ? argv[1] : "models/demo.onnx";
    tsopt::zoo::options o{.batch = 1, .image = 16, .width_div = 16, .depth_div = 5, .seed = 2024};
    tsopt::graph g = tsopt::zoo::build("nasnet_a", o);
    tsopt::onnx::save(g, out, {.opset = 17, .output_names = {"output"}, .graph_name = "tsopt_demo_nasnet_a"});
    std::cout << out << ": NasNet-A (image 16, width/16, depth/5), " << g.op_count() << " operators, "
              << std::filesystem::file_size(out) << " bytes\n";
    return 0;
} catch (const std::exception& e) {
    std::cerr << "make_demo_model: " << e.what() << "\n";
    return 1;
}
