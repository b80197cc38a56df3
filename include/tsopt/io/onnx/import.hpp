#pragma once
// ONNX -> tsopt graph. Operators with a declared counterpart map onto it when
// the mapping is exact (see the table in tsopt/onnx.hpp); every other operator
// becomes an opaque node carrying its serialized attributes and its output
// shapes (from the model's value_info or ONNX shape inference), so the model
// round-trips and the rest of it is still optimized.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <deque>
#include <fstream>
#include <future>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <span>
#include <type_traits>

// proto.hpp first: it defines ONNX_ML and ONNX_NAMESPACE, which the ONNX
// headers below need to find onnx/onnx-ml.pb.h (a consumer compiling without
// -DONNX_ML got "onnx/onnx.pb.h: No such file").
#include "tsopt/io/onnx/proto.hpp"
#include "tsopt/io/onnx/external_data.hpp"

#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

namespace tsopt::onnx {

struct import_options {
    // Value for a dynamic leading (batch) dimension of graph inputs; 0: none given.
    std::int64_t batch = 0;
    // Values for named symbolic dimensions (dim_param), e.g. {"seq", 128}.
    std::map<std::string, std::int64_t, std::less<>> dims{};
    // Run ONNX shape inference when an opaque node's output shape is not in
    // the model's value_info.
    bool shape_inference = true;
};

// An imported model: the graph plus what the graph IR does not keep and an
// export needs to reproduce the file's interface.
struct model {
    tsopt::graph graph;
    std::vector<std::string> output_names;                   // ONNX names of graph.outputs
    std::int64_t opset = 0;                                   // default-domain opset of the file
    std::vector<std::pair<std::string, std::int64_t>> other_opsets;  // custom domains
    std::string producer;
};

namespace detail {

// ONNX's multidirectional broadcasting: the extents the shapes `in`
// broadcast to, or an error naming them (`who`: the node) where they do not.
inline shape broadcast_shapes(std::span<const shape> in, const std::string& who) {
    int rank = 0;
    for (const shape& s : in) rank = std::max(rank, s.rank);
    shape out;
    for (int d = 0; d < rank; ++d) {
        std::int64_t e = 1;
        for (const shape& s : in) {
            const int at = d - (rank - s.rank);
            const std::int64_t x = at >= 0 ? s[at] : 1;
            if (x != 1 && e != 1 && x != e) {
                std::string shapes;
                for (const shape& q : in) shapes += (shapes.empty() ? "" : " and ") + q.str();
                throw error(who + ": shapes " + shapes + " do not broadcast");
            }
            if (x != 1) e = x;
        }
        out.push_back(e);
    }
    return out;
}

struct declared_shape {
    std::int32_t elem = 0;
    bool has_shape = false;
    shape s;
    std::array<bool, max_rank> fixed{};
};

class importer {
public:
    importer(const pb::ModelProto& m, const import_options& o) : m_(m), o_(o) {}

    model run() {
        model r;
        r.opset = check_opset(r);
        opset_ = r.opset;
        r.producer = m_.producer_name();
        if (!m_.has_graph()) throw error("model has no graph");
        const pb::GraphProto& gp = m_.graph();
        if (gp.sparse_initializer_size() > 0) throw error("graph: sparse initializers are not supported");
        for (const auto& vi : gp.value_info()) declare(vi, "value_info");
        for (const auto& vi : gp.output()) declare(vi, "graph output");
        for (int i = 0; i < gp.initializer_size(); ++i) {
            const auto& t = gp.initializer(i);
            if (t.name().empty()) throw error("initializer #" + std::to_string(i) + " has no name");
            if (syms_.count(t.name())) throw error("initializer '" + t.name() + "' is defined twice");
            check_initializer(t);
            syms_[t.name()].c = &t;
        }
        std::set<std::string, std::less<>> input_names;
        for (const auto& vi : gp.input()) {
            if (!input_names.insert(vi.name()).second) throw error("graph input '" + vi.name() + "' is listed twice");
            if (!syms_.count(vi.name())) add_input(vi);  // an initializer listed as an input (IR < 4) is a constant
        }
        // The strict check needs only the inputs' shapes, so it runs on a
        // second thread while the nodes are read (on a 100k-node chain each
        // took about half of import). Its verdict is taken where the check
        // used to run, so which error a bad model gets does not change.
        google::protobuf::Arena strict_arena;
        std::future<void> strict = start_strict_check(strict_arena);
        for (int i = 0; i < gp.node_size(); ++i) add_node(gp.node(i), i);
        for (const auto& vi : gp.output()) {
            g_.mark_output(as_value(vi.name(), "graph output '" + vi.name() + "'"));
            r.output_names.push_back(vi.name());
        }
        if (gp.output_size() == 0) throw error("graph has no outputs");
        if (strict.valid()) strict.get();
        g_.validate();
        r.graph = transposes_cancelled_ ? g_.compacted() : std::move(g_);
        return r;
    }

private:
    struct sym {
        std::optional<value> v;
        const pb::TensorProto* c = nullptr;
    };

    const pb::ModelProto& m_;
    const import_options& o_;
    std::int64_t opset_ = 0;
    graph g_;
    bool transposes_cancelled_ = false;  // a Transpose pair became the identity: its first half is dead
    // A layout conversion (`reorder`) is written as an Identity and a layout
    // pair: the layout is the conversion's, not its input's producer's, and
    // the Identity is dropped, so that pair gives no layout back (it made
    // SqueezeNet's first max pool channels-last after a blocked convolution,
    // oneDNN's reference kernel, 77 ms instead of 0.1). The backends convert
    // where a reader needs it, as for the graph that was written
    // (backend::bypass_layout_conversions). ONNX names of Identity outputs,
    // and the first Transposes reading one.
    std::set<std::string, std::less<>> identity_outputs_;
    std::set<std::int32_t> conversion_pairs_;
    // The pair exporter::express_layout writes for a value stored in another
    // layout (its first Transpose named `<name>/nhwc` or `<name>/col_major`)
    // gives that layout back to the operator computing the value, so the
    // written model runs as the graph that was timed before it was written
    // (tsopt optimize's end-to-end pick): without it, a candidate whose NHWC
    // choices were timed ran with none of them once read back.
    // `second_perm` is the pair's second (undoing) permutation.
    void restore_layout(const node& first, const std::vector<std::int64_t>& second_perm) {
        const auto ends_with = [](const std::string& name, std::string_view suffix) {
            return name.size() > suffix.size() && std::string_view(name).ends_with(suffix);
        };
        const int r = static_cast<int>(second_perm.size());
        std::optional<spec::layout> l;
        if (r == 4 && second_perm == std::vector<std::int64_t>{0, 3, 1, 2} && ends_with(first.name, "/nhwc")) l = spec::layout::nhwc;
        if (r >= 2 && ends_with(first.name, "/col_major")) {
            bool swap = second_perm[static_cast<std::size_t>(r - 2)] == r - 1 && second_perm[static_cast<std::size_t>(r - 1)] == r - 2;
            for (int k = 0; k < r - 2; ++k) swap = swap && second_perm[static_cast<std::size_t>(k)] == k;
            if (swap) l = spec::layout::col_major;
        }
        if (!l) return;
        // An operator with a fused activation is written as its ONNX
        // computation (output `<name>/pre_act`) and the activation: both
        // take the layout, so that they fuse again in the backend.
        for (value v = first.inputs[0];;) {
            node& producer = g_.nodes[static_cast<std::size_t>(v.node)];
            if (producer.kind != node_kind::op || producer.num_outputs() != 1 || producer.out_layout != spec::layout::row_major)
                return;
            const spec::layout_mask m = spec::decl(producer.op).layouts;
            if (m == spec::any_layout || !(m & (1u << static_cast<int>(*l)))) return;
            producer.out_layout = *l;
            const bool activation = producer.is_op(spec::op_kind::relu) || producer.is_op(spec::op_kind::sigmoid) ||
                                    producer.is_op(spec::op_kind::tanh);
            if (!activation || !ends_with(g_.at(producer.inputs[0]).name, "/pre_act")) return;
            v = producer.inputs[0];
        }
    }
    std::map<std::string, sym, std::less<>> syms_;
    std::map<std::string, declared_shape, std::less<>> declared_, inferred_;
    std::deque<pb::TensorProto> owned_;                           // tensors made from Constant attributes
    bool inferred_done_ = false;

    // ---- model level ----------------------------------------------------
    // Every initializer, read or not, has a defined element type and as many
    // raw bytes as its shape needs (onnx.checker's rule): a model that breaks
    // either is malformed even where tsopt never reads the tensor.
    static void check_initializer(const pb::TensorProto& t) {
        const std::string what = "initializer '" + t.name() + "'";
        if (t.data_type() == pb::TensorProto::UNDEFINED || !pb::TensorProto::DataType_IsValid(t.data_type()))
            throw error(what + ": element type " + std::to_string(t.data_type()) + " is undefined");
        const std::int64_t size = element_size(t.data_type());
        if (!t.has_raw_data() || size == 0 || t.data_location() == pb::TensorProto::EXTERNAL) return;
        std::int64_t n = 1;
        for (auto d : t.dims()) {
            if (d < 0 || d > max_extent) return;  // reported with the tensor's shape where it is read
            n *= d;
            if (n > max_elements) return;
        }
        if (static_cast<std::int64_t>(t.raw_data().size()) != n * size)
            throw error(what + ": raw_data holds " + std::to_string(t.raw_data().size()) + " bytes, its shape and type (" +
                        type_name(t.data_type()) + ") need " + std::to_string(n * size));
    }

    // A domain listed twice is refused: readers disagree on which entry
    // counts (ONNX Runtime takes the first, libonnx's inference one that let
    // Div of [3,4,5] by [3,36,5] through at opset 5), so the model would mean
    // one thing here and another to the runtime reading tsopt's output.
    std::int64_t check_opset(model& r) const {
        std::int64_t v = -1;
        std::map<std::string, std::int64_t> seen;
        for (const auto& o : m_.opset_import()) {
            const bool onnx_domain = o.domain().empty() || o.domain() == "ai.onnx";
            const std::string domain = onnx_domain ? std::string("ai.onnx") : o.domain();
            if (auto [at, fresh] = seen.try_emplace(domain, o.version()); !fresh)
                throw error("opset_import: the domain " + domain + " is listed twice (opsets " + std::to_string(at->second) +
                            " and " + std::to_string(o.version()) + "); a model imports each domain once");
            if (onnx_domain) v = o.version();
            else r.other_opsets.push_back({o.domain(), o.version()});
        }
        if (v < 0) throw error("opset_import: no entry for the default ONNX domain (ai.onnx)");
        if (v < min_opset || v > max_opset)
            throw error("opset_import: default-domain opset " + std::to_string(v) + " is outside the supported range " +
                        std::to_string(min_opset) + ".." + std::to_string(max_opset));
        return v;
    }

    static std::optional<declared_shape> read_type(const pb::ValueInfoProto& vi) {
        if (!vi.has_type() || !vi.type().has_tensor_type()) return std::nullopt;
        const auto& tt = vi.type().tensor_type();
        declared_shape d;
        d.elem = tt.elem_type();
        if (tt.has_shape()) {
            if (tt.shape().dim_size() > max_rank)
                throw error("value '" + vi.name() + "': rank " + std::to_string(tt.shape().dim_size()) +
                            " exceeds tsopt's maximum " + std::to_string(max_rank));
            d.has_shape = true;
            for (int i = 0; i < tt.shape().dim_size(); ++i) {
                const auto& dim = tt.shape().dim(i);
                bool fixed = dim.has_dim_value() && dim.dim_value() > 0;
                d.fixed[static_cast<std::size_t>(i)] = fixed;
                d.s.push_back(fixed ? std::min(dim.dim_value(), max_extent) : 0);
            }
        }
        return d;
    }
    void declare(const pb::ValueInfoProto& vi, const char*) {
        if (auto d = read_type(vi)) declared_[vi.name()] = *d;
    }

    void add_input(const pb::ValueInfoProto& vi) {
        std::string who = "graph input '" + vi.name() + "'";
        if (vi.name().empty()) throw error("graph input with an empty name");
        if (!vi.has_type() || !vi.type().has_tensor_type()) throw error(who + ": not a tensor");
        const auto& tt = vi.type().tensor_type();
        if (tt.elem_type() != pb::TensorProto::FLOAT)
            throw error(who + ": element type " + type_name(tt.elem_type()) + "; tsopt graphs carry float32 tensors");
        if (!tt.has_shape()) throw error(who + ": has no shape");
        if (tt.shape().dim_size() > max_rank)
            throw error(who + ": rank " + std::to_string(tt.shape().dim_size()) + " exceeds tsopt's maximum " +
                        std::to_string(max_rank));
        shape s;
        for (int i = 0; i < tt.shape().dim_size(); ++i) {
            const auto& d = tt.shape().dim(i);
            std::int64_t x = 0;
            if (d.has_dim_value() && d.dim_value() > 0) x = d.dim_value();
            else if (d.has_dim_param() && o_.dims.count(d.dim_param())) x = o_.dims.find(d.dim_param())->second;
            else if (i == 0 && o_.batch > 0) x = o_.batch;
            else if (d.has_dim_value())
                // Some exporters write -1 or 0 for an unknown extent; others
                // are simply wrong. Say which value it is rather than "dynamic".
                throw error(who + ": dimension " + std::to_string(i) + " has extent " + std::to_string(d.dim_value()) +
                            ", which is not positive (if the exporter meant it as dynamic, give its value with "
                            "import_options::batch or import_options::dims)");
            else
                throw error(who + ": dimension " + std::to_string(i) +
                            (d.has_dim_param() ? " ('" + d.dim_param() + "')" : std::string()) +
                            " is dynamic; give its value with import_options::batch or import_options::dims");
            if (x <= 0 || x > max_extent) throw error(who + ": dimension " + std::to_string(i) + " has extent " + std::to_string(x));
            s.push_back(x);
        }
        if (bounded_elements(s) > max_elements) throw error(who + ": too many elements");
        if (syms_.count(vi.name())) throw error(who + ": defined twice");
        check_declared(vi.name(), s, who);
        syms_[vi.name()].v = g_.input(vi.name(), s);
    }

