#pragma once
// Reference implementations of ONNX operators the importer keeps opaque
// because they have no exact declared counterpart (Div by a non-power-of-two,
// 2-D pooling with count_include_pad=0, ceil_mode or dilations, and the
// element-wise, normalization and reduction operators exporters emit: Clip,
// Erf, Gelu, HardSwish, LayerNormalization, ReduceMean ...), so imported
// models run on every backend (the measured ones run opaque nodes on the host
// through backend/host_fallback.hpp):
//   tsopt::backend::reference ref;
//   tsopt::onnx::install_reference_ops(ref);
// Each implementation follows the ONNX operator specification for float
// tensors and checks what it relies on (input count, constant operands),
// throwing tsopt::error naming the node otherwise.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "tsopt/backend/reference/executor.hpp"
#include "tsopt/io/onnx/proto.hpp"

namespace tsopt::onnx {

namespace detail {

using opaque_fn = backend::reference::opaque_fn;

inline std::vector<tensor<float>> div_impl(const node& n, std::span<const tensor<float>* const> in) {
    if (in.size() != 2) throw error(n.describe() + ": Div takes 2 inputs");
    tensor<float> out(n.shapes[0]);
    spec::detail::for_each_broadcast(out.shape, in[0]->shape, in[1]->shape,
                                     [&](std::int64_t o, std::int64_t a, std::int64_t b) { out[o] = (*in[0])[a] / (*in[1])[b]; });
    return {std::move(out)};
}

// ONNX 2-D pooling in full generality (pads, strides, dilations, ceil_mode,
// count_include_pad); the output extents come from the node's shape.
template <bool Max>
std::vector<tensor<float>> pool_impl(const node& n, std::span<const tensor<float>* const> in) {
    pb::NodeProto a = opaque_attributes(*n.opaque);
    attributes at(a, n.describe());
    const tensor<float>& x = *in[0];
    if (x.shape.rank != 4 || n.shapes[0].rank != 4) throw error(n.describe() + ": reference pooling handles NCHW only");
    auto k = at.get_ints("kernel_shape", {}, 2);
    auto st = at.get_ints("strides", {1, 1}, 2);
    auto dil = at.get_ints("dilations", {1, 1}, 2);
    std::string ap = at.get_string("auto_pad", "NOTSET");
    std::array<std::int64_t, 4> p{};
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
        for (int d = 0; d < 2; ++d) {
            std::int64_t i = x.shape[2 + d], s = st[static_cast<std::size_t>(d)];
            std::int64_t total = std::max<std::int64_t>(((i + s - 1) / s - 1) * s + (k[static_cast<std::size_t>(d)] - 1) * dil[static_cast<std::size_t>(d)] + 1 - i, 0);
            p[static_cast<std::size_t>(d)] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
        }
    } else if (ap == "NOTSET") {
        auto v = at.get_ints("pads", {0, 0, 0, 0}, 4);
        p = {v[0], v[1], v[2], v[3]};
    }
    bool include_pad = at.get_int("count_include_pad", 0) != 0;
    const std::int64_t H = x.shape[2], W = x.shape[3], OH = n.shapes[0][2], OW = n.shapes[0][3];
    tensor<float> out(n.shapes[0]);
    for (std::int64_t c = 0; c < x.shape[0] * x.shape[1]; ++c)
        for (std::int64_t oy = 0; oy < OH; ++oy)
            for (std::int64_t ox = 0; ox < OW; ++ox) {
                float acc = Max ? -std::numeric_limits<float>::infinity() : 0.f;
                std::int64_t count = 0;
                for (std::int64_t ky = 0; ky < k[0]; ++ky)
                    for (std::int64_t kx = 0; kx < k[1]; ++kx) {
                        std::int64_t iy = oy * st[0] - p[0] + ky * dil[0], ix = ox * st[1] - p[1] + kx * dil[1];
                        // Windows of ceil_mode may run past the padded input: never counted.
                        bool in_padded = iy < H + p[2] && ix < W + p[3];
                        if (iy < 0 || ix < 0 || iy >= H || ix >= W) {
                            count += include_pad && in_padded;
                            continue;
                        }
                        float v = x[(c * H + iy) * W + ix];
                        acc = Max ? std::max(acc, v) : acc + v;
                        ++count;
                    }
                out[(c * OH + oy) * OW + ox] = Max ? acc : acc / static_cast<float>(std::max<std::int64_t>(count, 1));
            }
    return {std::move(out)};
}

// The ONNX input list of an opaque node: graph values in order, with the
// constants the graph IR cannot carry (non-float, e.g. int64 axes) and empty
// optional slots restored from the importer's bookkeeping attributes.
struct onnx_inputs {
    struct slot {
        const tensor<float>* value = nullptr;         // a float graph value
        std::optional<pb::TensorProto> constant;      // a non-float constant
    };
    std::vector<slot> slots;

