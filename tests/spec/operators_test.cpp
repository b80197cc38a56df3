// Reference semantics of each operator against small hand-computed cases, in
// both number systems, and the shape rules' rejections with their messages.
// Expected values are worked out by hand in the comments next to them.
#include "check.hpp"

#include <cmath>

using namespace spec_test;
using tsopt::modp;

namespace {
const auto contains = [](const char* s) { return doctest::Contains(s); };
}  // namespace

// ---------------------------------------------------------------------------
// ewadd / ewmul / smul

TEST_CASE_TEMPLATE("ewadd: same shapes and numpy broadcasting", T, float, modp) {
    check<T>({op_kind::ewadd, {}, {make<T>({2, 2}, {1, 2, 3, 4}), make<T>({2, 2}, {10, 20, 30, -40})}},
             make<T>({2, 2}, {11, 22, 33, -36}));
    // [2,3] + [3]: the row is added to every row.
    check<T>({op_kind::ewadd, {}, {make<T>({2, 3}, {1, 2, 3, 4, 5, 6}), make<T>({3}, {10, 20, 30})}},
             make<T>({2, 3}, {11, 22, 33, 14, 25, 36}));
    // [2,1] + [1,3]: outer sum.
    check<T>({op_kind::ewadd, {}, {make<T>({2, 1}, {1, 2}), make<T>({1, 3}, {10, 20, 30})}},
             make<T>({2, 3}, {11, 21, 31, 12, 22, 32}));
    // [3] + [2,1,1]: lower rank on the left, result [2,1,3].
    check<T>({op_kind::ewadd, {}, {make<T>({3}, {1, 2, 3}), make<T>({2, 1, 1}, {100, 200})}},
             make<T>({2, 1, 3}, {101, 102, 103, 201, 202, 203}));
}

TEST_CASE_TEMPLATE("ewmul: same shapes and numpy broadcasting", T, float, modp) {
    check<T>({op_kind::ewmul, {}, {make<T>({3}, {1, -2, 3}), make<T>({3}, {4, 5, 6})}}, make<T>({3}, {4, -10, 18}));
    check<T>({op_kind::ewmul, {}, {make<T>({2, 3}, {1, 2, 3, 4, 5, 6}), make<T>({3}, {1, 0, -1})}},
             make<T>({2, 3}, {1, 0, -3, 4, 0, -6}));
    // [3,1] * [1,2]: outer product.
    check<T>({op_kind::ewmul, {}, {make<T>({3, 1}, {1, 2, 3}), make<T>({1, 2}, {10, -1})}},
             make<T>({3, 2}, {10, -1, 20, -2, 30, -3}));
}

TEST_CASE_TEMPLATE("smul multiplies by a one-element tensor", T, float, modp) {
    check<T>({op_kind::smul, {}, {make<T>({2, 2}, {1, 2, 3, 4}), make<T>({1}, {-3})}}, make<T>({2, 2}, {-3, -6, -9, -12}));
    check<T>({op_kind::smul, {}, {make<T>({3}, {1, 2, 3}), make<T>({1, 1}, {2})}}, make<T>({3}, {2, 4, 6}));
}

TEST_CASE("element-wise shape rules reject what does not broadcast") {
    tensor<float> a(shape{2, 3}), b(shape{4}), c(shape{2, 2}), d(shape{3, 1});
    CHECK_THROWS_WITH_AS(run<float>({op_kind::ewadd, {}, {a, b}}),
                         doctest::Contains("shapes [2,3] and [4] do not broadcast (axis 1: 3 vs 4)"), tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::ewmul, {}, {a, d}}), contains("do not broadcast"), tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::smul, {}, {a, c}}),
                         contains("scalar operand must hold one element, got shape [2,2]"), tsopt::error);
}

// ---------------------------------------------------------------------------
// relu / sigmoid / tanh: the real functions in float, distinct polynomials in
// modp (relu an idempotent projection, sigmoid = x^3+2, tanh = 3x^2+x+5).

TEST_CASE("relu, sigmoid, tanh in float") {
    const float ln2 = std::log(2.f), ln3 = std::log(3.f);
    check<float>({op_kind::relu, {}, {make<float>({4}, {-2, -1, 0, 3})}}, make<float>({4}, {0, 0, 0, 3}));
    // sigmoid(ln 3) = 1 / (1 + 1/3) = 3/4
    check<float>({op_kind::sigmoid, {}, {make_real<float>({3}, {0.f, ln3, -ln3})}}, make_real<float>({3}, {0.5f, 0.75f, 0.25f}));
    // tanh(ln 2) = (2 - 1/2) / (2 + 1/2) = 3/5
    check<float>({op_kind::tanh, {}, {make_real<float>({3}, {0.f, ln2, -ln2})}}, make_real<float>({3}, {0.f, 0.6f, -0.6f}));
}

TEST_CASE("relu, sigmoid, tanh in modp are the fingerprint functions") {
    // relu: even residues stay, odd x goes to x(x+1)+1 with its low bit
    // cleared: 3 -> 13 -> 12; 5 -> 31 -> 30; -2 (residue p-2, odd) -> 3 -> 2;
    // -1 (residue p-1, even) stays.
    check<modp>({op_kind::relu, {}, {make<modp>({6}, {3, 5, -2, -1, 0, 4})}}, make<modp>({6}, {12, 30, 2, -1, 0, 4}));
    // idempotent, as the real relu
    check<modp>({op_kind::relu, {}, {make<modp>({3}, {12, 30, 2})}}, make<modp>({3}, {12, 30, 2}));
    // sigmoid: 2 -> 8+2 = 10; -1 -> -1+2 = 1; 0 -> 2
    check<modp>({op_kind::sigmoid, {}, {make<modp>({3}, {2, -1, 0})}}, make<modp>({3}, {10, 1, 2}));
    // tanh: 1 -> 3+1+5 = 9; -1 -> 3-1+5 = 7; 2 -> 12+2+5 = 19
    check<modp>({op_kind::tanh, {}, {make<modp>({3}, {1, -1, 2})}}, make<modp>({3}, {9, 7, 19}));
}

// ---------------------------------------------------------------------------
// transpose

