#pragma once
// oneDNN lowerings of ONNX operators the importer keeps opaque (no declared
// counterpart in spec/): exporters emit them in every transformer and in
// most CNNs, and run on the host (backend/host_fallback.hpp) they cost more
// than the convolutions around them. An engine that imports ONNX installs
// them beside the host implementations:
//
//   backend::dnnl b;
//   onnx::install_reference_ops(b);          // host semantics: the fallback
//   onnx::install_dnnl_lowerings(b);         // native primitives where they apply
//
// A lowering returns false (or throws dnnl_impl::refused / dnnl::error)
// where the node's configuration is outside what it handles; the node then
// runs on its host implementation. Each follows the ONNX operator
// specification for float tensors; tests/backend/dnnl_onnx_ops_test.cpp
// compares every one with the host implementation.
//
//   Clip, Relu6-style clips      eltwise_clip_v2 (constant bounds)
//   Sqrt, Exp, Log, Abs, Neg     eltwise
//   Pow (constant scalar exponent) eltwise square / sqrt / pow
//   HardSigmoid, HardSwish, LeakyRelu, Gelu  eltwise
//     (these are registered as eltwise forms, backend::dnnl::opaque_eltwise,
//     so a convolution before them runs them as its post-ops)
//   Erf                          a vectorized loop over the buffer (oneDNN has none)
//   Sub, Div                     binary (second operand broadcast)
//   Div by sqrt(2) -> Erf -> +1 -> *x -> *0.5   one eltwise_gelu_erf (GELU as exporters write it),
//                                a post-op of the matmul or convolution computing x
//   ReduceMean, ReduceSum        reduction (axes from the attribute or a constant input)
//   LayerNormalization           layer_normalization over the last axis, scale and bias
//   MaxPool, AveragePool         pooling with explicit / asymmetric pads, ceil_mode,
//                                dilations, count_include_pad (as oneDNN counts it)
#include <cmath>

#include "tsopt/backend/dnnl/binary.hpp"
#include "tsopt/backend/dnnl/eltwise.hpp"
#include "tsopt/backend/dnnl/executor.hpp"
#include "tsopt/io/onnx/proto.hpp"
#include "tsopt/io/onnx/reference_ops.hpp"