    // ---- symbols ----------------------------------------------------------
    const pb::TensorProto* const_of(const std::string& name) const {
        auto it = syms_.find(name);
        return it == syms_.end() ? nullptr : it->second.c;
    }
    value as_value(const std::string& name, const std::string& who) {
        auto it = syms_.find(name);
        if (name.empty() || it == syms_.end())
            throw error(who + ": input '" + name + "' is not produced by any node, graph input or initializer");
        sym& s = it->second;
        if (!s.v) s.v = g_.weight(name, to_float_tensor(*s.c, who + ": constant '" + name + "'"));
        return *s.v;
    }
    value in(const pb::NodeProto& n, int i, const std::string& who) {
        if (i >= n.input_size() || n.input(i).empty())
            throw error(who + ": input " + std::to_string(i) + " is missing");
        return as_value(n.input(i), who);
    }
    bool has_in(const pb::NodeProto& n, int i) const { return i < n.input_size() && !n.input(i).empty(); }
    std::vector<std::int64_t> const_ints(const pb::NodeProto& n, int i, const std::string& who, const char* what) {
        auto* c = has_in(n, i) ? const_of(n.input(i)) : nullptr;
        if (!c)
            throw error(who + ": input " + std::to_string(i) + " ('" + (i < n.input_size() ? n.input(i) : std::string()) +
                        "', " + what + ") must be a constant (initializer or Constant node)");
        return to_ints(*c, who + ": " + what + " '" + n.input(i) + "'");
    }
    void define(const std::string& name, value v, const std::string& who) {
        if (name.empty()) return;
        sym& s = syms_[name];
        if (s.v || s.c) throw error(who + ": output '" + name + "' is already defined earlier in the graph");
        s.v = v;
    }

    // ---- nodes --------------------------------------------------------------
    void add_node(const pb::NodeProto& n, int index) {
        std::string label = n.name().empty() ? (n.output_size() ? n.output(0) : "#" + std::to_string(index)) : n.name();
        std::string who = "node '" + label + "' (" + n.op_type() + ")";
        if (n.output_size() == 0) throw error(who + ": has no outputs");
        try {
            bool standard = n.domain().empty() || n.domain() == "ai.onnx";
            check_references(n, who);
            if (standard) check_arity(n, who);
            if (standard && n.op_type() == "Constant") return add_constant(n, who);
            // An Identity of a constant is that constant: PyTorch's exporter
            // writes one where two parameters hold equal values (a fresh
            // BatchNormalization's bias and running mean are both zeros), and
            // operators that need constant inputs must still see one.
            if (standard && n.op_type() == "Identity" && n.output_size() == 1 && !n.output(0).empty() && has_in(n, 0))
                if (const pb::TensorProto* c = const_of(n.input(0))) {
                    sym& s = syms_[n.output(0)];
                    if (s.v || s.c) throw error(who + ": output '" + n.output(0) + "' is already defined earlier in the graph");
                    s.c = c;
                    return;
                }
            if (standard && fold_constant(n, who)) return;
            std::vector<value> outs;
            if (standard) outs = map_standard(n, who);
            const bool engine = n.domain() == engine_domain && outs.empty() && !(outs = map_engine_op(n, label, who)).empty();
            if (outs.empty()) outs = make_opaque(n, who);
            if (engine || (n.op_type() == "Split" && standard && outs.size() == static_cast<std::size_t>(n.output_size()))) {
                for (int k = 0; k < n.output_size(); ++k) finish(n.output(k), outs[static_cast<std::size_t>(k)], who);
            } else if (!outs.empty() && g_.at(outs[0]).kind == node_kind::opaque) {
                // Opaque outputs follow the non-empty output slots.
                std::size_t j = 0;
                for (int k = 0; k < n.output_size(); ++k)
                    if (!n.output(k).empty()) finish(n.output(k), outs[j++], who);
            } else {
                finish(n.output(0), outs[0], who);
            }
        } catch (const error& e) {
            std::string m = e.what();
            if (m.rfind(who, 0) == 0) throw;
            throw error(who + ": " + m);
        }
    }

    // Every named input is its node's own output neither directly nor
    // (since nodes are in topological order) otherwise, and is defined
    // before the node: an invalid graph is rejected, never repaired.
    void check_references(const pb::NodeProto& n, const std::string& who) const {
        for (const std::string& nm : n.input()) {
            if (nm.empty()) continue;
            for (const std::string& o : n.output())
                if (o == nm) throw error(who + ": input '" + nm + "' is the node's own output (a cycle)");
            if (!syms_.count(nm))
                throw error(who + ": input '" + nm + "' is not produced by any node, graph input or initializer");
        }
    }
    // Input and output counts within the operator's ONNX schema at the
    // model's opset (operators libonnx does not know are left to the opaque
    // path, which keeps every input).
    void check_arity(const pb::NodeProto& n, const std::string& who) const {
        const auto* schema = ::onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(opset_), "");
        // The default domain holds ONNX's operators only (onnx.checker rejects
        // others too); a custom operator belongs in its own domain, where it
        // becomes an opaque node.
        if (!schema)
            throw error(who + ": '" + n.op_type() + "' is not an ONNX operator at opset " + std::to_string(opset_) +
                        " (a custom operator needs its own domain, e.g. com.example)");
        if (std::string why = schema_violation(n, *schema); !why.empty()) throw error(who + ": " + why);
        auto range = [](int lo, int hi) {
            return hi == std::numeric_limits<int>::max() ? "at least " + std::to_string(lo)
                   : lo == hi                             ? std::to_string(lo)
                                                          : std::to_string(lo) + ".." + std::to_string(hi);
        };
        if (n.input_size() < schema->min_input() || n.input_size() > schema->max_input())
            throw error(who + ": has " + std::to_string(n.input_size()) + " inputs; " + n.op_type() + " (opset " +
                        std::to_string(opset_) + ") takes " + range(schema->min_input(), schema->max_input()));
        if (n.output_size() < schema->min_output() || n.output_size() > schema->max_output())
            throw error(who + ": has " + std::to_string(n.output_size()) + " outputs; " + n.op_type() + " (opset " +
                        std::to_string(opset_) + ") gives " + range(schema->min_output(), schema->max_output()));
    }

    // Binds an output name and checks it against the model's declared shape.
    void finish(const std::string& name, value v, const std::string& who) {
        const shape& s = g_.shape_of(v);
        if (bounded_elements(s) > max_elements) throw error(who + ": output '" + name + "' has too many elements " + s.str());
        for (int i = 0; i < s.rank; ++i)
            if (s[i] > max_extent) throw error(who + ": output '" + name + "' has too large an extent " + s.str());
        check_declared(name, s, who + ": output '" + name + "'");
        define(name, v, who);
    }
    // A value_info or graph output entry must agree with the value it names,
    // graph inputs included: ONNX shape inference takes the declaration over
    // the input's own shape, so a contradicting one gave the opaque nodes
    // reading that input shapes their re-import then refused.
    void check_declared(const std::string& name, const shape& s, const std::string& what) const {
        auto it = declared_.find(name);
        if (it == declared_.end()) return;
        const declared_shape& d = it->second;
        if (d.elem != 0 && d.elem != pb::TensorProto::FLOAT)
            throw error(what + " is declared " + type_name(d.elem) + "; tsopt graphs carry float32 tensors");
        bool ok = !d.has_shape || d.s.rank == s.rank;
        for (int i = 0; ok && d.has_shape && i < s.rank; ++i) ok = !d.fixed[static_cast<std::size_t>(i)] || d.s[i] == s[i];
        if (!ok) throw error(what + " is declared with shape " + shape_text(d) + " in the model but is " + s.str());
    }
    static std::string shape_text(const declared_shape& d) {
        std::string r = "[";
        for (int i = 0; i < d.s.rank; ++i)
            r += (i ? "," : "") + (d.fixed[static_cast<std::size_t>(i)] ? std::to_string(d.s[i]) : std::string("?"));
        return r + "]";
    }

    void add_constant(const pb::NodeProto& n, const std::string& who) {
        attributes a(n, who);
        pb::TensorProto t;
        if (auto* v = a.find("value")) {
            if (v->type() != pb::AttributeProto::TENSOR) a.fail("value", "must be a tensor");
            t = v->t();
        } else if (a.has("value_float")) {
            t.set_data_type(pb::TensorProto::FLOAT);
            t.add_float_data(a.get_float("value_float", 0));
        } else if (a.has("value_floats")) {
            auto* v = a.find("value_floats");
            t.set_data_type(pb::TensorProto::FLOAT);
            t.add_dims(v->floats_size());
            for (float f : v->floats()) t.add_float_data(f);
        } else if (a.has("value_int")) {
            t.set_data_type(pb::TensorProto::INT64);
            t.add_int64_data(a.get_int("value_int", 0));
        } else if (a.has("value_ints")) {
            auto v = a.get_ints("value_ints", {});
            t.set_data_type(pb::TensorProto::INT64);
            t.add_dims(static_cast<std::int64_t>(v.size()));
            for (auto x : v) t.add_int64_data(x);
        } else {
            throw error(who + ": needs one of the attributes value, value_float(s), value_int(s)");
        }
        (void)tensor_shape(t, who + ": value", true);  // validates rank and extents
        t.set_name(n.output(0));
        owned_.push_back(std::move(t));
        if (n.output(0).empty()) return;
        sym& s = syms_[n.output(0)];
        if (s.v || s.c) throw error(who + ": output '" + n.output(0) + "' is already defined earlier in the graph");
        s.c = &owned_.back();
    }

    // ---- constant subgraphs, folded at import ----------------------------
    // Exporters compute reshape targets from the input's shape (Shape ->
    // Gather -> Unsqueeze -> Concat -> Reshape, with Cast, arithmetic,
    // Slice, Squeeze). tsopt shapes are static, so such chains are
    // constants: they are evaluated here (int64) and bound as constants,
    // and the operators reading them (Reshape, Expand, ...) see constants.
    // The same operators over small float and bool constants are evaluated
    // too (in double, each result rounded to float32 as ONNX computes it):
    // Swin builds its shifted-window attention mask from zeros, ScatterND,
    // Equal and Where, all of it constant, and bool tensors have no place in
    // a tsopt graph.
    template <class T>
    struct folded {
        shape s;
        std::vector<T> v;                        // booleans are 0 / 1
        int type = pb::TensorProto::INT64;       // INT64 (integers and booleans) or FLOAT
    };
    // Constant input i for the integer (T = int64) or the float (T = double)
    // evaluation: integers only for the first; float, bool and integers,
    // at most max_folded elements, for the second.
    template <class T>
    std::optional<folded<T>> const_in(const pb::NodeProto& n, int i, const std::string& who) const {
        if (!has_in(n, i)) return std::nullopt;
        auto* c = const_of(n.input(i));
        if (!c) return std::nullopt;
        const std::string what = who + ": constant '" + n.input(i) + "'";
        const bool integer = c->data_type() == pb::TensorProto::INT64 || c->data_type() == pb::TensorProto::INT32;
        folded<T> r;
        if constexpr (std::is_integral_v<T>) {
            if (!integer) return std::nullopt;
            r.s = tensor_shape(*c, what, true);
            r.v = to_ints(*c, what);
        } else {
            const bool real = c->data_type() == pb::TensorProto::FLOAT || c->data_type() == pb::TensorProto::DOUBLE;
            if (!integer && !real && c->data_type() != pb::TensorProto::BOOL) return std::nullopt;
            r.s = tensor_shape(*c, what, true);
            if (r.s.elements() > max_folded) return std::nullopt;
            if (real) {
                auto f = to_float_tensor(*c, what);
                r.v.assign(f.data.begin(), f.data.end());
                r.type = pb::TensorProto::FLOAT;
            } else if (integer) {
                // Within +-2^53, exact in double; larger ones are "to the end" markers (Slice's ends).
                for (auto x : to_ints(*c, what)) r.v.push_back(static_cast<double>(std::clamp<std::int64_t>(x, -(std::int64_t{1} << 53), std::int64_t{1} << 53)));
            } else {
                check_stored(*c, what);
                std::vector<std::uint8_t> b = c->has_raw_data() ? from_raw<std::uint8_t>(*c, r.s.elements(), what)
                                                                : std::vector<std::uint8_t>(c->int32_data().begin(), c->int32_data().end());
                if (static_cast<std::int64_t>(b.size()) != r.s.elements()) throw error(what + ": holds " + std::to_string(b.size()) + " booleans, shape needs " + std::to_string(r.s.elements()));
                for (auto x : b) r.v.push_back(x != 0);
            }
        }
        return r;
    }
    static constexpr std::int64_t max_folded = std::int64_t{1} << 20;
    template <class T>
    void bind(const pb::NodeProto& n, const folded<T>& t, const std::string& who) {
        if (t.v.size() > static_cast<std::size_t>(max_folded)) throw error(who + ": folded constant tensor is too large");
        pb::TensorProto p;
        p.set_name(n.output(0));
        p.set_data_type(t.type);
        for (auto d : t.s) p.add_dims(d);
        if (t.type == pb::TensorProto::FLOAT)
            for (auto x : t.v) p.add_float_data(static_cast<float>(x));
        else
            for (auto x : t.v) p.add_int64_data(static_cast<std::int64_t>(x));
        owned_.push_back(std::move(p));
        sym& s = syms_[n.output(0)];
        if (s.v || s.c) throw error(who + ": output '" + n.output(0) + "' is already defined earlier in the graph");
        s.c = &owned_.back();
    }
    static std::int64_t norm_axis(std::int64_t a, std::int64_t rank, const std::string& who) {
        if (a < -rank || a >= rank) throw error(who + ": axis " + std::to_string(a) + " is outside [-" + std::to_string(rank) + ", " + std::to_string(rank) + ")");
        return a < 0 ? a + rank : a;
    }
    // The shape Unsqueeze or Squeeze gives x with these axes; none beyond
    // max_rank.
    std::optional<shape> squeezed(bool unsqueeze, const shape& x, const std::vector<std::int64_t>& axes, const attributes& a,
                                  const std::string& who) const {
        if (opset_ >= 13 && a.has("axes")) a.fail("axes", "is an input from opset 13 on, not an attribute");
        shape out;
        if (unsqueeze) {
            std::int64_t r = x.rank + static_cast<std::int64_t>(axes.size());
            if (r > max_rank) return std::nullopt;
            std::vector<bool> ins(static_cast<std::size_t>(r), false);
            for (auto ax : axes) {
                auto k = static_cast<std::size_t>(norm_axis(ax, r, who));
                if (ins[k]) throw error(who + ": axis " + std::to_string(ax) + " is repeated");
                ins[k] = true;
            }
            for (std::int64_t d = 0, j = 0; d < r; ++d) out.push_back(ins[static_cast<std::size_t>(d)] ? 1 : x[static_cast<int>(j++)]);
            return out;
        }
        std::vector<bool> drop(static_cast<std::size_t>(x.rank), axes.empty());
        for (auto ax : axes) drop[static_cast<std::size_t>(norm_axis(ax, x.rank, who))] = true;
        for (int d = 0; d < x.rank; ++d) {
            if (drop[static_cast<std::size_t>(d)] && x[d] != 1) {
                if (!axes.empty()) throw error(who + ": cannot squeeze axis " + std::to_string(d) + " of extent " + std::to_string(x[d]));
                drop[static_cast<std::size_t>(d)] = false;
            }
            if (!drop[static_cast<std::size_t>(d)]) out.push_back(x[d]);
        }
        return out;
    }
    static std::vector<std::int64_t> strides(const shape& s) {
        std::vector<std::int64_t> st(static_cast<std::size_t>(s.rank), 1);
        for (int d = s.rank - 2; d >= 0; --d) st[static_cast<std::size_t>(d)] = st[static_cast<std::size_t>(d + 1)] * s[d + 1];
        return st;
    }