TEST_CASE_TEMPLATE("transpose: rank 2 and rank-3 permutations", T, float, modp) {
    check<T>({op_kind::transpose, params({pack_perm({1, 0})}), {make<T>({2, 3}, {1, 2, 3, 4, 5, 6})}},
             make<T>({3, 2}, {1, 4, 2, 5, 3, 6}));
    // perm (0,2,1) on [1,2,3]: out[0][k][j] = in[0][j][k]
    check<T>({op_kind::transpose, params({pack_perm({0, 2, 1})}), {make<T>({1, 2, 3}, {0, 1, 2, 3, 4, 5})}},
             make<T>({1, 3, 2}, {0, 3, 1, 4, 2, 5}));
    // perm (2,0,1) on [2,3,4] with in[a][b][c] = 12a + 4b + c: out has shape
    // [4,2,3] and out[i][j][k] = in[j][k][i] = 12j + 4k + i.
    tensor<T> in(shape{2, 3, 4}), expected(shape{4, 2, 3});
    for (int i = 0; i < 24; ++i) in.data[std::size_t(i)] = num<T>(i);
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 2; ++j)
            for (int k = 0; k < 3; ++k) expected.at(i, j, k) = num<T>(12 * j + 4 * k + i);
    CHECK(expected.at(1, 1, 2) == num<T>(21));  // the formula, spot-checked: in[1][2][1]
    check<T>({op_kind::transpose, params({pack_perm({2, 0, 1})}), {in}}, expected);
}

TEST_CASE("transpose rejects a parameter that is not a permutation of the input's axes") {
    tensor<float> a(shape{2, 3, 4});
    CHECK_THROWS_WITH_AS(run<float>({op_kind::transpose, params({pack_perm({1, 0})}), {a}}),
                         contains("permutation has rank 2, input [2,3,4] has rank 3"), tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::transpose, params({pack_perm({0, 0, 1})}), {a}}),
                         contains("parameter is not a permutation of 3 axes"), tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::transpose, params({pack_perm({0, 3, 1})}), {a}}),
                         contains("not a permutation"), tsopt::error);
}

// ---------------------------------------------------------------------------
// matmul

TEST_CASE_TEMPLATE("matmul: plain, batched, and a shared rank-2 operand", T, float, modp) {
    // [[1,2,3],[4,5,6]] @ [[1,0],[0,1],[1,1]] = [[1+3, 2+3], [4+6, 5+6]]
    check<T>({op_kind::matmul, {}, {make<T>({2, 3}, {1, 2, 3, 4, 5, 6}), make<T>({3, 2}, {1, 0, 0, 1, 1, 1})}},
             make<T>({2, 2}, {4, 5, 10, 11}));
    // batch [2] x rank 2: [[1,2],[3,4]] @ [[1,1],[0,1]] = [[1,3],[3,7]];
    //                     [[5,6],[7,8]] @ [[1,1],[0,1]] = [[5,11],[7,15]]
    check<T>({op_kind::matmul, {}, {make<T>({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}), make<T>({2, 2}, {1, 1, 0, 1})}},
             make<T>({2, 2, 2}, {1, 3, 3, 7, 5, 11, 7, 15}));
    // rank 2 x batch [2]: [[1,1],[0,1]] @ [[1,2],[3,4]] = [[4,6],[3,4]];
    //                     [[1,1],[0,1]] @ [[5,6],[7,8]] = [[12,14],[7,8]]
    check<T>({op_kind::matmul, {}, {make<T>({2, 2}, {1, 1, 0, 1}), make<T>({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8})}},
             make<T>({2, 2, 2}, {4, 6, 3, 4, 12, 14, 7, 8}));
    // batch [2,1] x batch [3] -> [2,3]: rows (1,2), (3,4) against columns
    // (1,0), (0,1), (1,1) give dot products 1,2,3 and 3,4,7.
    check<T>({op_kind::matmul, {}, {make<T>({2, 1, 1, 2}, {1, 2, 3, 4}), make<T>({3, 2, 1}, {1, 0, 0, 1, 1, 1})}},
             make<T>({2, 3, 1, 1}, {1, 2, 3, 3, 4, 7}));
}

TEST_CASE("matmul with fused relu") {
    // [1,-1] @ [[2,1],[3,-1]] = [2-3, 1+1] = [-1, 2]
    check<float>({op_kind::matmul, params({1}), {make<float>({1, 2}, {1, -1}), make<float>({2, 2}, {2, 1, 3, -1})}},
                 make<float>({1, 2}, {0, 2}));
    // modp relu (the fingerprint projection): -1 (residue p-1, even) and 2 stay
    check<modp>({op_kind::matmul, params({1}), {make<modp>({1, 2}, {1, -1}), make<modp>({2, 2}, {2, 1, 3, -1})}},
                make<modp>({1, 2}, {-1, 2}));
}

// Float matmuls run through float_gemm.hpp's blocked product; each entry
// must still be the sum over k in order, exactly (see the conv2d case).
TEST_CASE("matmul: the float blocked product sums in the definition's order") {
    std::uint64_t state = 777;
    const auto random = [&] {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        return static_cast<float>(static_cast<std::int64_t>(state >> 40) % 2001 - 1000) / 113.0f;
    };
    struct operands { shape a, b; };
    const operands cases[] = {
        {shape{5, 13}, shape{13, 19}},        // partial blocks of 4 rows and 8 columns
        {shape{3, 6, 9}, shape{9, 8}},        // a rank-2 b shared by 3 batches
        {shape{2, 1, 4, 7}, shape{3, 7, 2}},  // batch axes broadcast both ways
        {shape{4, 0}, shape{0, 3}},           // empty inner extent: zeros
    };
    for (const operands& c : cases) {
        CAPTURE(c.a.str());
        tensor<float> a(c.a), b(c.b);
        for (auto& v : a.data) v = random();
        for (auto& v : b.data) v = random();
        for (int act : {0, 1}) {
            const tensor<float> got = run<float>({op_kind::matmul, params({act}), {a, b}})[0];
            const std::int64_t m = c.a[c.a.rank - 2], k = c.a[c.a.rank - 1], n = c.b[c.b.rank - 1];
            tensor<float> want(got.shape);
            shape ob = got.shape, ab = c.a, bb = c.b;
            ob.rank -= 2, ab.rank -= 2, bb.rank -= 2;
            detail::for_each_broadcast(ob, ab, bb, [&](std::int64_t bo, std::int64_t ba, std::int64_t bbi) {
                for (std::int64_t i = 0; i < m; ++i)
                    for (std::int64_t j = 0; j < n; ++j) {
                        float sum = 0;
                        for (std::int64_t kk = 0; kk < k; ++kk) sum += a.data[ba * m * k + i * k + kk] * b.data[bbi * k * n + kk * n + j];
                        want.data[bo * m * n + i * n + j] = act ? std::max(sum, 0.0f) : sum;
                    }
            });
            CHECK(got.data == want.data);
        }
    }
}

