#pragma once
// tsopt graph -> ONNX ModelProto (opset 13..17). Declared operators map back
// to ONNX operators (a fused activation becomes a following Relu / Sigmoid /
// Tanh, `same` padding becomes explicit pads); operators ONNX has no
// counterpart for (enlarge, the constant operators) are precomputed into
// initializers when their inputs are weights, and otherwise expressed with
// Pad; opaque nodes come back as the ONNX nodes they were, attributes and all.
// Non-default layouts become Transpose pairs (exporter::express_layout); a
// reorder node is an Identity plus that pair. A conv2d whose only reader adds
// a per-channel constant is written as one Conv with that bias as its B
// input, as ONNX models state a bias (the importer splits it into conv2d +
// ewadd, and rules and backends work on that form).
#include <map>
#include <set>

#include "tsopt/io/atomic_file.hpp"
#include "tsopt/io/onnx/import.hpp"
#include "tsopt/version.hpp"

namespace tsopt::onnx {

struct export_options {
    std::int64_t opset = 17;                  // default-domain opset written: 13..17
    std::vector<std::string> output_names{};  // names of the graph outputs (default: producing node's name)
    std::vector<std::pair<std::string, std::int64_t>> other_opsets{};  // opsets of opaque nodes' custom domains
    std::string graph_name = "tsopt";
    // A model whose serialized size would pass this keeps its initializers
    // of 1 KiB and more in an external data file (see to_files). Protobuf
    // cannot write a message over 2 GiB.
    std::size_t max_embedded_bytes = std::numeric_limits<std::int32_t>::max();
};

namespace detail {

class exporter {
public:
    exporter(const graph& g, const export_options& o) : g_(g), o_(o) {}

    void run(pb::ModelProto& m) {
        if (o_.opset < 13 || o_.opset > max_opset)
            throw error("export_options::opset is " + std::to_string(o_.opset) + "; tsopt writes opsets 13.." + std::to_string(max_opset));
        if (!o_.output_names.empty() && o_.output_names.size() != g_.outputs.size())
            throw error("export_options::output_names has " + std::to_string(o_.output_names.size()) + " names for " +
                        std::to_string(g_.outputs.size()) + " graph outputs");
        g_.validate();
        m.set_ir_version(o_.opset >= 14 ? 8 : 7);
        m.set_producer_name("tsopt");
        m.set_producer_version(TSOPT_VERSION_STRING);
        auto* op = m.add_opset_import();
        op->set_domain("");
        op->set_version(o_.opset);
        gp_ = m.mutable_graph();
        gp_->set_name(o_.graph_name);

        names_.resize(g_.size());
        for (std::size_t i = 0; i < g_.size(); ++i) names_[i].resize(static_cast<std::size_t>(g_.nodes[i].num_outputs()));
        // Graph inputs keep their names; they are the model's interface.
        for (value v : g_.inputs()) {
            const node& n = g_.at(v);
            name(v) = unique(n.name);
            value_info(gp_->add_input(), name(v), n.shapes[0]);
        }
        // Graph outputs produced by operators take the requested names.
        for (std::size_t i = 0; i < g_.outputs.size() && !o_.output_names.empty(); ++i) {
            value v = g_.outputs[i];
            node_kind k = g_.at(v).kind;
            if ((k == node_kind::op || k == node_kind::opaque) && name(v).empty() && !used_.count(o_.output_names[i]))
                name(v) = claim(o_.output_names[i]);
        }
        auto constant = g_.constant_mask();
        plan_conv_biases();
        std::set<std::string> domains;
        for (std::size_t i : g_.topological_order()) {
            const node& n = g_.nodes[i];
            value v0{static_cast<std::int32_t>(i), 0};
            if (absorbed_.count(i)) continue;  // written as part of a Conv's bias
            switch (n.kind) {
                case node_kind::input: break;
                case node_kind::weight: initializer(v0, *n.data); break;
                case node_kind::op:
                    if (folds(n, constant[i])) initializer(v0, fold(i));
                    else if (spec::is_extension(n.op)) {
                        emit_engine_op(i);
                        domains.insert(std::string(engine_domain));
                    } else {
                        const int first = gp_->node_size();
                        emit_op(i);
                        express_layout(i, first);
                    }
                    break;
                case node_kind::opaque:
                    emit_opaque(i);
                    if (!n.opaque->domain.empty() && n.opaque->domain != "ai.onnx") domains.insert(n.opaque->domain);
                    break;
            }
        }
        for (const auto& d : domains) {
            std::int64_t ver = 1;
            for (auto& [dn, dv] : o_.other_opsets)
                if (dn == d) ver = dv;
            auto* x = m.add_opset_import();
            x->set_domain(d);
            x->set_version(ver);
        }
        std::set<std::string> out_names;
        for (std::size_t i = 0; i < g_.outputs.size(); ++i) {
            value v = g_.outputs[i];
            std::string want = o_.output_names.empty() ? std::string() : o_.output_names[i];
            std::string nm = name(v);
            // An input or initializer that is also an output is listed under
            // its own name (ONNX allows it): the interface keeps its names.
            if ((!want.empty() && want != nm) || out_names.count(nm)) {
                // Rename through an Identity (a value listed twice, or a
                // requested name other than the value's).
                std::string out = claim_or_unique(want.empty() ? nm + "_output" : want);
                auto* nd = add_node("Identity", out + "/identity");
                nd->add_input(nm);
                nd->add_output(out);
                nm = out;
            }
            out_names.insert(nm);
            value_info(gp_->add_output(), nm, g_.shape_of(v));
        }
    }

private:
    const graph& g_;
    const export_options& o_;
    pb::GraphProto* gp_ = nullptr;
    std::vector<std::vector<std::string>> names_;
    std::set<std::string> used_;
    std::set<std::string> node_names_;  // a namespace of their own in ONNX
    std::map<std::size_t, std::vector<tensor<float>>> folded_;
    // conv2d node -> the ewadd that adds its bias, and the bias as ONNX's B ([C]).
    struct conv_bias {
        std::size_t add;
        tensor<float> b;
    };
    std::map<std::size_t, conv_bias> conv_bias_;
    std::set<std::size_t> absorbed_;  // nodes a Conv's B input replaces: the adds, their bias reshapes and weights

