// Writes an ONNX model using the engine's operators (in the domain
// ai.tsopt.engine): -(-x @ w) + -b, for plugin_test.sh.
#include <tsopt/onnx.hpp>

#include <iostream>
#include <random>

#include "myengine_ops.hpp"

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: make_engine_model OUT.onnx\n";
        return 1;
    }
    myengine::register_spec();
    std::mt19937_64 rng(3);
    tsopt::graph g;
    const auto neg = myengine::neg_decl.kind;
    auto x = g.input("x", {16, 32});
    auto b = g.input("b", {16, 24});
    auto m = g.matmul(g.add1(neg, {}, {x}), g.weight("w", {32, 24}, rng));
    g.mark_output(g.ewadd(g.add1(neg, {}, {m}), g.add1(neg, {}, {b})));
    tsopt::onnx::save(g, argv[1]);
    std::cout << argv[1] << ": " << g.op_count() << " operators\n";
}