TEST_CASE("matmul shape rule rejections") {
    tensor<float> a(shape{2, 3}), b(shape{4, 5}), v(shape{3}), b3(shape{2, 3, 2}), c3(shape{3, 3, 4});
    CHECK_THROWS_WITH_AS(run<float>({op_kind::matmul, {}, {a, b}}), contains("inner extents differ: [2,3] x [4,5] (3 vs 4)"),
                         tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::matmul, {}, {a, v}}), contains("operands must have rank >= 2"), tsopt::error);
    // batch [2] against batch [3]
    CHECK_THROWS_WITH_AS(run<float>({op_kind::matmul, {}, {tensor<float>(shape{2, 2, 3}), c3}}),
                         contains("batch shapes [2] and [3] do not broadcast"), tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::matmul, params({7}), {a, b3}}), contains("activation must be"),
                         tsopt::error);
}

// ---------------------------------------------------------------------------
// conv2d

TEST_CASE_TEMPLATE("conv2d: same and valid padding, stride 2, dilation", T, float, modp) {
    // x = 1..9 as a 3x3 image; a 3x3 box filter with same padding sums each
    // neighbourhood: corner 1+2+4+5 = 12, edge 1+2+3+4+5+6 = 21, centre 45.
    auto x3 = make<T>({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
    check<T>({op_kind::conv2d, conv(1, 1, same_pad), {x3, make<T>({1, 1, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1})}},
             make<T>({1, 1, 3, 3}, {12, 21, 16, 27, 45, 33, 24, 39, 28}));
    // valid, kernel [[1,0],[0,-1]]: x[y][x] - x[y+1][x+1] = -4 everywhere.
    check<T>({op_kind::conv2d, conv(1, 1, valid), {x3, make<T>({1, 1, 2, 2}, {1, 0, 0, -1})}},
             make<T>({1, 1, 2, 2}, {-4, -4, -4, -4}));
    // valid, kernel [[1,2],[3,4]] on the top-left window 1,2,4,5: 1+4+12+20 = 37
    check<T>({op_kind::conv2d, conv(1, 1, valid), {x3, make<T>({1, 1, 2, 2}, {1, 2, 3, 4})}},
             make<T>({1, 1, 2, 2}, {37, 47, 67, 77}));

    // x = 1..16 as 4x4. Stride 2, valid, 2x2 ones: block sums.
    auto x4 = make<T>({1, 1, 4, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16});
    check<T>({op_kind::conv2d, conv(2, 2, valid), {x4, make<T>({1, 1, 2, 2}, {1, 1, 1, 1})}},
             make<T>({1, 1, 2, 2}, {14, 22, 46, 54}));
    // Stride 2, same, 3x3 ones: windows centred on (0,0), (0,2), (2,0), (2,2):
    // 1+2+5+6 = 14; 2+3+4+6+7+8 = 30; 5+6+9+10+13+14 = 57; 6+7+8+10+11+12+14+15+16 = 99
    check<T>({op_kind::conv2d, conv(2, 2, same_pad), {x4, make<T>({1, 1, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1})}},
             make<T>({1, 1, 2, 2}, {14, 30, 57, 99}));
    // Stride 2 along h only (valid 1x1): rows 0 and 2.
    check<T>({op_kind::conv2d, conv(2, 1, valid), {x4, make<T>({1, 1, 1, 1}, {1})}},
             make<T>({1, 1, 2, 4}, {1, 2, 3, 4, 9, 10, 11, 12}));

    // Dilation 2, valid, 2x2 ones on 3x3: taps at the four corners 1+3+7+9 = 20.
    check<T>({op_kind::conv2d, conv(1, 1, valid, 0, 2, 2), {x3, make<T>({1, 1, 2, 2}, {1, 1, 1, 1})}},
             make<T>({1, 1, 1, 1}, {20}));
    // Dilation 2, same, 3x3 ones (padding 2): output (y,x) sums the taps at
    // (y-2..y+2 step 2, x-2..x+2 step 2) inside the image.
    //   (0,0): 1+3+7+9 = 20   (0,1): 2+8 = 10   (1,1): 5 alone   (1,0): 4+6 = 10
    check<T>({op_kind::conv2d, conv(1, 1, same_pad, 0, 2, 2), {x3, make<T>({1, 1, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1})}},
             make<T>({1, 1, 3, 3}, {20, 10, 20, 10, 5, 10, 20, 10, 20}));
    // Dilation along w only: taps (y, x) and (y, x+2) on a 2x3 image.
    check<T>({op_kind::conv2d, conv(1, 1, valid, 0, 1, 2), {make<T>({1, 1, 2, 3}, {1, 2, 3, 4, 5, 6}),
                                                            make<T>({1, 1, 1, 2}, {1, -1})}},
             make<T>({1, 1, 2, 1}, {-2, -2}));
}

TEST_CASE_TEMPLATE("conv2d: batches, channels, grouped and depthwise", T, float, modp) {
    // Two input channels summed: weights (1, 10) on 1x1 images.
    check<T>({op_kind::conv2d, conv(1, 1, valid), {make<T>({2, 2, 1, 1}, {1, 2, 3, 4}), make<T>({1, 2, 1, 1}, {1, 10})}},
             make<T>({2, 1, 1, 1}, {21, 43}));
    // Grouped: x has 4 channels, weight [2,2,1,1] -> 2 groups.
    // out0 = 1*x0 + 10*x1 = 1+20 = 21;  out1 = 100*x2 + 1000*x3 = 300+4000 = 4300
    check<T>({op_kind::conv2d, conv(1, 1, valid), {make<T>({1, 4, 1, 1}, {1, 2, 3, 4}), make<T>({2, 2, 1, 1}, {1, 10, 100, 1000})}},
             make<T>({1, 2, 1, 1}, {21, 4300}));
    // Grouped with two output channels per group: weight [4,2,1,1].
    // group 0 reads x0,x1 = 1,2: (1,1) -> 3, (1,-1) -> -1
    // group 1 reads x2,x3 = 3,4: (2,0) -> 6, (0,3) -> 12
    check<T>({op_kind::conv2d, conv(1, 1, valid),
              {make<T>({1, 4, 1, 1}, {1, 2, 3, 4}), make<T>({4, 2, 1, 1}, {1, 1, 1, -1, 2, 0, 0, 3})}},
             make<T>({1, 4, 1, 1}, {3, -1, 6, 12}));
    // Depthwise (weight [C,1,kh,kw]): channel 0 = 1..4 with ones -> 10,
    // channel 1 = 5..8 with (1,-1,1,-1) -> 5-6+7-8 = -2.
    check<T>({op_kind::conv2d, conv(1, 1, valid),
              {make<T>({1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}), make<T>({2, 1, 2, 2}, {1, 1, 1, 1, 1, -1, 1, -1})}},
             make<T>({1, 2, 1, 1}, {10, -2}));
    // Depthwise with multiplier 2: weight [4,1,1,1] on channels (3, 5).
    check<T>({op_kind::conv2d, conv(1, 1, valid), {make<T>({1, 2, 1, 1}, {3, 5}), make<T>({4, 1, 1, 1}, {1, 2, 3, 4})}},
             make<T>({1, 4, 1, 1}, {3, 6, 15, 20}));
}

TEST_CASE("conv2d with fused relu") {
    // 1x1 kernel 3 on (1, -2): (3, -6)
    check<float>({op_kind::conv2d, conv(1, 1, valid, 1), {make<float>({1, 1, 1, 2}, {1, -2}), make<float>({1, 1, 1, 1}, {3})}},
                 make<float>({1, 1, 1, 2}, {3, 0}));
    // modp relu: 3 (odd) -> 13 -> 12; -6 (residue p-6, odd) -> -6*-5+1 = 31 -> 30
    check<modp>({op_kind::conv2d, conv(1, 1, valid, 1), {make<modp>({1, 1, 1, 2}, {1, -2}), make<modp>({1, 1, 1, 1}, {3})}},
                make<modp>({1, 1, 1, 2}, {12, 30}));
}

// Float convolutions with at least 16 output channels per group run as a
// matrix product over laid-out patches (spec/ops/conv.hpp). Each output must
// be the sum of its taps in (ci, ky, kx) order, exactly: the generator's
// fingerprints and every tolerance downstream rely on the reference
// rounding one way. Shapes cover padding, strides, dilation, groups, channel
// counts that are not multiples of 4, several chunks of output rows and
// widths that are not multiples of 8.
TEST_CASE("conv2d: the float matrix-product path sums every tap in the definition's order") {
    struct geometry { std::int64_t n, c, h, w, co, ci, kh, kw; int s, pad, d, act; };
    const geometry cases[] = {
        {2, 3, 9, 11, 18, 3, 3, 3, 1, same_pad, 1, 0},   // remainders of 4 channels and 8 columns
        {1, 8, 13, 7, 37, 8, 5, 3, 2, same_pad, 1, 1},   // stride 2, non-square kernel, relu
        {1, 4, 12, 12, 34, 2, 3, 3, 1, same_pad, 2, 0},  // 2 groups of 17, dilation 2
        {1, 5, 80, 7, 16, 5, 1, 1, 1, valid, 1, 0},      // 80 rows of 7: three chunks
        {1, 6, 10, 9, 20, 6, 4, 2, 3, valid, 1, 0},      // valid padding, stride 3
    };
    std::uint64_t state = 12345;
    const auto random = [&] {  // small reals, signs mixed
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        return static_cast<float>(static_cast<std::int64_t>(state >> 40) % 2001 - 1000) / 137.0f;
    };
    for (const geometry& g : cases) {
        CAPTURE(g.co);
        CAPTURE(g.kh);
        tensor<float> x(shape{g.n, g.c, g.h, g.w}), w(shape{g.co, g.ci, g.kh, g.kw});
        for (auto& v : x.data) v = random();
        for (auto& v : w.data) v = random();
        const op_params p = conv(g.s, g.s, g.pad, g.act, g.d, g.d);
        const tensor<float> got = run<float>({op_kind::conv2d, p, {x, w}})[0];
        // The definition, tap by tap, skipping taps in the padding.
        const std::int64_t groups = g.c / g.ci, per_group = g.co / groups, oh = got.shape[2], ow = got.shape[3];
        const std::int64_t ph = g.pad == same_pad ? g.d * (g.kh - 1) / 2 : 0, pw = g.pad == same_pad ? g.d * (g.kw - 1) / 2 : 0;
        tensor<float> want(got.shape);
        for (std::int64_t n = 0; n < g.n; ++n)
            for (std::int64_t co = 0; co < g.co; ++co)
                for (std::int64_t oy = 0; oy < oh; ++oy)
                    for (std::int64_t ox = 0; ox < ow; ++ox) {
                        float sum = 0;
                        for (std::int64_t ci = 0; ci < g.ci; ++ci)
                            for (std::int64_t ky = 0; ky < g.kh; ++ky)
                                for (std::int64_t kx = 0; kx < g.kw; ++kx) {
                                    const std::int64_t iy = oy * g.s - ph + ky * g.d, ix = ox * g.s - pw + kx * g.d;
                                    if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
                                    const std::int64_t c = (co / per_group) * g.ci + ci;
                                    sum += w.data[static_cast<std::size_t>(((co * g.ci + ci) * g.kh + ky) * g.kw + kx)] *
                                           x.data[static_cast<std::size_t>(((n * g.c + c) * g.h + iy) * g.w + ix)];
                                }
                        want.data[static_cast<std::size_t>(((n * g.co + co) * oh + oy) * ow + ox)] =
                            g.act == 1 ? std::max(sum, 0.0f) : sum;
                    }
        CHECK(got.data == want.data);
    }
}

TEST_CASE("float_gemm: the instruction-set variants agree bit for bit") {
    // 9 taps, 7 output channels, 21 columns: partial blocks both ways.
    constexpr std::int64_t K = 9, channels = 7, cols = 21, MR = ops::float_gemm::MR, NR = ops::float_gemm::NR;
    alignas(32) float wpack[2 * K * MR], patches[3 * K * NR];
    for (std::size_t i = 0; i < std::size(wpack); ++i) wpack[i] = std::sin(float(i)) * 3;
    for (std::size_t i = 0; i < std::size(patches); ++i) patches[i] = std::cos(float(i) * 0.7f);
    std::vector<float> baseline(channels * cols, -1.0f), dispatched(channels * cols, -1.0f);
    ops::float_gemm::blocks_baseline(wpack, patches, K, channels, cols, baseline.data(), cols);
    ops::float_gemm::blocks(wpack, patches, K, channels, cols, dispatched.data(), cols);
    CHECK(baseline == dispatched);
    // Entry (3, 20): channel 3 of block 0 against column 4 of panel 2.
    float sum = 0;
    for (std::int64_t k = 0; k < K; ++k) sum += wpack[k * MR + 3] * patches[(2 * K + k) * NR + 4];
    CHECK(baseline[3 * cols + 20] == sum);
}

TEST_CASE("conv2d shape rule rejections") {
    tensor<float> x(shape{1, 3, 5, 5}), x4(shape{1, 4, 5, 5});
    CHECK_THROWS_WITH_AS(run<float>({op_kind::conv2d, conv(1, 1, same_pad), {x, tensor<float>(shape{1, 3, 2, 2})}}),
                         contains("same padding needs an odd kernel, got 2x2"), tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::conv2d, conv(1, 1, same_pad), {x, tensor<float>(shape{1, 3, 3, 2})}}),
                         contains("same padding needs an odd kernel, got 3x2"), tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::conv2d, conv(1, 1, valid), {x, tensor<float>(shape{4, 2, 3, 3})}}),
                         contains("input channels 3 are not a multiple of the weight's input channels 2"), tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::conv2d, conv(1, 1, valid), {x4, tensor<float>(shape{3, 2, 3, 3})}}),
                         contains("output channels 3 are not a multiple of the group count 2"), tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::conv2d, conv(1, 1, valid), {tensor<float>(shape{3, 5, 5}), tensor<float>(shape{1, 3, 3, 3})}}),
                         contains("input must be NCHW (rank 4), got [3,5,5]"), tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::conv2d, conv(1, 1, valid), {x, tensor<float>(shape{3, 3, 3})}}),
                         contains("weight must be [Cout, Cin/groups, kh, kw]"), tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::conv2d, conv(1, 1, valid), {x, tensor<float>(shape{1, 3, 7, 3})}}),
                         contains("does not fit input"), tsopt::error);
    // Dilation 3 makes a 3x3 kernel span 7 > 5.
    CHECK_THROWS_WITH_AS(run<float>({op_kind::conv2d, conv(1, 1, valid, 0, 3, 3), {x, tensor<float>(shape{1, 3, 3, 3})}}),
                         contains("does not fit input"), tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::conv2d, conv(0, 1, valid), {x, tensor<float>(shape{1, 3, 3, 3})}}),
                         contains("stride must be >= 1, got 0x1"), tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::conv2d, conv(1, 1, valid, 0, 1, 0), {x, tensor<float>(shape{1, 3, 3, 3})}}),
                         contains("dilation must be >= 1, got 1x0"), tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::conv2d, conv(1, 1, 2), {x, tensor<float>(shape{1, 3, 3, 3})}}),
                         contains("padding mode must be valid(0) or same(1), got 2"), tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::conv2d, conv(1, 1, valid, 4), {x, tensor<float>(shape{1, 3, 3, 3})}}),
                         contains("activation must be none(0), relu(1), sigmoid(2) or tanh(3), got 4"), tsopt::error);
}