    // Finds the conv2d -> ewadd(per-channel constant) pairs written as one
    // Conv: the conv (no fused activation) feeds only the add, neither is a
    // graph output or stored in another layout, and the other operand is a
    // weight of shape [1, C, 1, 1] or [C, 1, 1] (or a reshape of a weight
    // read by that add alone) holding C values, so the add's output is the
    // conv's shape and Conv's B computes it.
    void plan_conv_biases() {
        const auto readers = g_.consumers();
        auto is_output = [&](std::size_t i) {
            return std::any_of(g_.outputs.begin(), g_.outputs.end(), [&](value v) { return static_cast<std::size_t>(v.node) == i; });
        };
        auto plain = [&](const node& n) { return n.out_layout != spec::layout::nhwc && n.out_layout != spec::layout::col_major; };
        std::set<std::size_t> bias_sources;  // weights read by absorbed nodes
        for (std::size_t i = 0; i < g_.size(); ++i) {
            const node& c = g_.nodes[i];
            if (!c.is_op(spec::op_kind::conv2d) || c.params[spec::conv2d_p::act] != 0 || !plain(c) || is_output(i) ||
                readers[i].size() != 1)
                continue;
            const auto add = static_cast<std::size_t>(readers[i][0].first);
            const node& a = g_.nodes[add];
            if (!a.is_op(spec::op_kind::ewadd) || !plain(a) || !(a.shapes[0] == c.shapes[0]) || c.shapes[0].rank != 4) continue;
            const value bv = a.inputs[static_cast<std::size_t>(1 - readers[i][0].second)];
            const shape& bs = g_.shape_of(bv);
            const std::int64_t ch = c.shapes[0][1];
            if (!(bs == shape{1, ch, 1, 1} || bs == shape{ch, 1, 1})) continue;
            const node* w = &g_.at(bv);
            std::optional<std::size_t> reshape;
            if (w->is_op(spec::op_kind::reshape) && readers[static_cast<std::size_t>(bv.node)].size() == 1 &&
                !is_output(static_cast<std::size_t>(bv.node))) {
                reshape = static_cast<std::size_t>(bv.node);
                w = &g_.at(w->inputs[0]);
            }
            if (w->kind != node_kind::weight || !w->data || static_cast<std::int64_t>(w->data->data.size()) != ch) continue;
            conv_bias_[i] = {add, tensor<float>(shape{ch}, w->data->data)};
            absorbed_.insert(add);
            if (reshape) {
                absorbed_.insert(*reshape);
                bias_sources.insert(static_cast<std::size_t>(g_.nodes[*reshape].inputs[0].node));
            } else {
                bias_sources.insert(static_cast<std::size_t>(bv.node));
            }
        }
        // A bias weight nothing else reads is not written on its own.
        for (std::size_t w : bias_sources)
            if (!is_output(w) && std::all_of(readers[w].begin(), readers[w].end(), [&](const auto& r) {
                    return absorbed_.count(static_cast<std::size_t>(r.first)) > 0;
                }))
                absorbed_.insert(w);
    }

