#pragma once
// What the subcommands share: loading a model (errors -> exit code 2),
// inputs matched by name across two graphs, output comparison, the rule set
// this binary carries, opaque-operator implementations for the backends,
// and a minimal JSON writer for --report.
#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "tsopt/backend/reference/executor.hpp"
#include "tsopt/io/atomic_file.hpp"
#include "tsopt/onnx.hpp"

#include "tsopt/rules/built_in.hpp"
#include "tsopt/rules/load.hpp"
#include "cli.hpp"

namespace tsopt::cli {

// Upper bounds of counts given on the command line: beyond them a run would
// not finish in any useful time (and --reps must fit the int the backends take).
inline constexpr std::int64_t max_reps = 1'000'000;
inline constexpr std::int64_t max_top_k = 1'000;
// Largest extent --batch / --dims may give a dimension.
inline constexpr std::int64_t max_dim = std::numeric_limits<std::int32_t>::max();

// --dims "seq=128,len=4" -> {"seq": 128, "len": 4}
inline std::map<std::string, std::int64_t, std::less<>> parse_dims(const std::string& text) {
    std::map<std::string, std::int64_t, std::less<>> r;
    std::stringstream ss(text);
    for (std::string item; std::getline(ss, item, ',');) {
        auto eq = item.find('=');
        if (item.empty() || eq == std::string::npos || eq == 0)
            throw usage_error("--dims: expected NAME=N[,NAME=N...], got '" + text + "'");
        r[item.substr(0, eq)] = options::parse_integer("--dims " + item.substr(0, eq), item.substr(eq + 1), 1, max_dim);
    }
    return r;
}

// --batch / --dims, the model's symbolic dimensions.
struct import_args {
    std::int64_t batch = 0;  // 0: the model's
    std::string dims;
    void add_to(options& o) {
        o.integer("--batch", batch, 1, max_dim);
        o.text("--dims", dims);
    }
    onnx::import_options import_options() const {
        onnx::import_options o;
        o.batch = batch;
        if (!dims.empty()) o.dims = parse_dims(dims);
        return o;
    }
};

inline constexpr std::uintmax_t max_model_file_bytes = std::uintmax_t(2) << 30;

// Reads an ONNX model; every failure is a bad_input failure with the reason.
inline onnx::model load_model(const std::string& path, const onnx::import_options& o) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::exists(path, ec)) throw input_error(path + ": no such file");
    if (fs::is_directory(path, ec)) throw input_error(path + ": is a directory, not an ONNX file");
    // Devices (/dev/zero), FIFOs and sockets are refused before anything is
    // read: they could be endless or block forever.
    if (!fs::is_regular_file(path, ec)) throw input_error(path + ": not a regular file (a device, FIFO or socket?)");
    const auto size = fs::file_size(path, ec);
    if (ec) throw input_error(path + ": cannot read its size: " + ec.message());
    if (size == 0) throw input_error(path + ": the file is empty, not an ONNX model");
    // Protocol buffers cannot parse a message over 2 GiB; larger weights live
    // in external data files beside the model.
    if (size > max_model_file_bytes)
        throw input_error(path + ": " + std::to_string(size) + " bytes, over the 2 GiB limit of an ONNX file " +
                          "(store the weights as external data)");
    try {
        return onnx::read_model(path, o);
    } catch (const std::bad_alloc&) {
        throw input_error(path + ": the model is too large to load");
    } catch (const std::exception& e) {
        std::string what = e.what();
        if (what.find("no shape") != std::string::npos || what.find("dynamic") != std::string::npos ||
            what.find("symbolic") != std::string::npos)
            what += " (give its extents with --batch N or --dims NAME=N)";
        throw input_error(what.starts_with(path) ? what : path + ": " + what);
    }
}

inline std::string shape_text(const shape& s) { return s.str(); }

// 1.23e-07: small relative errors and tolerances stay readable (std::to_string
// would print 0.000000).
inline std::string scientific(double v) {
    std::ostringstream os;
    os << std::scientific << std::setprecision(2) << v;
    return os.str();
}

// Inputs for graph `to`, taken by name from `from`'s inputs `in`.
inline std::vector<tensor<float>> inputs_by_name(const graph& from, const std::vector<tensor<float>>& in, const graph& to,
                                                 const std::string& what) {
    std::map<std::string, const tensor<float>*> by_name;
    auto fi = from.inputs();
    for (std::size_t k = 0; k < fi.size(); ++k) by_name[from.at(fi[k]).name] = &in[k];
    std::vector<tensor<float>> r;
    for (value v : to.inputs()) {
        const node& n = to.at(v);
        auto it = by_name.find(n.name);
        if (it == by_name.end()) throw input_error(what + ": input '" + n.name + "' is not an input of the other model");
        if (!(it->second->shape == to.shape_of(v)))
            throw input_error(what + ": input '" + n.name + "' has shape " + to.shape_of(v).str() + " here and " +
                              it->second->shape.str() + " in the other model");
        r.push_back(*it->second);
    }
    if (r.size() != fi.size()) throw input_error(what + ": the models have different numbers of inputs");
    return r;
}