TEST_CASE("conv2d output extents: same padding gives ceil(in / stride)") {
    std::array<shape, 1> out;
    for (int h : {5, 6, 7})
        for (int s : {1, 2, 3}) {
            std::array<shape, 2> in{shape{1, 1, h, h}, shape{1, 1, 3, 3}};
            REQUIRE(infer_shapes(op_kind::conv2d, conv(s, s, same_pad), in, out) == "");
            CHECK(out[0] == shape{1, 1, (h + s - 1) / s, (h + s - 1) / s});
            REQUIRE(infer_shapes(op_kind::conv2d, conv(s, s, valid), in, out) == "");
            CHECK(out[0] == shape{1, 1, (h - 3) / s + 1, (h - 3) / s + 1});
        }
}

// ---------------------------------------------------------------------------
// enlarge

TEST_CASE_TEMPLATE("enlarge centres the kernel in zeros", T, float, modp) {
    check<T>({op_kind::enlarge, params({3, 3}), {make<T>({1, 1, 1, 1}, {7})}},
             make<T>({1, 1, 3, 3}, {0, 0, 0, 0, 7, 0, 0, 0, 0}));
    // Two channels of 1x3 rows become the middle rows of 3x3 kernels.
    check<T>({op_kind::enlarge, params({3, 3}), {make<T>({2, 1, 1, 3}, {1, 2, 3, 4, 5, 6})}},
             make<T>({2, 1, 3, 3}, {0, 0, 0, 1, 2, 3, 0, 0, 0, 0, 0, 0, 4, 5, 6, 0, 0, 0}));
    // 1x1 into 5x3: row 2, column 1.
    check<T>({op_kind::enlarge, params({5, 3}), {make<T>({1, 1, 1, 1}, {-1})}},
             make<T>({1, 1, 5, 3}, {0, 0, 0, 0, 0, 0, 0, -1, 0, 0, 0, 0, 0, 0, 0}));
    // Same size: unchanged.
    check<T>({op_kind::enlarge, params({1, 2}), {make<T>({1, 1, 1, 2}, {8, 9})}}, make<T>({1, 1, 1, 2}, {8, 9}));
}

