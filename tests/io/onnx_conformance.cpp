// ONNX's operator conformance tests (Debian's libonnx-testdata) through the
// importer and the reference backend: import model.onnx, run it on
// test_data_set_0's inputs, compare with the expected outputs.
//
// Each test runs twice: (a) only non-float graph inputs (shapes, pads, split
// sizes) are frozen into initializers; (b) additionally every graph input
// that no node reads as its first operand (weights, BN statistics, the
// second operand of binary ops) is frozen, which is how real models look.
// A test must match in every variant that imports; the tests in `must_pass`
// must import and match in at least one. Exit 77 (meson: skipped) without the data.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>

#include "tsopt/onnx.hpp"

namespace fs = std::filesystem;
namespace pb = ::onnx;
namespace ox = tsopt::onnx;
using namespace tsopt;

namespace {

const char* const prefixes[] = {
    "test_conv_", "test_gemm_", "test_matmul_", "test_add", "test_mul", "test_sub", "test_div", "test_relu",
    "test_sigmoid", "test_tanh", "test_maxpool_", "test_averagepool_", "test_globalaveragepool", "test_globalmaxpool",
    "test_batchnorm_", "test_concat_", "test_split_", "test_transpose_", "test_reshape_", "test_flatten_",
    "test_softmax_", "test_constant_pad", "test_identity", "test_constant", "test_basic_conv_", "test_dropout_default"};

// Verified to import and match; a regression here fails the test.
const std::set<std::string> must_pass = {
    "test_add", "test_add_bcast", "test_averagepool_2d_default", "test_averagepool_2d_pads_count_include_pad",
    "test_averagepool_2d_precomputed_pads_count_include_pad", "test_averagepool_2d_precomputed_strides",
    "test_averagepool_2d_strides", "test_averagepool_2d_same_upper", "test_averagepool_2d_same_lower",
    "test_averagepool_2d_pads", "test_averagepool_2d_ceil",
    "test_basic_conv_with_padding", "test_basic_conv_without_padding", "test_batchnorm_epsilon",
    "test_batchnorm_example", "test_concat_2d_axis_0", "test_concat_2d_axis_1", "test_concat_3d_axis_2",
    "test_concat_3d_axis_negative_1", "test_conv_with_autopad_same",
    "test_conv_with_strides_and_asymmetric_padding", "test_conv_with_strides_no_padding",
    "test_conv_with_strides_padding", "test_div", "test_div_bcast", "test_div_example", "test_flatten_axis0",
    "test_flatten_axis2", "test_flatten_default_axis", "test_flatten_negative_axis1", "test_gemm_all_attributes",
    "test_gemm_alpha", "test_gemm_beta", "test_gemm_default_matrix_bias", "test_gemm_default_no_bias",
    "test_gemm_default_scalar_bias", "test_gemm_default_vector_bias", "test_gemm_transposeA",
    "test_gemm_transposeB", "test_identity", "test_matmul_2d",
    "test_matmul_3d", "test_matmul_4d", "test_maxpool_2d_default", "test_maxpool_2d_pads",
    "test_maxpool_2d_precomputed_same_upper", "test_maxpool_2d_same_upper", "test_maxpool_2d_strides",
    "test_maxpool_2d_dilations", "test_maxpool_2d_ceil", "test_mul", "test_mul_bcast", "test_mul_example",
    "test_relu", "test_reshape_extended_dims", "test_reshape_negative_dim", "test_reshape_one_dim",
    "test_reshape_reduced_dims", "test_reshape_reordered_all_dims", "test_reshape_zero_and_negative_dim",
    "test_sigmoid", "test_softmax_axis_0", "test_softmax_axis_1", "test_softmax_axis_2", "test_softmax_default_axis",
    "test_softmax_example", "test_softmax_large_number", "test_split_equal_parts_1d", "test_split_equal_parts_2d",
    "test_split_variable_parts_1d", "test_split_variable_parts_2d", "test_sub", "test_sub_bcast",
    "test_sub_example", "test_tanh", "test_transpose_all_permutations_0", "test_transpose_all_permutations_5",
    "test_transpose_default"};

pb::TensorProto read_tensor(const fs::path& p) {
    pb::TensorProto t;
    std::ifstream f(p, std::ios::binary);
    if (!f || !t.ParseFromIstream(&f)) throw error("cannot read tensor " + p.string());
    return t;
}

struct outcome {
    enum { pass, not_imported, mismatch } kind;
    std::string detail;
};

outcome run_variant(const fs::path& dir, bool freeze_operands) {
    pb::ModelProto m;
    {
        std::ifstream f(dir / "model.onnx", std::ios::binary);
        if (!f || !m.ParseFromIstream(&f)) return {outcome::not_imported, "model.onnx does not parse"};
    }
    fs::path data = dir / "test_data_set_0";
    std::vector<pb::TensorProto> inputs, outputs;
    for (int i = 0; fs::exists(data / ("input_" + std::to_string(i) + ".pb")); ++i)
        inputs.push_back(read_tensor(data / ("input_" + std::to_string(i) + ".pb")));
    for (int i = 0; fs::exists(data / ("output_" + std::to_string(i) + ".pb")); ++i)
        outputs.push_back(read_tensor(data / ("output_" + std::to_string(i) + ".pb")));
    // Graph inputs in order (those without initializers) pair with input_i.pb.
    auto* gp = m.mutable_graph();
    std::set<std::string> inits;
    for (auto& t : gp->initializer()) inits.insert(t.name());
    std::set<std::string> first_operands;
    for (auto& n : gp->node())
        if (n.input_size() > 0) first_operands.insert(n.input(0));
    std::vector<pb::ValueInfoProto> keep;
    std::vector<std::size_t> kept;  // indices into `inputs` of the inputs that stay graph inputs
    std::size_t k = 0;
    for (auto& vi : gp->input()) {
        if (inits.count(vi.name())) { keep.push_back(vi); continue; }
        if (k >= inputs.size()) return {outcome::not_imported, "fewer input_*.pb files than graph inputs"};
        const pb::TensorProto& t = inputs[k++];
        bool non_float = vi.type().tensor_type().elem_type() != pb::TensorProto::FLOAT;
        if (non_float || (freeze_operands && !first_operands.count(vi.name()))) {
            auto* init = gp->add_initializer();
            *init = t;
            init->set_name(vi.name());
        } else {
            keep.push_back(vi);
            kept.push_back(k - 1);
        }
    }
    gp->clear_input();
    for (auto& vi : keep) *gp->add_input() = vi;
    ox::model im;
    try {
        im = ox::import_model(m);
    } catch (const error& e) {
        return {outcome::not_imported, e.what()};
    }
    // Inputs that stayed inputs, in order.
    std::vector<tensor<float>> in;
    try {
        for (std::size_t j : kept) in.push_back(ox::detail::to_float_tensor(inputs[j], "input_" + std::to_string(j) + ".pb"));
    } catch (const error& e) {
        return {outcome::not_imported, e.what()};
    }
    backend::reference ref;
    ox::install_reference_ops(ref);
    std::vector<tensor<float>> got;
    try {
        got = ref.execute(im.graph, in);
    } catch (const error& e) {
        return {outcome::not_imported, std::string("reference backend: ") + e.what()};
    }
    if (got.size() != outputs.size())
        return {outcome::mismatch, std::to_string(got.size()) + " outputs, expected " + std::to_string(outputs.size())};
    for (std::size_t i = 0; i < got.size(); ++i) {
        tensor<float> want;
        try {
            want = ox::detail::to_float_tensor(outputs[i], "expected output");
        } catch (const error& e) {
            return {outcome::not_imported, e.what()};
        }
        if (want.shape.rank == 0 && got[i].shape.rank == 0) want.shape = got[i].shape;
        double err = relative_error(got[i], want);
        if (!(err <= 1e-4))
            return {outcome::mismatch, "output " + std::to_string(i) + ": shape " + got[i].shape.str() + " vs expected " +
                                           want.shape.str() + ", relative error " + std::to_string(err)};
    }
    return {outcome::pass, {}};
}

}  // namespace