    // Evaluates node n when its inputs are constants: integer shape
    // arithmetic exactly, small float and bool tensors in double; returns
    // false to map it the ordinary way.
    bool fold_constant(const pb::NodeProto& n, const std::string& who) {
        return fold<std::int64_t>(n, who) || fold<double>(n, who);
    }
    template <class T>
    bool fold(const pb::NodeProto& n, const std::string& who) {
        constexpr bool exact = std::is_integral_v<T>;
        const std::string& t = n.op_type();
        if (n.output_size() != 1 || n.output(0).empty()) return false;
        attributes a(n, who);
        // A folded result beyond max_folded: an error in shape arithmetic,
        // left to the graph for float data.
        auto too_large = [&](std::int64_t elements) {
            if (elements <= max_folded) return false;
            if (exact) throw error(who + ": folded integer tensor is too large");
            return true;
        };
        auto ints = [](const std::vector<T>& v) {
            std::vector<std::int64_t> r;
            for (T x : v) r.push_back(static_cast<std::int64_t>(x));
            return r;
        };
        if (t == "Shape") {
            if (!exact) return false;
            if (!has_in(n, 0)) return false;
            shape s;
            if (auto* c = const_of(n.input(0))) s = tensor_shape(*c, who + ": input", true);
            else s = g_.shape_of(as_value(n.input(0), who));
            std::int64_t r = s.rank, start = a.get_int("start", 0), end = a.get_int("end", r);
            start = std::clamp<std::int64_t>(start < 0 ? start + r : start, 0, r);
            end = std::clamp<std::int64_t>(end < 0 ? end + r : end, 0, r);
            folded<T> out;
            for (std::int64_t d = start; d < end; ++d) out.v.push_back(s[static_cast<int>(d)]);
            out.s.push_back(static_cast<std::int64_t>(out.v.size()));
            bind(n, out, who);
            return true;
        }
        static constexpr std::string_view foldable[] = {
            "Gather", "Unsqueeze", "Squeeze", "Concat", "Slice", "Cast", "Add", "Sub",   "Mul",     "Div",  "Mod",
            "Reshape", "Identity", "Neg", "Abs", "ConstantOfShape", "Equal", "Less", "Greater", "Not", "Where", "Expand",
            "Range", "Max", "Min", "Transpose", "ScatterND"};
        if (std::find(std::begin(foldable), std::end(foldable), t) == std::end(foldable)) return false;
        std::vector<folded<T>> in;
        for (int i = 0; i < n.input_size(); ++i) {
            if (n.input(i).empty()) { in.emplace_back(); continue; }
            auto c = const_in<T>(n, i, who);
            if (!c) return false;  // not all constant (integer constants for T = int64): an ordinary operator
            in.push_back(std::move(*c));
        }
        if (in.empty() || n.input(0).empty()) return false;
        folded<T> out;
        const folded<T>& x = in[0];
        out.type = x.type;
        // Element-wise over broadcast inputs (ONNX's multidirectional
        // broadcasting); booleans are 0 / 1.
        auto elementwise = [&](const std::vector<const folded<T>*>& args, auto&& f) {
            std::vector<shape> extents;
            for (auto* p : args) extents.push_back(p->s);
            out.s = broadcast_shapes(extents, who);
            const int r = out.s.rank;
            if (too_large(out.s.elements())) return false;
            const std::int64_t n = out.s.elements();
            std::vector<std::vector<T>> at(args.size());
            for (std::size_t k = 0; k < args.size(); ++k) {
                const folded<T>& p = *args[k];
                const auto st = strides(p.s);
                at[k].reserve(static_cast<std::size_t>(n));
                std::vector<std::int64_t> idx(static_cast<std::size_t>(r), 0);
                for (std::int64_t o = 0; o < n; ++o) {
                    std::int64_t off = 0;
                    for (int d = 0; d < p.s.rank; ++d) {
                        const int od = d + (r - p.s.rank);
                        if (p.s[d] != 1) off += idx[static_cast<std::size_t>(od)] * st[static_cast<std::size_t>(d)];
                    }
                    at[k].push_back(p.v[static_cast<std::size_t>(off)]);
                    for (int d = r - 1; d >= 0; --d) {
                        if (++idx[static_cast<std::size_t>(d)] < out.s[d]) break;
                        idx[static_cast<std::size_t>(d)] = 0;
                    }
                }
            }
            for (std::int64_t o = 0; o < n; ++o) {
                std::vector<T> xs;
                for (auto& col : at) xs.push_back(col[static_cast<std::size_t>(o)]);
                out.v.push_back(f(xs));
            }
            return true;
        };
        if (t == "Identity") out = x;
        else if (t == "ConstantOfShape") {
            // An integer fill is shape arithmetic (Expand's -1 handling); the
            // default (float 0) and float fills make a float tensor.
            const pb::AttributeProto* value = a.find("value");
            if (value && !value->has_t()) return false;
            const bool integer_fill = value && (value->t().data_type() == pb::TensorProto::INT64 || value->t().data_type() == pb::TensorProto::INT32);
            if (integer_fill != exact) return false;
            T fill = 0;
            if (value) {
                const std::string what = who + ": attribute 'value'";
                std::size_t count = 0;
                if (integer_fill) {
                    const auto f = to_ints(value->t(), what);
                    count = f.size();
                    if (count == 1) fill = static_cast<T>(f[0]);
                } else {
                    if (value->t().data_type() != pb::TensorProto::FLOAT) return false;
                    const auto f = to_float_tensor(value->t(), what);
                    count = f.data.size();
                    if (count == 1) fill = static_cast<T>(f.data[0]);
                }
                if (count != 1) throw error(what + " has " + std::to_string(count) + " elements, expected 1");
            }
            out.type = integer_fill ? pb::TensorProto::INT64 : pb::TensorProto::FLOAT;
            if (x.s.rank != 1 || x.s[0] > max_rank) return false;
            for (auto d : ints(x.v)) {
                if (d < 0) throw error(who + ": negative extent " + std::to_string(d));
                out.s.push_back(d);
            }
            if (too_large(out.s.elements())) return false;
            out.v.assign(static_cast<std::size_t>(out.s.elements()), fill);
        } else if (t == "Equal" || t == "Less" || t == "Greater" || t == "Max" || t == "Min") {
            if (in.size() != 2) return false;
            if (t == "Equal" || t == "Less" || t == "Greater") out.type = pb::TensorProto::INT64;
            if (!elementwise({&in[0], &in[1]}, [&](const std::vector<T>& v) -> T {
                if (t == "Equal") return v[0] == v[1];
                if (t == "Less") return v[0] < v[1];
                if (t == "Greater") return v[0] > v[1];
                return t == "Max" ? std::max(v[0], v[1]) : std::min(v[0], v[1]);
            })) return false;
        } else if (t == "Not") {
            out.type = pb::TensorProto::INT64;
            if (!elementwise({&x}, [](const std::vector<T>& v) -> T { return v[0] == 0; })) return false;
        } else if (t == "Where") {
            if (in.size() != 3) return false;
            out.type = in[1].type;
            if (!elementwise({&in[0], &in[1], &in[2]}, [](const std::vector<T>& v) { return v[0] != 0 ? v[1] : v[2]; })) return false;
        } else if (t == "Expand") {
            if (in.size() != 2 || in[1].s.rank != 1 || in[1].s[0] > max_rank) return false;
            folded<T> target;
            for (auto d : ints(in[1].v)) {
                if (d < 0) throw error(who + ": negative extent " + std::to_string(d) + " in the shape");
                target.s.push_back(d);
            }
            if (too_large(target.s.elements())) return false;
            target.v.assign(static_cast<std::size_t>(target.s.elements()), 0);
            if (!elementwise({&x, &target}, [](const std::vector<T>& v) { return v[0]; })) return false;
        } else if (t == "Transpose") {
            std::vector<std::int64_t> perm;
            for (int d = x.s.rank - 1; d >= 0; --d) perm.push_back(d);
            perm = a.get_ints("perm", perm);
            if (static_cast<int>(perm.size()) != x.s.rank) a.fail("perm", "has " + std::to_string(perm.size()) + " entries for rank " + std::to_string(x.s.rank));
            std::vector<bool> used(static_cast<std::size_t>(x.s.rank), false);
            for (auto& d : perm) {
                d = norm_axis(d, x.s.rank, who);
                if (used[static_cast<std::size_t>(d)]) a.fail("perm", "repeats axis " + std::to_string(d));
                used[static_cast<std::size_t>(d)] = true;
                out.s.push_back(x.s[static_cast<int>(d)]);
            }
            const auto xs = strides(x.s);
            std::vector<std::int64_t> idx(static_cast<std::size_t>(x.s.rank), 0);
            for (std::int64_t k = 0, total = out.s.elements(); k < total; ++k) {
                std::int64_t off = 0;
                for (int d = 0; d < x.s.rank; ++d) off += idx[static_cast<std::size_t>(d)] * xs[static_cast<std::size_t>(perm[static_cast<std::size_t>(d)])];
                out.v.push_back(x.v[static_cast<std::size_t>(off)]);
                for (int d = out.s.rank - 1; d >= 0; --d) {
                    if (++idx[static_cast<std::size_t>(d)] < out.s[d]) break;
                    idx[static_cast<std::size_t>(d)] = 0;
                }
            }
        } else if (t == "Range") {
            if (in.size() != 3 || x.v.size() != 1 || in[1].v.size() != 1 || in[2].v.size() != 1) return false;
            const T start = x.v[0], limit = in[1].v[0], delta = in[2].v[0];
            if (delta == 0) throw error(who + ": delta 0");
            std::int64_t n;
            if constexpr (exact) n = std::max<std::int64_t>(0, (limit - start + delta + (delta > 0 ? -1 : 1)) / delta);
            else n = static_cast<std::int64_t>(std::max(0.0, std::ceil((limit - start) / delta)));
            if (too_large(n)) return false;
            out.s.push_back(n);
            for (std::int64_t k = 0; k < n; ++k) out.v.push_back(start + k * delta);
        }
        else if (t == "Neg" || t == "Abs") {
            out = x;
            for (auto& v : out.v) v = t == "Neg" ? -v : std::abs(v);
        } else if (t == "Cast") {
            auto to = a.get_int("to", 0);
            const bool to_int = to == pb::TensorProto::INT64 || to == pb::TensorProto::INT32;
            if constexpr (exact) {
                if (!to_int) return false;
                out = x;
            } else {
                if (!to_int && to != pb::TensorProto::BOOL && to != pb::TensorProto::FLOAT) return false;
                out = x;
                out.type = to == pb::TensorProto::FLOAT ? pb::TensorProto::FLOAT : pb::TensorProto::INT64;
                for (auto& v : out.v) v = to == pb::TensorProto::BOOL ? T(v != 0) : to_int ? std::trunc(v) : T(static_cast<float>(v));
            }
        } else if (t == "Gather") {
            if (in.size() != 2) return false;
            std::int64_t axis = norm_axis(a.get_int("axis", 0), x.s.rank, who);
            const auto idx = ints(in[1].v);
            for (int d = 0; d < axis; ++d) out.s.push_back(x.s[d]);
            for (auto d : in[1].s) out.s.push_back(d);
            for (int d = static_cast<int>(axis) + 1; d < x.s.rank; ++d) out.s.push_back(x.s[d]);
            if (out.s.rank > max_rank) return false;
            std::int64_t outer = 1, inner = 1, ext = x.s[static_cast<int>(axis)];
            for (int d = 0; d < axis; ++d) outer *= x.s[d];
            for (int d = static_cast<int>(axis) + 1; d < x.s.rank; ++d) inner *= x.s[d];
            for (std::int64_t o = 0; o < outer; ++o)
                for (auto k : idx) {
                    if (k < -ext || k >= ext) throw error(who + ": index " + std::to_string(k) + " is out of range for extent " + std::to_string(ext));
                    if (k < 0) k += ext;
                    for (std::int64_t i = 0; i < inner; ++i) out.v.push_back(x.v[static_cast<std::size_t>((o * ext + k) * inner + i)]);
                }
        } else if (t == "Unsqueeze" || t == "Squeeze") {
            std::vector<std::int64_t> axes = in.size() > 1 && !in[1].v.empty() ? ints(in[1].v) : a.get_ints("axes", {});
            auto s = squeezed(t == "Unsqueeze", x.s, axes, a, who);
            if (!s) return false;
            out.s = *s;
            out.v = x.v;
        } else if (t == "Concat") {
            if (!a.has("axis")) a.fail("axis", "is required");
            std::int64_t axis = norm_axis(a.get_int("axis", 0), x.s.rank, who);
            out.s = x.s;
            out.s[static_cast<int>(axis)] = 0;
            std::int64_t outer = 1;
            for (int d = 0; d < axis; ++d) outer *= x.s[d];
            for (const auto& p : in) {
                if (p.s.rank != x.s.rank) throw error(who + ": inputs of ranks " + std::to_string(x.s.rank) + " and " + std::to_string(p.s.rank));
                out.s[static_cast<int>(axis)] += p.s[static_cast<int>(axis)];
            }
            for (std::int64_t o = 0; o < outer; ++o)
                for (const auto& p : in) {
                    std::int64_t chunk = p.s.elements() / std::max<std::int64_t>(outer, 1);
                    if (outer * chunk != static_cast<std::int64_t>(p.v.size())) throw error(who + ": inputs disagree outside the axis");
                    out.v.insert(out.v.end(), p.v.begin() + o * chunk, p.v.begin() + (o + 1) * chunk);
                }
        } else if (t == "Slice") {
            if (in.size() < 3) return false;  // opset < 10 attribute form: not emitted at opsets 11..17
            const auto bounds = onnx_slice_bounds(x.s, ints(in[1].v), ints(in[2].v), in.size() > 3 ? ints(in[3].v) : std::vector<std::int64_t>{},
                                                  in.size() > 4 ? ints(in[4].v) : std::vector<std::int64_t>{}, who);
            out.s = bounds.out;
            out.v = sliced(x.v, x.s, bounds);
        } else if (t == "Reshape") {
            if (in.size() != 2) return false;
            std::int64_t known = 1;
            int infer = -1;
            const auto target = ints(in[1].v);
            for (std::size_t k = 0; k < target.size(); ++k) {
                std::int64_t d = target[k];
                if (d == 0 && a.get_int("allowzero", 0) == 0) d = static_cast<int>(k) < x.s.rank ? x.s[static_cast<int>(k)] : 0;
                if (d == -1) { infer = static_cast<int>(k); d = 1; }
                if (d < 0) throw error(who + ": shape entry " + std::to_string(d));
                out.s.push_back(d);
                known *= d;
            }
            if (infer >= 0 && known > 0) out.s[infer] = x.s.elements() / known;
            if (out.s.elements() != x.s.elements()) throw error(who + ": cannot reshape " + x.s.str() + " to " + out.s.str());
            out.v = x.v;
        } else if (t == "ScatterND") {
            // data, indices [..., k], updates: each index tuple addresses a
            // slice of data (the trailing rank - k axes), replaced in order.
            if (in.size() != 3 || a.get_string("reduction", "none") != "none") return false;
            const folded<T>& idx = in[1];
            const folded<T>& upd = in[2];
            if (idx.s.rank < 1) throw error(who + ": indices must have rank >= 1");
            const std::int64_t k = idx.s[idx.s.rank - 1];
            if (k < 1 || k > x.s.rank) throw error(who + ": index tuples of length " + std::to_string(k) + " for data of rank " + std::to_string(x.s.rank));
            std::int64_t slab = 1;
            for (int d = static_cast<int>(k); d < x.s.rank; ++d) slab *= x.s[d];
            const std::int64_t tuples = idx.s.elements() / k;
            if (upd.s.elements() != tuples * slab)
                throw error(who + ": updates " + upd.s.str() + " do not match " + std::to_string(tuples) + " slices of " + std::to_string(slab));
            out = x;
            const auto xs = strides(x.s);
            const auto at = ints(idx.v);
            for (std::int64_t j = 0; j < tuples; ++j) {
                std::int64_t off = 0;
                for (std::int64_t d = 0; d < k; ++d) {
                    std::int64_t i = at[static_cast<std::size_t>(j * k + d)];
                    const std::int64_t ext = x.s[static_cast<int>(d)];
                    if (i < -ext || i >= ext) throw error(who + ": index " + std::to_string(i) + " is out of range for extent " + std::to_string(ext));
                    off += (i < 0 ? i + ext : i) * xs[static_cast<std::size_t>(d)];
                }
                std::copy_n(upd.v.begin() + j * slab, slab, out.v.begin() + off);
            }
        } else {  // Add Sub Mul Div Mod
            if (in.size() != 2) return false;
            if (in[1].type == pb::TensorProto::FLOAT) out.type = pb::TensorProto::FLOAT;
            if (!elementwise({&in[0], &in[1]}, [&](const std::vector<T>& v) -> T {
                const T u = v[0], w = v[1];
                if constexpr (!exact) {
                    if (t == "Mod") return std::fmod(u, w);  // float Mod is fmod=1
                } else {
                    if ((t == "Div" || t == "Mod") && w == 0) throw error(who + ": integer division by zero");
                    // ONNX integer Div truncates (C semantics); integer Mod takes
                    // the divisor's sign (Python's %) unless fmod=1 (C's %).
                    if (t == "Mod") {
                        std::int64_t r = u % w;
                        if (a.get_int("fmod", 0) == 0 && r != 0 && (r < 0) != (w < 0)) r += w;
                        return r;
                    }
                }
                return t == "Add" ? u + w : t == "Sub" ? u - w : t == "Mul" ? u * w : u / w;
            })) return false;
        }
        if (out.type == pb::TensorProto::FLOAT)  // float32 results: one rounding per operator, as ONNX computes
            for (auto& v : out.v) v = static_cast<T>(static_cast<float>(v));
        bind(n, out, who);
        return true;
    }

