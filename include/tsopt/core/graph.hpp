#pragma once
// The graph IR: a DAG of nodes, each producing one or more tensors.
// Nodes are graph inputs, weights (data known at optimization time),
// declared operators (spec::op_kind with parameters), or opaque operators
// that tsopt does not know (kept as they are, with their attributes, so a
// model still round-trips and the rest of it is still optimized).
//
// Node ids are indices into `nodes`; a `value` names one output of one node.
// The builder methods validate as they go and name the node at fault.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "tsopt/core/error.hpp"
#include "tsopt/core/hash.hpp"
#include "tsopt/spec/registry.hpp"

namespace tsopt {

struct value {
    std::int32_t node = -1;
    std::int32_t output = 0;
    friend constexpr bool operator==(const value&, const value&) = default;
    friend constexpr auto operator<=>(const value&, const value&) = default;
};

enum class node_kind : std::uint8_t { input, weight, op, opaque };

// An operator tsopt has no declaration for. Attributes travel as an opaque
// blob (the ONNX importer stores serialized AttributeProtos there).
struct opaque_op {
    std::string type;
    std::string domain;
    std::string attributes;
    std::int32_t attribute_count = 0;
};

struct node {
    node_kind kind = node_kind::op;
    spec::op_kind op{};
    spec::op_params params{};
    std::vector<value> inputs;
    std::vector<shape> shapes;  // one per output
    std::string name;
    spec::layout out_layout = spec::layout::row_major;
    std::shared_ptr<const tensor<float>> data;      // weights
    std::shared_ptr<const opaque_op> opaque;        // opaque operators

    int num_outputs() const { return static_cast<int>(shapes.size()); }
    bool is_op(spec::op_kind k) const { return kind == node_kind::op && op == k; }
    std::string_view type_name() const {
        switch (kind) {
            case node_kind::input: return "input";
            case node_kind::weight: return "weight";
            case node_kind::opaque: return opaque ? std::string_view(opaque->type) : "opaque";
            default: return spec::name(op);
        }
    }
    // "name (type)" for error messages.
    std::string describe() const { return "node '" + name + "' (" + std::string(type_name()) + ")"; }
};

// Builder options, so model code reads like model code:
//   g.conv2d(x, w, {.stride = 2, .pad = same, .act = relu})
inline constexpr spec::pad_mode same = spec::pad_mode::same;
inline constexpr spec::pad_mode valid = spec::pad_mode::valid;
inline constexpr spec::activation relu = spec::activation::relu;
inline constexpr spec::activation no_activation = spec::activation::none;

struct conv_options {
    int stride = 1;
    int stride_h = 0, stride_w = 0;  // 0: use `stride`
    spec::pad_mode pad = same;
    spec::activation act = no_activation;
    int dilation = 1;
};
struct pool_options {
    int kernel = 3;
    int stride = 1;
    spec::pad_mode pad = same;
    spec::activation act = no_activation;
};
struct matmul_options {
    spec::activation act = no_activation;
};

class graph {
public:
    std::vector<node> nodes;
    std::vector<value> outputs;

    // ---- building -------------------------------------------------------
    value input(std::string name, shape s) {
        node n;
        n.kind = node_kind::input;
        n.name = std::move(name);
        n.shapes = {s};
        return push(std::move(n));
    }
    value weight(std::string name, tensor<float> t) {
        node n;
        n.kind = node_kind::weight;
        n.name = std::move(name);
        n.shapes = {t.shape};
        n.data = std::make_shared<const tensor<float>>(std::move(t));
        return push(std::move(n));
    }
    // Random weight, uniform in [-scale, scale] with scale = sqrt(3 / fan_in)
    // (fan_in = elements / extent of axis 0), which keeps activations of deep
    // models in a sane range.
    value weight(std::string name, shape s, std::mt19937_64& rng) {
        std::int64_t fan_in = s.rank > 0 && s[0] > 0 ? s.elements() / s[0] : 1;
        float scale = std::sqrt(3.f / static_cast<float>(std::max<std::int64_t>(fan_in, 1)));
        return weight(std::move(name), random_float(s, rng, -scale, scale));
    }