int main(int argc, char** argv) {
    fs::path root = argc > 1 ? argv[1] : "/usr/share/libonnx-testdata/data/node";
    if (!fs::is_directory(root)) {
        std::cout << "SKIP: " << root << " not found; install Debian's libonnx-testdata (scripts/install-deps.sh)\n";
        return 77;
    }
    std::vector<fs::path> dirs;
    for (auto& e : fs::directory_iterator(root)) {
        std::string n = e.path().filename().string();
        for (const char* p : prefixes)
            if (n.rfind(p, 0) == 0) {
                dirs.push_back(e.path());
                break;
            }
    }
    std::sort(dirs.begin(), dirs.end());
    int passed = 0, skipped = 0, failed = 0;
    std::set<std::string> seen;
    for (auto& d : dirs) {
        std::string name = d.filename().string();
        seen.insert(name);
        outcome a = run_variant(d, false), b = run_variant(d, true);
        bool bad = a.kind == outcome::mismatch || b.kind == outcome::mismatch;
        bool required = must_pass.count(name) > 0;
        if (required && a.kind != outcome::pass && b.kind != outcome::pass) bad = true;
        auto show = [](const outcome& o) {
            return o.kind == outcome::pass ? std::string("ok") : (o.kind == outcome::mismatch ? "MISMATCH " : "not imported: ") + o.detail;
        };
        if (bad) {
            ++failed;
            std::cout << "FAIL " << name << "\n  inputs only: " << show(a) << "\n  operands frozen: " << show(b) << "\n";
        } else if (a.kind == outcome::pass || b.kind == outcome::pass) {
            ++passed;
            std::cout << "ok   " << name << (a.kind != outcome::pass ? "  (inputs only: " + show(a) + ")" : "")
                      << (b.kind != outcome::pass ? "  (operands frozen: " + show(b) + ")" : "") << "\n";
        } else {
            ++skipped;
            std::cout << "skip " << name << ": " << a.detail << "\n";
        }
    }
    for (auto& n : must_pass)
        if (!seen.count(n)) {
            ++failed;
            std::cout << "FAIL " << n << ": required conformance test not found under " << root << "\n";
        }
    std::cout << passed << " passed, " << skipped << " not supported (skipped), " << failed << " failed\n";
    return failed ? 1 : 0;
}