    // Declared-operator mapping. Returns no values to ask for an opaque node
    // (the case is valid ONNX but has no exact tsopt counterpart); throws for
    // invalid ONNX. Must not add nodes before deciding to fall back.
    std::vector<value> map_standard(const pb::NodeProto& n, const std::string& who) {
        const std::string& t = n.op_type();
        attributes a(n, who);
        const std::string out = n.output(0);
        auto extra_outputs = [&] {
            for (int k = 1; k < n.output_size(); ++k)
                if (!n.output(k).empty()) return true;
            return false;
        };
        // An inference Dropout's mask (all true) that nothing reads is no
        // output at all: PyTorch exports attention dropout with it (Swin).
        const bool unread_mask = t == "Dropout" && n.output_size() == 2 && !read_anywhere(n.output(1));
        if (t != "Split" && extra_outputs() && !unread_mask) return {};
        auto none_but = [&](std::initializer_list<std::string_view> known) { return a.unknown(known).empty(); };

        if (t == "Relu" || t == "Sigmoid" || t == "Tanh") {
            if (!none_but({})) return {};
            value x = in(n, 0, who);
            auto k = t == "Relu" ? spec::op_kind::relu : t == "Sigmoid" ? spec::op_kind::sigmoid : spec::op_kind::tanh;
            return {g_.add1(k, {}, {x}, out)};
        }
        if (t == "Identity" || t == "Dropout") {
            if (t == "Dropout" && (!none_but({"ratio", "seed"}) || !inference_dropout(n))) return {};
            if (t == "Identity" && !none_but({})) return {};
            if (t == "Identity") identity_outputs_.insert(n.output(0));
            return {in(n, 0, who)};
        }
        if (t == "Add" || t == "Mul") {
            if (!none_but({})) return {};
            value x = in(n, 0, who), y = in(n, 1, who);
            if (t == "Mul") {
                // A one-element factor that does not change the shape: smul.
                const shape &xs = g_.shape_of(x), &ys = g_.shape_of(y);
                if (ys.elements() == 1 && ys.rank <= xs.rank) return {g_.smul(x, y, out)};
                if (xs.elements() == 1 && xs.rank <= ys.rank) return {g_.smul(y, x, out)};
            }
            return {g_.add1(t == "Add" ? spec::op_kind::ewadd : spec::op_kind::ewmul, {}, {x, y}, out)};
        }
        if (t == "Sub") {
            if (!none_but({})) return {};
            value x = in(n, 0, who);
            if (!has_in(n, 1)) throw error(who + ": input 1 is missing");
            if (auto* c = const_of(n.input(1)); c && c->data_type() == pb::TensorProto::FLOAT) {
                auto neg = to_float_tensor(*c, who + ": constant '" + n.input(1) + "'");
                for (auto& v : neg.data) v = -v;  // exact: x - c == x + (-c)
                return {g_.ewadd(x, g_.weight(out + "/neg", std::move(neg)), out)};
            }
            value y = in(n, 1, who);
            value m1 = g_.weight(out + "/minus_one", tensor<float>(shape{1}, -1.f));
            return {g_.ewadd(x, g_.smul(y, m1, out + "/neg"), out)};
        }
        if (t == "Div") {
            if (!none_but({})) return {};
            auto* c = has_in(n, 1) ? const_of(n.input(1)) : nullptr;
            if (!c || c->data_type() != pb::TensorProto::FLOAT) return {};
            auto r = to_float_tensor(*c, who + ": constant '" + n.input(1) + "'");
            for (auto& v : r.data) {
                int e = 0;
                if (!(std::isfinite(v) && v != 0 && std::frexp(v, &e) == (v > 0 ? 0.5f : -0.5f))) return {};
                float inv = 1.f / v;  // a power of two: x / v == x * (1/v) exactly
                if (!std::isnormal(inv)) return {};
                v = inv;
            }
            value x = in(n, 0, who);
            return {g_.ewmul(x, g_.weight(out + "/reciprocal", std::move(r)), out)};
        }
        if (t == "MatMul") {
            if (!none_but({})) return {};
            value x = in(n, 0, who), y = in(n, 1, who);
            if (g_.shape_of(x).rank < 2 || g_.shape_of(y).rank < 2) return {};
            return {g_.matmul(x, y, {}, out)};
        }
        if (t == "Gemm") return gemm(n, a, who, out);
        if (t == "Conv") return conv(n, a, who, out);
        if (t == "MaxPool" || t == "AveragePool") return pool(n, a, who, out, t == "MaxPool");
        if (t == "GlobalAveragePool" || t == "GlobalMaxPool") {
            if (!none_but({})) return {};
            value x = in(n, 0, who);
            const shape& s = g_.shape_of(x);
            if (s.rank != 4) return {};
            spec::op_params p;
            p[spec::pool_p::kh] = int32(s[2], who, "kernel");
            p[spec::pool_p::kw] = int32(s[3], who, "kernel");
            p[spec::pool_p::stride_h] = p[spec::pool_p::stride_w] = 1;
            p[spec::pool_p::pad] = static_cast<std::int32_t>(spec::pad_mode::valid);
            return {g_.add1(t == "GlobalMaxPool" ? spec::op_kind::maxpool : spec::op_kind::avgpool, p, {x}, out)};
        }
        if (t == "BatchNormalization") return batchnorm(n, a, who, out);
        if (t == "Concat") {
            if (!none_but({"axis"})) return {};
            if (!a.has("axis")) a.fail("axis", "is required");
            std::vector<value> xs;
            for (int i = 0; i < n.input_size(); ++i) xs.push_back(in(n, i, who));
            if (xs.empty()) throw error(who + ": has no inputs");
            int ax = axis(a, "axis", a.get_int("axis", 0), g_.shape_of(xs[0]).rank);
            if (xs.size() == 1) return {xs[0]};
            return {g_.concat(ax, xs, out)};
        }
        if (t == "Split") return split(n, a, who);
        if (t == "Transpose") {
            if (!none_but({"perm"})) return {};
            value x = in(n, 0, who);
            int r = g_.shape_of(x).rank;
            std::vector<std::int64_t> rev;
            for (int i = r - 1; i >= 0; --i) rev.push_back(i);
            auto perm = a.get_ints("perm", rev);
            if (static_cast<int>(perm.size()) != r) a.fail("perm", "has " + std::to_string(perm.size()) + " entries for rank " + std::to_string(r));
            unsigned seen = 0;
            spec::op_params p;
            p[spec::transpose_p::perm] = r << 24;
            for (int i = 0; i < r; ++i) {
                auto v = perm[static_cast<std::size_t>(i)];
                if (v < 0 || v >= r || (seen >> v) & 1u) a.fail("perm", "is not a permutation of " + std::to_string(r) + " axes");
                seen |= 1u << v;
                p[spec::transpose_p::perm] |= static_cast<std::int32_t>(v) << (3 * i);
            }
            // A Transpose undoing the one it reads is the identity: the
            // exporter writes every non-default layout as such a pair
            // (exporter::express_layout) and runtimes cancel it; kept, a
            // re-imported NASNet-Mobile ran 1,120 transposes and took 1.6x
            // as long as the graph that was written.
            if (const node& src = g_.at(x); src.is_op(spec::op_kind::transpose) && x.output == 0) {
                const std::int32_t q = src.params[spec::transpose_p::perm];
                bool undoes = (q >> 24) == r;
                for (int i = 0; undoes && i < r; ++i) undoes = ((q >> (3 * perm[static_cast<std::size_t>(i)])) & 7) == i;
                if (undoes) {
                    transposes_cancelled_ = true;
                    if (!conversion_pairs_.count(x.node)) restore_layout(src, perm);
                    return {src.inputs[0]};
                }
            }
            value first = g_.add1(spec::op_kind::transpose, p, {x}, out);
            if (identity_outputs_.count(n.input(0))) conversion_pairs_.insert(first.node);
            return {first};
        }
        if (t == "Reshape") {
            if (!none_but({"allowzero"})) return {};
            value x = in(n, 0, who);
            auto target = const_ints(n, 1, who, "shape");
            if (target.empty()) return {};  // to rank 0: no declared counterpart
            bool allowzero = a.get_int("allowzero", 0) != 0;
            const shape& s = g_.shape_of(x);
            if (target.size() > static_cast<std::size_t>(max_rank)) throw error(who + ": target rank " + std::to_string(target.size()) + " exceeds " + std::to_string(max_rank));
            shape r;
            int infer_at = -1;
            std::int64_t known = 1;
            for (std::size_t i = 0; i < target.size(); ++i) {
                std::int64_t d = target[i];
                if (d == 0 && !allowzero) {
                    if (static_cast<int>(i) >= s.rank) throw error(who + ": shape entry " + std::to_string(i) + " is 0 (copy) beyond the input's rank");
                    d = s[static_cast<int>(i)];
                } else if (d == -1) {
                    if (infer_at >= 0) throw error(who + ": shape has more than one -1 entry");
                    infer_at = static_cast<int>(i);
                    r.push_back(1);
                    continue;
                } else if (d <= 0) {
                    throw error(who + ": shape entry " + std::to_string(i) + " is " + std::to_string(d) + " (tsopt tensors are never empty)");
                }
                if (d > max_extent) throw error(who + ": shape entry " + std::to_string(i) + " is too large");
                known *= d;
                if (known > max_elements) throw error(who + ": shape has too many elements");
                r.push_back(d);
            }
            if (infer_at >= 0) {
                if (s.elements() % known != 0)
                    throw error(who + ": cannot infer the -1 entry: " + std::to_string(s.elements()) + " elements are not a multiple of " + std::to_string(known));
                r[infer_at] = s.elements() / known;
            }
            return {g_.reshape(x, r, out)};
        }
        if (t == "Unsqueeze" || t == "Squeeze") {  // of a computed tensor: a reshape (a view)
            if (!none_but({"axes"}) || (has_in(n, 1) && !const_of(n.input(1)))) return {};
            value x = in(n, 0, who);
            auto s = squeezed(t == "Unsqueeze", g_.shape_of(x), has_in(n, 1) ? const_ints(n, 1, who, "axes") : a.get_ints("axes", {}), a, who);
            if (!s) return {};
            return {g_.reshape(x, *s, out)};
        }
        if (t == "Flatten") {
            if (!none_but({"axis"})) return {};
            value x = in(n, 0, who);
            const shape& s = g_.shape_of(x);
            std::int64_t ax = a.get_int("axis", 1);
            if (ax < -s.rank || ax > s.rank) a.fail("axis", "is " + std::to_string(ax) + ", outside [-rank, rank] for rank " + std::to_string(s.rank));
            if (ax < 0) ax += s.rank;
            std::int64_t outer = 1;
            for (int i = 0; i < ax; ++i) outer *= s[i];
            return {g_.reshape(x, shape{outer, s.elements() / outer}, out)};
        }
        if (t == "Softmax") {
            if (!none_but({"axis"})) return {};
            value x = in(n, 0, who);
            const shape& s = g_.shape_of(x);
            int ax = axis(a, "axis", a.get_int("axis", opset_ >= 13 ? -1 : 1), s.rank);
            if (opset_ >= 13 || ax == s.rank - 1) return {g_.softmax(x, ax, out)};
            // Before opset 13 the input is coerced to 2-D at `axis`.
            std::int64_t outer = 1;
            for (int i = 0; i < ax; ++i) outer *= s[i];
            value f = g_.reshape(x, shape{outer, s.elements() / outer}, out + "/flat");
            return {g_.reshape(g_.softmax(f, 1, out + "/softmax"), s, out)};
        }
        if (t == "Pad") {
            if (!none_but({"mode"})) return {};
            std::string mode = a.get_string("mode", "constant");
            if (mode != "constant" && mode != "reflect" && mode != "edge")
                a.fail("mode", "has unknown value '" + mode + "' (constant, reflect or edge)");
            if (mode != "constant" || has_in(n, 3)) return {};
            if (has_in(n, 2)) {
                auto* c = const_of(n.input(2));
                if (!c || c->data_type() != pb::TensorProto::FLOAT) return {};
                auto v = to_float_tensor(*c, who + ": constant_value");
                if (v.data.size() != 1 || v.data[0] != 0.f) return {};
            }
            if (!has_in(n, 1) || !const_of(n.input(1))) return {};
            value x = in(n, 0, who);
            const shape& s = g_.shape_of(x);
            auto p = const_ints(n, 1, who, "pads");
            if (p.size() != static_cast<std::size_t>(2 * s.rank))
                throw error(who + ": pads has " + std::to_string(p.size()) + " entries, input rank " + std::to_string(s.rank) + " needs " + std::to_string(2 * s.rank));
            bool zero = true, spatial_only = s.rank == 4;
            for (std::size_t i = 0; i < p.size(); ++i) {
                zero = zero && p[i] == 0;
                if (p[i] < 0) spatial_only = false;
                if (s.rank == 4 && (i % 4) < 2 && p[i] != 0) spatial_only = false;
            }
            if (zero) return {x};
            if (!spatial_only) return {};
            return {padded(x, {p[2], p[3], p[6], p[7]}, who, out)};
        }
        if (t == "Slice") return slice(n, who, out);
        if (t == "Gather") return gather(n, a, who, out);
        return {};
    }