    // Adds a declared operator; returns its outputs. Throws tsopt::error
    // naming the node when the inputs do not fit the shape rule.
    std::vector<value> add(spec::op_kind k, const spec::op_params& p, std::vector<value> in, std::string name = {}) {
        node n;
        n.kind = node_kind::op;
        n.op = k;
        n.params = p;
        n.inputs = std::move(in);
        n.name = name.empty() ? auto_name(spec::name(k)) : std::move(name);
        n.shapes = infer(n);
        value v = push(std::move(n));
        std::vector<value> outs;
        for (int i = 0; i < nodes.back().num_outputs(); ++i) outs.push_back({v.node, i});
        return outs;
    }
    value add1(spec::op_kind k, const spec::op_params& p, std::vector<value> in, std::string name = {}) {
        return add(k, p, std::move(in), std::move(name))[0];
    }
    std::vector<value> opaque(std::shared_ptr<const opaque_op> op, std::vector<value> in, std::vector<shape> out_shapes,
                              std::string name = {}) {
        node n;
        n.kind = node_kind::opaque;
        n.inputs = std::move(in);
        n.shapes = std::move(out_shapes);
        n.name = name.empty() ? auto_name(op->type) : std::move(name);
        n.opaque = std::move(op);
        for (value v : n.inputs) check_ref(v, &n);
        value v = push(std::move(n));
        std::vector<value> outs;
        for (int i = 0; i < nodes.back().num_outputs(); ++i) outs.push_back({v.node, i});
        return outs;
    }

    value conv2d(value x, value w, conv_options o = {}, std::string name = {}) {
        spec::op_params p;
        p[spec::conv2d_p::stride_h] = o.stride_h ? o.stride_h : o.stride;
        p[spec::conv2d_p::stride_w] = o.stride_w ? o.stride_w : o.stride;
        p[spec::conv2d_p::pad] = static_cast<std::int32_t>(o.pad);
        p[spec::conv2d_p::act] = static_cast<std::int32_t>(o.act);
        p[spec::conv2d_p::dil_h] = p[spec::conv2d_p::dil_w] = o.dilation;
        return add1(spec::op_kind::conv2d, p, {x, w}, std::move(name));
    }
    value matmul(value a, value b, matmul_options o = {}, std::string name = {}) {
        spec::op_params p;
        p[spec::matmul_p::act] = static_cast<std::int32_t>(o.act);
        return add1(spec::op_kind::matmul, p, {a, b}, std::move(name));
    }
    value pool(spec::op_kind k, value x, pool_options o, std::string name) {
        spec::op_params p;
        p[spec::pool_p::kh] = p[spec::pool_p::kw] = o.kernel;
        p[spec::pool_p::stride_h] = p[spec::pool_p::stride_w] = o.stride;
        p[spec::pool_p::pad] = static_cast<std::int32_t>(o.pad);
        p[spec::pool_p::act] = static_cast<std::int32_t>(o.act);
        return add1(k, p, {x}, std::move(name));
    }
    value avgpool(value x, pool_options o = {}, std::string name = {}) { return pool(spec::op_kind::avgpool, x, o, std::move(name)); }
    value maxpool(value x, pool_options o = {}, std::string name = {}) { return pool(spec::op_kind::maxpool, x, o, std::move(name)); }
    value ewadd(value a, value b, std::string name = {}) { return add1(spec::op_kind::ewadd, {}, {a, b}, std::move(name)); }
    value ewmul(value a, value b, std::string name = {}) { return add1(spec::op_kind::ewmul, {}, {a, b}, std::move(name)); }
    value smul(value a, value s, std::string name = {}) { return add1(spec::op_kind::smul, {}, {a, s}, std::move(name)); }
    value relu(value a, std::string name = {}) { return add1(spec::op_kind::relu, {}, {a}, std::move(name)); }
    value sigmoid(value a, std::string name = {}) { return add1(spec::op_kind::sigmoid, {}, {a}, std::move(name)); }
    value tanh(value a, std::string name = {}) { return add1(spec::op_kind::tanh, {}, {a}, std::move(name)); }
    value batchnorm(value x, value scale, value shift, std::string name = {}) {
        return add1(spec::op_kind::batchnorm, {}, {x, scale, shift}, std::move(name));
    }
    value concat(int axis, std::vector<value> in, std::string name = {}) {
        spec::op_params p;
        p[spec::concat_p::axis] = axis;
        return add1(spec::op_kind::concat, p, std::move(in), std::move(name));
    }
    std::pair<value, value> split(int axis, int at, value x, std::string name = {}) {
        spec::op_params p;
        p[spec::split_p::axis] = axis;
        p[spec::split_p::at] = at;
        auto o = add(spec::op_kind::split, p, {x}, std::move(name));
        return {o[0], o[1]};
    }
    value transpose(value x, std::initializer_list<int> perm, std::string name = {}) {
        spec::op_params p;
        p[spec::transpose_p::perm] = spec::pack_perm(perm);
        return add1(spec::op_kind::transpose, p, {x}, std::move(name));
    }
    value reshape(value x, shape s, std::string name = {}) {
        spec::op_params p;
        if (s.rank > spec::max_params - 1) throw error("reshape '" + name + "': target rank " + std::to_string(s.rank) + " too large");
        p[spec::reshape_p::rank] = s.rank;
        for (int i = 0; i < s.rank; ++i) p[spec::reshape_p::d0 + i] = static_cast<std::int32_t>(s[i]);
        return add1(spec::op_kind::reshape, p, {x}, std::move(name));
    }
    value softmax(value x, int axis, std::string name = {}) {
        spec::op_params p;
        p[spec::softmax_p::axis] = axis;
        return add1(spec::op_kind::softmax, p, {x}, std::move(name));
    }
    value pad(value x, int top, int bottom, int left, int right, std::string name = {}) {
        spec::op_params p;
        p[spec::pad_p::top] = top; p[spec::pad_p::bottom] = bottom;
        p[spec::pad_p::left] = left; p[spec::pad_p::right] = right;
        return add1(spec::op_kind::pad, p, {x}, std::move(name));
    }
    void mark_output(value v) {
        check_ref(v, nullptr);
        outputs.push_back(v);
    }

