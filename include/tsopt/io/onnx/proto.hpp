#pragma once
// Shared details of the ONNX importer and exporter: the protobuf include with
// the macros Debian's libonnx-dev needs, tensor conversion between
// onnx::TensorProto and tsopt tensors (with size checks that keep malformed
// files from allocating wildly), typed attribute access that names the node
// and attribute at fault, and the opaque-operator attribute blob.
//
// Users link `onnx_dep` (onnx_proto + onnx + protobuf), see the root meson.build.
#ifndef ONNX_ML
#define ONNX_ML 1
#endif
#ifndef ONNX_NAMESPACE
#define ONNX_NAMESPACE onnx
#endif
#include <map>
#include <optional>
#include <cctype>
#include <algorithm>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "tsopt/core/graph.hpp"

namespace tsopt::onnx {

namespace pb = ::onnx;

// The default-domain opsets the importer accepts and the exporter writes.
inline constexpr std::int64_t min_opset = 11;
inline constexpr std::int64_t max_opset = 17;

// The ONNX domain of an engine's own operators (spec::register_operator):
// a node there named after the operator, its parameters as int attributes
// under their declared names. Export writes them so; import reads them back
// into the operator where the program registered it, and keeps them opaque
// where it did not.
inline constexpr std::string_view engine_domain = "ai.tsopt.engine";

namespace detail {

// Largest extent / element count the importer accepts for any tensor; keeps
// corrupt files from producing shapes whose products overflow.
inline constexpr std::int64_t max_extent = std::int64_t{1} << 31;
inline constexpr std::int64_t max_elements = std::int64_t{1} << 36;

// Attribute names the importer adds to an opaque operator's blob to restore
// inputs the graph IR cannot carry (constants of non-float type, empty
// optional slots) and gaps in the output list.
inline constexpr std::string_view input_attr_prefix = "__tsopt_input_";
inline constexpr std::string_view output_slots_attr = "__tsopt_output_slots";

// Element count of a shape, saturating at max_elements + 1 (extents of
// corrupt files may be large enough for the plain product to overflow).
inline std::int64_t bounded_elements(const shape& s) {
    std::int64_t n = 1;
    for (auto d : s) {
        if (d <= 0) return 0;
        if (d > max_elements || n > (max_elements + 1) / d) return max_elements + 1;
        n *= d;
    }
    return n;
}

inline const char* type_name(std::int32_t t) {
    switch (t) {
        case pb::TensorProto::FLOAT: return "float32";
        case pb::TensorProto::UINT8: return "uint8";
        case pb::TensorProto::INT8: return "int8";
        case pb::TensorProto::UINT16: return "uint16";
        case pb::TensorProto::INT16: return "int16";
        case pb::TensorProto::INT32: return "int32";
        case pb::TensorProto::INT64: return "int64";
        case pb::TensorProto::STRING: return "string";
        case pb::TensorProto::BOOL: return "bool";
        case pb::TensorProto::FLOAT16: return "float16";
        case pb::TensorProto::DOUBLE: return "float64";
        case pb::TensorProto::UINT32: return "uint32";
        case pb::TensorProto::UINT64: return "uint64";
        case pb::TensorProto::BFLOAT16: return "bfloat16";
        default: return "undefined";
    }
}

// Shape of a TensorProto, checked: rank <= max_rank, extents >= 0 and bounded.
// (Zero extents are rejected: tsopt tensors are never empty.)
inline shape tensor_shape(const pb::TensorProto& t, const std::string& what, bool allow_empty = false) {
    if (t.dims_size() > max_rank)
        throw error(what + ": rank " + std::to_string(t.dims_size()) + " exceeds tsopt's maximum " + std::to_string(max_rank));
    shape s;
    std::int64_t n = 1;
    for (int i = 0; i < t.dims_size(); ++i) {
        std::int64_t d = t.dims(i);
        if (d < (allow_empty ? 0 : 1) || d > max_extent)
            throw error(what + ": dimension " + std::to_string(i) + " has extent " + std::to_string(d) +
                        " (must be within " + (allow_empty ? "0" : "1") + ".." + std::to_string(max_extent) + ")");
        n *= d;
        if (n > max_elements) throw error(what + ": more than " + std::to_string(max_elements) + " elements");
        s.push_back(d);
    }
    return s;
}

inline std::int64_t element_size(std::int32_t t) {
    switch (t) {
        case pb::TensorProto::FLOAT: case pb::TensorProto::INT32: case pb::TensorProto::UINT32: return 4;
        case pb::TensorProto::DOUBLE: case pb::TensorProto::INT64: case pb::TensorProto::UINT64: return 8;
        case pb::TensorProto::INT16: case pb::TensorProto::UINT16: case pb::TensorProto::FLOAT16:
        case pb::TensorProto::BFLOAT16: return 2;
        case pb::TensorProto::INT8: case pb::TensorProto::UINT8: case pb::TensorProto::BOOL: return 1;
        default: return 0;
    }
}

inline void check_stored(const pb::TensorProto& t, const std::string& what) {
    if (t.data_location() == pb::TensorProto::EXTERNAL)
        throw error(what + ": external tensor data, and no place to read it from (read the model from its file, or give import_model an external_reader)");
}

template <class T>
std::vector<T> from_raw(const pb::TensorProto& t, std::int64_t n, const std::string& what) {
    const std::string& raw = t.raw_data();
    if (static_cast<std::int64_t>(raw.size()) != n * static_cast<std::int64_t>(sizeof(T)))
        throw error(what + ": raw_data holds " + std::to_string(raw.size()) + " bytes, shape needs " +
                    std::to_string(n * static_cast<std::int64_t>(sizeof(T))));
    std::vector<T> v(static_cast<std::size_t>(n));
    if (n) std::memcpy(v.data(), raw.data(), raw.size());  // ONNX raw data is little-endian, as is every target
    return v;
}
template <class Field>
void check_count(const Field& f, std::int64_t n, const char* field, const std::string& what) {
    if (static_cast<std::int64_t>(f.size()) != n)
        throw error(what + ": " + field + " holds " + std::to_string(f.size()) + " values, shape needs " + std::to_string(n));
}

// Values of a float tensor (float32 or float64 storage).
inline tensor<float> to_float_tensor(const pb::TensorProto& t, const std::string& what) {
    check_stored(t, what);
    shape s = tensor_shape(t, what);
    std::int64_t n = s.elements();
    tensor<float> r;
    r.shape = s;
    if (t.data_type() == pb::TensorProto::FLOAT) {
        if (t.has_raw_data()) r.data = from_raw<float>(t, n, what);
        else {
            check_count(t.float_data(), n, "float_data", what);
            r.data.assign(t.float_data().begin(), t.float_data().end());
        }
    } else if (t.data_type() == pb::TensorProto::DOUBLE) {
        std::vector<double> d;
        if (t.has_raw_data()) d = from_raw<double>(t, n, what);
        else {
            check_count(t.double_data(), n, "double_data", what);
            d.assign(t.double_data().begin(), t.double_data().end());
        }
        r.data.assign(d.begin(), d.end());
    } else {
        throw error(what + ": element type " + type_name(t.data_type()) + " where float32 is needed");
    }
    return r;
}

// Values of an integer tensor (int64 or int32 storage), e.g. shapes and pads.
inline std::vector<std::int64_t> to_ints(const pb::TensorProto& t, const std::string& what) {
    check_stored(t, what);
    shape s = tensor_shape(t, what, true);
    std::int64_t n = s.elements();
    if (t.data_type() == pb::TensorProto::INT64) {
        if (t.has_raw_data()) return from_raw<std::int64_t>(t, n, what);
        check_count(t.int64_data(), n, "int64_data", what);
        return {t.int64_data().begin(), t.int64_data().end()};
    }
    if (t.data_type() == pb::TensorProto::INT32) {
        std::vector<std::int32_t> v;
        if (t.has_raw_data()) v = from_raw<std::int32_t>(t, n, what);
        else {
            check_count(t.int32_data(), n, "int32_data", what);
            v.assign(t.int32_data().begin(), t.int32_data().end());
        }
        return {v.begin(), v.end()};
    }
    throw error(what + ": element type " + type_name(t.data_type()) + " where int64 is needed");
}

inline void fill_tensor(pb::TensorProto& t, const std::string& name, const tensor<float>& v) {
    t.set_name(name);
    t.set_data_type(pb::TensorProto::FLOAT);
    for (int i = 0; i < v.shape.rank; ++i) t.add_dims(v.shape[i]);
    t.set_raw_data(std::string(reinterpret_cast<const char*>(v.data.data()), v.data.size() * sizeof(float)));
}
inline void fill_ints(pb::TensorProto& t, const std::string& name, const std::vector<std::int64_t>& v) {
    t.set_name(name);
    t.set_data_type(pb::TensorProto::INT64);
    t.add_dims(static_cast<std::int64_t>(v.size()));
    t.set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(std::int64_t)));
}