    // A Gather of one constant index (a ViT's class token, x[:, 0]) is a
    // slice of extent 1 on that axis, reshaped away for a scalar index.
    // More indices stay opaque.
    std::vector<value> gather(const pb::NodeProto& n, const attributes& a, const std::string& who, const std::string& out) {
        if (!a.unknown({"axis"}).empty() || n.input_size() != 2 || !has_in(n, 1) || !const_of(n.input(1))) return {};
        const pb::TensorProto& c = *const_of(n.input(1));
        if (c.dims_size() > 1) return {};
        const auto idx = const_ints(n, 1, who, "indices");
        if (idx.size() != 1) return {};
        value x = in(n, 0, who);
        const shape& s = g_.shape_of(x);
        if (s.rank < 1 || s.rank > 4) return {};
        const int ax = axis(a, "axis", a.get_int("axis", 0), s.rank);
        const std::int64_t ext = s[ax];
        std::int64_t k = idx[0];
        if (k < -ext || k >= ext) throw error(who + ": index " + std::to_string(k) + " is out of range for extent " + std::to_string(ext));
        if (k < 0) k += ext;
        spec::op_params p{};
        p[spec::slice_p::b0 + ax] = int32(k, who, "indices");
        p[spec::slice_p::e0 + ax] = int32(k + 1, who, "indices");
        const bool scalar = c.dims_size() == 0;
        value y = ext == 1 ? x : g_.add1(spec::op_kind::slice, p, {x}, scalar ? out + "/slice" : out);
        if (!scalar) return {y};
        shape r;
        for (int d = 0; d < s.rank; ++d)
            if (d != ax) r.push_back(s[d]);
        return {g_.reshape(y, r, out)};
    }

    // A Slice of a computed tensor with constant starts, ends, axes and
    // steps of 1 (PyTorch's chunk and narrow: ShuffleNet's channel halves,
    // attention's q/k/v) is the spec's slice, so the optimizer sees through
    // it; other steps and a rank above 4 stay opaque. Starts and ends are
    // clamped as ONNX says; an empty result is refused (tsopt tensors are
    // never empty).
    std::vector<value> slice(const pb::NodeProto& n, const std::string& who, const std::string& out) {
        if (n.input_size() < 3 || n.input_size() > 5) return {};
        for (int i = 1; i < n.input_size(); ++i)
            if (has_in(n, i) && !const_of(n.input(i))) return {};
        if (!has_in(n, 1) || !has_in(n, 2)) return {};
        value x = in(n, 0, who);
        const shape& s = g_.shape_of(x);
        if (s.rank < 1 || s.rank > 4) return {};
        const auto bounds = onnx_slice_bounds(s, const_ints(n, 1, who, "starts"), const_ints(n, 2, who, "ends"),
                                              has_in(n, 3) ? const_ints(n, 3, who, "axes") : std::vector<std::int64_t>{},
                                              has_in(n, 4) ? const_ints(n, 4, who, "steps") : std::vector<std::int64_t>{}, who);
        spec::op_params p{};
        bool whole = true;
        for (int d = 0; d < s.rank; ++d) {
            const auto k = static_cast<std::size_t>(d);
            if (bounds.out[d] == s[d] && bounds.lo[k] == 0 && bounds.step[k] == 1) continue;  // untouched
            if (bounds.step[k] != 1) return {};
            if (bounds.out[d] == 0) throw error(who + ": the slice of axis " + std::to_string(d) + " (extent " + std::to_string(s[d]) + ") is empty (tsopt tensors are never empty)");
            p[spec::slice_p::b0 + d] = int32(bounds.lo[k], who, "starts");
            p[spec::slice_p::e0 + d] = int32(bounds.lo[k] + bounds.out[d], who, "ends");
            whole = false;
        }
        if (whole) return {x};
        return {g_.add1(spec::op_kind::slice, p, {x}, out)};
    }

    // Zero-pads H and W by p = {top, left, bottom, right}. The pad operator's
    // parameters and shape rule are 32-bit, so a padded extent beyond that
    // range is refused here rather than left to wrap (pads of 2^31 - 2 on a
    // 4-wide axis once gave an extent of 0).
    value padded(value x, const std::array<std::int64_t, 4>& p, const std::string& who, const std::string& name) {
        const shape& s = g_.shape_of(x);
        // Each pad must fit the operator's 32-bit parameter before the sum
        // is formed: pads near 2^63 overflowed the 64-bit sum (fuzzer find).
        std::array<std::int32_t, 4> q{};
        for (std::size_t i = 0; i < 4; ++i) q[i] = int32(p[i], who, "pads");
        shape o = s;
        for (int d = 0; d < 2; ++d) {
            const std::int64_t e = s[2 + d] + std::int64_t{q[static_cast<std::size_t>(d)]} + q[static_cast<std::size_t>(d + 2)];
            if (e > std::numeric_limits<std::int32_t>::max())
                throw error(who + ": pads " + std::to_string(p[static_cast<std::size_t>(d)]) + " and " +
                            std::to_string(p[static_cast<std::size_t>(d + 2)]) + " make axis " + std::to_string(2 + d) +
                            " of input " + s.str() + " " + std::to_string(e) + " long, beyond 2^31 - 1");
            o[2 + d] = e;
        }
        if (bounded_elements(o) > max_elements) throw error(who + ": padding input " + s.str() + " to " + o.str() + " gives too many elements");
        return g_.pad(x, q[0], q[2], q[1], q[3], name);
    }
    static std::int32_t int32(std::int64_t v, const std::string& who, const char* what) {
        if (v < std::numeric_limits<std::int32_t>::min() || v > std::numeric_limits<std::int32_t>::max())
            throw error(who + ": " + what + " value " + std::to_string(v) + " does not fit in 32 bits");
        return static_cast<std::int32_t>(v);
    }
    static int axis(const attributes& a, std::string_view name, std::int64_t v, int rank) {
        if (v < -rank || v >= rank)
            a.fail(name, "is " + std::to_string(v) + ", outside [-" + std::to_string(rank) + ", " + std::to_string(rank) + ")");
        return static_cast<int>(v < 0 ? v + rank : v);
    }