// Max relative error of `got` against `want` (1e300 when the outputs do not correspond).
inline double max_relative_error(const std::vector<tensor<float>>& got, const std::vector<tensor<float>>& want) {
    if (got.size() != want.size()) return 1e300;
    double e = 0;
    for (std::size_t k = 0; k < got.size(); ++k) e = std::max(e, relative_error(got[k], want[k]));
    return e;
}

// The same tensors: shapes and every value.
inline bool same_tensors(const std::vector<tensor<float>>& a, const std::vector<tensor<float>>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                      [](const tensor<float>& x, const tensor<float>& y) { return x.shape == y.shape && x.data == y.data; });
}

// Implementations of the ONNX operators the importer keeps opaque, for a
// backend with an `opaque_impls` map (reference, dnnl, cudnn).
template <class Backend>
void install_opaque_ops(Backend& b) {
    backend::reference r;
    onnx::install_reference_ops(r);
    for (const auto& [name, fn] : r.opaque_impls) b.opaque_impls[name] = fn;
}

// An opaque node's type as the cut below names it: "Type" in the default
// ONNX domain, "domain.Type" otherwise.
inline std::string opaque_key(const node& n) {
    bool standard = n.opaque->domain.empty() || n.opaque->domain == "ai.onnx";
    return standard ? n.opaque->type : n.opaque->domain + "." + n.opaque->type;
}

// Opaque operator types of g that `impls` (a backend's opaque_impls, keyed by
// type; they implement the default ONNX domain) cannot run: no device can
// execute g whole while this is not empty.
template <class Map>
std::set<std::string> unimplemented_types(const graph& g, const Map& impls) {
    std::set<std::string> r;
    for (const node& n : g.nodes)
        if (n.kind == node_kind::opaque && (!impls.count(n.opaque->type) || opaque_key(n) != n.opaque->type))
            r.insert(opaque_key(n));
    return r;
}

// Names of g's opaque nodes whose type (opaque_key) is in `types`.
inline std::set<std::string> opaque_nodes_of(const graph& g, const std::set<std::string>& types) {
    std::set<std::string> r;
    for (const node& n : g.nodes)
        if (n.kind == node_kind::opaque && types.count(opaque_key(n))) r.insert(n.name);
    return r;
}

// g with the nodes named in `names` cut out, so that the rest can be run,
// timed and compared: each such node's outputs become graph inputs named
// "<node name>:<k>", and its inputs computed by operators become extra graph
// outputs after g's own, ordered by node name and input slot. Two graphs
// holding the same cut nodes (the original and its optimized form) give
// inputs and outputs that correspond by name and position. Cut by name, not
// by type: a model read back from its export may map a node the first import
// kept opaque (its parameters are constants now), and must still be cut
// where the original was.
inline graph cut_nodes(const graph& g, const std::set<std::string>& names) {
    std::vector<std::size_t> cut;
    for (std::size_t i = 0; i < g.size(); ++i)
        if ((g.nodes[i].kind == node_kind::opaque || g.nodes[i].kind == node_kind::op) && names.count(g.nodes[i].name))
            cut.push_back(i);
    std::stable_sort(cut.begin(), cut.end(), [&](std::size_t a, std::size_t b) { return g.nodes[a].name < g.nodes[b].name; });
    graph h = g;
    std::map<value, value> replaced;
    for (std::size_t u : cut)
        for (int k = 0; k < g.nodes[u].num_outputs(); ++k)
            replaced[{static_cast<std::int32_t>(u), k}] = h.input(g.nodes[u].name + ":" + std::to_string(k), g.nodes[u].shapes[static_cast<std::size_t>(k)]);
    auto redirect = [&](value& v) {
        if (auto it = replaced.find(v); it != replaced.end()) v = it->second;
    };
    for (node& n : h.nodes) std::for_each(n.inputs.begin(), n.inputs.end(), redirect);
    std::for_each(h.outputs.begin(), h.outputs.end(), redirect);
    for (std::size_t u : cut)
        for (value v : h.nodes[u].inputs)
            if (h.at(v).kind == node_kind::op || h.at(v).kind == node_kind::opaque) h.outputs.push_back(v);
    for (std::size_t u : cut) h.nodes[u].inputs.clear();  // unreachable now: compaction drops it
    return std::move(h).compacted();
}

// g with its opaque nodes of `types` cut out (cut_nodes).
inline graph cut_around(const graph& g, const std::set<std::string>& types) {
    return cut_nodes(g, opaque_nodes_of(g, types));
}

// ---- rules ---------------------------------------------------------------

