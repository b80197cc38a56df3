// Randomized properties of the number systems and the operator declarations:
// modp arithmetic against a 128-bit reference; the `multilinear` flag of every
// operator against its semantics; identities between operators that rules
// rely on (identity constants, cpool == avgpool, enlarge, split of concat).
#include "check.hpp"

#include <limits>
#include <random>

using namespace spec_test;
using tsopt::modp;

namespace {

using u128 = unsigned __int128;
using i128 = __int128;
constexpr std::uint64_t P = modp::prime;

template <class T>
tensor<T> random_tensor(const shape& s, std::mt19937_64& rng) {
    if constexpr (std::is_same_v<T, modp>) return random_modp(s, rng);
    else return random_float(s, rng);
}

// Values where reductions go wrong first, then random ones.
std::vector<std::uint32_t> sample_values(std::mt19937_64& rng, int n) {
    std::vector<std::uint32_t> v{0, 1, 2, 3, std::uint32_t(P - 1), std::uint32_t(P - 2), 1u << 30, (1u << 30) - 1,
                                 (1u << 30) + 1, 65535, 65536, 46341 /* ceil(sqrt(2^31)) */};
    std::uniform_int_distribution<std::uint32_t> d(0, std::uint32_t(P - 1));
    while (static_cast<int>(v.size()) < n) v.push_back(d(rng));
    return v;
}

}  // namespace

// ---------------------------------------------------------------------------
// modp

TEST_CASE("modp: + - * agree with 128-bit arithmetic, including the Mersenne reduction's edge values") {
    std::mt19937_64 rng(1);
    auto vals = sample_values(rng, 200);
    for (auto a : vals)
        for (auto b : vals) {
            modp x = modp::raw(a), y = modp::raw(b);
            const auto prod = static_cast<std::uint32_t>((u128(a) * u128(b)) % P);
            if ((x * y).v != prod) FAIL_CHECK(a, " * ", b, " = ", (x * y).v, ", expected ", prod);
            if ((x + y).v != (std::uint64_t(a) + b) % P) FAIL_CHECK(a, " + ", b, " = ", (x + y).v);
            if ((x - y).v != (std::uint64_t(a) + P - b) % P) FAIL_CHECK(a, " - ", b, " = ", (x - y).v);
        }
    for (auto a : vals) CHECK((-modp::raw(a)).v == (P - a) % P);
    // (p-1)^2 = 1: the largest product the reduction sees.
    CHECK(modp::raw(std::uint32_t(P - 1)) * modp::raw(std::uint32_t(P - 1)) == modp(1));
}

TEST_CASE("modp: construction from any int64 reduces into [0, p)") {
    std::mt19937_64 rng(2);
    std::vector<std::int64_t> xs{0, 1, -1, std::int64_t(P), -std::int64_t(P), std::int64_t(P) + 1, -std::int64_t(P) - 1,
                                 std::numeric_limits<std::int64_t>::max(), std::numeric_limits<std::int64_t>::min()};
    for (int i = 0; i < 1000; ++i) xs.push_back(static_cast<std::int64_t>(rng()));
    for (auto x : xs) {
        i128 r = i128(x) % i128(P);
        if (r < 0) r += P;
        CAPTURE(x);
        CHECK(modp(x).v == static_cast<std::uint32_t>(r));
    }
    CHECK(modp(-1) == modp::raw(std::uint32_t(P - 1)));
    static_assert(modp(-3) + modp(3) == modp(0), "modp arithmetic is constexpr");
}

TEST_CASE("modp: inverse and Fermat's little theorem") {
    std::mt19937_64 rng(3);
    for (auto a : sample_values(rng, 500)) {
        if (a == 0) continue;
        modp x = modp::raw(a);
        CAPTURE(a);
        CHECK(x * x.inverse() == modp(1));
        CHECK(x.pow(P - 1) == modp(1));
    }
    CHECK(modp(2).inverse() == modp::raw(std::uint32_t((P + 1) / 2)));
    CHECK(modp(7).pow(0) == modp(1));
    CHECK(modp(3).pow(5) == modp(243));
    static_assert(modp(9).inverse() * modp(9) == modp(1));
}