    // Explicit pads [top, left, bottom, right] of a 2-D window from
    // auto_pad / pads (ONNX's conventions for SAME_UPPER / SAME_LOWER).
    static std::array<std::int64_t, 4> window_pads(const attributes& a, const shape& x, std::array<std::int64_t, 2> k,
                                                   const std::vector<std::int64_t>& st, const std::vector<std::int64_t>& dil) {
        std::string ap = a.get_string("auto_pad", "NOTSET");
        std::array<std::int64_t, 4> p{};
        if (ap == "NOTSET") {
            auto v = a.get_ints("pads", {0, 0, 0, 0}, 4);
            for (int i = 0; i < 4; ++i) {
                if (v[static_cast<std::size_t>(i)] < 0 || v[static_cast<std::size_t>(i)] > max_extent) a.fail("pads", "has an invalid entry " + std::to_string(v[static_cast<std::size_t>(i)]));
                p[static_cast<std::size_t>(i)] = v[static_cast<std::size_t>(i)];
            }
        } else if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
            for (int d = 0; d < 2; ++d) {
                std::int64_t in = x[2 + d], s = st[static_cast<std::size_t>(d)];
                std::int64_t outx = (in + s - 1) / s;
                std::int64_t total = std::max<std::int64_t>((outx - 1) * s + (k[static_cast<std::size_t>(d)] - 1) * dil[static_cast<std::size_t>(d)] + 1 - in, 0);
                std::int64_t small = total / 2;
                p[static_cast<std::size_t>(d)] = ap == "SAME_UPPER" ? small : total - small;
                p[static_cast<std::size_t>(d + 2)] = total - p[static_cast<std::size_t>(d)];
            }
        } else if (ap != "VALID") {
            a.fail("auto_pad", "has unknown value '" + ap + "' (NOTSET, SAME_UPPER, SAME_LOWER or VALID)");
        }
        return p;
    }
    enum class padding { valid, same, explicit_ };
    static padding classify(const std::array<std::int64_t, 4>& p, std::array<std::int64_t, 2> k, const std::vector<std::int64_t>& dil) {
        if (p[0] == 0 && p[1] == 0 && p[2] == 0 && p[3] == 0) return padding::valid;
        bool same = true;
        for (int d = 0; d < 2; ++d) {
            auto kk = k[static_cast<std::size_t>(d)];
            same = same && kk % 2 == 1 && p[static_cast<std::size_t>(d)] == p[static_cast<std::size_t>(d + 2)] &&
                   p[static_cast<std::size_t>(d)] == dil[static_cast<std::size_t>(d)] * (kk - 1) / 2;
        }
        return same ? padding::same : padding::explicit_;
    }
    static void positive(const attributes& a, std::string_view name, const std::vector<std::int64_t>& v) {
        for (auto x : v)
            if (x < 1 || x > max_extent) a.fail(name, "has an invalid entry " + std::to_string(x) + " (must be >= 1)");
    }

    std::vector<value> conv(const pb::NodeProto& n, const attributes& a, const std::string& who, const std::string& out) {
        if (!a.unknown({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}).empty()) return {};
        if (n.input_size() < 2 || n.input_size() > 3) throw error(who + ": takes 2 or 3 inputs, has " + std::to_string(n.input_size()));
        value x = in(n, 0, who), w = in(n, 1, who);
        shape xs = g_.shape_of(x), ws = g_.shape_of(w);
        if (xs.rank != 4 || ws.rank != 4) return {};  // 1-D and 3-D convolutions stay opaque
        auto k = a.get_ints("kernel_shape", {ws[2], ws[3]}, 2);
        if (k[0] != ws[2] || k[1] != ws[3])
            a.fail("kernel_shape", "is [" + std::to_string(k[0]) + "," + std::to_string(k[1]) + "] but the weight has shape " + ws.str());
        auto st = a.get_ints("strides", {1, 1}, 2);
        auto dil = a.get_ints("dilations", {1, 1}, 2);
        positive(a, "strides", st);
        positive(a, "dilations", dil);
        std::int64_t group = a.get_int("group", 1);
        if (group < 1 || ws[1] * group != xs[1])
            a.fail("group", "is " + std::to_string(group) + " but the input has " + std::to_string(xs[1]) +
                                " channels and the weight " + ws.str() + " expects " + std::to_string(ws[1]) + " per group");
        if (ws[0] % group != 0) a.fail("group", "is " + std::to_string(group) + ", which does not divide the " + std::to_string(ws[0]) + " output channels");
        auto pads = window_pads(a, xs, {ws[2], ws[3]}, st, dil);
        auto mode = classify(pads, {ws[2], ws[3]}, dil);
        value b{};
        bool bias = has_in(n, 2);
        if (bias) {
            if (auto* c = const_of(n.input(2))) {
                auto bt = to_float_tensor(*c, who + ": bias '" + n.input(2) + "'");
                if (!(bt.shape == shape{ws[0]})) throw error(who + ": bias has shape " + bt.shape.str() + ", expected [" + std::to_string(ws[0]) + "]");
                bt.shape = shape{1, ws[0], 1, 1};
                b = g_.weight(n.input(2), std::move(bt));
            } else {
                b = as_value(n.input(2), who);
                if (!(g_.shape_of(b) == shape{ws[0]})) throw error(who + ": bias has shape " + g_.shape_of(b).str() + ", expected [" + std::to_string(ws[0]) + "]");
                b = g_.reshape(b, shape{1, ws[0], 1, 1}, out + "/bias");
            }
        }
        if (mode == padding::explicit_)
            x = padded(x, pads, who, out + "/pad");
        conv_options o;
        o.stride_h = int32(st[0], who, "strides");
        o.stride_w = int32(st[1], who, "strides");
        o.pad = mode == padding::same ? same : valid;
        if (dil[0] != dil[1]) {
            // The builder takes one dilation; set both through the parameters.
            spec::op_params p;
            p[spec::conv2d_p::stride_h] = o.stride_h;
            p[spec::conv2d_p::stride_w] = o.stride_w;
            p[spec::conv2d_p::pad] = static_cast<std::int32_t>(o.pad);
            p[spec::conv2d_p::dil_h] = int32(dil[0], who, "dilations");
            p[spec::conv2d_p::dil_w] = int32(dil[1], who, "dilations");
            value y = g_.add1(spec::op_kind::conv2d, p, {x, w}, bias ? out + "/conv" : out);
            return {bias ? g_.ewadd(y, b, out) : y};
        }
        o.dilation = int32(dil[0], who, "dilations");
        value y = g_.conv2d(x, w, o, bias ? out + "/conv" : out);
        return {bias ? g_.ewadd(y, b, out) : y};
    }

    std::vector<value> pool(const pb::NodeProto& n, const attributes& a, const std::string& who, const std::string& out, bool max) {
        if (max ? !a.unknown({"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"}).empty()
                : !a.unknown({"auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides"}).empty())
            return {};
        value x = in(n, 0, who);
        shape xs = g_.shape_of(x);
        if (!a.has("kernel_shape")) a.fail("kernel_shape", "is required");
        auto kv = a.get_ints("kernel_shape", {});
        if (xs.rank != 4 || kv.size() != 2) return {};  // 1-D and 3-D pooling stay opaque
        positive(a, "kernel_shape", kv);
        auto st = a.get_ints("strides", {1, 1}, 2);
        auto dil = a.get_ints("dilations", {1, 1}, 2);
        positive(a, "strides", st);
        positive(a, "dilations", dil);
        if (dil[0] != 1 || dil[1] != 1) return {};
        std::array<std::int64_t, 2> k{kv[0], kv[1]};
        auto pads = window_pads(a, xs, k, st, dil);
        bool ceil_mode = a.get_int("ceil_mode", 0) != 0;
        for (int d = 0; d < 2; ++d) {
            std::int64_t span = xs[2 + d] + pads[static_cast<std::size_t>(d)] + pads[static_cast<std::size_t>(d + 2)] - k[static_cast<std::size_t>(d)];
            if (span < 0) throw error(who + ": window " + std::to_string(k[0]) + "x" + std::to_string(k[1]) + " does not fit input " + xs.str());
            if (ceil_mode && span % st[static_cast<std::size_t>(d)] != 0) return {};  // ceil changes the extent
        }
        auto mode = classify(pads, k, dil);
        bool include_pad = a.get_int("count_include_pad", 0) != 0;
        if (mode != padding::valid && !max && !include_pad) return {};  // padding not counted: no declared op
        if (mode == padding::explicit_ && max) return {};                 // zero padding would change the max
        if (mode == padding::explicit_)
            x = padded(x, pads, who, out + "/pad");
        spec::op_params p;
        p[spec::pool_p::kh] = int32(k[0], who, "kernel_shape");
        p[spec::pool_p::kw] = int32(k[1], who, "kernel_shape");
        p[spec::pool_p::stride_h] = int32(st[0], who, "strides");
        p[spec::pool_p::stride_w] = int32(st[1], who, "strides");
        p[spec::pool_p::pad] = static_cast<std::int32_t>(mode == padding::same ? spec::pad_mode::same : spec::pad_mode::valid);
        return {g_.add1(max ? spec::op_kind::maxpool : spec::op_kind::avgpool, p, {x}, out)};
    }

    std::vector<value> gemm(const pb::NodeProto& n, const attributes& a, const std::string& who, const std::string& out) {
        if (!a.unknown({"alpha", "beta", "transA", "transB"}).empty()) return {};
        float alpha = a.get_float("alpha", 1.f), beta = a.get_float("beta", 1.f);
        bool ta = a.get_int("transA", 0) != 0, tb = a.get_int("transB", 0) != 0;
        auto operand = [&](int i, bool trans, float scale, const std::string& suffix) -> value {
            if (auto* c = has_in(n, i) ? const_of(n.input(i)) : nullptr) {
                auto t = to_float_tensor(*c, who + ": constant '" + n.input(i) + "'");
                if (t.shape.rank != 2) throw error(who + ": input " + std::to_string(i) + " must be a matrix, has shape " + t.shape.str());
                if (!trans && scale == 1.f) return as_value(n.input(i), who);
                tensor<float> r(trans ? shape{t.shape[1], t.shape[0]} : t.shape);
                for (std::int64_t y = 0; y < t.shape[0]; ++y)
                    for (std::int64_t x = 0; x < t.shape[1]; ++x)
                        r[trans ? x * t.shape[0] + y : y * t.shape[1] + x] = t[y * t.shape[1] + x] * scale;
                return g_.weight(n.input(i) + suffix, std::move(r));
            }
            value v = in(n, i, who);
            if (g_.shape_of(v).rank != 2) throw error(who + ": input " + std::to_string(i) + " must be a matrix, has shape " + g_.shape_of(v).str());
            if (trans) v = g_.transpose(v, {1, 0}, out + "/transpose" + std::to_string(i));
            if (scale != 1.f) v = g_.smul(v, g_.weight(out + "/scale" + std::to_string(i), tensor<float>(shape{1}, scale)), out + "/scaled" + std::to_string(i));
            return v;
        };
        if (n.input_size() < 2 || n.input_size() > 3) throw error(who + ": takes 2 or 3 inputs, has " + std::to_string(n.input_size()));
        value A = operand(0, ta, 1.f, "/T");
        // alpha goes onto B (folded into the weight when B is constant).
        value B = operand(1, tb, alpha, tb ? "/T" : "/alpha");
        bool bias = has_in(n, 2) && beta != 0.f;
        value y = g_.matmul(A, B, {}, bias ? out + "/matmul" : out);
        if (!bias) return {y};
        value C;
        if (const_of(n.input(2)) && beta != 1.f) C = scaled_const(n.input(2), beta, who);
        else {
            C = in(n, 2, who);
            if (beta != 1.f) C = g_.smul(C, g_.weight(out + "/beta", tensor<float>(shape{1}, beta)), out + "/beta_c");
        }
        return {g_.ewadd(y, C, out)};
    }
    value scaled_const(const std::string& name, float s, const std::string& who) {
        auto t = to_float_tensor(*const_of(name), who + ": constant '" + name + "'");
        for (auto& v : t.data) v *= s;
        return g_.weight(name + "/scaled", std::move(t));
    }

    std::vector<value> batchnorm(const pb::NodeProto& n, const attributes& a, const std::string& who, const std::string& out) {
        if (!a.unknown({"epsilon", "momentum", "training_mode", "spatial"}).empty()) return {};
        if (a.get_int("training_mode", 0) != 0 || a.get_int("spatial", 1) != 1) return {};
        if (n.input_size() != 5) throw error(who + ": takes 5 inputs, has " + std::to_string(n.input_size()));
        for (int i = 1; i < 5; ++i)
            if (!has_in(n, i) || !const_of(n.input(i)) || const_of(n.input(i))->data_type() != pb::TensorProto::FLOAT) return {};
        value x = in(n, 0, who);
        const shape& xs = g_.shape_of(x);
        if (xs.rank < 2) throw error(who + ": input must have a channel axis, has shape " + xs.str());
        static constexpr const char* names[] = {"", "scale", "B", "input_mean", "input_var"};
        std::array<tensor<float>, 5> p;
        for (int i = 1; i < 5; ++i) {
            p[static_cast<std::size_t>(i)] = to_float_tensor(*const_of(n.input(i)), who + ": " + names[i] + " '" + n.input(i) + "'");
            if (!(p[static_cast<std::size_t>(i)].shape == shape{xs[1]}))
                throw error(who + ": " + names[i] + " has shape " + p[static_cast<std::size_t>(i)].shape.str() + ", expected [" + std::to_string(xs[1]) + "]");
        }
        double eps = a.get_float("epsilon", 1e-5f);
        tensor<float> scale(shape{xs[1]}), shift(shape{xs[1]});
        for (std::int64_t c = 0; c < xs[1]; ++c) {
            double s = double(p[1][c]) / std::sqrt(double(p[4][c]) + eps);
            scale[c] = static_cast<float>(s);
            shift[c] = static_cast<float>(double(p[2][c]) - double(p[3][c]) * s);
        }
        return {g_.batchnorm(x, g_.weight(out + "/scale", std::move(scale)), g_.weight(out + "/shift", std::move(shift)), out)};
    }