namespace tsopt::onnx {

namespace dnnl_lowering {

using namespace backend::dnnl_impl;

// The scalar value of constant input `slot` of node i, if it is one.
inline std::optional<float> constant_scalar(const lowering& L, std::size_t i, int slot) {
    if (static_cast<std::size_t>(slot) >= L.at(i).inputs.size() || !L.is_const(i, slot)) return std::nullopt;
    const tensor<float>* t = L.const_tensor(i, slot);
    if (!t || t->data.size() != 1) return std::nullopt;
    return t->data[0];
}

inline std::optional<eltwise_form> clip(const lowering& L, std::size_t i) {
    const node& n = L.at(i);
    pb::NodeProto blob = opaque_attributes(*n.opaque);
    detail::attributes at(blob, n.describe());
    float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
    if (at.has("min") || at.has("max")) {  // opset < 11
        lo = at.get_float("min", lo);
        hi = at.get_float("max", hi);
    }
    // Opset >= 11: bounds are inputs 1 and 2; an omitted one is carried as a
    // bookkeeping attribute, not a graph input, so only graph inputs are read.
    for (const auto& a : blob.attribute())
        if (a.name().rfind(detail::input_attr_prefix, 0) == 0) return std::nullopt;  // a bound the graph cannot carry
    if (n.inputs.size() >= 2) {
        auto v = constant_scalar(L, i, 1);
        if (!v) return std::nullopt;
        lo = *v;
    }
    if (n.inputs.size() >= 3) {
        auto v = constant_scalar(L, i, 2);
        if (!v) return std::nullopt;
        hi = *v;
    }
    return eltwise_form{dn::algorithm::eltwise_clip_v2, lo, hi, "clip"};
}

inline std::optional<eltwise_form> pow(const lowering& L, std::size_t i) {
    auto e = constant_scalar(L, i, 1);
    if (!e) return std::nullopt;
    // x^2 as square: exact, where pow goes through exp/log.
    if (*e == 2.f) return eltwise_form{dn::algorithm::eltwise_square, 0.f, 0.f, "pow (square)"};
    if (*e == 0.5f) return eltwise_form{dn::algorithm::eltwise_sqrt, 0.f, 0.f, "pow (sqrt)"};
    return eltwise_form{dn::algorithm::eltwise_pow, 1.f, *e, "pow"};
}

inline bool erf(lowering& L, std::size_t i) {
    if (L.at(i).inputs.size() != 1) return false;
    tref x = L.plain_in(i, 0);
    tref y = L.fresh(plain_md(L.out_dims(i)));
    const auto count = static_cast<std::ptrdiff_t>(elements(L.out_dims(i)));
    L.custom(
        i,
        [count](std::span<float* const> in, std::span<float* const> out) {
            const float* a = in[0];
            float* b = out[0];
            for (std::ptrdiff_t k = 0; k < count; ++k) b[k] = std::erf(a[k]);
        },
        {x}, {y}, "erf");
    L.set(i, 0, y);
    return true;
}

// Sub / Div: oneDNN broadcasts only the second operand.
inline bool binary(lowering& L, std::size_t i, dn::algorithm alg, const char* what) {
    const node& n = L.at(i);
    if (n.inputs.size() != 2) return false;
    const dims od = L.out_dims(i);
    if (pad_front(L.in_dims(i, 0), od.size()) != od) return false;
    tref a = L.plain(L.in(i, 0), od, i);
    tref b = L.plain(L.in(i, 1), pad_front(L.in_dims(i, 1), od.size()), i);
    L.set(i, 0, binary_step(L, i, alg, a, b, what));
    return true;
}

// GELU as exporters write it: x / sqrt(2) -> Erf -> + 1 -> * x -> * 0.5
// (the two multiplications in either order), each step read only by the
// next. The Div is one eltwise_gelu_erf on x covering the four nodes after
// it (five passes over the tensor, Erf on the host, otherwise); where x is
// computed by a matmul or a convolution, that runs it as a post-op.
inline std::optional<eltwise_form> gelu_from_div(const lowering& L, std::size_t div) {
    const node& d = L.at(div);
    auto c = constant_scalar(L, div, 1);
    if (!c || std::fabs(*c - std::sqrt(2.f)) > 1e-4f || d.num_outputs() != 1) return std::nullopt;
    const value x = d.inputs[0];
    // The single reader of node n (none when read twice, or a graph output).
    auto next = [&](std::size_t n) -> std::optional<std::size_t> {
        if (L.is_graph_output(n) || L.consumers[n].size() != 1 || L.at(n).num_outputs() != 1) return std::nullopt;
        const auto r = static_cast<std::size_t>(L.consumers[n][0].first);
        if (L.at(r).shapes.size() != 1 || L.at(r).shapes[0] != d.shapes[0]) return std::nullopt;
        return r;
    };
    // Node n is `op` of the chain's running value and a constant scalar `k`.
    auto with_constant = [&](std::size_t n, spec::op_kind op, float k, std::size_t from) {
        const node& m = L.at(n);
        if (!m.is_op(op) || m.inputs.size() != 2) return false;
        const int other = static_cast<std::size_t>(m.inputs[0].node) == from ? 1 : 0;
        auto v = constant_scalar(L, n, other);
        return v && *v == k;
    };
    auto erf = next(div);
    if (!erf || L.at(*erf).kind != node_kind::opaque || L.at(*erf).opaque->type != "Erf") return std::nullopt;
    auto add = next(*erf);
    if (!add || !with_constant(*add, spec::op_kind::ewadd, 1.f, *erf)) return std::nullopt;
    auto m1 = next(*add);
    auto m2 = m1 ? next(*m1) : std::nullopt;
    if (!m2) return std::nullopt;
    auto times_x = [&](std::size_t n, std::size_t from) {
        const node& m = L.at(n);
        return m.is_op(spec::op_kind::ewmul) && m.inputs.size() == 2 &&
               ((m.inputs[0] == x && static_cast<std::size_t>(m.inputs[1].node) == from) ||
                (m.inputs[1] == x && static_cast<std::size_t>(m.inputs[0].node) == from));
    };
    auto half = [&](std::size_t n, std::size_t from) {
        return with_constant(n, spec::op_kind::ewmul, 0.5f, from) || with_constant(n, spec::op_kind::smul, 0.5f, from);
    };
    if (!((times_x(*m1, *add) && half(*m2, *m1)) || (half(*m1, *add) && times_x(*m2, *m1)))) return std::nullopt;
    return eltwise_form{dn::algorithm::eltwise_gelu_erf, 0.f, 0.f, "gelu (x / sqrt 2, erf, +1, *x, *0.5)", {*erf, *add, *m1, *m2}};
}

inline std::optional<std::vector<std::int64_t>> reduce_axes(const lowering& L, std::size_t i, const pb::NodeProto& blob,
                                                             const detail::attributes& at) {
    const node& n = L.at(i);
    if (at.has("axes")) return at.get_ints("axes", {});
    for (const auto& a : blob.attribute())
        if (a.name() == std::string(detail::input_attr_prefix) + "1" && a.type() == pb::AttributeProto::TENSOR)
            return detail::to_ints(a.t(), n.describe() + ": axes");
    if (n.inputs.size() > 1) return std::nullopt;  // axes computed at run time
    return std::vector<std::int64_t>{};             // none: every axis (unless noop_with_empty_axes)
}

inline bool reduce(lowering& L, std::size_t i, dn::algorithm alg, const char* what) {
    const node& n = L.at(i);
    pb::NodeProto blob = opaque_attributes(*n.opaque);
    detail::attributes at(blob, n.describe());
    auto axes = reduce_axes(L, i, blob, at);
    if (!axes || n.num_outputs() != 1) return false;
    dims src = L.in_dims(i, 0);
    const auto rank = static_cast<std::int64_t>(src.size());
    if (axes->empty()) {
        if (at.get_int("noop_with_empty_axes", 0)) return false;
        for (std::int64_t a = 0; a < rank; ++a) axes->push_back(a);
    }
    dims dst = src;
    for (auto a : *axes) {
        if (a < -rank || a >= rank) return false;
        dst[static_cast<std::size_t>(a < 0 ? a + rank : a)] = 1;
    }
    if (elements(dst) != elements(L.out_dims(i))) return false;
    tref x = L.plain_in(i, 0);
    dn::reduction::primitive_desc pd(L.p.eng, alg, x.md, plain_md(dst), 0.f, 0.f, L.attr());
    tref y = L.fresh(pd.dst_desc());
    L.add<dn::reduction>(i, pd, {{DNNL_ARG_SRC, x}, {DNNL_ARG_DST, y}}, what);
    L.set(i, 0, y.as(plain_md(L.out_dims(i))));  // keepdims=0 drops the 1s: the same bytes
    return true;
}

inline bool layer_norm(lowering& L, std::size_t i) {
    const node& n = L.at(i);
    pb::NodeProto blob = opaque_attributes(*n.opaque);
    detail::attributes at(blob, n.describe());
    const dims xd = L.in_dims(i, 0);
    const auto rank = static_cast<std::int64_t>(xd.size());
    std::int64_t axis = at.get_int("axis", -1);
    if (axis < 0) axis += rank;
    // oneDNN normalizes over the last axis; mean / inverse std-dev outputs
    // and a non-float stash type are not produced.
    if (axis != rank - 1 || n.num_outputs() != 1 || n.inputs.size() < 2 || at.get_int("stash_type", 1) != 1) return false;
    const dims cd{xd.back()};
    auto per_channel = [&](int slot) { return elements(L.in_dims(i, slot)) == xd.back(); };
    if (!per_channel(1) || (n.inputs.size() > 2 && !per_channel(2))) return false;
    auto flags = dn::normalization_flags::use_scale;
    if (n.inputs.size() > 2) flags |= dn::normalization_flags::use_shift;
    tref x = L.plain_in(i, 0);
    dn::layer_normalization_forward::primitive_desc pd(L.p.eng, dn::prop_kind::forward_inference, x.md, x.md,
                                                       at.get_float("epsilon", 1e-5f), flags, L.attr());
    tref y = L.fresh(pd.dst_desc());
    std::vector<std::pair<int, tref>> args{{DNNL_ARG_SRC, x}, {DNNL_ARG_SCALE, L.plain(L.in(i, 1), cd, i)}, {DNNL_ARG_DST, y}};
    if (n.inputs.size() > 2) args.push_back({DNNL_ARG_SHIFT, L.plain(L.in(i, 2), cd, i)});
    L.add<dn::layer_normalization_forward>(i, pd, std::move(args), "layer normalization");
    L.set(i, 0, y);
    return true;
}

// ONNX 2-D pooling: explicit or SAME pads, strides, dilations, ceil_mode
// (the output extents, from the node's shape, decide how far the windows
// reach past the right edge: that overhang is extra right padding, never
// counted). Average pooling counts padding as oneDNN does only where they
// agree: count_include_pad=1 counts the explicit pads and not the
// overhang, so an overhang then is left to the host.
template <bool Max>
bool pool(lowering& L, std::size_t i) {
    const node& n = L.at(i);
    if (n.num_outputs() != 1 || L.in_dims(i, 0).size() != 4 || L.out_dims(i).size() != 4) return false;
    pb::NodeProto blob = opaque_attributes(*n.opaque);
    detail::attributes at(blob, n.describe());
    auto k = at.get_ints("kernel_shape", {});
    if (k.size() != 2) return false;
    auto st = at.get_ints("strides", {1, 1});
    auto dil = at.get_ints("dilations", {1, 1});
    if (st.size() != 2 || dil.size() != 2) return false;
    const dims xd = L.in_dims(i, 0), od = L.out_dims(i);
    std::array<std::int64_t, 4> p{};  // top, left, bottom, right
    const std::string ap = at.get_string("auto_pad", "NOTSET");
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
        for (std::size_t d = 0; d < 2; ++d) {
            const std::int64_t in = xd[2 + d], s = st[d];
            const std::int64_t total = std::max<std::int64_t>(((in + s - 1) / s - 1) * s + (k[d] - 1) * dil[d] + 1 - in, 0);
            p[d] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
            p[d + 2] = total - p[d];
        }
    } else if (ap == "NOTSET") {
        auto v = at.get_ints("pads", {0, 0, 0, 0});
        if (v.size() != 4) return false;
        p = {v[0], v[1], v[2], v[3]};
    } else if (ap != "VALID") {
        return false;
    }
    dims pad_l{p[0], p[1]}, pad_r{p[2], p[3]};
    bool overhang = false;
    for (std::size_t d = 0; d < 2; ++d) {
        const std::int64_t reach = (od[2 + d] - 1) * st[d] + (k[d] - 1) * dil[d] + 1;
        const std::int64_t r = reach - xd[2 + d] - pad_l[d];
        if (r > pad_r[d]) {
            overhang = true;
            pad_r[d] = r;
        }
        if (pad_l[d] >= k[d] * dil[d] || pad_r[d] < 0) return false;
    }
    dn::algorithm alg = dn::algorithm::pooling_max;
    if constexpr (!Max) {
        const bool include = at.get_int("count_include_pad", 0) != 0;
        if (include && overhang) return false;
        alg = include ? dn::algorithm::pooling_avg_include_padding : dn::algorithm::pooling_avg_exclude_padding;
    }
    tref x = L.in(i, 0);
    dn::pooling_forward::primitive_desc pd(L.p.eng, dn::prop_kind::forward_inference, alg, x.md, any_md(od), {st[0], st[1]},
                                           {k[0], k[1]}, {dil[0] - 1, dil[1] - 1}, pad_l, pad_r, L.attr());
    tref y = L.fresh(pd.dst_desc());
    L.add<dn::pooling_forward>(i, pd, {{DNNL_ARG_SRC, x}, {DNNL_ARG_DST, y}}, Max ? "max pooling" : "average pooling");
    L.set(i, 0, y);
    return true;
}

}  // namespace dnnl_lowering

