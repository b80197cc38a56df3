// Reference semantics of each operator against small hand-computed cases, in
// both number systems.
#include <doctest/doctest.h>

#include "tsopt/spec/registry.hpp"

using namespace tsopt;
using namespace tsopt::spec;

namespace {
template <class T>
std::vector<tensor<T>> run(op_kind k, op_params p, std::initializer_list<const tensor<T>*> in) {
    std::vector<const tensor<T>*> v(in);
    return evaluate<T>(k, p, v);
}
}  // namespace

TEST_CASE("conv2d, same padding, float: a 3x3 box filter sums the neighbourhood") {
    tensor<float> x(shape{1, 1, 3, 3}, std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9});
    tensor<float> w(shape{1, 1, 3, 3}, 1.f);
    op_params p;
    p[conv2d_p::stride_h] = p[conv2d_p::stride_w] = 1;
    p[conv2d_p::pad] = 1;
    p[conv2d_p::dil_h] = p[conv2d_p::dil_w] = 1;
    auto r = run<float>(op_kind::conv2d, p, {&x, &w});
    CHECK(r[0].shape == shape{1, 1, 3, 3});
    CHECK(r[0].at(0, 0, 0, 0) == 1 + 2 + 4 + 5);
    CHECK(r[0].at(0, 0, 1, 1) == 45);
}

TEST_CASE("relu in the fingerprint number system is the polynomial x(x+1)+1") {
    tensor<modp> x(shape{2}, std::vector<modp>{modp(3), modp(-1)});
    auto r = run<modp>(op_kind::relu, {}, {&x});
    CHECK(r[0][0] == modp(13));
    CHECK(r[0][1] == modp(1));
}

TEST_CASE("shape errors name the violated condition") {
    tensor<float> a(shape{2, 3}), b(shape{4, 5});
    CHECK_THROWS_WITH_AS(run<float>(op_kind::matmul, {}, {&a, &b}), doctest::Contains("inner extents differ"), tsopt::error);
}