    std::string& name(value v) { return names_[static_cast<std::size_t>(v.node)][static_cast<std::size_t>(v.output)]; }
    std::string claim(const std::string& s) {
        used_.insert(s);
        return s;
    }
    // `base`, else the first of base_1, base_2, ... not in `used`, claimed.
    static std::string unique_in(std::set<std::string>& used, const std::string& base) {
        std::string nm = base;
        for (int k = 1; !used.insert(nm).second; ++k) nm = base + "_" + std::to_string(k);
        return nm;
    }
    std::string unique(const std::string& base) { return unique_in(used_, base.empty() ? "t" : base); }
    std::string claim_or_unique(const std::string& s) { return unique(s); }
    // Tensor name of a value, assigned on first use.
    const std::string& tensor_name(value v) {
        std::string& s = name(v);
        if (s.empty()) {
            const node& n = g_.at(v);
            s = unique(v.output == 0 ? n.name : n.name + ":" + std::to_string(v.output));
        }
        return s;
    }

    static void value_info(pb::ValueInfoProto* vi, const std::string& nm, const shape& s) {
        vi->set_name(nm);
        auto* tt = vi->mutable_type()->mutable_tensor_type();
        tt->set_elem_type(pb::TensorProto::FLOAT);
        auto* sh = tt->mutable_shape();
        for (auto d : s) sh->add_dim()->set_dim_value(d);
    }
    void initializer(value v, const tensor<float>& t) { fill_tensor(*gp_->add_initializer(), tensor_name(v), t); }
    std::string int_initializer(const std::string& base, const std::vector<std::int64_t>& v) {
        std::string nm = unique(base);
        fill_ints(*gp_->add_initializer(), nm, v);
        return nm;
    }
    std::string float_initializer(const std::string& base, const tensor<float>& t) {
        std::string nm = unique(base);
        fill_tensor(*gp_->add_initializer(), nm, t);
        return nm;
    }
    // Node names are made unique too: ONNX Runtime refuses a model with two
    // nodes of one name, and a graph may hold two (built so by a user, or
    // stitched from parts that each named a conversion `<x>/to_nhwc`).
    pb::NodeProto* add_node(const std::string& type, const std::string& node_name) {
        auto* nd = gp_->add_node();
        nd->set_op_type(type);
        nd->set_name(unique_in(node_names_, node_name));
        return nd;
    }
    static void ints(pb::NodeProto* nd, const char* nm, std::vector<std::int64_t> v) {
        auto* a = nd->add_attribute();
        a->set_name(nm);
        a->set_type(pb::AttributeProto::INTS);
        for (auto x : v) a->add_ints(x);
    }
    static void int1(pb::NodeProto* nd, const char* nm, std::int64_t v) {
        auto* a = nd->add_attribute();
        a->set_name(nm);
        a->set_type(pb::AttributeProto::INT);
        a->set_i(v);
    }
    static void float1(pb::NodeProto* nd, const char* nm, float v) {
        auto* a = nd->add_attribute();
        a->set_name(nm);
        a->set_type(pb::AttributeProto::FLOAT);
        a->set_f(v);
    }
    static void str1(pb::NodeProto* nd, const char* nm, const std::string& v) {
        auto* a = nd->add_attribute();
        a->set_name(nm);
        a->set_type(pb::AttributeProto::STRING);
        a->set_s(v);
    }

