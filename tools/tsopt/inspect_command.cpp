// tsopt inspect: what a model contains, as tsopt sees it.
#include <algorithm>
#include <iomanip>
#include <iostream>

#include "backends.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "tsopt/cost/multi_dim.hpp"

namespace tsopt::cli {

const std::string_view inspect_help =
    "usage: tsopt inspect IN.onnx [--batch N] [--dims NAME=N,...] [--json]\n"
    "\n"
    "Imports an ONNX model and prints its inputs and outputs with shapes, its operators counted\n"
    "by type, the operators tsopt keeps opaque (not rewritten; run on the host where an\n"
    "implementation exists), weights, FLOPs and an analytical cost estimate.\n"
    "\n"
    "options:\n"
    "  --batch N          value for a dynamic leading (batch) dimension of the inputs\n"
    "  --dims NAME=N,...  values for named symbolic dimensions\n"
    "  --json             the same as one JSON object on stdout (docs/schema/inspect.schema.json)\n"
    "  -h, --help         this text\n";

namespace {

// What the model holds, counted once for the text and the JSON.
struct census {
    std::map<std::string, int> by_type;  // operator type -> count (opaque ones domain-qualified)
    struct opaque_type {
        int count = 0;
        std::string example;  // one such node's name
        std::string runs_on;  // onednn, host or none
    };
    std::map<std::string, opaque_type> opaque;
    std::size_t weights = 0;
    double parameters = 0;
    cost::metrics metrics;

    explicit census(const graph& g) {
        backend::reference ref;
        onnx::install_reference_ops(ref);
        backend::dnnl cpu({.persist = false});
        onnx::install_dnnl_lowerings(cpu);
        for (const node& n : g.nodes) {
            if (n.kind == node_kind::weight) {
                ++weights;
                for (const auto& s : n.shapes) parameters += static_cast<double>(s.elements());
            } else if (n.kind == node_kind::op) {
                ++by_type[std::string(n.type_name())];
            } else if (n.kind == node_kind::opaque) {
                std::string t = (n.opaque && !n.opaque->domain.empty() ? n.opaque->domain + "." : "") + std::string(n.type_name());
                ++by_type[t];
                opaque_type& o = opaque[t];
                if (o.count++ == 0) {
                    o.example = n.name;
                    o.runs_on = cpu.opaque_lowerings.count(t) || cpu.opaque_eltwise.count(t) ? "onednn"
                                : ref.opaque_impls.count(t)                                 ? "host"
                                                                                             : "none";
                }
            }
        }
        metrics = cost::multi_dim<cost::analytical>{}.evaluate(g);
    }
};

std::string output_name(const onnx::model& m, std::size_t k) {
    return k < m.output_names.size() ? m.output_names[k] : m.graph.at(m.graph.outputs[k]).name;
}

json inspect_json(const std::string& path, const onnx::model& m, const census& c) {
    const graph& g = m.graph;
    auto tensor_json = [&](const std::string& name, value v) {
        const shape& sh = g.shape_of(v);
        std::vector<std::int64_t> dims(static_cast<std::size_t>(sh.rank));
        for (int d = 0; d < sh.rank; ++d) dims[static_cast<std::size_t>(d)] = sh[d];
        return json{{"name", name}, {"shape", dims}};
    };
    json inputs = json::array(), outputs = json::array(), opaque = json::array();
    for (value v : g.inputs()) inputs.push_back(tensor_json(g.at(v).name, v));
    for (std::size_t k = 0; k < g.outputs.size(); ++k) outputs.push_back(tensor_json(output_name(m, k), g.outputs[k]));
    for (const auto& [t, o] : c.opaque)
        opaque.push_back({{"type", t}, {"count", o.count}, {"example", o.example}, {"runs_on", o.runs_on}});
    const auto& x = c.metrics;
    return {{"schema", "tsopt-inspect"},
            {"schema_version", 1},
            {"model", path},
            {"opset", m.opset},
            {"producer", m.producer},
            {"inputs", inputs},
            {"outputs", outputs},
            {"operators", g.op_count()},
            {"operator_counts", c.by_type},
            {"opaque", opaque},
            {"weights", {{"tensors", c.weights}, {"parameters", c.parameters}}},
            {"flops", x.flops},
            {"memory_bytes", x.memory_bytes},
            {"kernel_launches", x.launches},
            {"peak_memory_bytes", x.peak_bytes},
            {"analytical_cost_ms", x.time_ms}};
}

}  // namespace

int inspect_command(int argc, char** argv, int first) {
    std::vector<std::string> files;
    import_args shapes;
    bool as_json = false;
    options o("inspect");
    o.positionals(files).flag("--json", as_json);
    shapes.add_to(o);
    o.parse(argc, argv, first);
    if (files.size() != 1)
        throw usage_error(files.empty() ? "missing the model file (tsopt inspect IN.onnx)"
                                        : "expected one model file, got " + std::to_string(files.size()));
    const std::string path = files[0];
    auto m = load_model(path, shapes.import_options());
    const graph& g = m.graph;
    const census c(g);
    if (as_json) {
        std::cout << inspect_json(path, m, c).dump(2) << "\n";
        return exit_code::ok;
    }

    std::cout << path << ": ONNX opset " << m.opset << (m.producer.empty() ? "" : ", produced by " + m.producer) << "\n";
    std::cout << "inputs:\n";
    for (value v : g.inputs()) std::cout << "  " << g.at(v).name << "  " << g.shape_of(v).str() << "\n";
    std::cout << "outputs:\n";
    for (std::size_t k = 0; k < g.outputs.size(); ++k)
        std::cout << "  " << output_name(m, k) << "  " << g.shape_of(g.outputs[k]).str() << "\n";

    std::vector<std::pair<std::string, int>> sorted;
    for (const auto& [t, n] : c.by_type) sorted.emplace_back(c.opaque.count(t) ? t + " (opaque)" : t, n);
    std::stable_sort(sorted.begin(), sorted.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
    std::cout << "operators: " << g.op_count() << "\n";
    for (const auto& [t, n] : sorted) std::cout << "  " << std::setw(6) << n << "  " << t << "\n";

    if (c.opaque.empty()) std::cout << "opaque operators: none (every operator is declared to tsopt and can be rewritten)\n";
    else {
        std::cout << "opaque operators (kept as they are, not rewritten; the graph around them still is):\n";
        for (const auto& [t, o] : c.opaque)
            std::cout << "  " << std::setw(6) << o.count << "  " << t << "  e.g. '" << o.example << "'"
                      << (o.runs_on == "onednn" ? "; runs on oneDNN (configurations its lowering declines: on the host)"
                          : o.runs_on == "host" ? "; runs on the host (reference implementation)"
                                                : "; no implementation: tsopt's backends cannot run it")
                      << "\n";
    }
    std::cout << "weights: " << c.weights << " tensors, " << std::fixed << std::setprecision(3) << c.parameters / 1e6
              << " M parameters\n";
    const auto& x = c.metrics;
    std::cout << std::setprecision(3) << "FLOPs: " << x.flops / 1e6 << " M (declared operators; opaque ones not counted)\n"
              << "memory accesses: " << x.memory_bytes / 1e6 << " MB, kernel launches: " << std::setprecision(0)
              << x.launches << ", peak memory: " << std::setprecision(3) << x.peak_bytes / 1e6 << " MB\n"
              << "analytical cost estimate: " << x.time_ms << " ms (cost::analytical, default machine)\n";
    return exit_code::ok;
}

}  // namespace tsopt::cli