// ---- attributes -----------------------------------------------------------

// Typed access to a NodeProto's attributes; every failure names the node and
// the attribute.
class attributes {
public:
    attributes(const pb::NodeProto& n, std::string who) : n_(n), who_(std::move(who)) {}

    const pb::AttributeProto* find(std::string_view name) const {
        for (const auto& a : n_.attribute())
            if (a.name() == name) return &a;
        return nullptr;
    }
    bool has(std::string_view name) const { return find(name) != nullptr; }

    std::int64_t get_int(std::string_view name, std::int64_t fallback) const {
        auto* a = typed(name, pb::AttributeProto::INT, "an int");
        return a ? a->i() : fallback;
    }
    float get_float(std::string_view name, float fallback) const {
        auto* a = typed(name, pb::AttributeProto::FLOAT, "a float");
        return a ? a->f() : fallback;
    }
    std::string get_string(std::string_view name, std::string fallback) const {
        auto* a = typed(name, pb::AttributeProto::STRING, "a string");
        return a ? a->s() : fallback;
    }
    std::vector<std::int64_t> get_ints(std::string_view name, std::vector<std::int64_t> fallback) const {
        auto* a = typed(name, pb::AttributeProto::INTS, "a list of ints");
        return a ? std::vector<std::int64_t>(a->ints().begin(), a->ints().end()) : fallback;
    }
    // The list attribute must have exactly `n` entries when present.
    std::vector<std::int64_t> get_ints(std::string_view name, std::vector<std::int64_t> fallback, std::size_t n) const {
        auto v = get_ints(name, std::move(fallback));
        if (v.size() != n) fail(name, "has " + std::to_string(v.size()) + " entries, expected " + std::to_string(n));
        return v;
    }
    // Names every attribute outside `known` (so the mapping can fall back to
    // an opaque node rather than silently drop a meaning it does not know).
    std::string unknown(std::initializer_list<std::string_view> known) const {
        for (const auto& a : n_.attribute()) {
            bool ok = false;
            for (auto k : known) ok = ok || a.name() == k;
            if (!ok) return a.name();
        }
        return {};
    }
    [[noreturn]] void fail(std::string_view name, const std::string& msg) const {
        throw error(who_ + ": attribute '" + std::string(name) + "' " + msg);
    }

private:
    const pb::AttributeProto* typed(std::string_view name, pb::AttributeProto::AttributeType t, const char* what) const {
        auto* a = find(name);
        if (a && a->type() != t && !(a->type() == pb::AttributeProto::UNDEFINED && has_payload(*a, t)))
            fail(name, std::string("must be ") + what + ", has attribute type " + std::to_string(a->type()));
        return a;
    }
    // Old writers sometimes leave `type` unset; accept when the payload matches.
    static bool has_payload(const pb::AttributeProto& a, pb::AttributeProto::AttributeType t) {
        switch (t) {
            case pb::AttributeProto::INT: return a.has_i();
            case pb::AttributeProto::FLOAT: return a.has_f();
            case pb::AttributeProto::STRING: return a.has_s();
            case pb::AttributeProto::INTS: return a.ints_size() > 0;
            default: return false;
        }
    }
    const pb::NodeProto& n_;
    std::string who_;
};

