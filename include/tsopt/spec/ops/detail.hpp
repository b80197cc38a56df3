#pragma once
// Helpers shared by operator declarations: window geometry for conv/pool,
// numpy broadcasting, fused activations, message formatting.
#include <algorithm>
#include <string>

#include "tsopt/spec/dsl.hpp"

namespace tsopt::spec::detail {

inline std::string cat() { return {}; }
template <class A, class... R>
std::string cat(const A& a, const R&... r) {
    if constexpr (std::is_convertible_v<A, std::string_view>) return std::string(std::string_view(a)) + cat(r...);
    else if constexpr (std::is_same_v<A, shape>) return a.str() + cat(r...);
    else return std::to_string(a) + cat(r...);
}

// Extent of a sliding-window output along one axis, or -1 when the window
// does not fit. `same` pads symmetrically by dil*(k-1)/2 (odd k only), so
// the output extent is ceil(in / stride).
inline std::int64_t window_out(std::int64_t in, std::int64_t k, std::int64_t stride, std::int64_t dil, pad_mode pm) {
    if (k <= 0 || stride <= 0 || dil <= 0) return -1;
    std::int64_t span = dil * (k - 1) + 1;
    std::int64_t pad = pm == pad_mode::same ? dil * (k - 1) / 2 : 0;
    std::int64_t eff = in + 2 * pad - span;
    return eff < 0 ? -1 : eff / stride + 1;
}
inline std::int64_t window_pad(std::int64_t k, std::int64_t dil, pad_mode pm) {
    return pm == pad_mode::same ? dil * (k - 1) / 2 : 0;
}
inline std::string check_window_params(std::int32_t kh, std::int32_t kw, std::int32_t sh, std::int32_t sw,
                                       std::int32_t pad, std::int32_t dh = 1, std::int32_t dw = 1) {
    if (sh < 1 || sw < 1) return cat("stride must be >= 1, got ", sh, "x", sw);
    if (dh < 1 || dw < 1) return cat("dilation must be >= 1, got ", dh, "x", dw);
    if (pad != 0 && pad != 1) return cat("padding mode must be valid(0) or same(1), got ", pad);
    if (pad == 1 && (kh % 2 == 0 || kw % 2 == 0)) return cat("same padding needs an odd kernel, got ", kh, "x", kw);
    return {};
}

inline std::string check_activation(std::int32_t a) {
    if (a < 0 || a > 3) return cat("activation must be none(0), relu(1), sigmoid(2) or tanh(3), got ", a);
    return {};
}
template <class T>
inline T activate(T x, std::int32_t act) {
    using S = scalar_traits<T>;
    switch (static_cast<activation>(act)) {
        case activation::relu: return S::relu(x);
        case activation::sigmoid: return S::sigmoid(x);
        case activation::tanh: return S::tanh(x);
        default: return x;
    }
}

// o[i] += w * in[i] for i < n, in blocks of eight and then the rest: GCC's
// -O2 vectorizes only loops that need no scalar remainder. `o` and `in` are
// different tensors.
template <class T>
void add_scaled_row(T* __restrict o, const T* __restrict in, T w, std::int64_t n) {
    std::int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (std::int64_t k = 0; k < 8; ++k) o[i + k] += w * in[i + k];
    for (; i < n; ++i) o[i] += w * in[i];
}

template <class T>
inline void activate_all(tensor<T>& t, std::int32_t act) {
    if (act == 0) return;
    for (auto& x : t.data) x = activate(x, act);
}

// Numpy broadcasting of two shapes; error message when incompatible.
inline std::string broadcast(const shape& a, const shape& b, shape& out) {
    int r = std::max(a.rank, b.rank);
    out = shape{};
    for (int i = 0; i < r; ++i) {
        std::int64_t da = i - (r - a.rank) >= 0 ? a[i - (r - a.rank)] : 1;
        std::int64_t db = i - (r - b.rank) >= 0 ? b[i - (r - b.rank)] : 1;
        if (da != db && da != 1 && db != 1)
            return cat("shapes ", a, " and ", b, " do not broadcast (axis ", i, ": ", da, " vs ", db, ")");
        out.push_back(std::max(da, db));
    }
    return {};
}

// Calls f(out_index, a_index, b_index) over a broadcast result.
template <class F>
inline void for_each_broadcast(const shape& out, const shape& a, const shape& b, F&& f) {
    if (a == out && b == out) {
        for (std::int64_t i = 0, n = out.elements(); i < n; ++i) f(i, i, i);
        return;
    }
    auto sa = strides_of(a), sb = strides_of(b);
    std::array<std::int64_t, max_rank> ea{}, eb{};  // effective strides (0 on broadcast axes)
    for (int i = 0; i < out.rank; ++i) {
        int ia = i - (out.rank - a.rank), ib = i - (out.rank - b.rank);
        ea[i] = (ia >= 0 && a[ia] != 1) ? sa[ia] : 0;
        eb[i] = (ib >= 0 && b[ib] != 1) ? sb[ib] : 0;
    }
    std::array<std::int64_t, max_rank> idx{};
    std::int64_t oa = 0, ob = 0;
    for (std::int64_t o = 0, n = out.elements(); o < n; ++o) {
        f(o, oa, ob);
        for (int d = out.rank - 1; d >= 0; --d) {
            oa += ea[d]; ob += eb[d];
            if (++idx[d] < out[d]) break;
            oa -= ea[d] * out[d]; ob -= eb[d] * out[d];
            idx[d] = 0;
        }
    }
}

inline constexpr std::int32_t off_on[] = {0, 1};
inline constexpr std::int32_t one[] = {1};
inline constexpr std::int32_t one_two[] = {1, 2};
inline constexpr std::int32_t three[] = {3};
// Values beyond the domains that axiom validation tries in any_value slots.
inline constexpr std::int32_t probe_stride[] = {3};
inline constexpr std::int32_t probe_dilation[] = {2};
// Pool windows: an even one (valid padding only: same padding needs an odd
// window) and a larger odd one.
inline constexpr std::int32_t probe_window[] = {2, 5};

inline std::int64_t elements_flops(const op_params&, std::span<const shape>, std::span<const shape> out) {
    return out[0].elements();
}
inline std::int64_t no_flops(const op_params&, std::span<const shape>, std::span<const shape>) { return 0; }

}  // namespace tsopt::spec::detail