TEST_CASE("modp: ordering is by representative, so -1 is the largest element") {
    CHECK(modp(-1) > modp(5));
    CHECK(modp(2) < modp(3));
    CHECK(scalar_traits<modp>::max(modp(-1), modp(5)) == modp(-1));
}

// ---------------------------------------------------------------------------
// Linearity: an operator declared `multilinear` must be linear in each input
// separately, the others fixed; one declared otherwise must fail it for some
// input (or it would be missing PET's optimisations). Checked in modp, where
// the equalities are exact.

namespace {

struct sample {
    op_kind op;
    op_params p;
    std::vector<shape> in;
};

// At least one valid application of every operator that takes inputs. Fused
// activations are off: an activation makes any operator non-linear.
std::vector<sample> samples() {
    return {
        {op_kind::ewadd, {}, {{2, 3}, {2, 3}}},
        {op_kind::ewadd, {}, {{2, 3}, {3}}},
        {op_kind::ewmul, {}, {{2, 3}, {2, 3}}},
        {op_kind::ewmul, {}, {{2, 1}, {1, 3}}},
        {op_kind::smul, {}, {{2, 3}, {1}}},
        {op_kind::transpose, params({pack_perm({2, 0, 1})}), {{2, 3, 4}}},
        {op_kind::matmul, params({0}), {{2, 2, 3}, {3, 2}}},
        {op_kind::conv2d, conv(1, 1, same_pad), {{1, 4, 5, 5}, {4, 2, 3, 3}}},
        {op_kind::conv2d, conv(2, 2, valid, 0, 2, 1), {{2, 2, 6, 6}, {3, 2, 2, 3}}},
        {op_kind::enlarge, params({5, 5}), {{2, 1, 3, 3}}},
        {op_kind::relu, {}, {{2, 3}}},
        {op_kind::avgpool, pool(3, 3, 1, 1, same_pad), {{1, 2, 4, 4}}},
        {op_kind::avgpool, pool(2, 2, 2, 2, valid), {{2, 1, 4, 4}}},
        {op_kind::maxpool, pool(2, 2, 2, 2, valid), {{1, 2, 4, 4}}},
        {op_kind::concat, params({1}), {{2, 1}, {2, 3}}},
        {op_kind::concat, params({0}), {{1, 3}, {2, 3}, {1, 3}}},
        {op_kind::split, params({1, 1}), {{2, 3}}},
        {op_kind::sigmoid, {}, {{4}}},
        {op_kind::tanh, {}, {{4}}},
        {op_kind::batchnorm, {}, {{2, 2, 3}, {2}, {2}}},
        {op_kind::reshape, params({2, 3, 2}), {{2, 3}}},
        {op_kind::softmax, params({1}), {{2, 3}}},
        {op_kind::pad, params({1, 0, 2, 1}), {{1, 2, 2, 2}}},
        {op_kind::slice, params({0, 1, 0, 0, 1, 3, 0, 0}), {{2, 3}}},
        {op_kind::overwrite, params({1, 0}), {{3, 2}, {1, 2}}},
        {op_kind::reorder, {}, {{1, 2, 3, 2}}},
    };
}

std::vector<tensor<modp>> eval(const sample& s, const std::vector<tensor<modp>>& in) {
    std::vector<const tensor<modp>*> ptrs;
    for (auto& t : in) ptrs.push_back(&t);
    return evaluate<modp>(s.op, s.p, ptrs);
}

tensor<modp> plus(tensor<modp> a, const tensor<modp>& b) {
    for (std::size_t i = 0; i < a.data.size(); ++i) a.data[i] += b.data[i];
    return a;
}
tensor<modp> times(tensor<modp> a, modp c) {
    for (auto& x : a.data) x *= c;
    return a;
}

// Whether f is additive and homogeneous in input i on random values.
bool linear_in(const sample& s, int i, std::mt19937_64& rng, std::string& why) {
    std::vector<tensor<modp>> base;
    for (auto& sh : s.in) base.push_back(random_modp(sh, rng));
    auto a = base, b = base, ab = base, ca = base;
    a[std::size_t(i)] = random_modp(s.in[std::size_t(i)], rng);
    b[std::size_t(i)] = random_modp(s.in[std::size_t(i)], rng);
    ab[std::size_t(i)] = plus(a[std::size_t(i)], b[std::size_t(i)]);
    modp c = random_modp(shape{1}, rng)[0];
    ca[std::size_t(i)] = times(a[std::size_t(i)], c);
    auto fa = eval(s, a), fb = eval(s, b), fab = eval(s, ab), fca = eval(s, ca);
    for (std::size_t o = 0; o < fa.size(); ++o) {
        if (!(fab[o] == plus(fa[o], fb[o]))) { why = "f(a+b) != f(a)+f(b) in input " + std::to_string(i); return false; }
        if (!(fca[o] == times(fa[o], c))) { why = "f(c*a) != c*f(a) in input " + std::to_string(i); return false; }
    }
    return true;
}

}  // namespace

