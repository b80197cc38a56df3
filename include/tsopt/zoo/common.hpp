#pragma once
// Shared pieces of the model zoo: the options every builder takes and `net`,
// a small helper around tsopt::graph that owns the seeded generator, scales
// widths and depths, and builds the recurring units (conv + batchnorm + relu,
// dense layers, classifier heads) with readable, unique node names.
//
// Naming: a unit called "layer1.0.conv1" produces the nodes
//   layer1.0.conv1 (conv2d), layer1.0.conv1.bn (batchnorm), layer1.0.conv1.relu
// and the weights layer1.0.conv1.weight, layer1.0.conv1.bn.scale / .shift.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tsopt/core/graph.hpp"

namespace tsopt::zoo {

struct options {
    int batch = 1;
    int image = 0;          // input height = width; 0: the size the paper used
    int width_div = 1;      // divide channel / hidden widths (at least 1 channel, 1 head, 1 group remains)
    int depth_div = 1;      // divide repeated blocks, cells and layers (at least 1 remains)
    int length = 0;         // sequence length of RNNs and BERT; 0: the paper's
    bool batchnorm = true;  // CNNs: conv -> batchnorm -> relu as the real models; false: TASO's graphs (activation fused, no BN)
    bool random_weights = true;  // false: zero weights (fast shape-only builds of full-size models)
    std::uint64_t seed = 0;
};

class net {
public:
    graph g;
    options opt;

    explicit net(const options& o, int paper_image = 0) : opt(o), rng_(o.seed * 0x9e3779b97f4a7c15ull + 1) {
        if (o.batch < 1) throw error("zoo::options: batch must be >= 1, got " + std::to_string(o.batch));
        if (o.width_div < 1) throw error("zoo::options: width_div must be >= 1, got " + std::to_string(o.width_div));
        if (o.depth_div < 1) throw error("zoo::options: depth_div must be >= 1, got " + std::to_string(o.depth_div));
        if (o.image < 0 || o.length < 0) throw error("zoo::options: image and length must be >= 0");
        image = o.image ? o.image : paper_image;
    }

    int image = 0;  // the input size in use
    int ch(int c) const { return std::max(1, c / opt.width_div); }
    int reps(int n) const { return std::max(1, n / opt.depth_div); }
    int len(int paper) const { return opt.length ? opt.length : paper; }

    // A weight of shape `s`, uniform in [-sqrt(3/fan_in), sqrt(3/fan_in)]
    // (variance 1/fan_in keeps deep stacks in range), or zeros.
    value weight(const std::string& name, shape s, std::int64_t fan_in) {
        if (!opt.random_weights) return g.weight(name, tensor<float>(s));
        float a = std::sqrt(3.f / static_cast<float>(std::max<std::int64_t>(fan_in, 1)));
        return g.weight(name, random_float(s, rng_, -a, a));
    }
    // A conv kernel [cout, cin, kh, kw] like weight(), but each output
    // channel's kernel is negated if it sums below zero. Without it, a
    // narrow conv reading relu outputs (all >= 0, correlated) is dead with
    // high probability when it has no batchnorm or bias (SqueezeNet at small
    // widths computed all zeros), and equivalence checks on zeros prove
    // nothing. The variance is unchanged; the mean is kept roughly in scale.
    value conv_weight(const std::string& name, shape s) {
        std::int64_t fan_in = s.elements() / s[0];
        if (!opt.random_weights) return g.weight(name, tensor<float>(s));
        float a = std::sqrt(3.f / static_cast<float>(std::max<std::int64_t>(fan_in, 1)));
        tensor<float> t = random_float(s, rng_, -a, a);
        for (std::int64_t o = 0; o < s[0]; ++o) {
            float* row = t.data.data() + o * fan_in;
            float sum = 0;
            for (std::int64_t i = 0; i < fan_in; ++i) sum += row[i];
            if (sum < 0)
                for (std::int64_t i = 0; i < fan_in; ++i) row[i] = -row[i];
        }
        return g.weight(name, std::move(t));
    }
    value uniform(const std::string& name, shape s, float lo, float hi) {
        if (!opt.random_weights) return g.weight(name, tensor<float>(s, lo));
        return g.weight(name, random_float(s, rng_, lo, hi));
    }
    value constant(const std::string& name, shape s, float v) { return g.weight(name, tensor<float>(s, v)); }