    onnx_inputs(const pb::NodeProto& blob, std::span<const tensor<float>* const> in) {
        std::map<int, const pb::AttributeProto*> carried;
        for (const auto& a : blob.attribute())
            if (a.name().rfind(input_attr_prefix, 0) == 0) carried[std::atoi(a.name().c_str() + input_attr_prefix.size())] = &a;
        std::size_t next = 0;
        for (int i = 0; next < in.size() || carried.count(i); ++i) {
            slot s;
            if (auto it = carried.find(i); it != carried.end()) {
                if (it->second->type() == pb::AttributeProto::TENSOR) s.constant = it->second->t();
            } else {
                s.value = in[next++];
            }
            slots.push_back(std::move(s));
        }
    }
    bool has(std::size_t i) const { return i < slots.size() && (slots[i].value || slots[i].constant); }
    const tensor<float>& value(const node& n, std::size_t i) const {
        if (i >= slots.size() || !slots[i].value)
            throw error(n.describe() + ": input " + std::to_string(i) + " must be a float tensor");
        return *slots[i].value;
    }
    std::vector<std::int64_t> ints(const node& n, std::size_t i) const {
        if (i >= slots.size() || !slots[i].constant)
            throw error(n.describe() + ": input " + std::to_string(i) + " must be a constant integer tensor");
        return to_ints(*slots[i].constant, n.describe() + ": input " + std::to_string(i));
    }
};

// Offsets into a tensor of shape `in` read by each element of `out` under
// ONNX (numpy) broadcasting.
inline std::vector<std::int64_t> broadcast_offsets(const shape& out, const shape& in) {
    std::vector<std::int64_t> r(static_cast<std::size_t>(out.elements()));
    std::array<std::int64_t, max_rank> stride{};
    std::int64_t s = 1;
    for (int d = in.rank - 1; d >= 0; --d) {
        int o = d + out.rank - in.rank;
        stride[static_cast<std::size_t>(o)] = in[d] == 1 ? 0 : s;
        s *= in[d];
    }
    std::array<std::int64_t, max_rank> idx{};
    std::int64_t off = 0;
    for (std::size_t k = 0; k < r.size(); ++k) {
        r[k] = off;
        for (int d = out.rank - 1; d >= 0; --d) {
            off += stride[static_cast<std::size_t>(d)];
            if (++idx[static_cast<std::size_t>(d)] < out[d]) break;
            off -= stride[static_cast<std::size_t>(d)] * out[d];
            idx[static_cast<std::size_t>(d)] = 0;
        }
    }
    return r;
}

inline void check_inputs(const node& n, std::size_t count, std::size_t lo, std::size_t hi) {
    if (count < lo || count > hi)
        throw error(n.describe() + ": takes " + std::to_string(lo) + (lo == hi ? "" : ".." + std::to_string(hi)) + " inputs, has " +
                    std::to_string(count));
}

// An element-wise operator of one float input: f(x, attributes).
template <class F>
opaque_fn unary(F f) {
    return [f](const node& n, std::span<const tensor<float>* const> in) -> std::vector<tensor<float>> {
        check_inputs(n, in.size(), 1, 1);
        pb::NodeProto blob = opaque_attributes(*n.opaque);
        attributes at(blob, n.describe());
        auto g = f(at);
        tensor<float> out(in[0]->shape);
        for (std::size_t i = 0; i < out.data.size(); ++i) out.data[i] = g(in[0]->data[i]);
        if (!(out.shape == n.shapes[0])) throw error(n.describe() + ": output shape " + n.shapes[0].str() + " differs from the input's " + out.shape.str());
        return {std::move(out)};
    };
}

// An element-wise operator of two broadcast float inputs.
template <class F>
opaque_fn binary(F f) {
    return [f](const node& n, std::span<const tensor<float>* const> in) -> std::vector<tensor<float>> {
        check_inputs(n, in.size(), 2, 2);
        tensor<float> out(n.shapes[0]);
        auto oa = broadcast_offsets(out.shape, in[0]->shape), ob = broadcast_offsets(out.shape, in[1]->shape);
        for (std::size_t i = 0; i < out.data.size(); ++i)
            out.data[i] = f((*in[0])[oa[i]], (*in[1])[ob[i]]);
        return {std::move(out)};
    };
}

// A variadic element-wise fold (Max, Min, Sum, Mean).
template <class F>
opaque_fn variadic(F f, bool mean) {
    return [f, mean](const node& n, std::span<const tensor<float>* const> in) -> std::vector<tensor<float>> {
        if (in.empty()) throw error(n.describe() + ": has no inputs");
        tensor<float> out(n.shapes[0]);
        for (std::size_t k = 0; k < in.size(); ++k) {
            auto o = broadcast_offsets(out.shape, in[k]->shape);
            for (std::size_t i = 0; i < out.data.size(); ++i) out.data[i] = k ? f(out.data[i], (*in[k])[o[i]]) : (*in[k])[o[i]];
        }
        if (mean)
            for (auto& v : out.data) v /= static_cast<float>(in.size());
        return {std::move(out)};
    };
}

inline float gelu_exact(float x) { return 0.5f * x * (1.f + std::erf(x / std::sqrt(2.f))); }
inline float gelu_tanh(float x) {
    const float c = std::sqrt(2.f / 3.14159265358979323846f);
    return 0.5f * x * (1.f + std::tanh(c * (x + 0.044715f * x * x * x)));
}

inline std::vector<tensor<float>> clip_impl(const node& n, std::span<const tensor<float>* const> in) {
    pb::NodeProto blob = opaque_attributes(*n.opaque);
    attributes at(blob, n.describe());
    onnx_inputs args(blob, in);
    const tensor<float>& x = args.value(n, 0);
    // Before opset 11 the bounds are attributes; from 11 on optional scalar inputs.
    float lo = at.get_float("min", -std::numeric_limits<float>::infinity());
    float hi = at.get_float("max", std::numeric_limits<float>::infinity());
    auto bound = [&](std::size_t i, float& b) {
        if (!args.has(i)) return;
        const tensor<float>& t = args.value(n, i);
        if (t.data.size() != 1) throw error(n.describe() + ": bound " + std::to_string(i) + " must be a scalar, has shape " + t.shape.str());
        b = t.data[0];
    };
    bound(1, lo);
    bound(2, hi);
    tensor<float> out(x.shape);
    // ONNX (and numpy.clip): min(max(x, lo), hi); NaN stays NaN.
    for (std::size_t i = 0; i < out.data.size(); ++i) {
        float v = x.data[i];
        out.data[i] = std::isnan(v) ? v : std::min(std::max(v, lo), hi);
    }
    return {std::move(out)};
}

// LayerNormalization (opset 17): normalize over axes [axis, rank), then scale
// and shift; optional outputs Mean and InvStdDev.
inline std::vector<tensor<float>> layernorm_impl(const node& n, std::span<const tensor<float>* const> in) {
    pb::NodeProto blob = opaque_attributes(*n.opaque);
    attributes at(blob, n.describe());
    onnx_inputs args(blob, in);
    const tensor<float>& x = args.value(n, 0);
    const tensor<float>& scale = args.value(n, 1);
    const tensor<float>* bias = args.has(2) ? &args.value(n, 2) : nullptr;
    const int r = x.shape.rank;
    std::int64_t axis = at.get_int("axis", -1);
    if (axis < -r || axis >= r) at.fail("axis", "is " + std::to_string(axis) + ", outside [-rank, rank) for rank " + std::to_string(r));
    if (axis < 0) axis += r;
    if (at.get_int("stash_type", 1) != 1) at.fail("stash_type", "must be 1 (float32)");
    const double eps = at.get_float("epsilon", 1e-5f);
    shape inner_shape;
    for (int d = static_cast<int>(axis); d < r; ++d) inner_shape.push_back(x.shape[d]);
    std::int64_t inner = inner_shape.elements(), outer = x.shape.elements() / inner;
    auto so = broadcast_offsets(inner_shape, scale.shape);
    std::vector<std::int64_t> bo = bias ? broadcast_offsets(inner_shape, bias->shape) : std::vector<std::int64_t>{};
    std::vector<tensor<float>> outs;
    for (const shape& s : n.shapes) outs.emplace_back(s);
    if (!(outs[0].shape == x.shape)) throw error(n.describe() + ": output shape " + outs[0].shape.str() + " differs from the input's " + x.shape.str());
    for (std::size_t k = 1; k < outs.size(); ++k)
        if (outs[k].shape.elements() != outer) throw error(n.describe() + ": output " + std::to_string(k) + " has shape " + outs[k].shape.str());
    for (std::int64_t o = 0; o < outer; ++o) {
        const float* row = x.data.data() + o * inner;
        double mean = 0, var = 0;
        for (std::int64_t i = 0; i < inner; ++i) mean += row[i];
        mean /= static_cast<double>(inner);
        for (std::int64_t i = 0; i < inner; ++i) var += (row[i] - mean) * (row[i] - mean);
        var /= static_cast<double>(inner);
        const double inv = 1.0 / std::sqrt(var + eps);
        for (std::int64_t i = 0; i < inner; ++i) {
            double y = (row[i] - mean) * inv * scale[so[static_cast<std::size_t>(i)]];
            if (bias) y += (*bias)[bo[static_cast<std::size_t>(i)]];
            outs[0][o * inner + i] = static_cast<float>(y);
        }
        if (outs.size() > 1) outs[1][o] = static_cast<float>(mean);
        if (outs.size() > 2) outs[2][o] = static_cast<float>(inv);
    }
    return outs;
}

// ReduceSum / ReduceMean / ReduceMax / ReduceMin / ReduceProd: axes from the
// attribute (ReduceMean before opset 18) or the second input (ReduceSum from
// opset 13); keepdims, noop_with_empty_axes.
template <class F>
opaque_fn reduce(F f, float init, bool mean, float (*finish)(float) = nullptr) {
    return [f, init, mean, finish](const node& n, std::span<const tensor<float>* const> in) -> std::vector<tensor<float>> {
        pb::NodeProto blob = opaque_attributes(*n.opaque);
        attributes at(blob, n.describe());
        onnx_inputs args(blob, in);
        const tensor<float>& x = args.value(n, 0);
        const int r = x.shape.rank;
        std::vector<std::int64_t> axes = args.has(1) ? args.ints(n, 1) : at.get_ints("axes", {});
        bool noop = at.get_int("noop_with_empty_axes", 0) != 0;
        if (axes.empty() && noop) return {x};
        std::array<bool, max_rank> reduced{};
        for (auto a : axes) {
            if (a < -r || a >= r) throw error(n.describe() + ": axis " + std::to_string(a) + " is outside [-rank, rank) for rank " + std::to_string(r));
            reduced[static_cast<std::size_t>(a < 0 ? a + r : a)] = true;
        }
        if (axes.empty()) reduced.fill(true);
        // The result indexed like the input with extent 1 on reduced axes.
        shape kept;
        for (int d = 0; d < r; ++d) kept.push_back(reduced[static_cast<std::size_t>(d)] ? 1 : x.shape[d]);
        if (kept.elements() != n.shapes[0].elements()) throw error(n.describe() + ": output shape " + n.shapes[0].str() + " does not fit the reduction");
        tensor<float> acc(kept, init);
        auto to = broadcast_offsets(x.shape, kept);
        for (std::size_t i = 0; i < x.data.size(); ++i) acc.data[static_cast<std::size_t>(to[i])] = f(acc.data[static_cast<std::size_t>(to[i])], x.data[i]);
        if (mean) {
            float count = static_cast<float>(x.shape.elements() / kept.elements());
            for (auto& v : acc.data) v /= count;
        }
        if (finish)
            for (auto& v : acc.data) v = finish(v);
        acc.shape = n.shapes[0];
        return {std::move(acc)};
    };
}

// Where(condition, X, Y): the condition is a constant (bool or integer) the
// importer carried in the attribute blob, or a float tensor (non-zero = true).
inline std::vector<tensor<float>> where_impl(const node& n, std::span<const tensor<float>* const> in) {
    pb::NodeProto blob = opaque_attributes(*n.opaque);
    onnx_inputs args(blob, in);
    if (args.slots.size() != 3) throw error(n.describe() + ": takes 3 inputs, has " + std::to_string(args.slots.size()));
    tensor<float> cond;
    if (args.slots[0].constant) {
        const pb::TensorProto& c = *args.slots[0].constant;
        cond.shape = tensor_shape(c, n.describe() + ": condition");
        if (c.data_type() == pb::TensorProto::BOOL || c.data_type() == pb::TensorProto::UINT8) {
            std::int64_t k = cond.shape.elements();
            if (c.has_raw_data()) {
                if (static_cast<std::int64_t>(c.raw_data().size()) != k) throw error(n.describe() + ": condition holds the wrong number of bytes");
                for (char b : c.raw_data()) cond.data.push_back(b ? 1.f : 0.f);
            } else {
                if (c.int32_data_size() != k) throw error(n.describe() + ": condition holds the wrong number of values");
                for (auto b : c.int32_data()) cond.data.push_back(b ? 1.f : 0.f);
            }
        } else {
            for (auto v : to_ints(c, n.describe() + ": condition")) cond.data.push_back(v ? 1.f : 0.f);
        }
    } else {
        cond = args.value(n, 0);
    }
    const tensor<float>& x = args.value(n, 1);
    const tensor<float>& y = args.value(n, 2);
    tensor<float> out(n.shapes[0]);
    auto oc = broadcast_offsets(out.shape, cond.shape), ox = broadcast_offsets(out.shape, x.shape), oy = broadcast_offsets(out.shape, y.shape);
    for (std::size_t i = 0; i < out.data.size(); ++i) out.data[i] = cond[oc[i]] != 0.f ? x[ox[i]] : y[oy[i]];
    return {std::move(out)};
}

// Expand: broadcast the input to the node's (already inferred) output shape.
inline std::vector<tensor<float>> expand_impl(const node& n, std::span<const tensor<float>* const> in) {
    pb::NodeProto blob = opaque_attributes(*n.opaque);
    onnx_inputs args(blob, in);
    const tensor<float>& x = args.value(n, 0);
    tensor<float> out(n.shapes[0]);
    auto o = broadcast_offsets(out.shape, x.shape);
    for (std::size_t i = 0; i < out.data.size(); ++i) out.data[i] = x[o[i]];
    return {std::move(out)};
}

// Cast of a float tensor to float (the only cast a float graph carries).
inline std::vector<tensor<float>> cast_impl(const node& n, std::span<const tensor<float>* const> in) {
    check_inputs(n, in.size(), 1, 1);
    pb::NodeProto blob = opaque_attributes(*n.opaque);
    attributes at(blob, n.describe());
    auto to = at.get_int("to", 0);
    if (to != pb::TensorProto::FLOAT) throw error(n.describe() + ": cast to " + type_name(static_cast<std::int32_t>(to)) + "; tsopt graphs carry float32 tensors");
    return {*in[0]};
}

// Slice of a float tensor with constant starts, ends, axes and steps (any
// sign): what the importer does not map to the spec's slice (steps other
// than 1, a rank above 4: Swin's patch merging, x[..., 0::2, 0::2, :]).
inline std::vector<tensor<float>> slice_impl(const node& n, std::span<const tensor<float>* const> in) {
    pb::NodeProto blob = opaque_attributes(*n.opaque);
    onnx_inputs args(blob, in);
    const tensor<float>& x = args.value(n, 0);
    const auto bounds = onnx_slice_bounds(x.shape, args.ints(n, 1), args.ints(n, 2), args.has(3) ? args.ints(n, 3) : std::vector<std::int64_t>{},
                                          args.has(4) ? args.ints(n, 4) : std::vector<std::int64_t>{}, n.describe());
    if (!(bounds.out == n.shapes[0])) throw error(n.describe() + ": slice gives " + bounds.out.str() + ", the node declares " + n.shapes[0].str());
    tensor<float> out(bounds.out);
    out.data = sliced(x.data, x.shape, bounds);
    return {std::move(out)};
}

// Gather of a float tensor along an axis with constant integer indices of
// any shape (Swin's q, k, v = qkv[0], qkv[1], qkv[2] on a rank-5 tensor).
inline std::vector<tensor<float>> gather_impl(const node& n, std::span<const tensor<float>* const> in) {
    pb::NodeProto blob = opaque_attributes(*n.opaque);
    attributes at(blob, n.describe());
    onnx_inputs args(blob, in);
    const tensor<float>& x = args.value(n, 0);
    const auto idx = args.ints(n, 1);
    const int r = x.shape.rank;
    std::int64_t axis = at.get_int("axis", 0);
    if (axis < -r || axis >= r) throw error(n.describe() + ": axis " + std::to_string(axis) + " is outside [-rank, rank) for rank " + std::to_string(r));
    if (axis < 0) axis += r;
    std::int64_t outer = 1, inner = 1;
    const std::int64_t ext = x.shape[static_cast<int>(axis)];
    for (int d = 0; d < axis; ++d) outer *= x.shape[d];
    for (int d = static_cast<int>(axis) + 1; d < r; ++d) inner *= x.shape[d];
    tensor<float> out(n.shapes[0]);
    if (static_cast<std::int64_t>(out.data.size()) != outer * static_cast<std::int64_t>(idx.size()) * inner)
        throw error(n.describe() + ": output shape " + n.shapes[0].str() + " does not fit the gather");
    auto to = out.data.begin();
    for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t k : idx) {
            if (k < -ext || k >= ext) throw error(n.describe() + ": index " + std::to_string(k) + " is out of range for extent " + std::to_string(ext));
            if (k < 0) k += ext;
            to = std::copy_n(x.data.begin() + (o * ext + k) * inner, inner, to);
        }
    return {std::move(out)};
}

