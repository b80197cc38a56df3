#pragma once
// The two number systems every operator is defined over:
//  - float: confirmation tests and real execution;
//  - modp: exact integers modulo the Mersenne prime 2^31-1, used for
//    fingerprints. Exact arithmetic means no rounding can make two different
//    programs look equal, and Schwartz-Zippel bounds the chance that two
//    different polynomials agree on random inputs (PET's Theorem 2).
#include <cmath>
#include <compare>
#include <cstdint>

namespace tsopt {

struct modp {
    static constexpr std::uint32_t prime = 2147483647u;  // 2^31 - 1
    std::uint32_t v = 0;

    constexpr modp() = default;
    constexpr explicit modp(std::int64_t x)
        : v(static_cast<std::uint32_t>(((x % std::int64_t(prime)) + std::int64_t(prime)) % std::int64_t(prime))) {}

    static constexpr modp raw(std::uint32_t r) { modp m; m.v = r; return m; }

    friend constexpr modp operator+(modp a, modp b) {
        std::uint32_t s = a.v + b.v;  // < 2^32, no overflow
        return raw(s >= prime ? s - prime : s);
    }
    friend constexpr modp operator-(modp a, modp b) { return raw(a.v >= b.v ? a.v - b.v : a.v + prime - b.v); }
    friend constexpr modp operator-(modp a) { return raw(a.v == 0 ? 0 : prime - a.v); }
    friend constexpr modp operator*(modp a, modp b) {
        std::uint64_t p = std::uint64_t(a.v) * b.v;
        // Mersenne reduction: 2^31 == 1 (mod p)
        std::uint64_t r = (p & prime) + (p >> 31);
        r = (r & prime) + (r >> 31);
        return raw(static_cast<std::uint32_t>(r >= prime ? r - prime : r));
    }
    constexpr modp& operator+=(modp o) { return *this = *this + o; }
    constexpr modp& operator*=(modp o) { return *this = *this * o; }
    friend constexpr bool operator==(modp, modp) = default;
    // Ordering of representatives: lets max pooling be a deterministic
    // (non-linear) function in the fingerprint number system.
    friend constexpr auto operator<=>(modp a, modp b) { return a.v <=> b.v; }

    constexpr modp pow(std::uint64_t e) const {
        modp base = *this, r = raw(1);
        while (e) { if (e & 1) r *= base; base *= base; e >>= 1; }
        return r;
    }
    constexpr modp inverse() const { return pow(prime - 2); }  // Fermat
};

// Per-number-system behaviour of the non-polynomial operators. In modp, relu
// must be idempotent like the real function, or relu(relu(x)) and relu(x)
// fingerprint apart and the generator never pairs them (TASO's polynomial
// x(x+1)+1 is not). It is a pseudo-random projection: even residues are its
// fixed points, odd ones go to an even residue through x(x+1)+1. Nothing else
// about the real relu carries over on purpose: relu of the signed residue
// would also make relu(x)(x - relu(x)) == 0 and relu monotone, true identities
// that the axioms do not give, so Z3 spends its limit on hundreds of such
// candidates and proves none. Every axiom about relu holds for the projection:
// it is element-wise and fused activations use it too. sigmoid and tanh get
// distinct polynomials, as in TASO.
template <class T> struct scalar_traits;

template <> struct scalar_traits<float> {
    static constexpr float zero() { return 0.f; }
    static constexpr float one() { return 1.f; }
    static float from_int(std::int64_t x) { return static_cast<float>(x); }
    static float reciprocal(std::int64_t n) { return 1.f / static_cast<float>(n); }
    static float relu(float x) { return x > 0.f ? x : 0.f; }
    static float sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }
    static float tanh(float x) { return std::tanh(x); }
    static float max(float a, float b) { return a > b ? a : b; }
    static constexpr bool exact = false;
};

template <> struct scalar_traits<modp> {
    static constexpr modp zero() { return modp::raw(0); }
    static constexpr modp one() { return modp::raw(1); }
    static constexpr modp from_int(std::int64_t x) { return modp(x); }
    static constexpr modp reciprocal(std::int64_t n) { return modp(n).inverse(); }
    static constexpr modp relu(modp x) {
        if (x.v % 2 == 0) return x;
        return modp::raw((x * (x + one()) + one()).v & ~1u);
    }
    static constexpr modp sigmoid(modp x) { return x * x * x + modp(2); }
    static constexpr modp tanh(modp x) { return x * x * modp(3) + x + modp(5); }
    static constexpr modp max(modp a, modp b) { return a < b ? b : a; }
    static constexpr bool exact = true;
};

}  // namespace tsopt