    // ---- queries --------------------------------------------------------
    const node& at(value v) const { return nodes[static_cast<std::size_t>(v.node)]; }
    const shape& shape_of(value v) const { return at(v).shapes[static_cast<std::size_t>(v.output)]; }
    std::size_t size() const { return nodes.size(); }

    // Graph inputs in the order they were added: the order `execute` takes.
    std::vector<value> inputs() const {
        std::vector<value> r;
        for (std::size_t i = 0; i < nodes.size(); ++i)
            if (nodes[i].kind == node_kind::input) r.push_back({static_cast<std::int32_t>(i), 0});
        return r;
    }

    // Bytes this graph holds on its own: nodes, their input/shape lists and
    // names. Weight data and opaque attributes are shared between copies
    // (shared_ptr) and not counted. The search's memory budget adds these up
    // over the graphs it keeps queued.
    std::size_t footprint() const {
        std::size_t b = sizeof(graph) + nodes.capacity() * sizeof(node) + outputs.capacity() * sizeof(value);
        for (const node& n : nodes)
            b += n.inputs.capacity() * sizeof(value) + n.shapes.capacity() * sizeof(shape) +
                 (n.name.capacity() > 15 ? n.name.capacity() + 1 : 0);  // beyond the small-string buffer
        return b;
    }

    // Number of operator nodes (declared or opaque), not inputs/weights.
    std::size_t op_count() const {
        std::size_t n = 0;
        for (auto& nd : nodes) n += nd.kind == node_kind::op || nd.kind == node_kind::opaque;
        return n;
    }

    // For each node, the (consumer node, input slot) pairs reading each output.
    std::vector<std::vector<std::pair<std::int32_t, std::int32_t>>> consumers() const {
        std::vector<std::vector<std::pair<std::int32_t, std::int32_t>>> c(nodes.size());
        for (std::size_t i = 0; i < nodes.size(); ++i)
            for (std::size_t s = 0; s < nodes[i].inputs.size(); ++s)
                c[static_cast<std::size_t>(nodes[i].inputs[s].node)].push_back({static_cast<std::int32_t>(i), static_cast<std::int32_t>(s)});
        return c;
    }

