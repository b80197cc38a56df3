#pragma once
// RNNTC: a text classifier built from SRU layers (Lei et al., "Simple
// Recurrent Units for Highly Parallelizable Recurrence", EMNLP 2018), the
// RNN model of MetaFlow's evaluation (Jia et al., SysML 2019). Per layer the
// three gate pre-activations of every time step come from ONE matmul over
// the whole sequence, U = X W (W: [H, 3H]); the recurrence is element-wise:
//   f_t = sigmoid(U^f_t + b_f)        r_t = sigmoid(U^r_t + b_r)
//   c_t = f_t * c_{t-1} + (1 - f_t) * U^x_t  =  U^x_t + f_t * (c_{t-1} - U^x_t)
//   h_t = r_t * tanh(c_t) + (1 - r_t) * x_t  =  x_t + r_t * (tanh(c_t) - x_t)
// (subtraction is ewadd with smul by a -1 constant; c_0 is a zero weight).
// The top layer computes h only at the last step (the others are unused).
// Input: embedded tokens [L*N, H], time-major; output: class probabilities
// softmax(h_L W_c + b_c) [N, 2]. Configuration (MetaFlow does not list every
// extent; this is ours): hidden 1024, 4 layers, 32 tokens, 2 classes.
#include "tsopt/zoo/common.hpp"

namespace tsopt::zoo {

inline graph rnntc(const options& o = {}) {
    net n(o);
    const int H = n.ch(1024), T = n.len(32), layers = n.reps(4), B = o.batch;
    auto& g = n.g;
    value x = g.input("data", shape{T * B, H});
    value neg = n.constant("minus_one", shape{1}, -1.f);
    std::vector<int> rows(static_cast<std::size_t>(T), B);
    value last;
    for (int l = 0; l < layers; ++l) {
        std::string L = idx("sru", l);
        value u = g.matmul(x, n.weight(L + ".weight", shape{H, 3 * H}, H), {}, L + ".matmul");
        auto us = n.split_into(u, 0, rows, L + ".split_u");
        // x_t feeds the highway term of h_t; the last layer only needs h_{L-1}.
        const bool top = l + 1 == layers;
        std::vector<value> xs;
        if (!top) xs = n.split_into(x, 0, rows, L + ".split_x");
        else xs.assign(static_cast<std::size_t>(T), T > 1 ? g.split(0, (T - 1) * B, x, L + ".split_x").second : x);
        value bf = n.uniform(L + ".bias_f", shape{H}, -0.1f, 0.1f), br = n.uniform(L + ".bias_r", shape{H}, -0.1f, 0.1f);
        value c = n.constant(L + ".c0", shape{B, H}, 0.f);
        std::vector<value> hs;
        for (int t = 0; t < T; ++t) {
            std::string s = idx(L + ".step", t);
            auto parts = n.split_into(us[static_cast<std::size_t>(t)], 1, {H, H, H}, s + ".gates");
            value f = g.sigmoid(g.ewadd(parts[1], bf, s + ".f_bias"), s + ".f");
            value d = g.ewadd(c, g.smul(parts[0], neg, s + ".neg_ux"), s + ".c_minus_ux");
            c = g.ewadd(parts[0], g.ewmul(f, d, s + ".f_mul"), s + ".c");
            if (top && t + 1 < T) continue;
            value r = g.sigmoid(g.ewadd(parts[2], br, s + ".r_bias"), s + ".r");
            value xt = xs[static_cast<std::size_t>(t)];
            value tc = g.tanh(c, s + ".tanh_c"), nx = g.smul(xt, neg, s + ".neg_x");
            value e = g.ewadd(tc, nx, s + ".tanh_c_minus_x");
            hs.push_back(g.ewadd(xt, g.ewmul(r, e, s + ".r_mul"), s + ".h"));
        }
        last = hs.back();
        if (!top) x = T > 1 ? g.concat(0, hs, L + ".output") : hs[0];
    }
    value logits = n.dense(last, "classifier", 2);
    return n.finish({g.softmax(logits, 1, "probs")});
}

}  // namespace tsopt::zoo