    // Operators without an ONNX counterpart are precomputed when weight-only.
    static bool folds(const node& n, bool constant) {
        if (spec::decl(n.op).cls == spec::op_class::constant) return true;
        return constant && n.op == spec::op_kind::enlarge;
    }
    const tensor<float>& fold(std::size_t i) {
        if (auto it = folded_.find(i); it != folded_.end()) return it->second[0];
        const node& n = g_.nodes[i];
        std::vector<const tensor<float>*> args;
        for (value v : n.inputs) {
            const node& src = g_.at(v);
            if (src.kind == node_kind::weight) args.push_back(src.data.get());
            else args.push_back(&fold(static_cast<std::size_t>(v.node)));  // constant chains: enlarge(cpool)
        }
        return (folded_[i] = spec::evaluate<float>(n.op, n.params, args))[0];
    }

    void emit_op(std::size_t i) {
        const node& n = g_.nodes[i];
        std::vector<std::string> in;
        for (value v : n.inputs) in.push_back(tensor_name(v));
        value v0{static_cast<std::int32_t>(i), 0};
        // A conv with an absorbed bias writes its add's output.
        const auto bias = conv_bias_.find(i);
        const value written = bias == conv_bias_.end() ? v0 : value{static_cast<std::int32_t>(bias->second.add), 0};
        const std::string out = tensor_name(written);
        const auto& p = n.params;
        std::int32_t act = 0;
        // The ONNX node writing `out`, or its pre-activation when fused.
        auto emit = [&](const std::string& type) {
            auto* nd = add_node(type, n.name);
            for (auto& s : in) nd->add_input(s);
            nd->add_output(act ? unique(out + "/pre_act") : out);
            return nd;
        };
        using K = spec::op_kind;
        switch (n.op) {
            case K::conv2d: {
                using namespace spec::conv2d_p;
                act = p[spec::conv2d_p::act];
                const shape &x = g_.shape_of(n.inputs[0]), &w = g_.shape_of(n.inputs[1]);
                auto pm = static_cast<spec::pad_mode>(p[pad]);
                std::int64_t ph = spec::detail::window_pad(w[2], p[dil_h], pm), pw = spec::detail::window_pad(w[3], p[dil_w], pm);
                if (bias != conv_bias_.end()) in.push_back(float_initializer(n.name + "/bias", bias->second.b));
                auto* nd = emit("Conv");
                ints(nd, "kernel_shape", {w[2], w[3]});
                ints(nd, "strides", {p[stride_h], p[stride_w]});
                ints(nd, "dilations", {p[dil_h], p[dil_w]});
                ints(nd, "pads", {ph, pw, ph, pw});
                int1(nd, "group", x[1] / w[1]);
                break;
            }
            case K::matmul: act = p[spec::matmul_p::act]; emit("MatMul"); break;
            case K::ewadd: emit("Add"); break;
            case K::ewmul: emit("Mul"); break;
            case K::smul: {
                // smul keeps x's shape; ONNX Mul broadcasts, so a scalar operand of
                // higher rank than x is first reshaped to rank 0.
                const node& sn = g_.at(n.inputs[1]);
                if (g_.shape_of(n.inputs[1]).rank > g_.shape_of(n.inputs[0]).rank && sn.kind == node_kind::weight) {
                    in[1] = float_initializer(n.name + "/scalar", tensor<float>(shape{}, (*sn.data)[0]));
                } else if (g_.shape_of(n.inputs[1]).rank > g_.shape_of(n.inputs[0]).rank) {
                    std::string shp = int_initializer(n.name + "/scalar_shape", {});
                    auto* r = add_node("Reshape", n.name + "/scalar");
                    r->add_input(in[1]);
                    r->add_input(shp);
                    in[1] = unique(n.name + "/scalar");
                    r->add_output(in[1]);
                }
                emit("Mul");
                break;
            }
            case K::relu: emit("Relu"); break;
            case K::sigmoid: emit("Sigmoid"); break;
            case K::tanh: emit("Tanh"); break;
            case K::avgpool: case K::maxpool: {
                using namespace spec::pool_p;
                act = p[spec::pool_p::act];
                auto pm = static_cast<spec::pad_mode>(p[pad]);
                std::int64_t ph = spec::detail::window_pad(p[kh], 1, pm), pw = spec::detail::window_pad(p[kw], 1, pm);
                auto* nd = emit(n.op == K::avgpool ? "AveragePool" : "MaxPool");
                ints(nd, "kernel_shape", {p[kh], p[kw]});
                ints(nd, "strides", {p[stride_h], p[stride_w]});
                ints(nd, "pads", {ph, pw, ph, pw});
                if (n.op == K::avgpool) int1(nd, "count_include_pad", 1);
                break;
            }
            case K::concat: int1(emit("Concat"), "axis", p[spec::concat_p::axis]); break;
            case K::split: {
                int ax = p[spec::split_p::axis];
                std::int64_t at = p[spec::split_p::at], total = g_.shape_of(n.inputs[0])[ax];
                in.push_back(int_initializer(n.name + "/split", {at, total - at}));
                auto* nd = add_node("Split", n.name);
                for (auto& s : in) nd->add_input(s);
                nd->add_output(out);
                nd->add_output(tensor_name({static_cast<std::int32_t>(i), 1}));
                int1(nd, "axis", ax);
                return;
            }
            case K::transpose: {
                std::vector<std::int64_t> perm;
                for (int k = 0; k < spec::perm_rank(p[spec::transpose_p::perm]); ++k) perm.push_back(spec::perm_axis(p[spec::transpose_p::perm], k));
                ints(emit("Transpose"), "perm", perm);
                break;
            }
            case K::reshape: {
                std::vector<std::int64_t> s(n.shapes[0].begin(), n.shapes[0].end());
                in.push_back(int_initializer(n.name + "/shape", s));
                emit("Reshape");
                break;
            }
            case K::softmax: int1(emit("Softmax"), "axis", p[spec::softmax_p::axis]); break;
            // The value is unchanged; its storage is expressed by express_layout.
            case K::reorder: emit("Identity"); break;
            case K::pad: {
                using namespace spec::pad_p;
                in.push_back(int_initializer(n.name + "/pads", {0, 0, p[top], p[left], 0, 0, p[bottom], p[right]}));
                str1(emit("Pad"), "mode", "constant");
                break;
            }
            case K::slice: {
                const shape& x = g_.shape_of(n.inputs[0]);
                std::vector<std::int64_t> starts, ends, axes;
                for (int a = 0; a < x.rank; ++a) {
                    auto [b, e] = spec::ops::slice_range(p, x, a);
                    if (b == 0 && e == x[a]) continue;
                    starts.push_back(b);
                    ends.push_back(e);
                    axes.push_back(a);
                }
                if (axes.empty()) starts = {0}, ends = {x[0]}, axes = {0};  // the identity: one whole axis
                in.push_back(int_initializer(n.name + "/starts", starts));
                in.push_back(int_initializer(n.name + "/ends", ends));
                in.push_back(int_initializer(n.name + "/axes", axes));
                emit("Slice");
                break;
            }
            case K::batchnorm: {
                // x * scale + shift == BatchNormalization with mean 0, var 1, epsilon 0.
                std::int64_t c = n.shapes[0][1];
                in.push_back(float_initializer(n.name + "/mean", tensor<float>(shape{c}, 0.f)));
                in.push_back(float_initializer(n.name + "/var", tensor<float>(shape{c}, 1.f)));
                float1(emit("BatchNormalization"), "epsilon", 0.f);
                break;
            }
            case K::enlarge: {
                // Zero-pad the kernel's spatial axes (centred) with Pad.
                const shape& w = g_.shape_of(n.inputs[0]);
                std::int64_t dh = (p[spec::enlarge_p::kh] - w[2]) / 2, dw = (p[spec::enlarge_p::kw] - w[3]) / 2;
                in.push_back(int_initializer(n.name + "/pads", {0, 0, dh, dw, 0, 0, dh, dw}));
                str1(emit("Pad"), "mode", "constant");
                break;
            }
            default:
                throw error(n.describe() + ": no ONNX mapping for operator '" + std::string(spec::name(n.op)) + "'");
        }
        if (act) {
            static constexpr const char* acts[] = {"", "Relu", "Sigmoid", "Tanh"};
            const auto& pre = gp_->node(gp_->node_size() - 1).output(0);
            auto* a = add_node(acts[act], n.name + "/act");
            a->add_input(pre);
            a->add_output(out);
        }
        add_value_info(static_cast<std::size_t>(written.node));
    }