    // True when a node's value is fixed at optimization time: a weight, a
    // constant operator, or an operator whose inputs are all such.
    std::vector<bool> constant_mask() const {
        std::vector<bool> k(nodes.size(), false);
        for_each_inputs_first([&](std::size_t i) {
            const node& n = nodes[i];
            if (n.kind == node_kind::weight) k[i] = true;
            else if (n.kind == node_kind::op) {
                bool all = true;
                for (value v : n.inputs) all = all && k[static_cast<std::size_t>(v.node)];
                k[i] = all;
            }
        });
        return k;
    }

    // Kahn's algorithm; throws naming a node on a cycle.
    std::vector<std::size_t> topological_order() const { return placed_all(kahn_order()); }

    // The order a backend runs operators in: the nodes of `settled` first
    // (the graph's inputs, weights and what is computed from weights alone:
    // there before the first operator runs; closed under inputs), then the
    // others as Kahn's stack takes them with every settled node done.
    // topological_order() waits for each weight where it lies in the node
    // list, so an operator reading a weight a rewrite appended (a folded
    // batch norm) ran only after every operator needing no such weight:
    // breadth first, its input long gone from the caches. Here an operator
    // follows the one whose output it reads, depth first, wherever its
    // weights lie.
    // `waits_for(i, placed)`: a node i would rather follow, if any (a
    // backend's step for i fuses an operator reading that node's output only
    // when it is there). i is then put aside until that node is placed, or
    // until nothing else is ready.
    using waiting_rule = std::function<std::optional<std::size_t>(std::size_t, const std::vector<bool>& placed)>;
    std::vector<std::size_t> run_order(const std::vector<bool>& settled, const waiting_rule& waits_for = {}) const {
        if (settled.size() != nodes.size()) throw error("run_order: the settled mask has the wrong size");
        return placed_all(kahn_order(&settled, waits_for ? &waits_for : nullptr));
    }
    bool acyclic() const { return kahn_order().size() == nodes.size(); }

    // Whether every node's inputs come before it (a compacted graph, one built
    // operator by operator): then 0, 1, ... is a topological order, and the
    // passes that need only some such order (constant_mask, node_hashes)
    // skip sorting.
    bool inputs_precede() const {
        for (std::size_t i = 0; i < nodes.size(); ++i)
            for (value v : nodes[i].inputs)
                if (v.node < 0 || static_cast<std::size_t>(v.node) >= i) return false;
        return true;
    }

    // Full check: references, acyclicity, shapes, outputs. Throws tsopt::error
    // naming the node at fault.
    void validate() const {
        for (const node& n : nodes) {
            for (value v : n.inputs) check_ref(v, &n);
            if (n.kind == node_kind::op) {
                auto s = infer(n);
                if (s != n.shapes) throw error(n.describe() + ": recorded shapes disagree with the shape rule");
            }
            if (n.kind == node_kind::weight && (!n.data || !(n.data->shape == n.shapes[0])))
                throw error(n.describe() + ": weight data missing or of the wrong shape");
        }
        (void)topological_order();
        if (outputs.empty()) throw error("graph has no outputs");
        for (value v : outputs) check_ref(v, nullptr);
    }

    // A copy holding only nodes that reach an output, in topological order,
    // with ids renumbered. Inputs are always kept (they are the interface).
    // On a graph about to be dropped, std::move(g).compacted() moves the
    // nodes instead of copying them.
    graph compacted() const& {
        return compact([&](std::size_t i) { return nodes[i]; });
    }
    graph compacted() && {
        return compact([&](std::size_t i) { return std::move(nodes[i]); });
    }
    // The same, telling where each node went: new_id[i] is node i's id in
    // the result, -1 for a node dropped.
    graph compacted(std::vector<std::int32_t>& new_id) && {
        return compact([&](std::size_t i) { return std::move(nodes[i]); }, &new_id);
    }
    // The same, or nullopt (the graph left as it was) when it has a cycle:
    // one topological sort serves the check and the compaction, which a rule
    // application in the search does for every graph it makes.
    std::optional<graph> compacted_if_acyclic(std::vector<std::int32_t>* new_id = nullptr) && {
        auto order = kahn_order();
        if (order.size() != nodes.size()) return std::nullopt;
        return compact([&](std::size_t i) { return std::move(nodes[i]); }, new_id, &order);
    }

