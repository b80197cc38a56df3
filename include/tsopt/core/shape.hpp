#pragma once
// Tensor shapes: a small fixed-capacity list of extents, constexpr-friendly
// so that shape rules can be checked at compile time and hashed cheaply.
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace tsopt {

inline constexpr int max_rank = 6;

struct shape {
    std::array<std::int64_t, max_rank> dims{};
    int rank = 0;

    constexpr shape() = default;
    constexpr shape(std::initializer_list<std::int64_t> d) {
        for (auto x : d) dims[rank++] = x;
    }
    constexpr std::int64_t operator[](int i) const { return dims[i]; }
    constexpr std::int64_t& operator[](int i) { return dims[i]; }
    constexpr std::int64_t elements() const {
        std::int64_t n = 1;
        for (int i = 0; i < rank; ++i) n *= dims[i];
        return n;
    }
    constexpr void push_back(std::int64_t x) { dims[rank++] = x; }
    constexpr const std::int64_t* begin() const { return dims.data(); }
    constexpr const std::int64_t* end() const { return dims.data() + rank; }
    friend constexpr bool operator==(const shape& a, const shape& b) {
        if (a.rank != b.rank) return false;
        for (int i = 0; i < a.rank; ++i)
            if (a.dims[i] != b.dims[i]) return false;
        return true;
    }
    std::string str() const {
        std::string s = "[";
        for (int i = 0; i < rank; ++i) s += (i ? "," : "") + std::to_string(dims[i]);
        return s + "]";
    }
};

// Row-major strides of a shape.
constexpr std::array<std::int64_t, max_rank> strides_of(const shape& s) {
    std::array<std::int64_t, max_rank> st{};
    std::int64_t acc = 1;
    for (int i = s.rank - 1; i >= 0; --i) { st[i] = acc; acc *= s.dims[i]; }
    return st;
}

}  // namespace tsopt