TEST_CASE("every operator with inputs has a linearity sample") {
    auto ss = samples();
    for (const op_decl* d : operators) {
        if (d->max_inputs == 0) continue;
        bool found = false;
        for (auto& s : ss) found = found || s.op == d->kind;
        CHECK_MESSAGE(found, "no linearity sample for ", d->name);
    }
    for (auto& s : ss) {
        std::array<shape, max_outputs> out;
        CAPTURE(name(s.op));
        CHECK(infer_shapes(s.op, s.p, s.in, std::span<shape>(out.data(), std::size_t(decl(s.op).num_outputs))) == "");
    }
}

TEST_CASE("multilinear operators are linear in each input; the others are not") {
    std::mt19937_64 rng(4);
    for (const sample& s : samples()) {
        const op_decl& d = decl(s.op);
        CAPTURE(d.name);
        if (d.multilinear) {
            std::string why;
            bool linear = true;
            for (int i = 0; i < static_cast<int>(s.in.size()); ++i)
                for (int trial = 0; trial < 3 && linear; ++trial) linear = linear_in(s, i, rng, why);
            CHECK_MESSAGE(linear, d.name, " is declared multilinear but ", why);
        } else {
            bool some_nonlinear = false;
            std::string why;
            for (int i = 0; i < static_cast<int>(s.in.size()); ++i) some_nonlinear = some_nonlinear || !linear_in(s, i, rng, why);
            CHECK_MESSAGE(some_nonlinear, d.name, " is linear in each input on random values but not declared multilinear");
        }
    }
}

// ---------------------------------------------------------------------------
// Identities between operators, on random tensors in both number systems.

namespace {
template <class T>
tensor<T> apply1(op_kind k, op_params p, std::initializer_list<const tensor<T>*> in) {
    std::vector<const tensor<T>*> v(in);
    return evaluate<T>(k, p, v)[0];
}
}  // namespace

TEST_CASE_TEMPLATE("identity constants: conv with iconv, matmul with imatmul, ewmul with iewmul", T, float, modp) {
    std::mt19937_64 rng(5);
    auto x = random_tensor<T>(shape{2, 3, 4, 5}, rng);
    auto id3 = apply1<T>(op_kind::iconv, params({3, 3, 3}), {});
    check_same("conv2d(x, iconv(3,3,3))", apply1<T>(op_kind::conv2d, conv(1, 1, same_pad), {&x, &id3}), x);
    auto id1 = apply1<T>(op_kind::iconv, params({3, 3, 1}), {});
    check_same("conv2d(x, iconv(3,3,1)) valid", apply1<T>(op_kind::conv2d, conv(1, 1, valid), {&x, &id1}), x);
    // Grouped identity: 4 channels in 2 groups of 2.
    auto x4 = random_tensor<T>(shape{1, 4, 3, 3}, rng);
    auto idg = apply1<T>(op_kind::iconv, params({4, 2, 3}), {});
    check_same("conv2d(x, iconv(4,2,3))", apply1<T>(op_kind::conv2d, conv(1, 1, same_pad), {&x4, &idg}), x4);

    auto m = random_tensor<T>(shape{2, 3, 4}, rng);
    auto i4 = apply1<T>(op_kind::imatmul, params({4}), {});
    auto i3 = apply1<T>(op_kind::imatmul, params({3}), {});
    check_same("matmul(m, imatmul(4))", apply1<T>(op_kind::matmul, params({0}), {&m, &i4}), m);
    check_same("matmul(imatmul(3), m)", apply1<T>(op_kind::matmul, params({0}), {&i3, &m}), m);

    auto ones = apply1<T>(op_kind::iewmul, params({3, 2, 3, 4}), {});
    check_same("ewmul(m, iewmul)", apply1<T>(op_kind::ewmul, {}, {&m, &ones}), m);
    check_same("ewmul(iewmul, m)", apply1<T>(op_kind::ewmul, {}, {&ones, &m}), m);
}

