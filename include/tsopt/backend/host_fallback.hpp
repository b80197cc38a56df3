#pragma once
// Running a node on the host, shared by the backends that lower graphs to a
// library (dnnl, cudnn): a configuration the library refuses, and any opaque
// node or engine's operator without a native lowering, runs with the
// reference semantics or the implementation registered for its type, on
// row-major float buffers.
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tsopt/core/graph.hpp"

namespace tsopt::backend {

// An implementation of an opaque operator type: the node and its inputs in,
// its outputs out (as in the reference backend's opaque_impls).
using opaque_fn = std::function<std::vector<tensor<float>>(const node&, std::span<const tensor<float>* const>)>;
using opaque_map = std::map<std::string, opaque_fn, std::less<>>;

// The registered implementation of opaque node n; throws tsopt::error naming
// the node and the backend when there is none.
inline const opaque_fn& find_opaque(const opaque_map& opaque, const node& n, std::string_view backend) {
    auto it = opaque.find(n.opaque->type);
    if (it == opaque.end())
        throw error(n.describe() + ": the " + std::string(backend) + " backend has no implementation for opaque operator '" +
                    n.opaque->type + "' (register one in opaque_impls)");
    return it->second;
}

// The name a backend's registrations (opaque_impls, and oneDNN's native and
// eltwise lowerings) know node n by: an opaque node's type, or the name of an
// engine's own operator (spec::register_operator); nullopt for tsopt's.
inline std::optional<std::string_view> registered_type(const node& n) {
    if (n.kind == node_kind::opaque) return std::string_view(n.opaque->type);
    if (n.kind == node_kind::op && spec::is_extension(n.op)) return spec::name(n.op);
    return std::nullopt;
}

// The host implementation of node n: an opaque node's must be registered
// (throws naming it); an engine's operator may have one, else (empty) its
// reference semantics run.
inline opaque_fn host_impl(const opaque_map& opaque, const node& n, std::string_view backend) {
    if (n.kind == node_kind::opaque) return find_opaque(opaque, n, backend);
    if (auto type = registered_type(n))
        if (auto it = opaque.find(*type); it != opaque.end()) return it->second;
    return {};
}

// Prints "tsopt <backend>: <node> <what>" on stderr, once per process,
// backend and node (name and type).
inline void warn_once(std::string_view backend, const node& n, const std::string& what) {
    static std::mutex m;
    static std::set<std::string> seen;
    std::lock_guard lock(m);
    if (seen.insert(std::string(backend) + "|" + n.name + "|" + std::string(n.type_name())).second)
        std::cerr << "tsopt " << backend << ": " << n.describe() << " " << what << "\n";
}

// Runs node n on the host: `impl` when set, otherwise the reference
// semantics. Its inputs are row-major data of in_shapes at `in`; its outputs
// (row-major, of n.shapes) are written to `out`. Throws tsopt::error when the
// implementation returns the wrong number or shapes of outputs.
inline void run_on_host(const node& n, const opaque_fn& impl, std::span<const shape> in_shapes, std::span<float* const> in,
                        std::span<float* const> out) {
    std::vector<tensor<float>> args;
    std::vector<const tensor<float>*> argp;
    args.reserve(in.size());
    for (std::size_t k = 0; k < in.size(); ++k) {
        args.emplace_back(in_shapes[k]);
        std::memcpy(args.back().data.data(), in[k], args.back().data.size() * sizeof(float));
    }
    for (auto& a : args) argp.push_back(&a);
    auto res = impl ? impl(n, argp) : spec::evaluate<float>(n.op, n.params, argp);
    if (res.size() != out.size()) throw error(n.describe() + ": implementation returned the wrong number of outputs");
    for (std::size_t k = 0; k < out.size(); ++k) {
        if (!(res[k].shape == n.shapes[k]))
            throw error(n.describe() + ": implementation returned shape " + res[k].shape.str() + ", expected " + n.shapes[k].str());
        std::memcpy(out[k], res[k].data.data(), res[k].data.size() * sizeof(float));
    }
}

}  // namespace tsopt::backend
