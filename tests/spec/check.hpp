#pragma once
// Test helpers for operator semantics, in the shape `check(input, expected)`:
// on failure they print the call (operator, parameters, input tensors), the
// outputs it produced and the outputs expected, side by side.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "tsopt/spec/registry.hpp"

namespace spec_test {

using namespace tsopt;
using namespace tsopt::spec;

// A number of either system from an integer (negative values wrap in modp).
template <class T>
T num(std::int64_t v) { return scalar_traits<T>::from_int(v); }

// n / d: exact in modp (n * d^-1), rounded in float.
template <class T>
T frac(std::int64_t n, std::int64_t d) {
    if constexpr (std::is_same_v<T, float>) return float(double(n) / double(d));
    else return modp(n) * modp(d).inverse();
}

// A tensor from integer values; the value count must match the shape.
template <class T>
tensor<T> make(const shape& s, std::initializer_list<std::int64_t> values) {
    REQUIRE_MESSAGE(static_cast<std::int64_t>(values.size()) == s.elements(),
                    "test bug: ", values.size(), " values for shape ", s.str());
    tensor<T> t(s);
    std::size_t i = 0;
    for (auto v : values) t.data[i++] = num<T>(v);
    return t;
}
template <class T>
tensor<T> make_real(const shape& s, std::initializer_list<float> values) {
    REQUIRE(static_cast<std::int64_t>(values.size()) == s.elements());
    return tensor<T>(s, std::vector<T>(values));
}

inline std::string str(float x) {
    std::string s = std::to_string(x);
    return s;
}
// Representatives above p/2 are shown with their signed value: 2147483646(-1).
inline std::string str(modp x) {
    if (x.v > modp::prime / 2) return std::to_string(x.v) + "(-" + std::to_string(modp::prime - x.v) + ")";
    return std::to_string(x.v);
}
template <class T>
std::string str(const tensor<T>& t) {
    std::string s = t.shape.str() + "{";
    for (std::size_t i = 0; i < t.data.size(); ++i) s += (i ? ", " : "") + str(t.data[i]);
    return s + "}";
}
inline std::string str(const op_params& p, int n) {
    std::string s = "(";
    for (int i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(p[i]);
    return s + ")";
}

// One operator application: what `check` evaluates.
template <class T>
struct call {
    op_kind op;
    op_params params{};
    std::vector<tensor<T>> in{};

    std::string str() const {
        const op_decl& d = decl(op);
        std::string s = std::string(d.name) + spec_test::str(params, d.num_params) + " on";
        for (auto& t : in) s += "\n    " + spec_test::str(t);
        return s;
    }
};

template <class T>
std::vector<tensor<T>> run(const call<T>& c) {
    std::vector<const tensor<T>*> ptrs;
    for (auto& t : c.in) ptrs.push_back(&t);
    return evaluate<T>(c.op, c.params, ptrs);
}

inline bool close(float a, float b) { return std::abs(a - b) <= 1e-5f * std::max(1.f, std::abs(b)); }
inline bool close(modp a, modp b) { return a == b; }
template <class T>
bool same(const tensor<T>& a, const tensor<T>& b) {
    if (!(a.shape == b.shape)) return false;
    for (std::size_t i = 0; i < a.data.size(); ++i)
        if (!close(a.data[i], b.data[i])) return false;
    return true;
}

template <class T>
std::string str(const std::vector<tensor<T>>& ts) {
    std::string s;
    for (auto& t : ts) s += "\n    " + str(t);
    return s;
}

// Exact in modp; within a relative 1e-5 in float.
template <class T>
void check(const call<T>& c, const std::vector<tensor<T>>& expected) {
    std::vector<tensor<T>> got;
    try {
        got = run(c);
    } catch (const tsopt::error& e) {
        FAIL_CHECK("input:    ", c.str(), "\nthrew:    ", e.what(), "\nexpected:", str(expected));
        return;
    }
    bool ok = got.size() == expected.size();
    for (std::size_t i = 0; ok && i < got.size(); ++i) ok = same(got[i], expected[i]);
    if (!ok) FAIL_CHECK("input:    ", c.str(), "\noutput:  ", str(got), "\nexpected:", str(expected));
    else CHECK(ok);
}
template <class T>
void check(const call<T>& c, const tensor<T>& expected) {
    check(c, std::vector<tensor<T>>{expected});
}

// Compare two computations that must agree (identities between operators).
template <class T>
void check_same(const std::string& what, const tensor<T>& got, const tensor<T>& expected) {
    if (!same(got, expected)) FAIL_CHECK(what, "\noutput:   ", str(got), "\nexpected: ", str(expected));
    else CHECK(true);
}

// Parameter lists.
inline op_params params(std::initializer_list<std::int32_t> v) {
    op_params p;
    int i = 0;
    for (auto x : v) p[i++] = x;
    return p;
}
inline op_params conv(int sh, int sw, int pad, int act = 0, int dh = 1, int dw = 1) {
    return params({sh, sw, pad, act, dh, dw});
}
inline op_params pool(int kh, int kw, int sh, int sw, int pad, int act = 0) { return params({kh, kw, sh, sw, pad, act}); }
inline constexpr int valid = 0, same_pad = 1;

}  // namespace spec_test

namespace spec_test {
// A tensor from values already in the number system (fractions, reals).
template <class T>
tensor<T> tens(const shape& s, std::vector<T> values) {
    REQUIRE(static_cast<std::int64_t>(values.size()) == s.elements());
    return tensor<T>(s, std::move(values));
}
}  // namespace spec_test