    std::vector<value> split(const pb::NodeProto& n, const attributes& a, const std::string& who) {
        if (!a.unknown({"axis", "split"}).empty()) return {};
        value x = in(n, 0, who);
        const shape& s = g_.shape_of(x);
        int ax = axis(a, "axis", a.get_int("axis", 0), s.rank);
        const int parts = n.output_size();
        std::vector<std::int64_t> sizes;
        if (opset_ >= 13) {
            if (a.has("split")) a.fail("split", "is an input from opset 13 on, not an attribute");
            if (has_in(n, 1)) sizes = const_ints(n, 1, who, "split");
        } else {
            if (n.input_size() > 1) throw error(who + ": takes one input before opset 13, has " + std::to_string(n.input_size()));
            sizes = a.get_ints("split", {});
        }
        if (sizes.empty()) {
            if (s[ax] % parts != 0)
                throw error(who + ": axis " + std::to_string(ax) + " of extent " + std::to_string(s[ax]) + " does not split into " + std::to_string(parts) + " equal parts");
            sizes.assign(static_cast<std::size_t>(parts), s[ax] / parts);
        }
        if (static_cast<int>(sizes.size()) != parts)
            throw error(who + ": split has " + std::to_string(sizes.size()) + " sizes for " + std::to_string(parts) + " outputs");
        std::int64_t total = 0;
        for (auto v : sizes) {
            if (v <= 0) throw error(who + ": split size " + std::to_string(v) + " (tsopt tensors are never empty)");
            // Compared before adding: sizes near 2^63 would overflow the sum.
            if (v > max_extent - total)
                throw error(who + ": split sizes add up to more than " + std::to_string(max_extent) + ", axis " + std::to_string(ax) +
                            " has extent " + std::to_string(s[ax]));
            total += v;
        }
        if (total != s[ax])
            throw error(who + ": split sizes add up to " + std::to_string(total) + ", axis " + std::to_string(ax) + " has extent " + std::to_string(s[ax]));
        // An n-way split is a chain of two-way splits.
        std::vector<value> outs;
        value rest = x;
        for (int k = 0; k + 1 < parts; ++k) {
            std::string nm = n.output(k).empty() ? n.output(parts - 1) + "/split" + std::to_string(k) : n.output(k);
            auto [head, tail] = g_.split(ax, int32(sizes[static_cast<std::size_t>(k)], who, "split"), rest, nm);
            outs.push_back(head);
            rest = tail;
        }
        outs.push_back(rest);
        return outs;
    }

    // ---- opaque operators ---------------------------------------------------
    // A node of engine_domain (proto.hpp) naming an operator this program
    // registered becomes that operator, its parameters read from the
    // attributes named as the declaration names them (absent: the
    // declaration's fallback); any other node there stays opaque.
    std::vector<value> map_engine_op(const pb::NodeProto& n, const std::string& label, const std::string& who) {
        const auto k = spec::find_op(n.op_type());
        if (!k || !spec::is_extension(*k)) return {};
        const spec::op_decl& d = spec::decl(*k);
        if (n.output_size() != d.num_outputs)
            throw error(who + ": operator '" + std::string(d.name) + "' has " + std::to_string(d.num_outputs) + " outputs, the node lists " +
                        std::to_string(n.output_size()));
        attributes a(n, who);
        for (const auto& at : n.attribute())
            if (d.param_index(at.name()) < 0)
                throw error(who + ": attribute '" + at.name() + "' is not a parameter of operator '" + std::string(d.name) + "'");
        spec::op_params p{};
        for (int i = 0; i < d.num_params; ++i) {
            const auto& slot = d.params[static_cast<std::size_t>(i)];
            p[i] = int32(a.get_int(slot.name, slot.fallback), who, "parameter");
        }
        std::vector<value> ins;
        for (int i = 0; i < n.input_size(); ++i) ins.push_back(in(n, i, who));
        return g_.add(*k, p, std::move(ins), label);
    }

    // An ONNX operator that broadcasts its inputs multidirectionally, kept
    // opaque, whose inputs' extents do not broadcast: refused by name, as
    // ONNX Runtime refuses it. libonnx's strict inference can miss it (a
    // graph output declared with a free extent stands in for the input it
    // names), so the model was taken and the one tsopt wrote refused.
    void check_broadcast(const pb::NodeProto& n, const std::string& who) {
        static constexpr std::string_view broadcasting[] = {
            "Add", "Sub", "Mul", "Div", "Pow", "Mod", "And", "Or", "Xor", "Equal", "Greater", "Less", "GreaterOrEqual",
            "LessOrEqual", "BitShift", "Max", "Min", "Mean", "Sum", "Where", "BitwiseAnd", "BitwiseOr", "BitwiseXor"};
        if (!(n.domain().empty() || n.domain() == "ai.onnx") ||
            std::find(std::begin(broadcasting), std::end(broadcasting), n.op_type()) == std::end(broadcasting))
            return;
        std::vector<shape> in;
        for (int i = 0; i < n.input_size(); ++i) {
            const std::string& nm = n.input(i);
            if (nm.empty()) continue;
            auto it = syms_.find(nm);
            if (it == syms_.end()) return;  // as_value names it
            if (it->second.v) in.push_back(g_.shape_of(*it->second.v));
            else if (it->second.c && it->second.c->dims_size() <= max_rank) {
                shape c;
                for (auto d : it->second.c->dims()) c.push_back(d);
                in.push_back(c);
            } else
                return;  // more axes than tsopt's shapes hold: libonnx's inference judges
        }
        (void)broadcast_shapes(in, who);
    }

    std::vector<value> make_opaque(const pb::NodeProto& n, const std::string& who) {
        auto op = std::make_shared<opaque_op>();
        op->type = n.op_type();
        op->domain = n.domain();
        pb::NodeProto blob;
        for (const auto& at : n.attribute()) {
            if (at.name().rfind(input_attr_prefix, 0) == 0 || at.name() == output_slots_attr)
                throw error(who + ": attribute name '" + at.name() + "' is reserved by tsopt");
            *blob.add_attribute() = at;
        }
        check_broadcast(n, who);
        std::vector<value> ins;
        for (int i = 0; i < n.input_size(); ++i) {
            const std::string& nm = n.input(i);
            auto* c = nm.empty() ? nullptr : const_of(nm);
            if (nm.empty() || (c && c->data_type() != pb::TensorProto::FLOAT)) {
                // Inputs the graph IR cannot carry travel in the blob.
                auto* at = blob.add_attribute();
                at->set_name(std::string(input_attr_prefix) + std::to_string(i));
                if (nm.empty()) at->set_type(pb::AttributeProto::STRINGS);
                else {
                    at->set_type(pb::AttributeProto::TENSOR);
                    *at->mutable_t() = *c;
                    at->mutable_t()->set_name(nm);
                }
                continue;
            }
            ins.push_back(as_value(nm, who));
        }
        std::vector<shape> shapes;
        std::vector<std::int64_t> slots;
        bool gaps = false;
        for (int k = 0; k < n.output_size(); ++k) {
            const std::string& nm = n.output(k);
            if (nm.empty()) { gaps = true; continue; }
            slots.push_back(k);
            shapes.push_back(output_shape(nm, n, who));
        }
        if (gaps) {
            auto* at = blob.add_attribute();
            at->set_name(std::string(output_slots_attr));
            at->set_type(pb::AttributeProto::INTS);
            for (auto s : slots) at->add_ints(s);
        }
        if (shapes.empty()) throw error(who + ": has no named outputs");
        op->attributes = blob.SerializeAsString();
        op->attribute_count = blob.attribute_size();
        return g_.opaque(std::move(op), std::move(ins), std::move(shapes), n.output(static_cast<int>(slots[0])));
    }

    shape output_shape(const std::string& name, const pb::NodeProto& node, const std::string& who) {
        auto full = [](const declared_shape& d) {
            if (!d.has_shape) return false;
            for (int i = 0; i < d.s.rank; ++i)
                if (!d.fixed[static_cast<std::size_t>(i)]) return false;
            return true;
        };
        auto check = [&](const declared_shape& d) {
            if (d.elem != 0 && d.elem != pb::TensorProto::FLOAT)
                throw error(who + ": output '" + name + "' has element type " + type_name(d.elem) + "; tsopt graphs carry float32 tensors");
            if (bounded_elements(d.s) > max_elements) throw error(who + ": output '" + name + "' has too many elements");
            return d.s;
        };
        if (auto it = declared_.find(name); it != declared_.end() && full(it->second)) return check(it->second);
        run_inference();
        if (auto it = inferred_.find(name); it != inferred_.end() && full(it->second)) return check(it->second);
        if (auto d = infer_alone(node, name, who); d && full(*d)) return check(*d);
        if (node.op_type() == "Einsum" && (node.domain().empty() || node.domain() == "ai.onnx"))
            if (auto e = einsum_shape(node, who)) {
                if (bounded_elements(*e) > max_elements) throw error(who + ": output '" + name + "' has too many elements");
                return *e;
            }
        throw error(who + ": the shape of output '" + name +
                    "' is unknown (not in the model's value_info, and ONNX shape inference could not infer it); "
                    "add it to value_info");
    }

    // The output shape of an Einsum from its equation and its inputs'
    // shapes: libonnx (1.12) infers only the rank where the equation has an
    // ellipsis (MaxViT's attention: "...ij,...kj->...ik").
    std::optional<shape> einsum_shape(const pb::NodeProto& n, const std::string& who) {
        attributes a(n, who);
        std::vector<shape> shapes;
        for (int i = 0; i < n.input_size(); ++i) shapes.push_back(g_.shape_of(as_value(n.input(i), who)));
        const auto p = plan_einsum(a.get_string("equation", ""), shapes);
        if (!p) return std::nullopt;
        shape out;
        for (char l : p->out) out.push_back(p->extent.at(l));
        return out;
    }

    // A Dropout whose training_mode is absent or a constant false (PyTorch
    // writes the constant), or whose ratio is a constant 0 (torchvision
    // 0.14's Swin exports training_mode true with ratio 0): the identity.
    bool inference_dropout(const pb::NodeProto& n) const {
        if (!has_in(n, 2)) return true;
        if (const pb::TensorProto* r = has_in(n, 1) ? const_of(n.input(1)) : nullptr;
            r && r->data_type() == pb::TensorProto::FLOAT && r->dims_size() == 0) {
            const std::string& raw = r->raw_data();
            float v = 1;
            if (raw.size() == sizeof v) std::memcpy(&v, raw.data(), sizeof v);
            else if (raw.empty() && r->float_data_size() == 1) v = r->float_data(0);
            if (v == 0.f) return true;
        }
        const pb::TensorProto* c = const_of(n.input(2));
        if (!c || c->data_type() != pb::TensorProto::BOOL || c->dims_size() > 1 || (c->dims_size() == 1 && c->dims(0) != 1)) return false;
        if (c->has_raw_data()) return c->raw_data() == std::string(1, '\0');
        return c->int32_data_size() == 1 && c->int32_data(0) == 0;
    }

    // Whether a node or the graph's outputs read value `name`.
    bool read_anywhere(const std::string& name) const {
        if (name.empty()) return false;
        for (const auto& nd : m_.graph().node())
            for (const auto& in : nd.input())
                if (in == name) return true;
        for (const auto& o : m_.graph().output())
            if (o.name() == name) return true;
        return false;
    }

    // ONNX shape inference of node n alone, its inputs as the import has
    // them: shapes of the values before it, constants (the shape arithmetic
    // folded at import among them) as initializers. Inference of the whole
    // model cannot see through that arithmetic: a Slice whose starts come
    // from Shape -> Gather -> Div (PyTorch's chunk) has no inferred shape.
    std::optional<declared_shape> infer_alone(const pb::NodeProto& n, const std::string& name, const std::string& who) {
        if (!o_.shape_inference) return std::nullopt;
        google::protobuf::Arena arena;
        pb::ModelProto& model = *google::protobuf::Arena::CreateMessage<pb::ModelProto>(&arena);
        model.set_ir_version(m_.ir_version());
        *model.mutable_opset_import() = m_.opset_import();
        auto* gp = model.mutable_graph();
        gp->set_name("one node");
        *gp->add_node() = n;
        std::set<std::string> seen;
        for (const std::string& in : n.input()) {
            if (in.empty() || !seen.insert(in).second) continue;
            if (const pb::TensorProto* c = const_of(in)) {
                auto* t = gp->add_initializer();
                const std::size_t stored = c->raw_data().size() + static_cast<std::size_t>(c->float_data_size()) * sizeof(float);
                if (c->data_type() == pb::TensorProto::FLOAT && stored > 16384) {  // weights: inference reads their dims only
                    t->set_data_type(c->data_type());
                    *t->mutable_dims() = c->dims();
                } else {
                    *t = *c;
                }
                t->set_name(in);
                continue;
            }
            auto* vi = gp->add_input();
            vi->set_name(in);
            auto* tt = vi->mutable_type()->mutable_tensor_type();
            tt->set_elem_type(pb::TensorProto::FLOAT);
            auto* sh = tt->mutable_shape();
            for (auto d : g_.shape_of(as_value(in, who))) sh->add_dim()->set_dim_value(d);
        }
        for (const std::string& o : n.output())
            if (!o.empty()) gp->add_output()->set_name(o);
        try {
            ::onnx::shape_inference::InferShapes(model);
        } catch (const std::exception&) {
            return std::nullopt;  // best effort, as run_inference
        }
        for (const auto* list : {&gp->output(), &gp->value_info()})
            for (const auto& vi : *list)
                if (vi.name() == name)
                    if (auto d = read_type(vi)) return d;
        return std::nullopt;
    }