    // ONNX tensors are logical (ONNX operators compute NCHW, row-major), so a
    // node stored in another layout (NHWC image, column-major matrix) is
    // written as its ONNX computation followed by a Transpose into the
    // physical order (`<name>/nhwc`, `<name>/col_major`: the buffer as a
    // layout-aware runtime holds it) and the Transpose back that the logical
    // readers see. Runtimes cancel the pair; the layout decision and every
    // explicit reorder stay visible in the model. `first` is the index of the
    // first ONNX node emit_op wrote for node i.
    void express_layout(std::size_t i, int first) {
        const node& n = g_.nodes[i];
        const shape& s = n.shapes[0];
        std::vector<std::int64_t> to, back;
        std::string suffix;
        if (n.out_layout == spec::layout::nhwc && s.rank == 4) {
            to = {0, 2, 3, 1};
            back = {0, 3, 1, 2};
            suffix = "/nhwc";
        } else if (n.out_layout == spec::layout::col_major && s.rank >= 2) {
            for (int k = 0; k < s.rank; ++k) to.push_back(k);
            std::swap(to[static_cast<std::size_t>(s.rank - 2)], to[static_cast<std::size_t>(s.rank - 1)]);
            back = to;
            suffix = "/col_major";
        } else {
            return;
        }
        if (n.num_outputs() != 1)
            throw error(n.describe() + ": cannot express a " + suffix.substr(1) + " layout of a multi-output operator in ONNX");
        const std::string out = tensor_name({static_cast<std::int32_t>(i), 0});
        const std::string computed = unique(out + "/computed"), physical = unique(out + suffix);
        for (int k = first; k < gp_->node_size(); ++k)
            for (auto& o : *gp_->mutable_node(k)->mutable_output())
                if (o == out) o = computed;
        auto* t = add_node("Transpose", n.name + suffix);
        t->add_input(computed);
        t->add_output(physical);
        ints(t, "perm", to);
        shape ps;
        for (auto a : to) ps.push_back(s[static_cast<int>(a)]);
        value_info(gp_->add_value_info(), physical, ps);
        auto* b = add_node("Transpose", n.name + suffix + "/view");
        b->add_input(physical);
        b->add_output(out);
        ints(b, "perm", back);
    }