// Registers the lowerings above with a oneDNN backend, by ONNX type name.
inline void install_dnnl_lowerings(backend::dnnl& b) {
    namespace d = dnnl_lowering;
    using alg = ::dnnl::algorithm;
    using form = d::eltwise_form;
    auto fixed = [](alg a, float alpha, float beta, const char* what) {
        return [=](const d::lowering&, std::size_t) { return std::optional<form>(form{a, alpha, beta, what}); };
    };
    // ONNX attributes of node i.
    struct attrs {
        pb::NodeProto blob;
        detail::attributes at;
        attrs(const d::lowering& L, std::size_t i) : blob(opaque_attributes(*L.at(i).opaque)), at(blob, L.at(i).describe()) {}
    };
    d::opaque_eltwise_map e;
    e["Clip"] = d::clip;
    e["Pow"] = d::pow;
    e["Sqrt"] = fixed(alg::eltwise_sqrt, 0.f, 0.f, "sqrt");
    e["Exp"] = fixed(alg::eltwise_exp, 0.f, 0.f, "exp");
    e["Log"] = fixed(alg::eltwise_log, 0.f, 0.f, "log");
    e["Abs"] = fixed(alg::eltwise_abs, 0.f, 0.f, "abs");
    e["Neg"] = fixed(alg::eltwise_linear, -1.f, 0.f, "neg");
    e["HardSwish"] = fixed(alg::eltwise_hardswish, 1.f / 6.f, 0.5f, "hardswish");
    e["HardSigmoid"] = [](const d::lowering& L, std::size_t i) {
        attrs a(L, i);
        return std::optional<form>(form{alg::eltwise_hardsigmoid, a.at.get_float("alpha", 0.2f), a.at.get_float("beta", 0.5f), "hardsigmoid"});
    };
    e["LeakyRelu"] = [](const d::lowering& L, std::size_t i) {
        attrs a(L, i);
        return std::optional<form>(form{alg::eltwise_relu, a.at.get_float("alpha", 0.01f), 0.f, "leaky relu"});
    };
    e["Div"] = d::gelu_from_div;  // only the GELU pattern; other divisions are binary (m["Div"])
    e["Gelu"] = [](const d::lowering& L, std::size_t i) {
        attrs a(L, i);
        const bool tanh = a.at.get_string("approximate", "none") == "tanh";
        return std::optional<form>(form{tanh ? alg::eltwise_gelu_tanh : alg::eltwise_gelu_erf, 0.f, 0.f, "gelu"});
    };
    d::opaque_lowering_map m;
    m["Erf"] = d::erf;
    m["Sub"] = [](d::lowering& L, std::size_t i) { return d::binary(L, i, alg::binary_sub, "sub"); };
    m["Div"] = [](d::lowering& L, std::size_t i) { return d::binary(L, i, alg::binary_div, "div"); };
    m["ReduceMean"] = [](d::lowering& L, std::size_t i) { return d::reduce(L, i, alg::reduction_mean, "reduce mean"); };
    m["ReduceSum"] = [](d::lowering& L, std::size_t i) { return d::reduce(L, i, alg::reduction_sum, "reduce sum"); };
    m["LayerNormalization"] = d::layer_norm;
    m["MaxPool"] = d::pool<true>;
    m["AveragePool"] = d::pool<false>;
    // The default ONNX domain's semantics only: a custom domain may reuse a type name.
    for (auto& [type, lower] : m)
        b.opaque_lowerings[type] = [lower](d::lowering& L, std::size_t i) { return detail::default_domain(L.at(i)) && lower(L, i); };
    for (auto& [type, describe] : e)
        b.opaque_eltwise[type] = [describe](const d::lowering& L, std::size_t i) {
            return detail::default_domain(L.at(i)) ? describe(L, i) : std::nullopt;
        };
}

}  // namespace tsopt::onnx