// --rules generated|axioms|all|FILE: a built-in set (tsopt/rules/built_in.hpp;
// default: generated, tsopt::rules::default_rules()), or a rule listing
// written by tsopt-gen (rules::load_listing re-checks its provenance).
class chosen_rules {
public:
    explicit chosen_rules(const std::string& v) {
        if (v.empty() || v == "axioms" || v == "generated" || v == "all") {
            built_ = std::make_unique<rules::built_in_rules>(v.empty() ? rules::built_in_set::generated
                                                                      : rules::parse_built_in_set(v));
            return;
        }
        std::error_code ec;
        if (!std::filesystem::is_regular_file(v, ec))
            throw usage_error("--rules: expected generated, axioms, all or a rule listing file, got '" + v +
                              "' (no such file)");
        try {
            loaded_ = std::make_unique<rules::loaded_rules>(rules::load_listing(v));
        } catch (const failure&) {
            throw;
        } catch (const error& e) {
            // A listing that does not parse or is not proven is bad input.
            throw input_error(std::string("--rules: ") + e.what());
        }
    }
    std::span<const rewrite::rule> rules() const { return built_ ? built_->rules() : loaded_->rules(); }
    std::string text() const { return loaded_ ? "from " + loaded_->source() : std::string(rules::describe(built_->set())); }
    // A built-in set: which one.
    std::optional<rules::built_in_set> built_in() const { return built_ ? std::optional(built_->set()) : std::nullopt; }

private:
    std::unique_ptr<rules::built_in_rules> built_;
    std::unique_ptr<rules::loaded_rules> loaded_;
};

// ---- output files ----------------------------------------------------------

// A path with its links and `..` resolved, for comparing destinations.
inline std::filesystem::path resolved_path(const std::string& p) {
    std::error_code ec;
    auto r = std::filesystem::weakly_canonical(p, ec);
    return ec ? std::filesystem::absolute(p, ec).lexically_normal() : r;
}

// Whether two paths name the same file (through links, `..`, hard links).
inline bool same_file(const std::string& a, const std::string& b) {
    std::error_code ec;
    if (std::filesystem::equivalent(a, b, ec) && !ec) return true;
    return resolved_path(a) == resolved_path(b);
}

// Checks, before any work, that option `what` can write the file `path`:
// its directory exists (tsopt never creates one for an output file) and is
// writable, and the path is not a directory or a device. The file itself is
// written later, atomically (io/atomic_file.hpp).
inline void check_output_file(const std::string& what, const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::path parent = fs::path(path).parent_path();
    if (parent.empty()) parent = ".";
    if (!fs::exists(parent, ec))
        throw write_error(what + " '" + path + "': directory '" + parent.string() +
                          "' does not exist (output directories are not created; make it first)");
    if (!fs::is_directory(parent, ec))
        throw write_error(what + " '" + path + "': '" + parent.string() + "' is not a directory");
    if (::access(parent.c_str(), W_OK | X_OK) != 0)
        throw write_error(what + " '" + path + "': directory '" + parent.string() + "' is not writable");
    if (fs::is_directory(path, ec)) throw write_error(what + " '" + path + "' is a directory");
    if (fs::exists(path, ec) && !fs::is_regular_file(path, ec))
        throw write_error(what + " '" + path + "' exists and is not a regular file");
}

// Refuses two options naming the same file (e.g. -o equal to the input:
// the input is never overwritten).
inline void check_distinct(const std::vector<std::pair<std::string, std::string>>& files) {
    for (std::size_t i = 0; i < files.size(); ++i)
        for (std::size_t j = i + 1; j < files.size(); ++j)
            if (!files[i].second.empty() && !files[j].second.empty() && same_file(files[i].second, files[j].second))
                throw usage_error(files[i].first + " and " + files[j].first + " name the same file ('" + files[i].second +
                                  "' and '" + files[j].second + "'); give distinct files");
}

// Writes a whole output file atomically; a failure is a write_failed failure.
inline void write_file(const std::string& path, const std::string& bytes, const char* what) {
    try {
        io::write_file_atomically(path, bytes);
    } catch (const error& e) {
        throw write_error(std::string(what) + ": " + e.what());
    }
}

// A model and its external data file (when the weights went outside).
inline void write_model_files(const std::string& path, const onnx::model_files& f, const char* what) {
    try {
        onnx::save(f, path);
    } catch (const error& e) {
        throw write_error(std::string(what) + ": " + e.what());
    }
}

// Where a model just exported in memory reads its external data back from.
inline onnx::external_reader written_data(const onnx::model_files& f) {
    return f.data_location.empty() ? onnx::external_reader{} : onnx::external_bytes(f.data_location, f.data);
}

// ---- JSON ----------------------------------------------------------------
// nlohmann/json, keys in insertion order (the reports read top-down). Every
// JSON document tsopt writes carries "schema" and "schema_version"; their
// JSON Schemas are in docs/schema/.
using json = nlohmann::ordered_json;

// A JSON number, or null where there is none (NaN, infinity, absent).
inline json json_number(std::optional<double> v) { return v && std::isfinite(*v) ? json(*v) : json(nullptr); }

}  // namespace tsopt::cli
