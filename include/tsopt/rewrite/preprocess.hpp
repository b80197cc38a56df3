#pragma once
// Weight preprocessing (TASO §4: "operators whose inputs are all weights are
// computed once"):
//
//   graph g2 = rewrite::fold_constants(g);      // constant operators -> weights
//   graph g3 = rewrite::fold_batchnorm(g);      // batchnorm(conv(x, W)) -> conv(x, W') (+ bias)
//   graph g4 = rewrite::merge_duplicates(g);    // an operator computed twice, once
//   graph g5 = rewrite::preprocess(g);          // all three
//
// Every operator whose inputs are all weights or constants
// (graph::constant_mask) is evaluated with the reference semantics and
// replaced by weight nodes: an enlarged kernel, concatenated kernels, a cpool
// or iconv constant, a transposed weight matrix. A `fold_cache` shared across
// calls (the search keeps one) makes equal folds share one tensor, so graphs
// reached along different derivations hash equal: results are looked up by
// (operator, parameters, input tensors) and then by content.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tsopt/core/graph.hpp"

namespace tsopt::rewrite {

// Bounded: past `max_bytes` of folded tensors (4 concatenated kernels per
// conv merge, transposed matrices, ...) it starts over empty, so a long
// search holds at most that much in it: Inception-v3's grew by 600 MB in a
// 30 s search. Starting over costs only sharing (a later equal fold makes a
// new tensor, so a graph reached again may be explored again); every graph
// keeps the tensors it uses.
class fold_cache {
public:
    using ptr = std::shared_ptr<const tensor<float>>;
    static constexpr std::size_t default_max_bytes = std::size_t{256} << 20;

    explicit fold_cache(std::size_t max_bytes = default_max_bytes) : max_bytes_(max_bytes) {}

    // Outputs of op(params, inputs), computed once.
    std::vector<ptr> fold(spec::op_kind k, const spec::op_params& p, const std::vector<ptr>& in) {
        std::uint64_t key = hashing::combine(static_cast<std::uint64_t>(k) + 1, in.size());
        for (auto v : p.v) key = hashing::combine(key, static_cast<std::uint32_t>(v));
        for (const auto& t : in) key = hashing::combine(key, reinterpret_cast<std::uintptr_t>(t.get()));
        auto& bucket = by_op_[key];
        for (const auto& e : bucket)
            if (e.op == k && e.params == p && e.inputs == in) return e.outputs;
        std::vector<const tensor<float>*> args;
        for (const auto& t : in) args.push_back(t.get());
        auto res = spec::evaluate<float>(k, p, args);
        std::vector<ptr> outs;
        std::size_t added = 0;
        for (auto& t : res) {
            auto fresh = std::make_shared<const tensor<float>>(std::move(t));
            outs.push_back(intern(fresh));
            if (outs.back() == fresh) added += fresh->data.size() * sizeof(float);
        }
        bucket.push_back({k, p, in, outs});
        folded_bytes_ += added;
        if (folded_bytes_ > max_bytes_) start_over();
        return outs;
    }

    // The first registered tensor with this content (registers `t` if new).
    ptr intern(const ptr& t) {
        if (known_.count(t.get())) return t;
        auto& bucket = by_content_[content_key(*t)];
        for (const auto& e : bucket)
            if (*e == *t) return e;
        bucket.push_back(t);
        known_.insert(t.get());
        return t;
    }

    std::size_t size() const { return by_content_.size(); }
    std::size_t folded_bytes() const { return folded_bytes_; }
    std::size_t restarts() const { return restarts_; }

    // The bucket of a tensor: its shape and at most `sampled_values` evenly
    // spaced values. Equal tensors share a bucket, and intern compares
    // whole tensors within one, so the sample decides only how often a
    // comparison is made. Hashing every value instead took 40 % of a BERT
    // search: its 4 MiB matrices are registered again after each start_over.
    static constexpr std::size_t sampled_values = 1024;
    static std::uint64_t content_key(const tensor<float>& t) {
        std::uint64_t h = hashing::combine(static_cast<std::uint64_t>(t.shape.rank), static_cast<std::uint64_t>(t.size()));
        for (int i = 0; i < t.shape.rank; ++i) h = hashing::combine(h, static_cast<std::uint64_t>(t.shape[i]));
        const std::size_t n = t.data.size(), step = std::max<std::size_t>(1, n / sampled_values);
        hashing::fnv1a f;
        for (std::size_t i = 0; i < n; i += step) f.words(&t.data[i], 1);
        if (n > 0) f.words(&t.data[n - 1], 1);
        return hashing::combine(h, f.value);
    }

private:
    void start_over() {
        by_op_.clear();
        by_content_.clear();
        known_.clear();
        folded_bytes_ = 0;
        ++restarts_;
    }