TEST_CASE("enlarge shape rule rejections") {
    tensor<float> w(shape{1, 1, 3, 3});
    CHECK_THROWS_WITH_AS(run<float>({op_kind::enlarge, params({1, 3}), {w}}),
                         contains("target size 1x3 is smaller than kernel [1,1,3,3]"), tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::enlarge, params({4, 5}), {w}}),
                         contains("kernel [1,1,3,3] cannot be centred in 4x5"), tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::enlarge, params({3, 3}), {tensor<float>(shape{3, 3})}}),
                         contains("kernel must be rank 4, got [3,3]"), tsopt::error);
}

// ---------------------------------------------------------------------------
// avgpool / maxpool

TEST_CASE_TEMPLATE("avgpool: valid and same windows, padding counted in the mean", T, float, modp) {
    auto x3 = make<T>({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
    auto x4 = make<T>({1, 1, 4, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16});
    // 2x2 stride 2, valid: block sums 14, 22, 46, 54 over 4.
    check<T>({op_kind::avgpool, pool(2, 2, 2, 2, valid), {x4}},
             tens<T>({1, 1, 2, 2}, {frac<T>(14, 4), frac<T>(22, 4), frac<T>(46, 4), frac<T>(54, 4)}));
    // 3x3 stride 1, same: neighbourhood sums (see conv2d) always over 9, so the
    // corner is 12/9, not 12/4.
    check<T>({op_kind::avgpool, pool(3, 3, 1, 1, same_pad), {x3}},
             tens<T>({1, 1, 3, 3}, {frac<T>(12, 9), frac<T>(21, 9), frac<T>(16, 9), frac<T>(27, 9), frac<T>(45, 9),
                                    frac<T>(33, 9), frac<T>(24, 9), frac<T>(39, 9), frac<T>(28, 9)}));
    // 3x3 stride 2, same: sums 14, 30, 57, 99 over 9.
    check<T>({op_kind::avgpool, pool(3, 3, 2, 2, same_pad), {x4}},
             tens<T>({1, 1, 2, 2}, {frac<T>(14, 9), frac<T>(30, 9), frac<T>(57, 9), frac<T>(99, 9)}));
    // Non-square window 1x2, two channels: pairs averaged per channel.
    check<T>({op_kind::avgpool, pool(1, 2, 1, 2, valid), {make<T>({1, 2, 1, 4}, {1, 3, 5, 7, 2, 2, 0, 4})}},
             make<T>({1, 2, 1, 2}, {2, 6, 2, 2}));
}

TEST_CASE("avgpool in modp is exact: out * 9 == window sum") {
    auto r = run<modp>({op_kind::avgpool, pool(3, 3, 1, 1, same_pad), {make<modp>({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9})}});
    CHECK(r[0].at(0, 0, 0, 0) * modp(9) == modp(12));
    CHECK(r[0].at(0, 0, 1, 1) == modp(5));
}

TEST_CASE("avgpool with fused relu") {
    // 1x2 windows: (-4+2)/2 = -1, (6+4)/2 = 5
    check<float>({op_kind::avgpool, pool(1, 2, 1, 1, valid, 1), {make<float>({1, 1, 2, 2}, {-4, 2, 6, 4})}},
                 make<float>({1, 1, 2, 1}, {0, 5}));
    // modp relu: -1 (even) stays, 5 (odd) -> 31 -> 30
    check<modp>({op_kind::avgpool, pool(1, 2, 1, 1, valid, 1), {make<modp>({1, 1, 2, 2}, {-4, 2, 6, 4})}},
                make<modp>({1, 1, 2, 1}, {-1, 30}));
}

TEST_CASE_TEMPLATE("maxpool: valid windows, and same padding never wins", T, float, modp) {
    check<T>({op_kind::maxpool, pool(2, 2, 2, 2, valid), {make<T>({1, 1, 4, 4}, {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3})}},
             make<T>({1, 1, 2, 2}, {9, 6, 9, 9}));
    // All-negative image -1..-9 with same 3x3 windows: a zero pad would win if
    // padding took part. In modp the negatives are p-1 .. p-9, ordered alike.
    check<T>({op_kind::maxpool, pool(3, 3, 1, 1, same_pad), {make<T>({1, 1, 3, 3}, {-1, -2, -3, -4, -5, -6, -7, -8, -9})}},
             make<T>({1, 1, 3, 3}, {-1, -1, -2, -1, -1, -2, -4, -4, -5}));
    // Stride 1, 1x2 windows over two channels.
    check<T>({op_kind::maxpool, pool(1, 2, 1, 1, valid), {make<T>({1, 2, 1, 3}, {1, 3, 2, 6, 5, 4})}},
             make<T>({1, 2, 1, 2}, {3, 3, 6, 5}));
}

TEST_CASE("maxpool in modp orders representatives; fused relu in float") {
    // -1 is represented by p-1, the largest element of the field.
    check<modp>({op_kind::maxpool, pool(1, 2, 1, 1, valid), {make<modp>({1, 1, 1, 2}, {-1, 5})}}, make<modp>({1, 1, 1, 1}, {-1}));
    check<float>({op_kind::maxpool, pool(1, 2, 1, 1, valid), {make<float>({1, 1, 1, 2}, {-1, 5})}}, make<float>({1, 1, 1, 1}, {5}));
    check<float>({op_kind::maxpool, pool(1, 2, 1, 1, valid, 1), {make<float>({1, 1, 1, 2}, {-3, -1})}}, make<float>({1, 1, 1, 1}, {0}));
}

TEST_CASE("pool shape rule rejections") {
    tensor<float> x(shape{1, 1, 4, 4});
    for (op_kind k : {op_kind::avgpool, op_kind::maxpool}) {
        CAPTURE(name(k));
        CHECK_THROWS_WITH_AS(run<float>({k, pool(2, 2, 1, 1, same_pad), {x}}), contains("same padding needs an odd kernel, got 2x2"),
                             tsopt::error);
        CHECK_THROWS_WITH_AS(run<float>({k, pool(3, 3, 1, 1, valid), {tensor<float>(shape{4, 4})}}),
                             contains("input must be NCHW (rank 4), got [4,4]"), tsopt::error);
        CHECK_THROWS_WITH_AS(run<float>({k, pool(0, 3, 1, 1, valid), {x}}), contains("kernel must be at least 1x1, got 0x3"),
                             tsopt::error);
        CHECK_THROWS_WITH_AS(run<float>({k, pool(5, 5, 1, 1, valid), {x}}), contains("window 5x5 does not fit input [1,1,4,4]"),
                             tsopt::error);
        CHECK_THROWS_WITH_AS(run<float>({k, pool(3, 3, 1, 0, valid), {x}}), contains("stride must be >= 1"), tsopt::error);
        CHECK_THROWS_WITH_AS(run<float>({k, pool(3, 3, 1, 1, valid, 9), {x}}), contains("activation must be"), tsopt::error);
    }
}

// ---------------------------------------------------------------------------
// concat / split

TEST_CASE_TEMPLATE("concat along each axis, and of three inputs", T, float, modp) {
    // a[i][j][k] = 4i + 2j + k, b = a + 10, both [2,2,2].
    auto a = make<T>({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
    auto b = make<T>({2, 2, 2}, {10, 11, 12, 13, 14, 15, 16, 17});
    check<T>({op_kind::concat, params({0}), {a, b}},
             make<T>({4, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 14, 15, 16, 17}));
    check<T>({op_kind::concat, params({1}), {a, b}},
             make<T>({2, 4, 2}, {0, 1, 2, 3, 10, 11, 12, 13, 4, 5, 6, 7, 14, 15, 16, 17}));
    check<T>({op_kind::concat, params({2}), {a, b}},
             make<T>({2, 2, 4}, {0, 1, 10, 11, 2, 3, 12, 13, 4, 5, 14, 15, 6, 7, 16, 17}));
    // Rank 4, axis 3: columns interleave per row.
    check<T>({op_kind::concat, params({3}), {make<T>({1, 1, 2, 1}, {1, 2}), make<T>({1, 1, 2, 1}, {3, 4})}},
             make<T>({1, 1, 2, 2}, {1, 3, 2, 4}));
    // Unequal extents on the axis.
    check<T>({op_kind::concat, params({0}), {make<T>({1, 2}, {1, 2}), make<T>({2, 2}, {3, 4, 5, 6})}},
             make<T>({3, 2}, {1, 2, 3, 4, 5, 6}));
    // Variadic: three inputs of widths 1, 2, 1.
    check<T>({op_kind::concat, params({1}), {make<T>({2, 1}, {1, 5}), make<T>({2, 2}, {2, 3, 6, 7}), make<T>({2, 1}, {4, 8})}},
             make<T>({2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST_CASE("concat shape rule rejections") {
    tensor<float> a(shape{2, 3}), b(shape{2, 4}), c(shape{3, 3}), r3(shape{2, 3, 1});
    CHECK_THROWS_WITH_AS(run<float>({op_kind::concat, params({0}), {a, b}}),
                         contains("inputs [2,3] and [2,4] differ off the concat axis 0"), tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::concat, params({1}), {a, c}}), contains("differ off the concat axis 1"), tsopt::error);
    // The third input is checked too.
    CHECK_THROWS_WITH_AS(run<float>({op_kind::concat, params({1}), {a, b, c}}), contains("differ off the concat axis 1"),
                         tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::concat, params({0}), {a, r3}}), contains("input 1 has rank 3, input 0 has rank 2"),
                         tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::concat, params({2}), {a, a}}), contains("axis 2 out of range for rank 2"),
                         tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::concat, params({-1}), {a, a}}), contains("axis -1 out of range"), tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::concat, params({0}), {a}}), contains("concat takes 2..64 inputs, got 1"),
                         tsopt::error);
}

