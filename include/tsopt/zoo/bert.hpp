#pragma once
// BERT encoder layers (Devlin et al., NAACL 2019; Vaswani et al., 2017) at
// the size TASO evaluates (examples/bert.py): sequence 64, hidden 1024,
// 16 heads of 64, 8 layers; input [N*64, 1024] (rows are tokens, batch-major),
// output [N*64, 1024]. Each layer:
//   q, k, v  = x W_{q,k,v} + b                 (matmul + bias add)
//   heads    = reshape [N,S,h,d], transpose to [N,h,S,d] (k: [N,h,d,S])
//   p        = softmax((q k) * 1/sqrt(d), last axis)
//   ctx      = transpose(p v) back, reshape [N*S, H]
//   x1       = ctx W_o + b_o + x               (residual)
//   x2       = relu(x1 W_1 + b_1) W_2 + b_2 + x1  (feed-forward, 4H)
// 27 operators per layer. Simplifications, stated honestly: no layer
// normalisation (1/sqrt(var + eps) is not expressible exactly with the
// declared operators, so it is left out rather than approximated), and relu
// instead of GELU in the feed-forward block (no GELU operator). TASO's own
// graph has neither softmax, biases, residuals nor the feed-forward block.
#include <cmath>

#include "tsopt/zoo/common.hpp"

namespace tsopt::zoo {

inline graph bert(const options& o = {}) {
    net n(o);
    const int H = n.ch(1024), S = n.len(64), heads = std::max(1, 16 / o.width_div), layers = n.reps(8), B = o.batch;
    if (H % heads != 0)
        throw error("zoo::bert: hidden size " + std::to_string(H) + " does not split into " + std::to_string(heads) +
                    " heads; choose a width_div that divides 16");
    const int d = H / heads;
    auto& g = n.g;
    value x = g.input("data", shape{B * S, H});
    for (int l = 0; l < layers; ++l) {
        std::string L = idx("layer", l);
        auto to_heads = [&](value t, const std::string& nm, bool keys) {
            value r = g.reshape(t, shape{B, S, heads, d}, nm + ".reshape");
            return keys ? g.transpose(r, {0, 2, 3, 1}, nm + ".transpose") : g.transpose(r, {0, 2, 1, 3}, nm + ".transpose");
        };
        value q = to_heads(n.dense(x, L + ".attention.query", H), L + ".attention.query", false);
        value k = to_heads(n.dense(x, L + ".attention.key", H), L + ".attention.key", true);
        value v = to_heads(n.dense(x, L + ".attention.value", H), L + ".attention.value", false);
        value scores = g.matmul(q, k, {}, L + ".attention.scores");
        value scale = n.constant(L + ".attention.scale", shape{1}, 1.f / std::sqrt(static_cast<float>(d)));
        value probs = g.softmax(g.smul(scores, scale, L + ".attention.scaled"), 3, L + ".attention.softmax");
        value ctx = g.matmul(probs, v, {}, L + ".attention.context");
        ctx = g.transpose(ctx, {0, 2, 1, 3}, L + ".attention.context.transpose");
        ctx = g.reshape(ctx, shape{B * S, H}, L + ".attention.context.reshape");
        value a = n.dense(ctx, L + ".attention.output", H);
        x = g.ewadd(a, x, L + ".attention.residual");
        value f = n.dense(x, L + ".intermediate", 4 * H, true, relu);
        f = n.dense(f, L + ".output", H);
        x = g.ewadd(f, x, L + ".output.residual");
    }
    return n.finish({x});
}

}  // namespace tsopt::zoo