    // Shapes of intermediate values, so a re-import knows opaque nodes' shapes.
    void add_value_info(std::size_t i) {
        const node& n = g_.nodes[i];
        for (int k = 0; k < n.num_outputs(); ++k)
            if (std::find(g_.outputs.begin(), g_.outputs.end(), value{static_cast<std::int32_t>(i), k}) == g_.outputs.end())
                value_info(gp_->add_value_info(), tensor_name({static_cast<std::int32_t>(i), k}), n.shapes[static_cast<std::size_t>(k)]);
    }

    // An engine's own operator, in engine_domain (proto.hpp).
    void emit_engine_op(std::size_t i) {
        const node& n = g_.nodes[i];
        const spec::op_decl& d = spec::decl(n.op);
        auto* nd = add_node(std::string(d.name), n.name);
        nd->set_domain(std::string(engine_domain));
        for (value v : n.inputs) nd->add_input(tensor_name(v));
        for (int k = 0; k < n.num_outputs(); ++k) nd->add_output(tensor_name({static_cast<std::int32_t>(i), k}));
        for (int k = 0; k < d.num_params; ++k) int1(nd, std::string(d.params[static_cast<std::size_t>(k)].name).c_str(), n.params[k]);
        // Its shapes, for a reader that does not know the operator (opaque
        // to it, and ONNX shape inference has no schema for it).
        add_value_info(i);
    }