    struct entry {
        spec::op_kind op;
        spec::op_params params;
        std::vector<ptr> inputs, outputs;
    };
    std::unordered_map<std::uint64_t, std::vector<entry>> by_op_;
    std::unordered_map<std::uint64_t, std::vector<ptr>> by_content_;
    std::unordered_set<const void*> known_;
    std::size_t max_bytes_, folded_bytes_ = 0, restarts_ = 0;
};

namespace detail {
// Folds g in place: each constant operator's outputs become weight nodes
// appended to g, their readers read those, and the operator is left dead
// (compacting drops it). False, g untouched, when there is nothing to fold.
inline bool fold_in_place(graph& g, fold_cache& cache) {
    // Register the graph's own weights, so a fold that reproduces one (an
    // enlarge to the kernel's own size) yields that very tensor.
    for (const node& n : g.nodes)
        if (n.kind == node_kind::weight && n.data) (void)cache.intern(n.data);
    auto mask = g.constant_mask();
    bool any = false;
    for (std::size_t i = 0; i < g.size() && !any; ++i) any = mask[i] && g.nodes[i].kind == node_kind::op;
    if (!any) {
        // Two weight nodes holding one tensor (merged below). Sorted, not
        // hashed: this runs for every graph the search makes.
        std::vector<const void*> data;
        for (const node& n : g.nodes)
            if (n.kind == node_kind::weight) data.push_back(n.data.get());
        std::sort(data.begin(), data.end());
        any = std::adjacent_find(data.begin(), data.end()) != data.end();
    }
    if (!any) return false;
    const std::size_t n0 = g.size();
    std::vector<node> added;  // the new weight nodes, ids n0, n0 + 1, ...
    auto at = [&](value v) -> const node& {
        const auto i = static_cast<std::size_t>(v.node);
        return i < n0 ? g.nodes[i] : added[i - n0];
    };
    std::vector<std::vector<value>> subst(n0);
    auto sub = [&](value v) {
        const auto& s = subst[static_cast<std::size_t>(v.node)];
        return s.empty() ? v : s[static_cast<std::size_t>(v.output)];
    };
    std::vector<std::pair<std::int32_t, value>> alias;  // new weight node -> the node it duplicates
    auto resolve = [&](value v) {
        if (static_cast<std::size_t>(v.node) < n0) v = sub(v);
        for (auto& [from, to] : alias)
            if (v.node == from) return to;
        return v;
    };
    for (std::size_t i : g.topological_order()) {
        const node& n = g.nodes[i];
        if (!mask[i] || n.kind != node_kind::op) continue;
        std::vector<fold_cache::ptr> in;
        for (value v : n.inputs) {
            const node& src = at(sub(v));
            if (src.kind != node_kind::weight || !src.data) throw error(n.describe() + ": constant input is not a weight");
            in.push_back(src.data);
        }
        std::vector<fold_cache::ptr> outs;
        try {
            outs = cache.fold(n.op, n.params, in);
        } catch (const error& e) {
            throw error(n.describe() + ": folding failed: " + e.what());
        }
        for (std::size_t o = 0; o < outs.size(); ++o) {
            node w;
            w.kind = node_kind::weight;
            w.name = o == 0 ? n.name : n.name + ":" + std::to_string(o);
            w.shapes = {outs[o]->shape};
            w.data = outs[o];
            w.out_layout = n.out_layout;
            subst[i].push_back({static_cast<std::int32_t>(n0 + added.size()), 0});
            added.push_back(std::move(w));
        }
    }
    for (node& w : added) g.nodes.push_back(std::move(w));
    // Weight nodes holding the same tensor become one node, so a tensor
    // variable of a rule binds them as one value.
    std::unordered_map<const void*, value> first;
    for (std::size_t i = 0; i < g.size(); ++i) {
        const node& n = g.nodes[i];
        if (n.kind != node_kind::weight) continue;
        auto [it, fresh] = first.try_emplace(n.data.get(), value{static_cast<std::int32_t>(i), 0});
        if (fresh) continue;
        if (i < n0) subst[i] = {it->second};
        else alias.push_back({static_cast<std::int32_t>(i), it->second});
    }
    for (node& n : g.nodes)
        for (value& v : n.inputs) v = resolve(v);
    for (value& v : g.outputs) v = resolve(v);
    return true;
}
}  // namespace detail

// Replaces every constant operator node by weight nodes (same names; a
// second output gets ":1"); returns g itself when there is none (copied, or
// moved when given an rvalue: the search folds every graph it generates).
inline graph fold_constants(const graph& g, fold_cache& cache) {
    graph ng = g;
    return detail::fold_in_place(ng, cache) ? std::move(ng).compacted() : ng;
}
inline graph fold_constants(graph&& g, fold_cache& cache) {
    return detail::fold_in_place(g, cache) ? std::move(g).compacted() : std::move(g);
}
inline graph fold_constants(const graph& g) {
    fold_cache c;
    return fold_constants(g, c);
}

// batchnorm(conv2d(x, W), scale, shift) with W, scale, shift constant, no
// fused activation on the conv, and the conv read only by the batchnorm:
// becomes conv2d(x, W * scale[co]) followed by ewadd with shift as a [C,1,1]
// weight (omitted when shift is zero). `only`: fold the batchnorm of that
// name alone. `folded`: receives (convolution, batchnorm) names per fold.
inline graph fold_batchnorm(const graph& g, std::string_view only = {},
                            std::vector<std::pair<std::string, std::string>>* folded = nullptr) {
    auto cons = g.consumers();
    graph ng = g;
    bool changed = false;
    for (std::size_t i = 0; i < g.size(); ++i) {
        const node& bn = g.nodes[i];
        if (!bn.is_op(spec::op_kind::batchnorm) || (!only.empty() && bn.name != only)) continue;
        value cv = bn.inputs[0];
        const node& conv = g.at(cv);
        if (!conv.is_op(spec::op_kind::conv2d) || conv.params[spec::conv2d_p::act] != 0) continue;
        if (cons[static_cast<std::size_t>(cv.node)].size() != 1) continue;
        bool outs = false;
        for (value o : g.outputs) outs = outs || o.node == cv.node;
        if (outs) continue;
        const node& wn = g.at(conv.inputs[1]);
        const node& sn = g.at(bn.inputs[1]);
        const node& tn = g.at(bn.inputs[2]);
        if (wn.kind != node_kind::weight || sn.kind != node_kind::weight || tn.kind != node_kind::weight) continue;
        tensor<float> w = *wn.data;
        const std::int64_t co = w.shape[0], per = w.size() / co;
        for (std::int64_t c = 0; c < co; ++c)
            for (std::int64_t k = 0; k < per; ++k) w[c * per + k] *= (*sn.data)[c];
        value nw = ng.weight(wn.name + ".bn", std::move(w));
        node& nc = ng.nodes[static_cast<std::size_t>(cv.node)];
        nc.inputs[1] = nw;
        bool zero = true;
        for (float x : tn.data->data) zero = zero && x == 0.f;
        value result = cv;
        if (!zero) {
            value b = ng.weight(tn.name + ".bias", tensor<float>(shape{co, 1, 1}, tn.data->data));
            result = ng.ewadd(cv, b, bn.name);
        }
        for (node& n : ng.nodes)
            for (value& v : n.inputs)
                if (v == value{static_cast<std::int32_t>(i), 0}) v = result;
        for (value& v : ng.outputs)
            if (v == value{static_cast<std::int32_t>(i), 0}) v = result;
        if (folded) folded->emplace_back(conv.name, bn.name);
        changed = true;
    }
    return changed ? std::move(ng).compacted() : g;
}

// An operator computed twice, once (ONNX Runtime's common subexpression
// elimination): an operator with the kind, parameters, output layout and
// inputs of an earlier one is dropped, and its readers read that one.
// NASNet-A's cells pool one input twice with the same window: zoo_nasnet_a
// ran 15 of its 51 average pools and 3 of its 6 max pools twice. Left
// alone: operators on constants (fold_constants shares equal folds), opaque
// operators (an unknown operator need not be a function of its inputs),
// and graph outputs (each keeps its own value). `merged`: the dropped
// operators' names.
inline graph merge_duplicates(const graph& g, std::vector<std::string>* merged = nullptr) {
    const auto constant = g.constant_mask();
    std::vector<bool> output(g.size(), false);
    for (value v : g.outputs) output[static_cast<std::size_t>(v.node)] = true;
    std::vector<std::int32_t> twin(g.size(), -1);  // the earlier operator a dropped one repeats
    std::unordered_map<std::uint64_t, std::vector<std::size_t>> kept;
    graph ng = g;
    bool changed = false;
    for (std::size_t i : g.topological_order()) {
        node& n = ng.nodes[i];
        for (value& v : n.inputs)
            if (const auto t = twin[static_cast<std::size_t>(v.node)]; t >= 0) v.node = t;
        if (n.kind != node_kind::op || constant[i]) continue;
        std::uint64_t key = hashing::combine(static_cast<std::uint64_t>(n.op) + 1, static_cast<std::uint64_t>(n.out_layout));
        for (auto p : n.params.v) key = hashing::combine(key, static_cast<std::uint32_t>(p));
        for (value v : n.inputs) key = hashing::combine(hashing::combine(key, static_cast<std::uint64_t>(v.node)), v.output);
        auto& bucket = kept[key];
        const auto same = std::find_if(bucket.begin(), bucket.end(), [&](std::size_t j) {
            const node& o = ng.nodes[j];
            return o.op == n.op && o.params == n.params && o.out_layout == n.out_layout && o.inputs == n.inputs;
        });
        if (same == bucket.end() || output[i]) {
            bucket.push_back(i);
            continue;
        }
        twin[i] = static_cast<std::int32_t>(*same);
        if (merged) merged->push_back(n.name);
        changed = true;
    }
    return changed ? std::move(ng).compacted() : g;
}

struct preprocess_options {
    bool fold_batchnorm = true;
    bool fold_constants = true;
    bool merge_duplicates = true;
};
inline graph preprocess(const graph& g, fold_cache& cache, preprocess_options o = {}) {
    graph r = o.merge_duplicates ? merge_duplicates(g) : g;
    r = o.fold_constants ? fold_constants(r, cache) : r;
    return o.fold_batchnorm ? fold_batchnorm(r) : r;
}
inline graph preprocess(const graph& g, preprocess_options o = {}) {
    fold_cache c;
    return preprocess(g, c, o);
}

}  // namespace tsopt::rewrite