    // conv2d with a fresh [cout, cin/groups, kh, kw] weight.
    value conv(value x, const std::string& name, int cout, int kh, int kw, conv_options o = {}, int groups = 1) {
        std::int64_t cin = g.shape_of(x)[1];
        if (groups < 1 || cin % groups != 0 || cout % groups != 0)
            throw error("zoo: conv '" + name + "': " + std::to_string(cin) + " -> " + std::to_string(cout) +
                        " channels do not split into " + std::to_string(groups) + " groups");
        return g.conv2d(x, conv_weight(name + ".weight", shape{cout, cin / groups, kh, kw}), o, name);
    }
    value batchnorm(value x, const std::string& name) {
        std::int64_t c = g.shape_of(x)[1];
        value s = uniform(name + ".scale", shape{c}, 0.8f, 1.2f);
        value b = uniform(name + ".shift", shape{c}, -0.1f, 0.1f);
        return g.batchnorm(x, s, b, name);
    }
    // The CNN unit: conv -> batchnorm -> activation (opt.batchnorm), or one
    // conv with the activation fused (TASO's graphs).
    value conv_bn(value x, const std::string& name, int cout, int kh, int kw, conv_options o = {}, int groups = 1) {
        if (!opt.batchnorm) return conv(x, name, cout, kh, kw, o, groups);
        auto act = o.act;
        o.act = no_activation;
        value y = batchnorm(conv(x, name, cout, kh, kw, o, groups), name + ".bn");
        return act == relu ? g.relu(y, name + ".relu") : y;
    }
    value conv_bn(value x, const std::string& name, int cout, int k, conv_options o = {}, int groups = 1) {
        return conv_bn(x, name, cout, k, k, o, groups);
    }

    // x [.., in] @ W [in, out] (+ bias [out]).
    value dense(value x, const std::string& name, int out, bool bias = true, spec::activation act = no_activation) {
        std::int64_t in = g.shape_of(x)[g.shape_of(x).rank - 1];
        value w = weight(name + ".weight", shape{in, out}, in);
        value y = g.matmul(x, w, {.act = bias ? no_activation : act}, name);
        if (!bias) return y;
        y = g.ewadd(y, uniform(name + ".bias", shape{out}, -0.1f, 0.1f), name + ".add_bias");
        if (act == relu) y = g.relu(y, name + ".relu");
        else if (act != no_activation) throw error("zoo: dense '" + name + "': only relu may follow a bias");
        return y;
    }

    // Global average pooling over a square NCHW map, flatten, and a dense
    // layer to `classes` logits: [N, classes].
    value classifier(value x, int classes, const std::string& pool = "avgpool", const std::string& fc = "fc") {
        shape s = g.shape_of(x);
        if (s[2] != s[3]) throw error("zoo: global pooling '" + pool + "' needs a square map, got " + s.str());
        value p = g.avgpool(x, {.kernel = static_cast<int>(s[2]), .stride = 1, .pad = valid}, pool);
        value f = g.reshape(p, shape{s[0], s[1]}, "flatten");
        return dense(f, fc, classes);
    }

    // Splits x along `axis` into pieces of the given extents (a chain of
    // binary splits named name.0, name.1, ...).
    std::vector<value> split_into(value x, int axis, const std::vector<int>& extents, const std::string& name) {
        std::vector<value> r;
        for (std::size_t i = 0; i + 1 < extents.size(); ++i) {
            auto [a, b] = g.split(axis, extents[i], x, name + "." + std::to_string(i));
            r.push_back(a);
            x = b;
        }
        r.push_back(x);
        return r;
    }

    graph finish(std::vector<value> outs) {
        for (value v : outs) g.mark_output(v);
        g.validate();
        return std::move(g);
    }

private:
    std::mt19937_64 rng_;
};

inline std::string idx(const std::string& a, int i) { return a + "." + std::to_string(i); }

}  // namespace tsopt::zoo