// Einsum over float tensors (plan_einsum: letters, extents, the output's
// letters); the sum runs over the letters not in the output (MaxViT's
// attention, "B G H I D, B G H J D -> B G H I J").
inline std::vector<tensor<float>> einsum_impl(const node& n, std::span<const tensor<float>* const> in) {
    pb::NodeProto blob = opaque_attributes(*n.opaque);
    attributes at(blob, n.describe());
    const std::string eq = at.get_string("equation", "");
    std::vector<shape> shapes;
    for (const auto* x : in) shapes.push_back(x->shape);
    const auto plan = plan_einsum(eq, shapes);
    if (!plan) throw error(n.describe() + ": equation '" + eq + "' does not fit its operands");
    const std::vector<std::string>& terms = plan->terms;
    const std::string& outt = plan->out;
    // Output letters first, then the summed ones: one odometer over all.
    std::string all = outt;
    for (auto& [l, e] : plan->extent) if (outt.find(l) == std::string::npos) all += l;
    std::vector<std::int64_t> ext;
    for (char l : all) ext.push_back(plan->extent.at(l));
    std::int64_t out_count = 1, sum_count = 1;
    for (std::size_t j = 0; j < all.size(); ++j) (j < outt.size() ? out_count : sum_count) *= ext[j];
    tensor<float> out(n.shapes[0]);
    if (static_cast<std::int64_t>(out.data.size()) != out_count) throw error(n.describe() + ": output shape " + n.shapes[0].str() + " does not fit the equation");
    // Per operand, the stride of each letter of `all` (0 where absent or broadcast).
    std::vector<std::vector<std::int64_t>> step(in.size(), std::vector<std::int64_t>(all.size(), 0));
    for (std::size_t k = 0; k < in.size(); ++k) {
        const auto st = strides_of(in[k]->shape);
        for (std::size_t d = 0; d < terms[k].size(); ++d)
            if (in[k]->shape[static_cast<int>(d)] != 1) step[k][all.find(terms[k][d])] += st[d];
    }
    std::vector<std::int64_t> idx(all.size(), 0), off(in.size(), 0);
    for (std::int64_t o = 0; o < out_count; ++o) {
        double acc = 0;
        for (std::int64_t s = 0; s < sum_count; ++s) {
            double p = 1;
            for (std::size_t k = 0; k < in.size(); ++k) p *= in[k]->data[static_cast<std::size_t>(off[k])];
            acc += p;
            // Advance the summed letters (the odometer's tail), then the output ones.
            for (std::size_t j = all.size(); j-- > 0;) {
                if (j < outt.size() && s + 1 < sum_count) break;
                for (std::size_t k = 0; k < in.size(); ++k) off[k] += step[k][j];
                if (++idx[j] < ext[j]) break;
                for (std::size_t k = 0; k < in.size(); ++k) off[k] -= step[k][j] * ext[j];
                idx[j] = 0;
            }
        }
        out.data[static_cast<std::size_t>(o)] = static_cast<float>(acc);
    }
    return {std::move(out)};
}

