#pragma once
// Sample graphs shared by the io tests, the ONNX Runtime cross-check and the
// demo-model tool: two hand-built nets covering every exportable operator,
// and the zoo's models at test size.
#include <random>
#include <string_view>

#include "tsopt/core/graph.hpp"
#include "tsopt/zoo/zoo.hpp"

namespace io_samples {

using namespace tsopt;

inline std::mt19937_64 rng_for(int seed) { return std::mt19937_64(static_cast<std::uint64_t>(seed)); }

inline graph conv_net() {
    auto rng = rng_for(1);
    graph g;
    value x = g.input("x", {2, 4, 9, 9});
    value a = g.conv2d(x, g.weight("w1", {8, 4, 3, 3}, rng), {.pad = same}, "c1");
    value b = g.conv2d(a, g.weight("w2", {8, 2, 3, 3}, rng), {.stride = 2, .pad = valid, .dilation = 1}, "c2_grouped");
    value c = g.conv2d(a, g.weight("w3", {8, 8, 3, 3}, rng), {.stride = 2, .pad = same, .dilation = 2}, "c3_dilated");
    value d = g.ewadd(g.maxpool(c, {.kernel = 3, .stride = 1, .pad = same}), g.avgpool(c, {.kernel = 3, .stride = 1, .pad = same}));
    value e = g.pad(b, 1, 1, 0, 2, "pad");  // asymmetric: 4x4 -> 6x6
    value f = g.batchnorm(e, g.weight("s", {8}, rng), g.weight("t", {8}, rng), "bn");
    value h = g.concat(1, {d, g.avgpool(f, {.kernel = 2, .stride = 1, .pad = valid})}, "cat");
    auto [l, r] = g.split(1, 5, h, "split");
    value m = g.ewmul(g.sigmoid(l), g.weight("bc", {1, 5, 1, 1}, rng));  // broadcasting
    g.mark_output(g.tanh(m));
    g.mark_output(g.relu(r));
    return g;
}

inline graph matmul_net() {
    auto rng = rng_for(2);
    graph g;
    value x = g.input("x", {2, 3, 4});
    value y = g.matmul(x, g.weight("w", {4, 6}, rng), {}, "mm");  // batch broadcast
    value t = g.transpose(y, {0, 2, 1}, "tr");
    value r = g.reshape(t, {6, 6}, "rs");
    value s = g.softmax(r, 1, "sm");
    value k = g.smul(s, g.weight("k", {1}, rng), "scale");
    g.mark_output(g.ewadd(k, g.weight("bias", {6}, rng)));
    return g;
}


// Small sizes for every zoo model (as in tests/zoo), so a round trip runs in
// seconds on the reference backend.
inline zoo::options zoo_small(std::string_view name) {
    zoo::options o;
    if (name == "resnet18") { o.image = 32; o.width_div = 8; }
    else if (name == "resnet50") { o.image = 32; o.width_div = 16; }
    else if (name == "resnext50") { o.image = 32; o.width_div = 8; o.depth_div = 2; }
    else if (name == "inception_v3") { o.image = 75; o.width_div = 16; }
    else if (name == "squeezenet") { o.image = 63; o.width_div = 8; }
    else if (name == "nasnet_a") { o.image = 16; o.width_div = 16; o.depth_div = 5; }
    else if (name == "nasnet_mobile") { o.image = 32; o.width_div = 4; o.depth_div = 4; }
    else if (name == "nasrnn") { o.width_div = 16; o.length = 3; }
    else if (name == "bert") { o.width_div = 16; o.length = 8; o.depth_div = 4; }
    else if (name == "rnntc") { o.width_div = 32; o.length = 4; o.depth_div = 2; }
    else if (name == "csrnet") { o.image = 32; o.width_div = 8; }
    else { o.image = 32; o.width_div = 16; o.depth_div = 4; }  // a model added later: a guess at small
    return o;
}

}  // namespace io_samples