    // How node_hashes names a weight: by the address of its data (cheap; the
    // same only within one process) or by its values (the same in every run).
    enum class weights_by { address, content };

    // Per-node Merkle hashes over the DAG: a node's hash covers its kind,
    // operator, parameters, layout, shapes and everything upstream, not its
    // id or its name (inputs hash by name, opaque operators by type and
    // attributes), nor the operand order of a commutative operator (a + b
    // and b + a hash alike, as the matcher binds them alike). Built from
    // core/hash.hpp's one hash, so the values of weights_by::content are the
    // same in every run on every machine.
    std::vector<std::uint64_t> node_hashes(weights_by weights) const {
        std::vector<std::uint64_t> h(nodes.size(), 0);
        for_each_inputs_first([&](std::size_t i) {
            h[i] = node_hash(nodes[i], nodes[i].inputs, weights, [&](value v) { return h[static_cast<std::size_t>(v.node)]; });
        });
        return h;
    }

    // One step of node_hashes: node n's hash when it reads `inputs` (its
    // own, or those a rewrite is about to give it) and hash_of(v) is the
    // hash of the node computing v. rewrite::apply hashes the graph an
    // application would make with it before making it.
    template <class HashOf>
    static std::uint64_t node_hash(const node& n, std::span<const value> inputs, weights_by weights, HashOf&& hash_of) {
        using hashing::combine;
        std::uint64_t x = combine(0x51ed270b27bd4f3dull, static_cast<std::uint64_t>(n.kind));
        switch (n.kind) {
            case node_kind::input: x = combine(x, hashing::fnv1a_of(n.name)); break;
            case node_kind::weight:
                if (weights == weights_by::address) x = combine(x, reinterpret_cast<std::uintptr_t>(n.data.get()));
                else if (n.data) x = combine(x, hashing::fnv1a{}.words(n.data->data.data(), n.data->data.size()).value);
                break;
            case node_kind::opaque:
                x = combine(x, hashing::fnv1a{}.text(n.opaque->type).text(n.opaque->attributes).value);
                break;
            case node_kind::op:
                x = combine(x, static_cast<std::uint64_t>(n.op));
                for (auto p : n.params.v) x = combine(x, static_cast<std::uint32_t>(p));
                break;
        }
        x = combine(x, static_cast<std::uint64_t>(n.out_layout));
        for (const shape& sh : n.shapes)
            for (auto d : sh) x = combine(x, static_cast<std::uint64_t>(d));
        auto operand = [&](value v) { return std::pair{hash_of(v), static_cast<std::uint64_t>(v.output)}; };
        auto add = [&](std::pair<std::uint64_t, std::uint64_t> o) { x = combine(combine(x, o.first), o.second); };
        if (n.kind == node_kind::op && inputs.size() == 2 && spec::decl(n.op).commutative) {
            const auto a = operand(inputs[0]), b = operand(inputs[1]);
            add(std::min(a, b));
            add(std::max(a, b));
        } else {
            for (value v : inputs) add(operand(v));
        }
        return x;
    }

    // Hash of what the graph computes: its outputs' node hashes, in order.
    std::uint64_t hash_of_outputs(weights_by weights) const {
        const auto h = node_hashes(weights);
        return outputs_hash(outputs, [&](value v) { return h[static_cast<std::size_t>(v.node)]; });
    }
    // hash_of_outputs's last step, for outputs `outs`.
    template <class HashOf>
    static std::uint64_t outputs_hash(std::span<const value> outs, HashOf&& hash_of) {
        std::uint64_t r = hashing::fnv_offset_basis;
        for (value v : outs) r = hashing::combine(hashing::combine(r, hash_of(v)), static_cast<std::uint64_t>(v.output));
        return r;
    }