TEST_CASE_TEMPLATE("split cuts along an axis at a point", T, float, modp) {
    check<T>({op_kind::split, params({1, 1}), {make<T>({2, 3}, {0, 1, 2, 3, 4, 5})}},
             {make<T>({2, 1}, {0, 3}), make<T>({2, 2}, {1, 2, 4, 5})});
    check<T>({op_kind::split, params({0, 1}), {make<T>({3, 2}, {0, 1, 2, 3, 4, 5})}},
             {make<T>({1, 2}, {0, 1}), make<T>({2, 2}, {2, 3, 4, 5})});
    check<T>({op_kind::split, params({2, 2}), {make<T>({1, 2, 3}, {0, 1, 2, 3, 4, 5})}},
             {make<T>({1, 2, 2}, {0, 1, 3, 4}), make<T>({1, 2, 1}, {2, 5})});
}

TEST_CASE("split shape rule rejections") {
    tensor<float> a(shape{2, 3});
    CHECK_THROWS_WITH_AS(run<float>({op_kind::split, params({1, 0}), {a}}),
                         contains("split point 0 must lie strictly inside extent 3"), tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::split, params({1, 3}), {a}}),
                         contains("split point 3 must lie strictly inside extent 3"), tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::split, params({0, 5}), {a}}), contains("strictly inside extent 2"), tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::split, params({2, 1}), {a}}), contains("axis 2 out of range for rank 2"),
                         tsopt::error);
    std::array<shape, 1> in{shape{2, 3}};
    std::array<shape, 1> one_out;
    CHECK(infer_shapes(op_kind::split, params({1, 1}), in, one_out) == "split has 2 outputs");
}