    void emit_opaque(std::size_t i) {
        const node& n = g_.nodes[i];
        pb::NodeProto blob = opaque_attributes(*n.opaque);
        auto* nd = add_node(n.opaque->type, n.name);
        if (!n.opaque->domain.empty()) nd->set_domain(n.opaque->domain);
        std::map<int, const pb::AttributeProto*> special;
        std::vector<std::int64_t> slots;
        for (const auto& a : blob.attribute()) {
            const std::string& an = a.name();
            if (an.rfind(input_attr_prefix, 0) == 0) {
                int pos = std::atoi(an.c_str() + input_attr_prefix.size());
                if (pos < 0 || pos > 4096) throw error(n.describe() + ": bad bookkeeping attribute '" + an + "'");
                special[pos] = &a;
            } else if (an == output_slots_attr) {
                slots.assign(a.ints().begin(), a.ints().end());
            } else {
                *nd->add_attribute() = a;
            }
        }
        std::size_t next = 0;
        const int total = static_cast<int>(n.inputs.size() + special.size());
        for (int pos = 0; pos < total; ++pos) {
            if (auto it = special.find(pos); it != special.end()) {
                const auto& a = *it->second;
                if (a.type() == pb::AttributeProto::TENSOR) {
                    std::string nm = unique(a.t().name().empty() ? n.name + "/input" + std::to_string(pos) : a.t().name());
                    auto* t = gp_->add_initializer();
                    *t = a.t();
                    t->set_name(nm);
                    nd->add_input(nm);
                } else {
                    nd->add_input("");
                }
            } else {
                if (next >= n.inputs.size()) throw error(n.describe() + ": bookkeeping attributes do not match the inputs");
                nd->add_input(tensor_name(n.inputs[next++]));
            }
        }
        if (slots.empty())
            for (int k = 0; k < n.num_outputs(); ++k) slots.push_back(k);
        if (static_cast<int>(slots.size()) != n.num_outputs()) throw error(n.describe() + ": output slots do not match the outputs");
        for (std::size_t k = 0; k < slots.size(); ++k) {
            while (nd->output_size() < slots[k]) nd->add_output("");
            nd->add_output(tensor_name({static_cast<std::int32_t>(i), static_cast<std::int32_t>(k)}));
        }
        add_value_info(i);
    }
};

}  // namespace detail

// The graph as an ONNX model. Throws tsopt::error naming the node at fault.
inline pb::ModelProto to_proto(const graph& g, const export_options& o = {}) {
    pb::ModelProto m;
    detail::exporter(g, o).run(m);
    return m;
}

// Built on an arena, as import parses: the many small messages of a large
// graph are freed at once.
// A serialized model and, when its weights did not fit in it, the external
// data file they were moved to (`data_location`, relative to the model's
// directory; empty `data` when there is none).
struct model_files {
    std::string model;
    std::string data;
    std::string data_location;
};

inline model_files to_files(const graph& g, const std::string& data_location, const export_options& o = {}) {
    google::protobuf::Arena arena;
    auto& m = *google::protobuf::Arena::CreateMessage<pb::ModelProto>(&arena);
    detail::exporter(g, o).run(m);
    model_files f;
    if (m.ByteSizeLong() > o.max_embedded_bytes) {
        f.data = outline_initializers(m, data_location);
        f.data_location = data_location;
    }
    if (m.ByteSizeLong() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()) || !m.SerializeToString(&f.model))
        throw error("ONNX export: the model is over protobuf's 2 GiB limit; write it with save() or to_files(), which keep "
                    "the weights in an external data file");
    return f;
}

// The model in one buffer, weights inside: what fits in 2 GiB.
inline std::string to_bytes(const graph& g, export_options o = {}) {
    o.max_embedded_bytes = std::numeric_limits<std::size_t>::max();
    return to_files(g, {}, o).model;
}

// The name of the data file written beside `model_path` when the weights
// go outside: "<model file name>.data".
inline std::string data_location_for(const std::string& model_path) {
    return std::filesystem::path(model_path).filename().string() + ".data";
}

// Writes the data file (if any) before the model, so a model on disk never
// names data that is not there yet.
inline void save(const model_files& f, const std::string& path) {
    if (!f.data_location.empty())
        io::write_file_atomically(std::filesystem::path(path).parent_path() / f.data_location, f.data);
    io::write_file_atomically(path, f.model);
}

inline void save(const graph& g, const std::string& path, const export_options& o = {}) {
    save(to_files(g, data_location_for(path), o), path);
}

// Export options that reproduce an imported model's interface: output names
// and custom-domain opsets (the default-domain opset is at least 13).
inline export_options options_for(const model& m) {
    export_options o;
    o.output_names = m.output_names;
    o.other_opsets = m.other_opsets;
    o.opset = std::clamp<std::int64_t>(m.opset, 13, max_opset);
    return o;
}

}  // namespace tsopt::onnx
