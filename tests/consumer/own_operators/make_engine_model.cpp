// Writes an ONNX model using the engine's operators (in the domain
// ai.tsopt.engine): myengine::negated_product, for plugin_test.sh.
#include <tsopt/onnx.hpp>

#include <iostream>

#include "myengine_ops.hpp"

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: make_engine_model OUT.onnx\n";
        return 1;
    }
    myengine::register_spec();
    const tsopt::graph g = myengine::negated_product();
    tsopt::onnx::save(g, argv[1]);
    std::cout << argv[1] << ": " << g.op_count() << " operators\n";
}
