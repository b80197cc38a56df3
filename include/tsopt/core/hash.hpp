#pragma once
// tsopt's one hash: FNV-1a (64-bit) for byte streams and text, and one
// combine step for Merkle-style hashes of structures (graphs, patterns,
// parameter sets). Every hash in the library and the generator is built from
// these, so a value written in one place (a spec hash in a rule listing, a
// rule name's suffix, a measurement cache's file name or keys) is computed
// the same way everywhere. docs/architecture.md ("Hashing") lists what is
// persisted and how a change of these functions is migrated.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace tsopt::hashing {

// The published FNV-1a 64-bit parameters (offset basis 14695981039346656037).
inline constexpr std::uint64_t fnv_offset_basis = 0xcbf29ce484222325ull;
inline constexpr std::uint64_t fnv_prime = 0x100000001b3ull;

// FNV-1a over a stream of bytes; `text` and `number` frame their values
// (length first, fixed width) so that concatenations cannot collide.
struct fnv1a {
    std::uint64_t value = fnv_offset_basis;

    constexpr fnv1a& byte(unsigned char b) {
        value = (value ^ b) * fnv_prime;
        return *this;
    }
    fnv1a& bytes(const void* p, std::size_t n) {
        auto* c = static_cast<const unsigned char*>(p);
        for (std::size_t i = 0; i < n; ++i) byte(c[i]);
        return *this;
    }
    // The FNV-1a step per 32-bit word instead of per byte: a quarter of the
    // steps for large arrays (weights); not interchangeable with bytes().
    // `n` words from p (any 4-byte type: read as bits, e.g. floats).
    fnv1a& words(const void* p, std::size_t n) {
        auto* c = static_cast<const unsigned char*>(p);
        for (std::size_t i = 0; i < n; ++i) {
            std::uint32_t w;
            std::memcpy(&w, c + 4 * i, 4);
            value = (value ^ w) * fnv_prime;
        }
        return *this;
    }
    fnv1a& number(std::int64_t v) { return bytes(&v, sizeof v); }
    fnv1a& text(std::string_view s) {
        number(static_cast<std::int64_t>(s.size()));
        return bytes(s.data(), s.size());
    }
};

// FNV-1a of the bytes of s, unframed (e.g. a file name from a machine's text).
constexpr std::uint64_t fnv1a_of(std::string_view s) {
    fnv1a f;
    for (char c : s) f.byte(static_cast<unsigned char>(c));
    return f.value;
}

// Folds v into seed: boost's hash_combine step followed by the splitmix64
// finalizer, so that a Merkle hash built from it spreads small differences
// (a parameter off by one) over all 64 bits.
constexpr std::uint64_t combine(std::uint64_t seed, std::uint64_t v) {
    seed ^= v + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2);
    seed ^= seed >> 31;
    seed *= 0xbf58476d1ce4e5b9ull;
    return seed ^ (seed >> 29);
}

// splitmix64's finalizer (with its golden-ratio increment): a bijection on
// 64-bit values that spreads every input bit, for hashing a single number.
constexpr std::uint64_t mix64(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// Lower-case hexadecimal of the low `digits` nibbles, zero-padded.
inline std::string hex(std::uint64_t v, int digits = 16) {
    static constexpr char d[] = "0123456789abcdef";
    std::string s(static_cast<std::size_t>(digits), '0');
    for (int i = digits - 1; i >= 0; --i, v >>= 4) s[static_cast<std::size_t>(i)] = d[v & 15];
    return s;
}

}  // namespace tsopt::hashing