    // Equal for graphs that compute the same expression with the same
    // operators, parameters, inputs and weights (the same weight objects),
    // whatever the node order and the operand order of commutative
    // operators. The search de-duplicates with it.
    std::uint64_t structural_hash() const { return hash_of_outputs(weights_by::address); }

    // Shapes an operator node would have from its inputs; throws naming it.
    std::vector<shape> infer(const node& n) const {
        std::vector<shape> in;
        for (value v : n.inputs) {
            check_ref(v, &n);
            in.push_back(shape_of(v));
        }
        std::vector<shape> out(static_cast<std::size_t>(spec::decl(n.op).num_outputs));
        if (auto e = spec::infer_shapes(n.op, n.params, in, out); !e.empty()) throw error(n.describe() + ": " + e);
        return out;
    }

private:
    // `order`, unless it left out a node: then the error names one on a cycle.
    std::vector<std::size_t> placed_all(std::vector<std::size_t> order) const {
        if (order.size() != nodes.size()) {
            std::vector<bool> placed(nodes.size(), false);
            for (std::size_t i : order) placed[i] = true;
            for (std::size_t i = 0; i < nodes.size(); ++i)
                if (!placed[i]) throw error("graph has a cycle through " + nodes[i].describe());
        }
        return order;
    }

    // Kahn's algorithm over the consumer lists, held in one array (the pass
    // runs several times per candidate graph in a search: a vector per node
    // made it mostly allocation). Short of size() when there is a cycle.
    // With `settled`: its nodes first, and an unsettled node waits only for
    // its unsettled inputs; `waits_for` puts nodes aside (run_order).
    std::vector<std::size_t> kahn_order(const std::vector<bool>* settled = nullptr,
                                        const waiting_rule* waits_for = nullptr) const {
        const std::size_t n = nodes.size();
        std::vector<std::size_t> first(n + 1, 0);  // node i's consumers: cons[first[i], first[i+1])
        for (std::size_t i = 0; i < n; ++i)
            for (value v : nodes[i].inputs) {
                if (v.node < 0 || static_cast<std::size_t>(v.node) >= n)
                    throw error(nodes[i].describe() + ": input refers to missing node " + std::to_string(v.node));
                ++first[static_cast<std::size_t>(v.node) + 1];
            }
        for (std::size_t i = 0; i < n; ++i) first[i + 1] += first[i];
        std::vector<std::int32_t> cons(first[n]);
        std::vector<std::size_t> fill(first.begin(), first.end() - 1);
        std::vector<int> indeg(n, 0);
        auto counts = [&](std::size_t producer, std::size_t reader) {
            return !settled || (*settled)[reader] || !(*settled)[producer];
        };
        for (std::size_t i = 0; i < n; ++i)
            for (value v : nodes[i].inputs) {
                const auto p = static_cast<std::size_t>(v.node);
                cons[fill[p]++] = static_cast<std::int32_t>(i);
                indeg[i] += counts(p, i);
            }
        std::vector<std::size_t> order, ready;
        order.reserve(n);
        std::vector<bool> placed(waits_for ? n : 0, false), released(placed.size(), false);
        std::vector<std::vector<std::size_t>> aside(placed.size());  // by the node they wait for
        std::size_t aside_count = 0;
        auto drain = [&] {
            for (;;) {
                if (ready.empty()) {
                    if (aside_count == 0) return;
                    // What waits for a node that cannot come first (it reads
                    // their outputs) goes now, in a fixed order.
                    for (std::size_t w = n; w-- > 0;)
                        for (std::size_t i : aside[w]) {
                            released[i] = true;
                            ready.push_back(i);
                        }
                    for (auto& a : aside) a.clear();
                    aside_count = 0;
                }
                std::size_t i = ready.back();
                ready.pop_back();
                if (waits_for && !released[i] && !(settled && (*settled)[i])) {
                    if (auto w = (*waits_for)(i, placed); w && *w < n && !placed[*w]) {
                        aside[*w].push_back(i);
                        ++aside_count;
                        continue;
                    }
                }
                order.push_back(i);
                for (std::size_t k = first[i + 1]; k-- > first[i];) {
                    const auto c = static_cast<std::size_t>(cons[k]);
                    if (counts(i, c) && --indeg[c] == 0) ready.push_back(c);
                }
                if (waits_for) {
                    placed[i] = true;
                    // Those that waited for i run right after it.
                    for (std::size_t a : aside[i]) ready.push_back(a);
                    aside_count -= aside[i].size();
                    aside[i].clear();
                }
            }
        };
        // Settled nodes first (all of them when there is no mask), then the
        // others whose inputs are all settled.
        for (bool later : {false, true}) {
            if (later && !settled) break;
            for (std::size_t i = n; i-- > 0;)
                if (indeg[i] == 0 && (!settled || (*settled)[i] != later)) ready.push_back(i);
            drain();
        }
        return order;
    }
    template <class F>
    void for_each_inputs_first(F&& f) const {
        if (inputs_precede()) {
            for (std::size_t i = 0; i < nodes.size(); ++i) f(i);
        } else {
            for (std::size_t i : topological_order()) f(i);
        }
    }
    // compacted()'s work; take(i) gives node i (a copy, or moved out).
    template <class Take>
    graph compact(Take&& take, std::vector<std::int32_t>* new_id = nullptr,
                  const std::vector<std::size_t>* sorted = nullptr) const {
        std::vector<bool> live(nodes.size(), false);
        std::vector<std::size_t> stack;
        for (value v : outputs) stack.push_back(static_cast<std::size_t>(v.node));
        while (!stack.empty()) {
            std::size_t i = stack.back();
            stack.pop_back();
            if (live[i]) continue;
            live[i] = true;
            for (value v : nodes[i].inputs) stack.push_back(static_cast<std::size_t>(v.node));
        }
        for (std::size_t i = 0; i < nodes.size(); ++i)
            if (nodes[i].kind == node_kind::input) live[i] = true;
        std::vector<std::int32_t> remap(nodes.size(), -1);
        std::vector<std::size_t> own;
        const auto& order = sorted ? *sorted : (own = topological_order());
        graph g;
        g.nodes.reserve(order.size());
        for (std::size_t i : order) {
            if (!live[i]) continue;
            remap[i] = static_cast<std::int32_t>(g.nodes.size());
            node n = take(i);
            for (value& v : n.inputs) v.node = remap[static_cast<std::size_t>(v.node)];
            g.nodes.push_back(std::move(n));
        }
        for (value v : outputs) g.outputs.push_back({remap[static_cast<std::size_t>(v.node)], v.output});
        if (new_id) *new_id = std::move(remap);
        return g;
    }