    // The concrete shapes chosen at import for the graph inputs that are not
    // initializers, by name.
    std::map<std::string, shape, std::less<>> input_shapes() const {
        std::map<std::string, shape, std::less<>> r;
        for (const auto& vi : m_.graph().input()) {
            auto it = syms_.find(vi.name());
            if (it == syms_.end() || !it->second.v || it->second.c) continue;
            const node& nd = g_.at(*it->second.v);
            if (nd.kind == node_kind::input) r.emplace(vi.name(), nd.shapes[0]);
        }
        return r;
    }

    // A copy of the model for ONNX shape inference: graph inputs carry the
    // concrete shapes chosen at import (so dynamic batch dims become static),
    // and the declared value_info is kept only for checking against it.
    // Large float initializers come without their data: inference reads
    // only their type and dims (it reads values only of shape-like inputs,
    // small integer or float tensors), and copying the weights twice (the
    // strict check, then inference) made import peak at three copies of them.
    // Reads only m_, opset_ and `inputs`, so it may run on another thread.
    pb::ModelProto& inference_copy(bool keep_value_info, google::protobuf::Arena& arena,
                                   const std::map<std::string, shape, std::less<>>& inputs) const {
        pb::ModelProto& copy = *google::protobuf::Arena::CreateMessage<pb::ModelProto>(&arena);
        copy.set_ir_version(m_.ir_version());
        *copy.mutable_opset_import() = m_.opset_import();
        *copy.mutable_functions() = m_.functions();
        const pb::GraphProto& src = m_.graph();
        auto* gp = copy.mutable_graph();
        gp->set_name(src.name());
        *gp->mutable_node() = src.node();
        *gp->mutable_input() = src.input();
        *gp->mutable_output() = src.output();
        if (keep_value_info) *gp->mutable_value_info() = src.value_info();
        for (const auto& t : src.initializer()) {
            auto* c = gp->add_initializer();
            const std::size_t stored = t.raw_data().size() + static_cast<std::size_t>(t.float_data_size()) * sizeof(float);
            if (t.data_type() != pb::TensorProto::FLOAT || stored <= 16384) {
                *c = t;
                continue;
            }
            c->set_name(t.name());
            c->set_data_type(t.data_type());
            *c->mutable_dims() = t.dims();
        }

        for (auto& vi : *gp->mutable_input()) {
            auto it = inputs.find(vi.name());
            if (it == inputs.end()) continue;
            auto* sh = vi.mutable_type()->mutable_tensor_type()->mutable_shape();
            sh->clear_dim();
            for (auto d : it->second) sh->add_dim()->set_dim_value(d);
        }
        // The dims known before inference: initializers, graph inputs with
        // every extent given, Constants.
        std::map<std::string, std::vector<std::int64_t>, std::less<>> known_dims;
        for (const auto& t : gp->initializer()) known_dims[t.name()] = {t.dims().begin(), t.dims().end()};
        for (const auto& vi : gp->input()) {
            if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) continue;
            std::vector<std::int64_t> d;
            for (const auto& e : vi.type().tensor_type().shape().dim())
                if (e.has_dim_value()) d.push_back(e.dim_value());
            if (static_cast<int>(d.size()) == vi.type().tensor_type().shape().dim_size()) known_dims.try_emplace(vi.name(), std::move(d));
        }
        for (const auto& nd : gp->node())
            if (nd.op_type() == "Constant" && nd.output_size() == 1)
                for (const auto& at : nd.attribute())
                    if (at.name() == "value" && at.has_t()) known_dims[nd.output(0)] = {at.t().dims().begin(), at.t().dims().end()};
        // libonnx's inference functions trust attributes (a zero stride divides
        // by zero, a misspelt kernel_shape reads a missing one); nodes with
        // non-positive window attributes, attributes their schema does not
        // declare or types differently, a required attribute missing, or no
        // outputs are left out, so their outputs stay unknown and the caller
        // reports them.
        auto* nodes = gp->mutable_node();
        for (int i = nodes->size() - 1; i >= 0; --i) {
            const auto& nd = nodes->Get(i);
            // A node without outputs: Split's inference divides by their count.
            bool bad = nd.output_size() == 0;
            if (nd.domain().empty() || nd.domain() == "ai.onnx") {
                const auto* schema = ::onnx::OpSchemaRegistry::Schema(nd.op_type(), static_cast<int>(opset_), "");
                bad = bad || (schema ? !schema_violation(nd, *schema).empty() : nd.attribute_size() > 0);
            }
            // Without kernel_shape, the convolutions' inference takes the
            // kernel's size from W and reads a dilation per kernel axis
            // without comparing the counts: a W of higher rank than the
            // input read past an empty vector (SIGSEGV on a fuzzer-made
            // model). Where W's dims are known, kernel_shape (its meaning
            // when absent) is written out, so the inference compares its
            // length with the input's spatial rank; a W without spatial axes
            // is left out.
            if (const int w = nd.op_type() == "QLinearConv" ? 3 : 1;
                (nd.domain().empty() || nd.domain() == "ai.onnx") && nd.input_size() > w &&
                (nd.op_type() == "Conv" || nd.op_type() == "ConvInteger" || nd.op_type() == "ConvTranspose" || nd.op_type() == "QLinearConv") &&
                std::none_of(nd.attribute().begin(), nd.attribute().end(), [](const auto& at) { return at.name() == "kernel_shape"; })) {
                if (auto it = known_dims.find(nd.input(w)); it != known_dims.end()) {
                    if (it->second.size() < 3) bad = true;
                    else {
                        auto* ks = nodes->Mutable(i)->add_attribute();
                        ks->set_name("kernel_shape");
                        ks->set_type(pb::AttributeProto::INTS);
                        for (std::size_t k = 2; k < it->second.size(); ++k) ks->add_ints(it->second[k]);
                    }
                }
            }
            for (const auto& at : nodes->Get(i).attribute()) {
                static constexpr std::string_view risky[] = {"strides", "dilations", "kernel_shape", "group", "blocksize", "pads"};
                if (std::find(std::begin(risky), std::end(risky), at.name()) == std::end(risky)) continue;
                bool pads = at.name() == "pads";
                if (at.has_i() && (pads ? at.i() < 0 : at.i() <= 0)) bad = true;
                for (auto v : at.ints()) bad = bad || (pads ? v < 0 : v <= 0) || v > max_extent;
            }
            if (bad) nodes->DeleteSubrange(i, 1);
        }
        return copy;
    }

    // What the node's ONNX schema at the model's opset says is wrong with its
    // attributes (one the schema does not declare, one of another type, a
    // required one missing), or "" when nothing is. libonnx's inference
    // functions trust the schema (Scan's reads num_scan_inputs without
    // checking it is there).
    std::string schema_violation(const pb::NodeProto& nd, const ::onnx::OpSchema& schema) const {
        const std::string at_opset = " (opset " + std::to_string(opset_) + ")";
        for (const auto& at : nd.attribute()) {
            auto declared = schema.attributes().find(at.name());
            if (declared == schema.attributes().end())
                return "attribute '" + at.name() + "' is not one of " + nd.op_type() + "'s" + at_opset;
            if (at.type() != pb::AttributeProto::UNDEFINED && at.type() != declared->second.type)
                return "attribute '" + at.name() + "' is " + pb::AttributeProto::AttributeType_Name(at.type()) + "; " +
                       nd.op_type() + at_opset + " declares it " +
                       pb::AttributeProto::AttributeType_Name(declared->second.type);
        }
        for (const auto& declared : schema.attributes())
            if (declared.second.required && std::none_of(nd.attribute().begin(), nd.attribute().end(),
                                                         [&](const auto& at) { return at.name() == declared.first; }))
                return "needs the attribute '" + declared.first + "' (" + nd.op_type() + at_opset + " requires it)";
        return "";
    }

    // onnx.checker's full check runs ONNX shape inference in strict mode: a
    // node whose inputs do not fit its operator (Div of [3,4,5] by [3,4], a
    // BatchNormalization scale of the wrong length, a kernel_shape shorter
    // than the input's spatial rank) makes the model invalid even where
    // tsopt keeps the node opaque or reads only part of an attribute. The
    // same inference, on the same sanitized copy run_inference uses (libonnx
    // divides by a zero stride), rejects such a model by name.
    // The inputs' shapes are read here, on the calling thread (syms_ and g_
    // change as add_node goes on); the task reads only the model, those
    // shapes and libonnx's schema registry (read-only once built), and
    // writes only its copy. `arena` must outlive the returned future (whose
    // destructor waits for the task). Where no thread can be started (a
    // process limit), libstdc++ runs the task deferred, at get().
    std::future<void> start_strict_check(google::protobuf::Arena& arena) const {
        if (!o_.shape_inference) return {};
        // Built before the task starts: the registry's first use registers every schema.
        (void)::onnx::OpSchemaRegistry::Instance();
        return std::async(std::launch::async | std::launch::deferred, [this, &arena, inputs = input_shapes()] {
            pb::ModelProto& copy = inference_copy(true, arena, inputs);
            try {
                ::onnx::shape_inference::InferShapes(copy, ::onnx::OpSchemaRegistry::Instance(),
                                                     ::onnx::ShapeInferenceOptions(/*check_type=*/true, /*error_mode=*/1));
            } catch (const std::exception& e) {
                std::string m = e.what();
                while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
                throw error("ONNX shape inference (strict, as onnx.checker's full check) rejects the model: " + m);
            }
        });
    }

    // ONNX shape inference on inference_copy(false), best effort: fills
    // inferred_ with the shapes of outputs value_info does not declare.
    void run_inference() {
        if (inferred_done_ || !o_.shape_inference) return;
        inferred_done_ = true;
        google::protobuf::Arena arena;
        pb::ModelProto& copy = inference_copy(false, arena, input_shapes());
        try {
            ::onnx::shape_inference::InferShapes(copy);
        } catch (const std::exception&) {
            return;  // inference is best effort; the caller reports what stays unknown
        }
        for (const auto& vi : copy.graph().value_info())
            if (auto d = read_type(vi)) inferred_[vi.name()] = *d;
        for (const auto& vi : copy.graph().output())
            if (auto d = read_type(vi)) inferred_[vi.name()] = *d;
    }
};

}  // namespace detail

// Imports a serialized ModelProto. Throws tsopt::error naming the node,
// attribute or field at fault.
namespace detail {
inline void parse_model(std::string_view bytes, pb::ModelProto& m) {
    if (bytes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()) ||
        !m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
        throw error("not a valid ONNX model: the data does not parse as an onnx.ModelProto (truncated or not protobuf)");
}
}  // namespace detail

// Parsed models live on an arena: a model of many nodes is a great many small
// messages, and freeing them one by one took a tenth of `optimize` on a
// 100k-node chain.
// External tensor data, if the model has any, comes from `external`
// (without one such a model is refused when a weight is read).
inline model import_model(std::string_view bytes, const import_options& o = {}, const external_reader& external = {}) {
    google::protobuf::Arena arena;
    auto& m = *google::protobuf::Arena::CreateMessage<pb::ModelProto>(&arena);
    detail::parse_model(bytes, m);
    if (external) inline_external_data(m, external);
    return detail::importer(m, o).run();
}
inline model import_model(const pb::ModelProto& m, const import_options& o = {}) { return detail::importer(m, o).run(); }

// The file's bytes are read once, at their size, and freed once parsed, so
// the weights exist twice at most while the graph is built (the parsed model
// and the graph): a stringstream and its str() copy held four. External
// tensor data is read from beside the file.
inline model read_model(const std::string& path, const import_options& o = {}) {
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    if (!f) throw error("cannot open ONNX file '" + path + "'");
    try {
        google::protobuf::Arena arena;
        auto& m = *google::protobuf::Arena::CreateMessage<pb::ModelProto>(&arena);
        {
            const std::streamoff size = f.tellg();
            if (size < 0) throw error("cannot read its size");
            std::string bytes(static_cast<std::size_t>(size), '\0');
            f.seekg(0);
            if (!f.read(bytes.data(), size)) throw error("cannot read " + std::to_string(size) + " bytes");
            detail::parse_model(bytes, m);
        }
        inline_external_data(m, external_files(std::filesystem::path(path).parent_path()));
        return detail::importer(m, o).run();
    } catch (const error& e) {
        throw error(path + ": " + e.what());
    }
}

// The graph of an ONNX file: `auto g = tsopt::onnx::load("model.onnx");`
inline graph load(const std::string& path, const import_options& o = {}) { return read_model(path, o).graph; }

}  // namespace tsopt::onnx
