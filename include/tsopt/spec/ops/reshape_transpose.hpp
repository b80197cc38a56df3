#pragma once
// Data-layout operators: transpose (a permutation packed into one parameter,
// see pack_perm), reshape (target extents in the parameters), pad (zero
// padding of the two spatial axes of an NCHW tensor) and reorder (the explicit
// layout conversion of TASO §5: the value is unchanged, only its storage
// becomes the node's out_layout, so rules never need it and it is not
// generated; cost models price the copy it is).
#include <initializer_list>

#include "tsopt/spec/ops/detail.hpp"

namespace tsopt::spec {
namespace transpose_p { enum : int { perm }; }
namespace reshape_p { enum : int { rank, d0 }; }  // extents in slots d0 .. d0+rank-1
namespace pad_p { enum : int { top, bottom, left, right }; }

// A permutation of up to 6 axes in one int32: 3 bits per axis, rank in bits 24-27.
constexpr std::int32_t pack_perm(std::initializer_list<int> perm) {
    std::int32_t v = static_cast<std::int32_t>(perm.size()) << 24;
    int i = 0;
    for (int a : perm) v |= a << (3 * i++);
    return v;
}
constexpr int perm_rank(std::int32_t packed) { return (packed >> 24) & 0xf; }
constexpr int perm_axis(std::int32_t packed, int i) { return (packed >> (3 * i)) & 7; }

namespace ops {

inline std::string transpose_shape(const op_params& p, std::span<const shape> in, std::span<shape> out) {
    std::int32_t pm = p[transpose_p::perm];
    const shape& a = in[0];
    if (perm_rank(pm) != a.rank) return detail::cat("permutation has rank ", perm_rank(pm), ", input ", a, " has rank ", a.rank);
    unsigned seen = 0;
    shape r;
    for (int i = 0; i < a.rank; ++i) {
        int ax = perm_axis(pm, i);
        if (ax >= a.rank || (seen >> ax) & 1u) return detail::cat("parameter is not a permutation of ", a.rank, " axes");
        seen |= 1u << ax;
        r.push_back(a[ax]);
    }
    out[0] = r;
    return {};
}

template <class T>
void transpose_eval(const op_params& p, std::span<const tensor<T>* const> in, std::span<tensor<T>> out) {
    const auto& a = *in[0];
    auto& o = out[0];
    std::int32_t pm = p[transpose_p::perm];
    auto ist = strides_of(a.shape);
    std::array<std::int64_t, max_rank> st{};  // input stride of each output axis
    for (int i = 0; i < o.shape.rank; ++i) st[i] = ist[perm_axis(pm, i)];
    // A row of the last output axis at a time: the copy loop carries no
    // index bookkeeping (verification transposes every activation of a
    // model exported in NHWC).
    const int last = o.shape.rank - 1;
    const std::int64_t row = last >= 0 ? o.shape[last] : 1, step = last >= 0 ? st[last] : 0;
    std::array<std::int64_t, max_rank> idx{};
    std::int64_t src = 0;
    for (std::int64_t k = 0, n = o.size(); k < n; k += row) {
        T* dst = o.data.data() + k;
        const T* from = a.data.data() + src;
        for (std::int64_t j = 0; j < row; ++j) dst[j] = from[j * step];
        for (int d = last - 1; d >= 0; --d) {
            src += st[d];
            if (++idx[d] < o.shape[d]) break;
            src -= st[d] * o.shape[d];
            idx[d] = 0;
        }
    }
}

inline std::string reshape_shape(const op_params& p, std::span<const shape> in, std::span<shape> out) {
    int r = p[reshape_p::rank];
    // Bounded by both the parameter slots and a shape's capacity (max_rank).
    constexpr int most = std::min(max_rank, max_params - 1);
    if (r < 1 || r > most) return detail::cat("target rank ", r, " must be within 1..", most);
    shape s;
    for (int i = 0; i < r; ++i) {
        if (p[reshape_p::d0 + i] < 1) return detail::cat("target extent ", p[reshape_p::d0 + i], " must be positive");
        s.push_back(p[reshape_p::d0 + i]);
    }
    if (s.elements() != in[0].elements())
        return detail::cat("cannot reshape ", in[0], " (", in[0].elements(), " elements) to ", s, " (", s.elements(), ")");
    out[0] = s;
    return {};
}
template <class T>
void copy_eval(const op_params&, std::span<const tensor<T>* const> in, std::span<tensor<T>> out) {
    out[0].data = in[0]->data;
}

inline std::string pad_shape(const op_params& p, std::span<const shape> in, std::span<shape> out) {
    using namespace pad_p;
    if (in[0].rank != 4) return detail::cat("input must be NCHW (rank 4), got ", in[0]);
    for (int i = 0; i < 4; ++i)
        if (p[i] < 0) return detail::cat("padding must be non-negative, got ", p[i]);
    out[0] = in[0];
    out[0][2] += p[top] + p[bottom];
    out[0][3] += p[left] + p[right];
    return {};
}
template <class T>
void pad_eval(const op_params& p, std::span<const tensor<T>* const> in, std::span<tensor<T>> out) {
    using namespace pad_p;
    const auto& x = *in[0];
    auto& o = out[0];
    std::fill(o.data.begin(), o.data.end(), scalar_traits<T>::zero());
    const std::int64_t H = x.shape[2], W = x.shape[3], OH = o.shape[2], OW = o.shape[3];
    for (std::int64_t c = 0; c < x.shape[0] * x.shape[1]; ++c)
        for (std::int64_t y = 0; y < H; ++y)
            std::copy_n(x.data.begin() + (c * H + y) * W, W, o.data.begin() + (c * OH + y + p[top]) * OW + p[left]);
}

inline std::string reorder_shape(const op_params&, std::span<const shape> in, std::span<shape> out) {
    out[0] = in[0];
    return {};
}

inline constexpr std::int32_t transposes[] = {pack_perm({1, 0}), pack_perm({0, 2, 1})};

}  // namespace ops

inline constexpr op_decl transpose_decl{
    .kind = op_kind::transpose, .name = "transpose", .math = "permute the axes of x",
    .input_names = {"x"}, .params = {param_decl{"perm", ops::transposes}}, .num_params = 1,
    .cls = op_class::data_movement, .multilinear = true,
    .infer = ops::transpose_shape, .eval_float = ops::transpose_eval<float>, .eval_modp = ops::transpose_eval<modp>,
    .flops = detail::no_flops};

inline constexpr op_decl reshape_decl{
    .kind = op_kind::reshape, .name = "reshape", .math = "same elements, new extents (row-major)",
    .input_names = {"x"},
    .params = {param_decl{"rank"}, param_decl{"d0"}, param_decl{"d1"}, param_decl{"d2"}, param_decl{"d3"},
               param_decl{"d4"}, param_decl{"d5"}, param_decl{"d6"}},
    .num_params = 8, .cls = op_class::data_movement, .multilinear = true, .generated = false,
    .infer = ops::reshape_shape, .eval_float = ops::copy_eval<float>, .eval_modp = ops::copy_eval<modp>,
    .flops = detail::no_flops};

inline constexpr op_decl pad_decl{
    .kind = op_kind::pad, .name = "pad", .math = "zero-pad the H and W axes of x",
    .input_names = {"x"},
    .params = {param_decl{"top"}, param_decl{"bottom"}, param_decl{"left"}, param_decl{"right"}}, .num_params = 4,
    .cls = op_class::data_movement, .multilinear = true, .generated = false,
    .infer = ops::pad_shape, .eval_float = ops::pad_eval<float>, .eval_modp = ops::pad_eval<modp>,
    .flops = detail::no_flops};

// Every layout: a reorder converts into any of them.
inline constexpr op_decl reorder_decl{
    .kind = op_kind::reorder, .name = "reorder", .math = "x, stored in the node's layout",
    .input_names = {"x"}, .cls = op_class::data_movement, .multilinear = true, .generated = false,
    .infer = ops::reorder_shape, .eval_float = ops::copy_eval<float>, .eval_modp = ops::copy_eval<modp>,
    .flops = detail::no_flops};

}  // namespace tsopt::spec