    value push(node n) {
        nodes.push_back(std::move(n));
        return {static_cast<std::int32_t>(nodes.size() - 1), 0};
    }
    std::string auto_name(std::string_view type) const { return std::string(type) + "_" + std::to_string(nodes.size()); }
    void check_ref(value v, const node* user) const {
        // Runs for every input of every node: the message is built only on failure.
        auto who = [&] { return user ? user->describe() : std::string("graph output"); };
        if (v.node < 0 || static_cast<std::size_t>(v.node) >= nodes.size())
            throw error(who() + ": input refers to missing node " + std::to_string(v.node));
        if (v.output < 0 || v.output >= at(v).num_outputs())
            throw error(who() + ": input refers to output " + std::to_string(v.output) + " of " + at(v).describe() +
                        ", which has " + std::to_string(at(v).num_outputs()));
    }
};

// `base`, else the first of base#2, base#3, ... that `taken` does not
// refuse: rewrites name every operator they make apart from all others, as
// derivations (search/derivation.hpp) locate operators by name.
template <class Taken>
std::string unused_name(const std::string& base, Taken&& taken) {
    if (!taken(base)) return base;
    for (int k = 2;; ++k)
        if (std::string alt = base + "#" + std::to_string(k); !taken(alt)) return alt;
}

}  // namespace tsopt