TEST_CASE_TEMPLATE("conv2d with cpool is avgpool (padding counted)", T, float, modp) {
    std::mt19937_64 rng(6);
    auto x = random_tensor<T>(shape{2, 3, 5, 6}, rng);
    for (int stride : {1, 2})
        for (int pad : {valid, same_pad}) {
            CAPTURE(stride);
            CAPTURE(pad);
            auto k = apply1<T>(op_kind::cpool, params({3, 3, 3}), {});
            check_same("conv2d(x, cpool(3,3,3))", apply1<T>(op_kind::conv2d, conv(stride, stride, pad), {&x, &k}),
                       apply1<T>(op_kind::avgpool, pool(3, 3, stride, stride, pad), {&x}));
            auto k15 = apply1<T>(op_kind::cpool, params({3, 1, 5}), {});
            check_same("conv2d(x, cpool(3,1,5))", apply1<T>(op_kind::conv2d, conv(stride, stride, pad), {&x, &k15}),
                       apply1<T>(op_kind::avgpool, pool(1, 5, stride, stride, pad), {&x}));
        }
    // A hand case: valid 2x2 over 1,2,3,4 is 10/4.
    auto h = make<T>({1, 1, 2, 2}, {1, 2, 3, 4});
    auto k = apply1<T>(op_kind::cpool, params({1, 2, 2}), {});
    check_same("conv2d(h, cpool(1,2,2))", apply1<T>(op_kind::conv2d, conv(1, 1, valid), {&h, &k}),
               tens<T>({1, 1, 1, 1}, {frac<T>(10, 4)}));
}

TEST_CASE_TEMPLATE("conv2d with an enlarged kernel equals the original under same padding", T, float, modp) {
    std::mt19937_64 rng(7);
    auto x = random_tensor<T>(shape{1, 2, 6, 5}, rng);
    auto w = random_tensor<T>(shape{3, 2, 1, 3}, rng);
    auto big = apply1<T>(op_kind::enlarge, params({5, 5}), {&w});
    for (int stride : {1, 2}) {
        CAPTURE(stride);
        check_same("conv2d(x, enlarge(w, 5, 5))", apply1<T>(op_kind::conv2d, conv(stride, stride, same_pad), {&x, &big}),
                   apply1<T>(op_kind::conv2d, conv(stride, stride, same_pad), {&x, &w}));
    }
}

TEST_CASE_TEMPLATE("split undoes concat along every axis", T, float, modp) {
    std::mt19937_64 rng(8);
    for (int ax = 0; ax < 4; ++ax) {
        CAPTURE(ax);
        shape sa{2, 3, 2, 3}, sb = sa;
        sb[ax] = 1 + ax % 2;  // a different extent on the axis
        auto a = random_tensor<T>(sa, rng), b = random_tensor<T>(sb, rng);
        auto c = apply1<T>(op_kind::concat, params({ax}), {&a, &b});
        std::vector<const tensor<T>*> in{&c};
        auto parts = evaluate<T>(op_kind::split, params({ax, std::int32_t(sa[ax])}), in);
        REQUIRE(parts.size() == 2);
        check_same("split_0(concat(a, b))", parts[0], a);
        check_same("split_1(concat(a, b))", parts[1], b);
    }
}

TEST_CASE_TEMPLATE("transpose twice with inverse permutations is the identity", T, float, modp) {
    std::mt19937_64 rng(9);
    auto x = random_tensor<T>(shape{2, 3, 4}, rng);
    auto t = apply1<T>(op_kind::transpose, params({pack_perm({2, 0, 1})}), {&x});
    CHECK(t.shape == shape{4, 2, 3});
    check_same("transpose(1,2,0) . transpose(2,0,1)", apply1<T>(op_kind::transpose, params({pack_perm({1, 2, 0})}), {&t}), x);
}