// ---------------------------------------------------------------------------
// Constants

TEST_CASE_TEMPLATE("constant operators: cpool, iconv, imatmul, iewmul", T, float, modp) {
    check<T>({op_kind::cpool, params({2, 1, 2}), {}}, tens<T>({2, 1, 1, 2}, std::vector<T>(4, frac<T>(1, 2))));
    check<T>({op_kind::cpool, params({1, 3, 3}), {}}, tens<T>({1, 1, 3, 3}, std::vector<T>(9, frac<T>(1, 9))));
    // iconv(2, 2, 3): a single 1 at the centre of kernel (c, c).
    tensor<T> id(shape{2, 2, 3, 3}, num<T>(0));
    id.at(0, 0, 1, 1) = id.at(1, 1, 1, 1) = num<T>(1);
    check<T>({op_kind::iconv, params({2, 2, 3}), {}}, id);
    // iconv(4, 2, 1), grouped: output channel c reads input channel c % 2 of its group.
    check<T>({op_kind::iconv, params({4, 2, 1}), {}}, make<T>({4, 2, 1, 1}, {1, 0, 0, 1, 1, 0, 0, 1}));
    check<T>({op_kind::imatmul, params({3}), {}}, make<T>({3, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1}));
    check<T>({op_kind::iewmul, params({2, 2, 3}), {}}, make<T>({2, 3}, {1, 1, 1, 1, 1, 1}));
    check<T>({op_kind::iewmul, params({0}), {}}, make<T>(shape{}, {1}));
}

TEST_CASE("cpool in modp is the exact inverse of the window size") {
    auto r = run<modp>({op_kind::cpool, params({1, 3, 3}), {}});
    CHECK(r[0][0] * modp(9) == modp(1));
}

TEST_CASE("constant shape rule rejections") {
    CHECK_THROWS_WITH_AS(run<float>({op_kind::cpool, params({0, 3, 3}), {}}),
                         contains("extent parameter 0 must be positive, got 0"), tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::cpool, params({2, 3, -1}), {}}),
                         contains("extent parameter 2 must be positive, got -1"), tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::iconv, params({2, 2, 2}), {}}), contains("identity kernel size must be odd, got 2"),
                         tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::iconv, params({3, 2, 3}), {}}),
                         contains("output channels 3 must be a multiple of input channels 2"), tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::imatmul, params({0}), {}}), contains("must be positive, got 0"), tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::iewmul, params({2, 2, 0}), {}}),
                         contains("extent parameter 2 must be positive, got 0"), tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::iewmul, params({-1}), {}}), contains("rank -1 must be within"), tsopt::error);
    // A shape holds at most max_rank extents; rank 7 fits the parameter slots
    // but not a shape.
    CHECK_THROWS_WITH_AS(run<float>({op_kind::iewmul, params({7, 1, 1, 1, 1, 1, 1, 1}), {}}),
                         contains("rank 7 must be within 0..6"), tsopt::error);
    tensor<float> x(shape{2});
    CHECK_THROWS_WITH_AS(run<float>({op_kind::cpool, params({1, 1, 1}), {x}}), contains("cpool takes 0 inputs, got 1"),
                         tsopt::error);
}

// ---------------------------------------------------------------------------
// batchnorm / reshape / softmax / pad

TEST_CASE_TEMPLATE("batchnorm applies a per-channel affine map", T, float, modp) {
    // channel 0 = (1,2) * 2 + 10 = (12,14); channel 1 = (3,4) * 3 - 20 = (-11,-8)
    auto scale = make<T>({2}, {2, 3});
    auto shift = make<T>({2}, {10, -20});
    check<T>({op_kind::batchnorm, {}, {make<T>({1, 2, 2}, {1, 2, 3, 4}), scale, shift}}, make<T>({1, 2, 2}, {12, 14, -11, -8}));
    // Rank 4 with a batch of 2: the channel index wraps per sample.
    check<T>({op_kind::batchnorm, {}, {make<T>({2, 2, 1, 1}, {1, 1, 2, 2}), scale, shift}}, make<T>({2, 2, 1, 1}, {12, -17, 14, -14}));
    // Rank 2 ([N, C]).
    check<T>({op_kind::batchnorm, {}, {make<T>({1, 2}, {0, 1}), scale, shift}}, make<T>({1, 2}, {10, -17}));
}

TEST_CASE("batchnorm shape rule rejections") {
    tensor<float> x(shape{1, 2, 2}), c2(shape{2}), c3(shape{3}), m(shape{2, 1});
    CHECK_THROWS_WITH_AS(run<float>({op_kind::batchnorm, {}, {x, c3, c2}}), contains("scale must have shape [2], got [3]"),
                         tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::batchnorm, {}, {x, c2, m}}), contains("shift must have shape [2], got [2,1]"),
                         tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::batchnorm, {}, {c2, c2, c2}}),
                         contains("input must have a channel axis (rank >= 2), got [2]"), tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::batchnorm, {}, {x, c2}}), contains("batchnorm takes 3 inputs, got 2"), tsopt::error);
}

