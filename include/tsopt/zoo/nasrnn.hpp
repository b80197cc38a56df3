#pragma once
// NasRNN: the recurrent cell found by neural architecture search (Zoph & Le,
// "Neural Architecture Search with Reinforcement Learning", ICLR 2017,
// Figure 8), unrolled as in TASO's evaluation (examples/nasrnn.py): hidden
// size 512, 5 time steps, batch 1. Each step computes eight combinations
// W_i x_t + U_i h_{t-1} (16 matmuls, 8 adds), then the fixed tree
//   m0 = relu(t0) + sigmoid(t3)      m1 = sigmoid(t1) + tanh(t2)
//   m2 = sigmoid(t4) * tanh(t5)      m3 = sigmoid(t6) * relu(t7)
//   m4 = sigmoid(m1) + tanh(m2)      m5 = tanh(m0) * tanh(m3)
//   h_t = tanh(tanh(m4) * tanh(m5))
// 46 operators per step. Inputs x0..x{L-1} [N,H] and the initial state h0
// [N,H]; output h_L [N,H]. Unlike TASO's script, which draws fresh weights
// for every step, the 16 weight matrices are shared across time as in a real
// RNN; the operator count is the same.
#include "tsopt/zoo/common.hpp"

namespace tsopt::zoo {

inline graph nasrnn(const options& o = {}) {
    net n(o);
    const int H = n.ch(512), L = n.len(5);
    auto& g = n.g;
    std::vector<value> xs;
    for (int t = 0; t < L; ++t) xs.push_back(g.input(idx("x", t), shape{o.batch, H}));
    value h = g.input("h0", shape{o.batch, H});
    std::vector<value> W, U;
    for (int i = 0; i < 8; ++i) {
        W.push_back(n.weight(idx("cell.W", i), shape{H, H}, H));
        U.push_back(n.weight(idx("cell.U", i), shape{H, H}, H));
    }
    for (int t = 0; t < L; ++t) {
        std::string s = idx("step", t);
        std::vector<value> c;
        for (int i = 0; i < 8; ++i) {
            value a = g.matmul(xs[static_cast<std::size_t>(t)], W[static_cast<std::size_t>(i)], {}, idx(s + ".Wx", i));
            value b = g.matmul(h, U[static_cast<std::size_t>(i)], {}, idx(s + ".Uh", i));
            c.push_back(g.ewadd(a, b, idx(s + ".t", i)));
        }
        auto sig = [&](value v, const char* nm) { return g.sigmoid(v, s + "." + nm); };
        auto th = [&](value v, const char* nm) { return g.tanh(v, s + "." + nm); };
        auto rl = [&](value v, const char* nm) { return g.relu(v, s + "." + nm); };
        // One statement per node: argument evaluation order is unspecified.
        value a0 = rl(c[0], "relu_t0"), b0 = sig(c[3], "sigmoid_t3");
        value m0 = g.ewadd(a0, b0, s + ".m0");
        value a1 = sig(c[1], "sigmoid_t1"), b1 = th(c[2], "tanh_t2");
        value m1 = g.ewadd(a1, b1, s + ".m1");
        value a2 = sig(c[4], "sigmoid_t4"), b2 = th(c[5], "tanh_t5");
        value m2 = g.ewmul(a2, b2, s + ".m2");
        value a3 = sig(c[6], "sigmoid_t6"), b3 = rl(c[7], "relu_t7");
        value m3 = g.ewmul(a3, b3, s + ".m3");
        value a4 = sig(m1, "sigmoid_m1"), b4 = th(m2, "tanh_m2");
        value m4 = g.ewadd(a4, b4, s + ".m4");
        value a5 = th(m0, "tanh_m0"), b5 = th(m3, "tanh_m3");
        value m5 = g.ewmul(a5, b5, s + ".m5");
        value a6 = th(m4, "tanh_m4"), b6 = th(m5, "tanh_m5");
        value m6 = g.ewmul(a6, b6, s + ".m6");
        h = th(m6, "h");
    }
    return n.finish({h});
}

}  // namespace tsopt::zoo