// ONNX Slice on a tensor of shape x, clamped as the specification says: per
// axis the first index read, the step and the extent taken (0: empty).
// Missing axes are 0, 1, ...; missing steps are 1.
struct slice_bounds {
    std::vector<std::int64_t> lo, step;
    shape out;
};
inline slice_bounds onnx_slice_bounds(const shape& x, const std::vector<std::int64_t>& starts, const std::vector<std::int64_t>& ends,
                                      std::vector<std::int64_t> axes, std::vector<std::int64_t> steps, const std::string& who) {
    const int r = x.rank;
    if (axes.empty()) for (std::size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<std::int64_t>(k));
    if (steps.empty()) steps.assign(starts.size(), 1);
    if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
        throw error(who + ": starts, ends, axes and steps differ in length");
    slice_bounds b{std::vector<std::int64_t>(static_cast<std::size_t>(r), 0), std::vector<std::int64_t>(static_cast<std::size_t>(r), 1), x};
    unsigned seen = 0;
    for (std::size_t k = 0; k < starts.size(); ++k) {
        std::int64_t d = axes[k];
        if (d < -r || d >= r) throw error(who + ": axis " + std::to_string(d) + " is outside [-" + std::to_string(r) + ", " + std::to_string(r) + ")");
        if (d < 0) d += r;
        if ((seen >> d) & 1u) throw error(who + ": axis " + std::to_string(d) + " is sliced twice");
        seen |= 1u << d;
        const std::int64_t ext = x[static_cast<int>(d)], st = steps[k];
        if (st == 0) throw error(who + ": step 0");
        auto clamped = [&](std::int64_t v, std::int64_t lo, std::int64_t hi) { return std::clamp(v < 0 ? v + ext : v, lo, hi); };
        const std::int64_t from = st > 0 ? clamped(starts[k], 0, ext) : clamped(starts[k], -1, ext - 1);
        const std::int64_t to = st > 0 ? clamped(ends[k], 0, ext) : clamped(ends[k], -1, ext - 1);
        b.lo[static_cast<std::size_t>(d)] = from;
        b.step[static_cast<std::size_t>(d)] = st;
        b.out[static_cast<int>(d)] = st > 0 ? std::max<std::int64_t>(0, (to - from + st - 1) / st) : std::max<std::int64_t>(0, (from - to - st - 1) / -st);
    }
    return b;
}