TEST_CASE_TEMPLATE("reshape keeps the row-major elements", T, float, modp) {
    check<T>({op_kind::reshape, params({3, 3, 1, 2}), {make<T>({2, 3}, {1, 2, 3, 4, 5, 6})}}, make<T>({3, 1, 2}, {1, 2, 3, 4, 5, 6}));
    check<T>({op_kind::reshape, params({1, 4}), {make<T>({2, 2}, {1, 2, 3, 4})}}, make<T>({4}, {1, 2, 3, 4}));
}

TEST_CASE("reshape shape rule rejections") {
    tensor<float> a(shape{2, 3});
    CHECK_THROWS_WITH_AS(run<float>({op_kind::reshape, params({2, 4, 2}), {a}}),
                         contains("cannot reshape [2,3] (6 elements) to [4,2] (8)"), tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::reshape, params({0}), {a}}), contains("target rank 0 must be within 1..6"),
                         tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::reshape, params({2, 6, 0}), {a}}), contains("target extent 0 must be positive"),
                         tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::reshape, params({7, 2, 3, 1, 1, 1, 1, 1}), {a}}),
                         contains("target rank 7 must be within 1..6"), tsopt::error);
}

TEST_CASE("softmax: float along either axis") {
    const float ln3 = std::log(3.f);
    // [[0, 0], [ln3, 0]]: along axis 0 column 0 is (1, 3)/4, column 1 (1, 1)/2;
    // along axis 1 row 0 is (1, 1)/2, row 1 (3, 1)/4.
    auto x = make_real<float>({2, 2}, {0.f, 0.f, ln3, 0.f});
    check<float>({op_kind::softmax, params({0}), {x}}, make_real<float>({2, 2}, {0.25f, 0.5f, 0.75f, 0.5f}));
    check<float>({op_kind::softmax, params({1}), {x}}, make_real<float>({2, 2}, {0.5f, 0.5f, 0.75f, 0.25f}));
    // Large inputs do not overflow (the maximum is subtracted first).
    check<float>({op_kind::softmax, params({0}), {make_real<float>({2}, {1000.f, 1000.f})}}, make_real<float>({2}, {0.5f, 0.5f}));
}

TEST_CASE("softmax in modp normalises x^2 + 7") {
    // (1, 2) -> (8, 11) / 19;  axis 0 of [[1],[2]] likewise.
    check<modp>({op_kind::softmax, params({1}), {make<modp>({1, 2}, {1, 2})}}, tens<modp>({1, 2}, {frac<modp>(8, 19), frac<modp>(11, 19)}));
    check<modp>({op_kind::softmax, params({0}), {make<modp>({2, 1}, {1, 2})}}, tens<modp>({2, 1}, {frac<modp>(8, 19), frac<modp>(11, 19)}));
    auto r = run<modp>({op_kind::softmax, params({1}), {make<modp>({1, 3}, {1, 2, 3})}});
    CHECK(r[0][0] + r[0][1] + r[0][2] == modp(1));
    CHECK(r[0][2] * modp(8 + 11 + 16) == modp(16));
    CHECK_THROWS_WITH_AS(run<modp>({op_kind::softmax, params({2}), {make<modp>({1, 2}, {1, 2})}}),
                         contains("axis 2 out of range for rank 2"), tsopt::error);
}

TEST_CASE_TEMPLATE("pad adds zeros around H and W", T, float, modp) {
    // top 1, bottom 0, left 0, right 1
    check<T>({op_kind::pad, params({1, 0, 0, 1}), {make<T>({1, 1, 2, 2}, {1, 2, 3, 4})}},
             make<T>({1, 1, 3, 3}, {0, 0, 0, 1, 2, 0, 3, 4, 0}));
    // bottom 1, left 1 on two channels of 1x1
    check<T>({op_kind::pad, params({0, 1, 1, 0}), {make<T>({1, 2, 1, 1}, {5, 6})}}, make<T>({1, 2, 2, 2}, {0, 5, 0, 0, 0, 6, 0, 0}));
}

TEST_CASE("pad shape rule rejections") {
    CHECK_THROWS_WITH_AS(run<float>({op_kind::pad, params({0, -1, 0, 0}), {tensor<float>(shape{1, 1, 2, 2})}}),
                         contains("padding must be non-negative, got -1"), tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::pad, params({1, 1, 1, 1}), {tensor<float>(shape{2, 2})}}),
                         contains("input must be NCHW (rank 4), got [2,2]"), tsopt::error);
}

// ---------------------------------------------------------------------------
// Arity, checked for every declared operator.

TEST_CASE("every operator rejects the wrong number of inputs with its name and arity") {
    std::array<shape, max_outputs> outs;
    for (const op_decl* d : operators) {
        CAPTURE(d->name);
        auto out = std::span<shape>(outs.data(), static_cast<std::size_t>(d->num_outputs));
        std::string arity = d->min_inputs == d->max_inputs ? std::to_string(d->min_inputs)
                                                            : std::to_string(d->min_inputs) + ".." + std::to_string(d->max_inputs);
        if (d->min_inputs > 0) {
            std::vector<shape> in(static_cast<std::size_t>(d->min_inputs - 1), shape{1, 1, 1, 1});
            CHECK(infer_shapes(d->kind, {}, in, out) ==
                  std::string(d->name) + " takes " + arity + " inputs, got " + std::to_string(d->min_inputs - 1));
        }
        std::vector<shape> in(static_cast<std::size_t>(d->max_inputs + 1), shape{1, 1, 1, 1});
        CHECK(infer_shapes(d->kind, {}, in, out) ==
              std::string(d->name) + " takes " + arity + " inputs, got " + std::to_string(d->max_inputs + 1));
    }
    // evaluate() prefixes the operator's name.
    tensor<float> a(shape{2});
    CHECK_THROWS_WITH_AS(run<float>({op_kind::ewadd, {}, {a}}), "ewadd: ewadd takes 2 inputs, got 1", tsopt::error);
    CHECK_THROWS_WITH_AS(run<float>({op_kind::relu, {}, {a, a}}), contains("relu: relu takes 1"), tsopt::error);
}

TEST_CASE("every declaration has a shape rule, semantics in both number systems and a flops count") {
    for (const op_decl* d : operators) {
        INFO(d->name);
        CHECK(static_cast<bool>(d->infer));
        CHECK(static_cast<bool>(d->eval_float));
        CHECK(static_cast<bool>(d->eval_modp));
        CHECK(static_cast<bool>(d->flops));
    }
}
