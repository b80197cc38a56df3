#pragma once
// Dense row-major tensors over either number system (float or modp).
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "tsopt/core/scalar.hpp"
#include "tsopt/core/shape.hpp"

namespace tsopt {

template <class T>
struct tensor {
    tsopt::shape shape;
    std::vector<T> data;

    tensor() = default;
    explicit tensor(const tsopt::shape& s, T fill = T{}) : shape(s), data(static_cast<std::size_t>(s.elements()), fill) {}
    tensor(const tsopt::shape& s, std::vector<T> values) : shape(s), data(std::move(values)) {}

    std::int64_t size() const { return static_cast<std::int64_t>(data.size()); }
    T& operator[](std::int64_t i) { return data[static_cast<std::size_t>(i)]; }
    const T& operator[](std::int64_t i) const { return data[static_cast<std::size_t>(i)]; }

    // Element at a multi-index (tests and readable reference loops).
    template <class... I>
    T& at(I... idx) { return data[offset({static_cast<std::int64_t>(idx)...})]; }
    template <class... I>
    const T& at(I... idx) const { return data[offset({static_cast<std::int64_t>(idx)...})]; }

    std::size_t offset(std::initializer_list<std::int64_t> idx) const {
        auto st = strides_of(shape);
        std::int64_t o = 0;
        int i = 0;
        for (auto x : idx) o += x * st[i++];
        return static_cast<std::size_t>(o);
    }
    friend bool operator==(const tensor& a, const tensor& b) { return a.shape == b.shape && a.data == b.data; }
};

// Random tensors for fingerprints (uniform over the field) and for float
// confirmation/equivalence tests (uniform in [-1, 1]).
inline tensor<modp> random_modp(const shape& s, std::mt19937_64& rng) {
    tensor<modp> t(s);
    std::uniform_int_distribution<std::uint32_t> d(0, modp::prime - 1);
    for (auto& x : t.data) x = modp::raw(d(rng));
    return t;
}
inline tensor<float> random_float(const shape& s, std::mt19937_64& rng, float lo = -1.f, float hi = 1.f) {
    tensor<float> t(s);
    std::uniform_real_distribution<float> d(lo, hi);
    for (auto& x : t.data) x = d(rng);
    return t;
}

// max |a-b| / max(1e-6, max|b|): the relative error measure used by every
// equivalence check in the project.
inline double relative_error(const tensor<float>& a, const tensor<float>& b) {
    if (!(a.shape == b.shape)) return 1e300;
    double num = 0, den = 0;
    for (std::size_t i = 0; i < a.data.size(); ++i) {
        double d = std::abs(double(a.data[i]) - double(b.data[i]));
        if (!(d <= num)) num = d;  // also propagates NaN
        den = std::max(den, std::abs(double(b.data[i])));
    }
    return num / std::max(den, 1e-6);
}

}  // namespace tsopt