// An Einsum equation over operands of the given shapes, with every ellipsis
// written out as letters the equation does not use (right-aligned and
// broadcast like ONNX says) and the implicit output made explicit (the
// ellipsis, then the letters used once, in alphabetical order): per operand
// its letters, the output's letters, and each letter's extent. No value
// where the equation does not fit the shapes.
struct einsum_plan {
    std::vector<std::string> terms;
    std::string out;
    std::map<char, std::int64_t> extent;
};
inline std::optional<einsum_plan> plan_einsum(const std::string& equation, const std::vector<shape>& shapes) {
    std::string eq;
    for (char c : equation) if (c != ' ') eq += c;
    const auto arrow = eq.find("->");
    std::vector<std::string> terms(1);
    for (char c : eq.substr(0, arrow)) {
        if (c == ',') terms.emplace_back();
        else terms.back() += c;
    }
    if (terms.size() != shapes.size()) return std::nullopt;
    std::string fresh;  // letters for the ellipsis axes
    for (char c = 'A'; c <= 'Z'; ++c) if (eq.find(c) == std::string::npos) fresh += c;
    for (char c = 'a'; c <= 'z'; ++c) if (eq.find(c) == std::string::npos) fresh += c;
    int ellipsis = 0;
    for (std::size_t k = 0; k < terms.size(); ++k)
        if (const auto dots = terms[k].find("..."); dots != std::string::npos)
            ellipsis = std::max(ellipsis, shapes[k].rank - static_cast<int>(terms[k].size() - 3));
    if (ellipsis > static_cast<int>(fresh.size())) return std::nullopt;
    auto spread = [&](std::string t, int n) {  // "..." as the last n of the ellipsis letters
        if (const auto dots = t.find("..."); dots != std::string::npos) t.replace(dots, 3, fresh.substr(static_cast<std::size_t>(ellipsis - n), static_cast<std::size_t>(n)));
        return t;
    };
    einsum_plan p;
    std::map<char, int> count;
    for (std::size_t k = 0; k < terms.size(); ++k) {
        const shape& xs = shapes[k];
        const bool dots = terms[k].find("...") != std::string::npos;
        const int n = xs.rank - static_cast<int>(terms[k].size()) + (dots ? 3 : 0);
        if (n < 0 || (!dots && n != 0)) return std::nullopt;
        p.terms.push_back(spread(terms[k], n));
        for (std::size_t d = 0; d < p.terms[k].size(); ++d) {
            const char l = p.terms[k][d];
            if (!std::isalpha(static_cast<unsigned char>(l))) return std::nullopt;
            const std::int64_t e = xs[static_cast<int>(d)];
            auto [it, added] = p.extent.emplace(l, e);
            if (!added && it->second != e) {
                if (it->second == 1) it->second = e;
                else if (e != 1) return std::nullopt;
            }
            if (terms[k].find(l) != std::string::npos) ++count[l];  // ellipsis letters are not "used once"
        }
    }
    if (arrow != std::string::npos) {
        p.out = spread(eq.substr(arrow + 2), ellipsis);
    } else {
        p.out = fresh.substr(0, static_cast<std::size_t>(ellipsis));
        for (auto& [l, c] : count) if (c == 1) p.out += l;
    }
    if (static_cast<int>(p.out.size()) > max_rank) return std::nullopt;
    for (char l : p.out)
        if (!p.extent.count(l)) return std::nullopt;
    return p;
}

