// tsopt bench: median end-to-end time of one model, or of two side by side
// (interleaved rounds, same random inputs, outputs compared).
#include <iomanip>
#include <iostream>

#include "backends.hpp"
#include "tsopt/backend/profile.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "tsopt/io/progress.hpp"

namespace tsopt::cli {

using io::progress;

const std::string_view bench_help =
    "usage: tsopt bench IN.onnx [OPT.onnx] [--backend cpu|cuda] [--reps N] [options]\n"
    "\n"
    "Runs a model on the backend and prints its median end-to-end time. With two models (e.g.\n"
    "the input and the output of `tsopt optimize`), times both in interleaved rounds on the same\n"
    "random inputs, prints the ratio, and checks that their outputs are equal (exit code 3 when\n"
    "they differ by more than the tolerance).\n"
    "\n"
    "options:\n"
    "  --backend B         cpu: oneDNN (default); cuda: cuDNN/cuBLAS (needs a CUDA build and a GPU)\n"
    "  --reps N            timed rounds (default 20); the median is reported\n"
    "  --batch N           value for a dynamic leading (batch) dimension of the inputs\n"
    "  --dims NAME=N,...   values for named symbolic dimensions\n"
    "  --tolerance E       max relative error between the two models' outputs (default 1e-4)\n"
    "  --seed S            seed of the random inputs (default 1)\n"
    "  --keep-denormals    cpu: compute with denormal floats instead of flushing them to zero\n"
    "  --profile           where each model's time goes: its plan's steps timed one by one, summed per operator kind\n"
    "  --profile-steps     as --profile, then every step in execution order with its node, shapes and kernel\n"
    "  --quiet             no progress lines on stderr (by default: a bar on a terminal, plain lines otherwise)\n"
    "  --json              the results as one JSON object on stdout (docs/schema/bench.schema.json)\n"
    "  -h, --help          this text\n";

int bench_command(int argc, char** argv, int first) {
    std::vector<std::string> files;
    std::string which = "cpu";
    int reps = 20;
    double tolerance = 1e-4;
    std::uint64_t seed = 1;
    bool profile = false, profile_steps = false, quiet = false, as_json = false, keep_denormals = false;
    import_args shapes;
    options o("bench");
    o.positionals(files)
        .one_of("--backend", which, {"cpu", "cuda"})
        .integer("--reps", reps, 1, max_reps)
        .number("--tolerance", tolerance, 0.0, true)
        .integer("--seed", seed, 0)
        .flag("--profile", profile)
        .flag("--profile-steps", profile_steps)
        .flag("--keep-denormals", keep_denormals)
        .flag("--quiet", quiet)
        .flag("--json", as_json);
    shapes.add_to(o);
    o.parse(argc, argv, first);
    profile = profile || profile_steps;
    if (as_json && profile) throw usage_error("--profile prints a table; it does not combine with --json");
    if (files.empty() || files.size() > 2)
        throw usage_error(files.empty() ? "missing the model file (tsopt bench IN.onnx [OPT.onnx])"
                                        : "expected one or two model files, got " + std::to_string(files.size()));
    const auto io = shapes.import_options();

    std::vector<graph> graphs;
    for (const auto& f : files) graphs.push_back(load_model(f, io).graph);

    return with_device(which, [&]<class B>() {
        typename B::options bo;
        bo.warmup = 0;  // warmed up below, then timed in interleaved single runs
        if constexpr (requires { bo.flush_denormals; }) bo.flush_denormals = !keep_denormals;
        B be(bo);
        install_device_ops(be);
        // Opaque nodes without an implementation are cut out: what surrounds
        // them is timed and compared (cut_around).
        std::set<std::string> unimplemented;
        for (const graph& g : graphs) unimplemented.merge(unimplemented_types(g, be.opaque_impls));
        if (!unimplemented.empty()) {
            if (!as_json) {
                std::cout << "tsopt bench: opaque operator(s)";
                for (const auto& t : unimplemented) std::cout << " " << t;
                std::cout << " have no implementation; timing the graph without them (their outputs fed random values)\n";
            }
            for (graph& g : graphs) g = cut_around(g, unimplemented);
        }
        std::vector<std::vector<tensor<float>>> inputs{backend::random_inputs(graphs[0], seed)};
        if (graphs.size() == 2) inputs.push_back(inputs_by_name(graphs[0], inputs[0], graphs[1], files[1]));
        progress prog(quiet);
        std::vector<std::vector<tensor<float>>> outs;
        for (std::size_t m = 0; m < graphs.size(); ++m) {
            prog.line("compiling " + files[m]);
            outs.push_back(be.execute(graphs[m], inputs[m]));
            for (int w = 0; w < 2; ++w) be.execute(graphs[m], inputs[m]);
        }
        std::vector<std::vector<double>> t(graphs.size());
        for (int r = 0; r < reps; ++r) {
            prog.bar("timing", static_cast<std::size_t>(r), static_cast<std::size_t>(reps));
            for (std::size_t m = 0; m < graphs.size(); ++m) t[m].push_back(be.time_end_to_end(graphs[m], inputs[m], 1));
        }
        prog.clear();
        std::vector<double> med;
        for (auto& v : t) med.push_back(backend::median(v));

        const double err = graphs.size() == 2 ? max_relative_error(outs[1], outs[0]) : 0;
        const bool agree = err <= tolerance;
        auto differ = [&] {
            return mismatch_error("the two models' outputs differ on the same random inputs (max relative error " +
                                  scientific(err) + " > tolerance " + scientific(tolerance) + ")");
        };
        if (as_json) {
            json models = json::array();
            for (std::size_t m = 0; m < graphs.size(); ++m)
                models.push_back({{"file", files[m]}, {"median_ms", med[m]}, {"operators", graphs[m].op_count()}});
            const json j = {{"schema", "tsopt-bench"},
                            {"schema_version", 1},
                            {"device", device_text<B>()},
                            {"reps", reps},
                            {"models", models},
                            {"not_run_opaque", unimplemented},
                            {"speedup", graphs.size() == 2 && med[1] > 0 ? json(med[0] / med[1]) : json(nullptr)},
                            {"outputs", graphs.size() == 2 ? json{{"max_relative_error", json_number(err)},
                                                                  {"tolerance", tolerance},
                                                                  {"equal", agree}}
                                                           : json(nullptr)}};
            std::cout << j.dump(2) << "\n";
            if (!agree) throw differ();
            return static_cast<int>(exit_code::ok);
        }

        std::size_t width = 10;
        for (const auto& f : files) width = std::max(width, f.size() + 2);
        std::cout << "tsopt bench: " << device_text<B>() << ", median of " << reps << " end-to-end runs\n";
        for (std::size_t m = 0; m < graphs.size(); ++m) {
            std::cout << "  " << std::left << std::setw(static_cast<int>(width)) << files[m] << std::right << std::fixed
                      << std::setprecision(3) << std::setw(10) << med[m] << " ms   " << std::setw(5)
                      << graphs[m].op_count() << " operators";
            if (m == 1 && med[1] > 0) std::cout << "   " << std::setprecision(2) << med[0] / med[1] << "x";
            std::cout << "\n";
        }
        if (graphs.size() == 2) {
            std::cout << std::fixed << "  speedup: " << std::setprecision(2) << (med[1] > 0 ? med[0] / med[1] : 0)
                      << "x (" << files[0] << " / " << files[1] << ")\n"
                      << std::scientific << std::setprecision(2) << "  outputs: max relative error " << err
                      << " (tolerance " << tolerance << "): " << (agree ? "equal" : "DIFFERENT") << "\n";
            if (!agree) throw differ();
        }
        if (profile)
            for (std::size_t m = 0; m < graphs.size(); ++m) backend::print_profile(std::cout, be, graphs[m], inputs[m], reps, files[m], profile_steps);
        return static_cast<int>(exit_code::ok);
    });
}

}  // namespace tsopt::cli
