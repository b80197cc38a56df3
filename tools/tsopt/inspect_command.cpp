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

// Where an opaque type runs: oneDNN, the host's reference implementation, or nowhere.
std::string runs_on(const std::string& type, const backend::dnnl& cpu, const backend::reference& ref) {
    if (cpu.opaque_lowerings.count(type) || cpu.opaque_eltwise.count(type)) return "onednn";
    return ref.opaque_impls.count(type) ? "host" : "none";
}

json inspect_json(const std::string& path, const onnx::model& m) {
    const graph& g = m.graph;
    auto tensors = [&](auto&& values, auto&& name_of) {
        json list = json::array();
        for (std::size_t k = 0; k < values.size(); ++k) {
            const shape& sh = g.shape_of(values[k]);
            std::vector<std::int64_t> dims(sh.rank);
            for (int d = 0; d < sh.rank; ++d) dims[static_cast<std::size_t>(d)] = sh[d];
            list.push_back({{"name", name_of(k)}, {"shape", dims}});
        }
        return list;
    };
    const auto inputs = g.inputs();
    std::map<std::string, int> by_type;
    std::map<std::string, std::pair<int, std::string>> opaque;  // type -> count, an example node
    std::size_t weights = 0;
    double parameters = 0;
    for (const node& n : g.nodes) {
        if (n.kind == node_kind::weight) {
            ++weights;
            for (const auto& s : n.shapes) parameters += static_cast<double>(s.elements());
        } else if (n.kind == node_kind::op) {
            ++by_type[std::string(n.type_name())];
        } else if (n.kind == node_kind::opaque) {
            std::string t = (n.opaque && !n.opaque->domain.empty() ? n.opaque->domain + "." : "") + std::string(n.type_name());
            ++by_type[t];
            auto& [count, example] = opaque[t];
            if (count++ == 0) example = n.name;
        }
    }
    backend::reference ref;
    onnx::install_reference_ops(ref);
    backend::dnnl cpu({.persist = false});
    onnx::install_dnnl_lowerings(cpu);
    json opaque_list = json::array();
    for (const auto& [t, ce] : opaque)
        opaque_list.push_back({{"type", t}, {"count", ce.first}, {"example", ce.second}, {"runs_on", runs_on(t, cpu, ref)}});
    cost::multi_dim<cost::analytical> md;
    auto x = md.evaluate(g);
    return {{"schema", "tsopt-inspect"},
            {"schema_version", 1},
            {"model", path},
            {"opset", m.opset},
            {"producer", m.producer},
            {"inputs", tensors(inputs, [&](std::size_t k) { return g.at(inputs[k]).name; })},
            {"outputs", tensors(g.outputs, [&](std::size_t k) {
                 return k < m.output_names.size() ? m.output_names[k] : g.at(g.outputs[k]).name;
             })},
            {"operators", g.op_count()},
            {"operator_counts", by_type},
            {"opaque", opaque_list},
            {"weights", {{"tensors", weights}, {"parameters", parameters}}},
            {"flops", x.flops},
            {"memory_bytes", x.memory_bytes},
            {"kernel_launches", x.launches},
            {"peak_memory_bytes", x.peak_bytes},
            {"analytical_cost_ms", x.time_ms}};
}

}  // namespace

int inspect_command(int argc, char** argv, int first) {
    args a(argc, argv, first, {{"--batch"}, {"--dims"}, {"--json", false}});
    if (a.positional().size() != 1)
        throw usage_error(a.positional().empty() ? "missing the model file (tsopt inspect IN.onnx)"
                                                 : "expected one model file, got " + std::to_string(a.positional().size()));
    const std::string path = a.positional()[0];
    auto m = load_model(path, import_options_from(a));
    const graph& g = m.graph;
    if (a.flag("--json")) {
        std::cout << inspect_json(path, m).dump(2) << "\n";
        return exit_code::ok;
    }

    std::cout << path << ": ONNX opset " << m.opset << (m.producer.empty() ? "" : ", produced by " + m.producer) << "\n";
    std::cout << "inputs:\n";
    for (value v : g.inputs()) std::cout << "  " << g.at(v).name << "  " << g.shape_of(v).str() << "\n";
    std::cout << "outputs:\n";
    for (std::size_t k = 0; k < g.outputs.size(); ++k)
        std::cout << "  " << (k < m.output_names.size() ? m.output_names[k] : g.at(g.outputs[k]).name) << "  "
                  << g.shape_of(g.outputs[k]).str() << "\n";

    std::map<std::string, int> by_type, opaque;
    std::map<std::string, std::vector<std::string>> opaque_names;
    std::size_t weights = 0;
    double parameters = 0;
    for (const node& n : g.nodes) {
        if (n.kind == node_kind::weight) {
            ++weights;
            for (const auto& s : n.shapes) parameters += static_cast<double>(s.elements());
        } else if (n.kind == node_kind::op) {
            ++by_type[std::string(n.type_name())];
        } else if (n.kind == node_kind::opaque) {
            std::string t = (n.opaque && !n.opaque->domain.empty() ? n.opaque->domain + "." : "") + std::string(n.type_name());
            ++by_type[t + " (opaque)"];
            ++opaque[t];
            opaque_names[t].push_back(n.name);
        }
    }
    std::vector<std::pair<std::string, int>> sorted(by_type.begin(), by_type.end());
    std::stable_sort(sorted.begin(), sorted.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
    std::cout << "operators: " << g.op_count() << "\n";
    for (const auto& [t, n] : sorted) std::cout << "  " << std::setw(6) << n << "  " << t << "\n";

    backend::reference ref;
    onnx::install_reference_ops(ref);
    backend::dnnl cpu({.persist = false});
    onnx::install_dnnl_lowerings(cpu);
    if (opaque.empty()) std::cout << "opaque operators: none (every operator is declared to tsopt and can be rewritten)\n";
    else {
        std::cout << "opaque operators (kept as they are, not rewritten; the graph around them still is):\n";
        for (const auto& [t, n] : opaque) {
            const auto& names = opaque_names[t];
            std::cout << "  " << std::setw(6) << n << "  " << t << "  e.g. '" << names.front() << "'"
                      << (cpu.opaque_lowerings.count(t) || cpu.opaque_eltwise.count(t)
                              ? "; runs on oneDNN (configurations its lowering declines: on the host)"
                              : ref.opaque_impls.count(t) ? "; runs on the host (reference implementation)"
                                                          : "; no implementation: tsopt's backends cannot run it")
                      << "\n";
        }
    }
    std::cout << "weights: " << weights << " tensors, " << std::fixed << std::setprecision(3) << parameters / 1e6
              << " M parameters\n";
    cost::multi_dim<cost::analytical> md;
    auto x = md.evaluate(g);
    std::cout << std::setprecision(3) << "FLOPs: " << x.flops / 1e6 << " M (declared operators; opaque ones not counted)\n"
              << "memory accesses: " << x.memory_bytes / 1e6 << " MB, kernel launches: " << std::setprecision(0)
              << x.launches << ", peak memory: " << std::setprecision(3) << x.peak_bytes / 1e6 << " MB\n"
              << "analytical cost estimate: " << x.time_ms << " ms (cost::analytical, default machine)\n";
    return exit_code::ok;
}

}  // namespace tsopt::cli