// Elements of a row-major tensor of shape x read by a slice, in order.
template <class T>
std::vector<T> sliced(const std::vector<T>& v, const shape& x, const slice_bounds& b) {
    std::vector<T> out;
    out.reserve(static_cast<std::size_t>(b.out.elements()));
    std::vector<std::int64_t> st(static_cast<std::size_t>(x.rank), 1), idx(static_cast<std::size_t>(x.rank), 0);
    for (int d = x.rank - 2; d >= 0; --d) st[static_cast<std::size_t>(d)] = st[static_cast<std::size_t>(d + 1)] * x[d + 1];
    for (std::int64_t k = 0, total = b.out.elements(); k < total; ++k) {
        std::int64_t off = 0;
        for (std::size_t d = 0; d < idx.size(); ++d) off += (b.lo[d] + idx[d] * b.step[d]) * st[d];
        out.push_back(v[static_cast<std::size_t>(off)]);
        for (int d = x.rank - 1; d >= 0; --d) {
            if (++idx[static_cast<std::size_t>(d)] < b.out[d]) break;
            idx[static_cast<std::size_t>(d)] = 0;
        }
    }
    return out;
}

}  // namespace detail

// The attribute blob of an opaque operator imported from ONNX: a serialized
// NodeProto holding only the node's AttributeProtos (plus the importer's
// __tsopt_* bookkeeping attributes). Throws when the blob does not parse.
inline pb::NodeProto opaque_attributes(const opaque_op& op) {
    pb::NodeProto n;
    if (!op.attributes.empty() && !n.ParseFromString(op.attributes))
        throw error("opaque operator '" + op.type + "': attribute blob is not a serialized ONNX NodeProto");
    return n;
}

}  // namespace tsopt::onnx