// Pad in any mode (constant with its value, reflect, edge) on any axes,
// negative pads cropping: what the importer does not map to the spec's pad
// (Swin V2 pads the last axes of rank-4 tensors).
inline std::vector<tensor<float>> pad_impl(const node& n, std::span<const tensor<float>* const> in) {
    pb::NodeProto blob = opaque_attributes(*n.opaque);
    attributes at(blob, n.describe());
    onnx_inputs args(blob, in);
    const tensor<float>& x = args.value(n, 0);
    const int r = x.shape.rank;
    const std::string mode = at.get_string("mode", "constant");
    if (mode != "constant" && mode != "reflect" && mode != "edge") at.fail("mode", "has unknown value '" + mode + "' (constant, reflect or edge)");
    const auto pads = args.ints(n, 1);
    float value = 0;
    if (args.has(2)) {
        const auto& v = args.slots[2].value ? *args.slots[2].value : to_float_tensor(*args.slots[2].constant, n.describe() + ": constant_value");
        if (v.data.size() != 1) throw error(n.describe() + ": constant_value must hold one value");
        value = v.data[0];
    }
    std::vector<std::int64_t> axes;
    if (args.has(3)) axes = args.ints(n, 3);
    else for (int d = 0; d < r; ++d) axes.push_back(d);
    if (pads.size() != 2 * axes.size()) throw error(n.describe() + ": pads has " + std::to_string(pads.size()) + " entries for " + std::to_string(axes.size()) + " axes");
    std::vector<std::int64_t> begin(static_cast<std::size_t>(r), 0);
    shape o = x.shape;
    for (std::size_t k = 0; k < axes.size(); ++k) {
        std::int64_t d = axes[k] < 0 ? axes[k] + r : axes[k];
        if (d < 0 || d >= r) throw error(n.describe() + ": axis " + std::to_string(axes[k]) + " is outside [-rank, rank) for rank " + std::to_string(r));
        begin[static_cast<std::size_t>(d)] = pads[k];
        o[static_cast<int>(d)] += pads[k] + pads[k + axes.size()];
        if (mode != "constant" && x.shape[static_cast<int>(d)] == 0) throw error(n.describe() + ": " + mode + " padding of an empty axis");
    }
    if (!(o == n.shapes[0])) throw error(n.describe() + ": padding gives " + o.str() + ", the node declares " + n.shapes[0].str());
    tensor<float> out(o);
    const auto xs = strides_of(x.shape);
    std::vector<std::int64_t> idx(static_cast<std::size_t>(r), 0);
    for (std::size_t k = 0; k < out.data.size(); ++k) {
        std::int64_t off = 0;
        bool inside = true;
        for (std::size_t d = 0; d < idx.size(); ++d) {
            const std::int64_t ext = x.shape[static_cast<int>(d)];
            std::int64_t i = idx[d] - begin[d];
            if (i < 0 || i >= ext) {
                if (mode == "constant") { inside = false; break; }
                if (mode == "edge") i = std::clamp<std::int64_t>(i, 0, ext - 1);
                else {  // reflect, without repeating the edge; period 2 (ext - 1)
                    const std::int64_t period = std::max<std::int64_t>(1, 2 * (ext - 1));
                    i = ((i % period) + period) % period;
                    if (i >= ext) i = period - i;
                }
            }
            off += i * xs[d];
        }
        out.data[k] = inside ? x.data[static_cast<std::size_t>(off)] : value;
        for (int d = r - 1; d >= 0; --d) {
            if (++idx[static_cast<std::size_t>(d)] < o[d]) break;
            idx[static_cast<std::size_t>(d)] = 0;
        }
    }
    return {std::move(out)};
}

