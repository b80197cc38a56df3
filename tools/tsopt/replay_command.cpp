// tsopt replay: rebuilds an optimized model from the original and the
// rewrites its report lists (search::replay), and writes it. The written
// model is byte for byte what `tsopt optimize` wrote when the report tells
// the whole truth, which is what tests/cli/cli_test.py checks.
#include <fstream>
#include <iostream>
#include <sstream>

#include "commands.hpp"
#include "common.hpp"
#include "derivation_json.hpp"
#include "tsopt/cost/analytical.hpp"
#include "tsopt/search/derivation.hpp"

namespace tsopt::cli {

const std::string_view replay_help =
    "usage: tsopt replay IN.onnx --report REPORT.json -o OUT.onnx [options]\n"
    "\n"
    "Applies the rewrites listed in REPORT.json (written by `tsopt optimize --report`) to IN.onnx,\n"
    "one by one at the operators they name, and writes the result: the model `tsopt optimize`\n"
    "wrote, rebuilt from what its report says. Each rewrite is printed with its cost before and\n"
    "after (analytical cost model).\n"
    "\n"
    "options:\n"
    "  --report FILE.json      the optimize report (required)\n"
    "  -o, --output OUT.onnx   where to write the rebuilt model (required)\n"
    "  --rules SET|FILE        the rule set the optimization used (as for optimize; default generated)\n"
    "  --batch N, --dims NAME=N,...   as given to optimize\n"
    "  -h, --help              this text\n";

int replay_command(int argc, char** argv, int first) {
    std::vector<std::string> files;
    std::string report_path, out_path, rule_set;
    import_args shapes;
    options o("replay");
    o.positionals(files).text("--report", report_path).text("-o,--output", out_path).text("--rules", rule_set);
    shapes.add_to(o);
    o.parse(argc, argv, first);
    if (files.size() != 1)
        throw usage_error(files.empty() ? "missing the original model (tsopt replay IN.onnx --report R.json -o OUT.onnx)"
                                        : "expected one model file, got " + std::to_string(files.size()));
    if (report_path.empty()) throw usage_error("missing --report REPORT.json");
    if (out_path.empty()) throw usage_error("missing -o OUT.onnx");
    check_distinct({{"the input", files[0]}, {"--report", report_path}, {"-o", out_path}});

    json report;
    {
        std::ifstream in(report_path, std::ios::binary);
        if (!in) throw input_error("--report '" + report_path + "': cannot open it");
        try {
            report = json::parse(in);
        } catch (const json::exception& e) {
            throw input_error("--report '" + report_path + "': not JSON: " + e.what());
        }
    }
    if (!report.is_object() || report.value("schema", "") != "tsopt-optimize-report")
        throw input_error("--report '" + report_path + "': not a tsopt optimize report (no \"schema\": \"tsopt-optimize-report\")");
    if (!report.contains("rewrites"))
        throw input_error("--report '" + report_path + "': it has no \"rewrites\" (written by a tsopt older than `tsopt replay`)");
    auto d = derivation_from_json(report["rewrites"], "--report '" + report_path + "', \"rewrites\"");

    chosen_rules rules(rule_set);
    auto model = load_model(files[0], shapes.import_options());
    graph g;
    try {
        g = search::replay(model.graph, d, rules.rules(), cost::analytical{});
    } catch (const error& e) {
        throw input_error(std::string(e.what()) + " (are --rules, --batch and --dims those given to optimize?)");
    }
    g.validate();
    std::size_t k = 0;
    for (const search::rewrite_step* s : d.steps()) {
        std::cout << "  " << ++k << ". " << s->rule << " at";
        for (const auto& w : s->where) std::cout << " " << w;
        std::cout << ": cost " << s->cost_before << " -> " << s->cost_after << "\n";
    }
    const onnx::model_files written = onnx::to_files(g, onnx::data_location_for(out_path), onnx::options_for(model));
    write_model_files(out_path, written, "the rebuilt model");
    std::cout << "tsopt replay: " << k << " rewrite(s) from " << report_path << " applied to " << files[0] << "; wrote "
              << out_path << " (" << written.model.size() << " bytes"
              << (written.data_location.empty() ? "" : "; weights in " + written.data_location) << ")\n";
    return exit_code::ok;
}

}  // namespace tsopt::cli