// Whether an opaque node is of the default ONNX domain, the only one these
// implementations follow (a custom domain may reuse a type name).
inline bool default_domain(const node& n) { return n.opaque->domain.empty() || n.opaque->domain == "ai.onnx"; }

}  // namespace detail

inline void install_reference_ops(backend::reference& r) {
    r.opaque_impls["Div"] = detail::div_impl;
    r.opaque_impls["AveragePool"] = detail::pool_impl<false>;
    r.opaque_impls["MaxPool"] = detail::pool_impl<true>;
    using detail::attributes;
    auto plain = [](float (*f)(float)) { return [f](const attributes&) { return f; }; };
    r.opaque_impls["Erf"] = detail::unary(plain([](float x) { return std::erf(x); }));
    r.opaque_impls["Sqrt"] = detail::unary(plain([](float x) { return std::sqrt(x); }));
    r.opaque_impls["Exp"] = detail::unary(plain([](float x) { return std::exp(x); }));
    r.opaque_impls["Log"] = detail::unary(plain([](float x) { return std::log(x); }));
    r.opaque_impls["Neg"] = detail::unary(plain([](float x) { return -x; }));
    r.opaque_impls["Abs"] = detail::unary(plain([](float x) { return std::fabs(x); }));
    r.opaque_impls["Reciprocal"] = detail::unary(plain([](float x) { return 1.f / x; }));
    r.opaque_impls["Floor"] = detail::unary(plain([](float x) { return std::floor(x); }));
    r.opaque_impls["Ceil"] = detail::unary(plain([](float x) { return std::ceil(x); }));
    r.opaque_impls["Softplus"] = detail::unary(plain([](float x) { return std::log1p(std::exp(x)); }));
    r.opaque_impls["HardSigmoid"] = detail::unary([](const attributes& a) {
        float alpha = a.get_float("alpha", 0.2f), beta = a.get_float("beta", 0.5f);
        return [alpha, beta](float x) { return std::max(0.f, std::min(1.f, alpha * x + beta)); };
    });
    r.opaque_impls["HardSwish"] = detail::unary(plain([](float x) { return x * std::max(0.f, std::min(1.f, x / 6.f + 0.5f)); }));
    r.opaque_impls["LeakyRelu"] = detail::unary([](const attributes& a) {
        float alpha = a.get_float("alpha", 0.01f);
        return [alpha](float x) { return x < 0 ? alpha * x : x; };
    });
    r.opaque_impls["Elu"] = detail::unary([](const attributes& a) {
        float alpha = a.get_float("alpha", 1.f);
        return [alpha](float x) { return x < 0 ? alpha * (std::exp(x) - 1.f) : x; };
    });
    r.opaque_impls["Gelu"] = detail::unary([](const attributes& a) {
        std::string approx = a.get_string("approximate", "none");
        if (approx != "none" && approx != "tanh") a.fail("approximate", "has unknown value '" + approx + "' (none or tanh)");
        return approx == "tanh" ? &detail::gelu_tanh : &detail::gelu_exact;
    });
    r.opaque_impls["Clip"] = detail::clip_impl;
    r.opaque_impls["Sub"] = detail::binary([](float a, float b) { return a - b; });
    r.opaque_impls["Pow"] = detail::binary([](float a, float b) { return std::pow(a, b); });
    r.opaque_impls["Max"] = detail::variadic([](float a, float b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }, false);
    r.opaque_impls["Min"] = detail::variadic([](float a, float b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); }, false);
    r.opaque_impls["Sum"] = detail::variadic([](float a, float b) { return a + b; }, false);
    r.opaque_impls["Mean"] = detail::variadic([](float a, float b) { return a + b; }, true);
    r.opaque_impls["LayerNormalization"] = detail::layernorm_impl;
    r.opaque_impls["ReduceSum"] = detail::reduce([](float a, float b) { return a + b; }, 0.f, false);
    r.opaque_impls["ReduceMean"] = detail::reduce([](float a, float b) { return a + b; }, 0.f, true);
    r.opaque_impls["ReduceMax"] = detail::reduce([](float a, float b) { return std::max(a, b); }, -std::numeric_limits<float>::infinity(), false);
    r.opaque_impls["ReduceMin"] = detail::reduce([](float a, float b) { return std::min(a, b); }, std::numeric_limits<float>::infinity(), false);
    r.opaque_impls["ReduceL1"] = detail::reduce([](float a, float b) { return a + std::fabs(b); }, 0.f, false);
    r.opaque_impls["ReduceL2"] = detail::reduce([](float a, float b) { return a + b * b; }, 0.f, false, [](float v) { return std::sqrt(v); });
    r.opaque_impls["ReduceSumSquare"] = detail::reduce([](float a, float b) { return a + b * b; }, 0.f, false);
    r.opaque_impls["ReduceProd"] = detail::reduce([](float a, float b) { return a * b; }, 1.f, false);
    r.opaque_impls["Where"] = detail::where_impl;
    r.opaque_impls["Expand"] = detail::expand_impl;
    r.opaque_impls["Cast"] = detail::cast_impl;
    r.opaque_impls["Slice"] = detail::slice_impl;
    r.opaque_impls["Gather"] = detail::gather_impl;
    r.opaque_impls["Einsum"] = detail::einsum_impl;
    r.opaque_impls["Pad"] = detail::pad_impl;
    for (auto& [type, fn] : r.opaque_impls)
        fn = [fn = std::move(fn)](const node& n, std::span<const tensor<float>* const> in) {
            if (!detail::default_domain(n))
                throw error(n.describe() + ": operator of domain '" + n.opaque->domain +
                            "' has no reference implementation (only the default ONNX domain's operators do)");
            return fn(n, in);
        };
}

}  // namespace tsopt::onnx
