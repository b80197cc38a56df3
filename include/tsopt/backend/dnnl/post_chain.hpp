#pragma once
// The operators after a convolution that run inside it: its post-ops
// (conv2d.hpp) or the epilogue of its Winograd output transform
// (winograd.hpp).
//
// The single-reader chain after a convolution of per-channel constant adds /
// multiplies ([C,1,1] or [1,C,1,1], e.g. the bias batchnorm folding leaves),
// relu / sigmoid / tanh, opaque operators that are one eltwise (ONNX Clip,
// HardSwish: lowering::eltwise_of), and one add of a full-size tensor computed earlier
// (a residual, or the other branch of a sum) runs as the convolution's
// post-ops: one primitive instead of a pass over the whole tensor per
// operator. The full-size add is oneDNN's sum post-op: the convolution
// accumulates into that tensor's buffer, so it is taken only where nothing
// else reads the buffer. (Separately, a broadcast add on the convolution's
// blocked output only finds oneDNN's reference kernel, which is two orders of
// magnitude slower.)
//
// After an elementwise operator (add, multiply, relu / sigmoid / tanh, smul
// by a constant) the same kind of chain runs as its post-ops, with adds and
// multiplies by any tensor computed earlier (full-size or broadcast, not
// only constants), and subtractions of one whose negation was left to the
// sum (eltwise.hpp, leave_negation_to_sum): an RNN cell's gates, tens of
// tiny operators per time step, become a few primitives (fused_elementwise).
#include "tsopt/backend/dnnl/plan.hpp"

namespace tsopt::backend::dnnl_impl {

struct post_chain {
    enum class kind { eltwise, binary, sum };
    std::vector<std::size_t> nodes;                     // absorbed, in order
    std::vector<std::pair<dn::algorithm, tref>> ops;    // per node: eltwise alg, binary alg + operand, or the sum's operand
    std::vector<kind> kinds;
    std::vector<std::pair<float, float>> eltwise_ab;    // per node: an eltwise's alpha, beta
    std::vector<std::vector<std::size_t>> covered;      // per node: the nodes its eltwise form covers (eltwise_form::covers)

    std::optional<std::size_t> sum() const {
        for (std::size_t k = 0; k < kinds.size(); ++k)
            if (kinds[k] == kind::sum) return k;
        return std::nullopt;
    }
    void truncate(std::size_t k) {
        nodes.resize(k);
        ops.resize(k);
        kinds.resize(k);
        eltwise_ab.resize(k);
        covered.resize(k);
    }
};

// Whether value `v` (read by the ewadd `reader`) may be overwritten by a sum
// post-op: its readers other than the add ran before (a residual branch's
// input, which the block's first convolution read). Consecutive identity
// blocks then accumulate into one buffer, block after block.
inline bool can_accumulate_into(const lowering& L, value v, std::size_t reader) {
    const auto n = static_cast<std::size_t>(v.node);
    if (L.at(n).kind != node_kind::op || L.constant[n]) return false;
    const auto& outs = L.vals[n];
    if (static_cast<std::size_t>(v.output) >= outs.size()) return false;
    const tref& r = outs[static_cast<std::size_t>(v.output)];
    if (r.buf < 0 || r.offset != 0 || L.persistent(r)) return false;
    // Dead once the add has read it: every value in the buffer (v, the other
    // outputs of its node, the stages of v's fused primitive, an earlier
    // value accumulated into it) computed by an operator, not a graph output,
    // and read by nothing that is still to be lowered.
    for (std::size_t k = 0; k < L.vals.size(); ++k) {
        if (std::none_of(L.vals[k].begin(), L.vals[k].end(), [&](const tref& t) { return t.buf == r.buf; })) continue;
        if (L.at(k).kind != node_kind::op || L.is_graph_output(k)) return false;
        for (const auto& [c32, slot] : L.consumers[k]) {
            const auto c = static_cast<std::size_t>(c32);
            if (c != reader && L.vals[c].empty() && !L.absorbed[c]) return false;
        }
    }
    return true;
}

// The reader of node `cur` that can continue a post-op chain, with the input
// slot it reads: cur's single reader (x + x reads it twice), or an opaque
// eltwise form whose covered nodes are all of cur's other readers (GELU
// reads x twice).
inline std::optional<std::pair<std::size_t, int>> chain_reader(const lowering& L, std::size_t cur) {
    const auto& readers = L.consumers[cur];
    if (!readers.empty() && std::all_of(readers.begin(), readers.end(), [&](const auto& o) { return o.first == readers[0].first; }))
        return std::pair{static_cast<std::size_t>(readers[0].first), static_cast<int>(readers[0].second)};
    for (const auto& [r32, slot] : readers) {
        const auto r = static_cast<std::size_t>(r32);
        if (slot != 0) continue;
        const auto form = L.eltwise_of(r);
        if (!form || form->covers.empty()) continue;
        const bool inside = std::all_of(readers.begin(), readers.end(), [&](const auto& other) {
            const auto o = static_cast<std::size_t>(other.first);
            return o == r || std::find(form->covers.begin(), form->covers.end(), o) != form->covers.end();
        });
        if (inside) return std::pair{r, 0};
    }
    return std::nullopt;
}

// oneDNN takes at most 32 post-ops (post_ops_limit); a recurrent state's
// chain runs on through every time step.
inline constexpr std::size_t max_post_ops = 32;

// The operators after node i (C output channels) that can run as its post-ops;
// `binary`: per-channel adds / multiplies too (not on grouped convolutions:
// oneDNN 2.6 ran a 4-channel-per-group conv with a per-channel binary
// post-op 20x slower than without, under the same kernel name); `bias`: a
// per-channel add right after the convolution, which it takes as its bias
// (not a post-op, so grouped convolutions too).
// `runtime_operands`: adds / multiplies by any tensor already computed whose
// extents broadcast to the output (full-size in any layout, or row-major),
// smul by a constant scalar, no sum (elementwise producers).
inline post_chain fusible_chain(lowering& L, std::size_t i, std::int64_t C, bool binary, bool bias, bool runtime_operands = false) {
    post_chain c;
    std::size_t cur = i;
    const shape& out = L.at(i).shapes[0];
    while (L.at(cur).num_outputs() == 1 && !L.is_graph_output(cur) && c.nodes.size() < max_post_ops) {
        const auto next = chain_reader(L, cur);
        if (!next) break;
        const auto [nx, slot] = *next;
        const node& n = L.at(nx);
        // A layout a later operator asks for (NHWC, say, from the search's
        // layout moves) does not stop the chain: layouts are where values
        // are stored, and every reader converts what it gets, so the fused
        // result keeps node i's layout. Stopping there, a layout move on a
        // convolution left its bias, ReLU6 and residual add as steps of
        // their own (MobileNetV2: 55 -> 81 steps, 0.93x of the original).
        if ((n.kind != node_kind::op && n.kind != node_kind::opaque) || n.shapes[0] != out) break;
        std::pair<float, float> ab{0.f, 0.f};
        std::vector<std::size_t> covered;
        if (registered_type(n)) {
            auto form = slot == 0 ? L.eltwise_of(nx) : std::nullopt;
            if (!form) break;
            c.ops.push_back({form->alg, tref{}});
            c.kinds.push_back(post_chain::kind::eltwise);
            ab = {form->alpha, form->beta};
            covered = std::move(form->covers);
        } else if ((n.is_op(spec::op_kind::ewadd) || n.is_op(spec::op_kind::ewmul)) && n.inputs.size() == 2 &&
                   n.inputs[0] == n.inputs[1]) {
            // x + x = 2x and x * x = x^2, exactly: one eltwise post-op (a
            // NASNet cell adds a pool to itself once its twin is merged:
            // rewrite::merge_duplicates).
            const bool add = n.is_op(spec::op_kind::ewadd);
            c.ops.push_back({add ? dn::algorithm::eltwise_linear : dn::algorithm::eltwise_square, tref{}});
            c.kinds.push_back(post_chain::kind::eltwise);
            ab = {add ? 2.f : 0.f, 0.f};
        } else if (n.is_op(spec::op_kind::relu) || n.is_op(spec::op_kind::sigmoid) || n.is_op(spec::op_kind::tanh)) {
            const int act = n.is_op(spec::op_kind::relu) ? 1 : n.is_op(spec::op_kind::sigmoid) ? 2 : 3;
            c.ops.push_back({*act_algorithm(act), tref{}});
            c.kinds.push_back(post_chain::kind::eltwise);
        } else if (runtime_operands && n.is_op(spec::op_kind::smul) && slot == 0 && L.const_tensor(nx, 1)) {
            c.ops.push_back({dn::algorithm::eltwise_linear, tref{}});
            c.kinds.push_back(post_chain::kind::eltwise);
            ab = {(*L.const_tensor(nx, 1))[0], 0.f};
        } else if (runtime_operands && (n.is_op(spec::op_kind::ewadd) || n.is_op(spec::op_kind::ewmul)) && n.inputs.size() == 2 &&
                   n.inputs[0] != n.inputs[1]) {
            const int other = slot == 0 ? 1 : 0;
            // A negation left to this sum: the post-op subtracts its operand.
            const auto negation = n.is_op(spec::op_kind::ewadd) ? L.negation(nx, other) : std::nullopt;
            if (!negation && !L.lowered(nx, other)) break;
            const dims full = L.out_dims(nx), od = pad_front(L.in_dims(nx, other), full.size());
            tref b = negation ? L.in(*negation, 0) : L.in(nx, other);
            bool broadcasts = od.size() == full.size();
            for (std::size_t d = 0; broadcasts && d < od.size(); ++d) broadcasts = od[d] == full[d] || od[d] == 1;
            if (!broadcasts) break;
            if (b.md.get_dims() != od) {  // broadcast, or fewer axes
                if (!is_plain(b.md)) break;
                b = b.as(plain_md(od));
            }
            c.ops.push_back({negation ? dn::algorithm::binary_sub
                             : n.is_op(spec::op_kind::ewadd) ? dn::algorithm::binary_add
                                                             : dn::algorithm::binary_mul,
                             b});
            c.kinds.push_back(post_chain::kind::binary);
        } else if ((binary || (bias && c.nodes.empty() && n.is_op(spec::op_kind::ewadd))) &&
                   (n.is_op(spec::op_kind::ewadd) || n.is_op(spec::op_kind::ewmul)) && n.inputs.size() == 2 &&
                   n.inputs[0] != n.inputs[1]) {
            const int other = slot == 0 ? 1 : 0;
            if (!L.lowered(nx, other)) break;
            if (binary && n.is_op(spec::op_kind::ewadd) && L.in_shape(nx, other) == out && !c.sum() &&
                can_accumulate_into(L, n.inputs[static_cast<std::size_t>(other)], nx)) {
                c.ops.push_back({dn::algorithm::undef, L.in(nx, other)});
                c.kinds.push_back(post_chain::kind::sum);
            } else {
                if (!L.is_const(nx, other)) break;
                const dims od = pad_front(L.in_dims(nx, other), 4);
                if (L.in_shape(nx, other).rank > 4 || od != dims{1, C, 1, 1}) break;
                tref b = L.plain(L.in(nx, other), od, nx);
                if (!L.persistent(b)) break;
                c.ops.push_back({n.is_op(spec::op_kind::ewadd) ? dn::algorithm::binary_add : dn::algorithm::binary_mul, b});
                c.kinds.push_back(post_chain::kind::binary);
            }
        } else
            break;
        c.nodes.push_back(nx);
        c.eltwise_ab.push_back(ab);
        cur = covered.empty() ? nx : covered.back();
        c.covered.push_back(std::move(covered));
    }
    return c;
}

inline bool is_pooling(const node& n) { return n.is_op(spec::op_kind::maxpool) || n.is_op(spec::op_kind::avgpool); }

// The operators whose steps run the operators after them as post-ops,
// computed operands included (lower_conv2d, matmul, pooling).
inline bool heads_chains(const node& n) {
    return n.is_op(spec::op_kind::conv2d) || n.is_op(spec::op_kind::matmul) || is_pooling(n);
}

// The step node whose post-op chain computes node o on its way to node
// `meets`: one that heads chains, from which o is reached through operators
// with constant operands or none, if there is one.
inline std::optional<std::size_t> chain_head_reaching(const lowering& L, std::size_t o, std::size_t meets) {
    using K = spec::op_kind;
    std::size_t c = o;
    for (std::size_t k = 0; k < max_post_ops && !heads_chains(L.at(c)); ++k) {
        const node& n = L.at(c);
        if (n.kind != node_kind::op) return std::nullopt;
        if (n.is_op(K::relu) || n.is_op(K::sigmoid) || n.is_op(K::tanh) || n.is_op(K::smul)) {
            c = static_cast<std::size_t>(n.inputs[0].node);
        } else if ((n.is_op(K::ewadd) || n.is_op(K::ewmul)) && n.inputs.size() == 2) {
            const bool c0 = L.constant[static_cast<std::size_t>(n.inputs[0].node)], c1 = L.constant[static_cast<std::size_t>(n.inputs[1].node)];
            if (c0 == c1) return std::nullopt;
            c = static_cast<std::size_t>(n.inputs[c0 ? 1 : 0].node);
        } else {
            return std::nullopt;
        }
    }
    if (!heads_chains(L.at(c))) return std::nullopt;
    for (std::size_t cur = c, k = 0; k < max_post_ops; ++k) {
        const auto next = chain_reader(L, cur);
        if (!next) return std::nullopt;
        if (next->first == meets) return c;
        cur = next->first;
    }
    return std::nullopt;
}

// The operator whose output node i's step would like computed before it is
// lowered: the other operand of the first add or multiply in the chain after
// i that reads a value not yet placed (`placed`, compile's run order).
// fusible_chain fuses such an add only when that operand is there, so the
// run order puts i aside until it is (graph::run_order): a residual add
// after a convolution then runs inside it whichever branch the order took
// first. `takes_operand(h)`: whether head h's step can add a full-size
// operand another step computes (Winograd's cannot).
template <class TakesOperand>
std::optional<std::size_t> chain_operand_awaited(const lowering& L, std::size_t i, const std::vector<bool>& placed,
                                                 const TakesOperand& takes_operand) {
    using K = spec::op_kind;
    auto elementwise = [](const node& n) {  // the built-in operators a chain runs as post-ops
        return n.is_op(K::relu) || n.is_op(K::sigmoid) || n.is_op(K::tanh) || n.is_op(K::smul) || n.is_op(K::ewadd) ||
               n.is_op(K::ewmul);
    };
    const node& head = L.at(i);
    const bool chains = head.kind == node_kind::op ? heads_chains(head) || elementwise(head) : L.eltwise_of(i).has_value();
    if (!chains || L.constant[i] || head.num_outputs() != 1) return std::nullopt;
    const bool conv = head.is_op(K::conv2d);
    bool summed = false;
    std::size_t cur = i;
    for (std::size_t k = 0; k < max_post_ops && L.at(cur).num_outputs() == 1 && !L.is_graph_output(cur); ++k) {
        const auto next = chain_reader(L, cur);
        if (!next) break;
        const auto [nx, slot] = *next;
        const node& n = L.at(nx);
        if ((n.kind != node_kind::op && n.kind != node_kind::opaque) || n.shapes[0] != head.shapes[0]) break;
        cur = nx;
        if (registered_type(n)) {
            const auto form = slot == 0 ? L.eltwise_of(nx) : std::nullopt;
            if (!form) break;
            if (!form->covers.empty()) cur = form->covers.back();
        } else if ((n.is_op(K::ewadd) || n.is_op(K::ewmul)) && n.inputs.size() == 2 && n.inputs[0] != n.inputs[1]) {
            // (A negation left to the sum is placed after what it negates.)
            const auto o = static_cast<std::size_t>(n.inputs[slot == 0 ? 1 : 0].node);
            if (L.constant[o]) continue;
            // Whether head h's step can take this add or multiply, the
            // other operand computed elsewhere: a convolution adds one such
            // operand, of its output's size, as its sum post-op; Winograd's
            // none (fusible_chain). Waiting for another would gain nothing.
            auto fuses_here = [&](std::size_t h) {
                if (!L.at(h).is_op(K::conv2d)) return true;
                return n.is_op(K::ewadd) && L.in_shape(nx, 0) == n.shapes[0] && L.in_shape(nx, 1) == n.shapes[0] && takes_operand(h);
            };
            if (conv) {  // one full-size operand per convolution (its sum post-op)
                if (summed || !fuses_here(i)) break;
                summed = true;
            }
            if (!placed[o]) {
                // Two chains that meet at this add or multiply (two branches
                // summed) would each wait for the other's value, and go only
                // once nothing else is ready, their inputs gone from the
                // caches (NASNet's separable branches). One waits and fuses
                // the meeting, the other runs with its chain cut before it:
                // one whose step can take the other's value; a convolution
                // or matmul before a pooling (which takes computed operands
                // only where its source is not row-major, pool.hpp); else
                // the later head.
                const auto other = chain_head_reaching(L, o, nx);
                const bool pools = is_pooling(head), other_pools = other && is_pooling(L.at(*other));
                if (other && fuses_here(*other) && (pools != other_pools ? pools : *other > i)) return std::nullopt;
                return o;
            }
            // A convolution adds a full-size operand as a sum post-op,
            // accumulating into its buffer: only once its other readers ran
            // (can_accumulate_into). Where another reader is the same kind
            // of sum after another convolution (NASNet adds one pooling to
            // two branches), each would wait for the other: the later
            // convolution waits, the earlier leaves its add to a step.
            if (conv)
                for (const auto& [r32, r_slot] : L.consumers[o]) {
                    const auto r = static_cast<std::size_t>(r32);
                    if (r == nx || placed[r]) continue;
                    const node& rn = L.at(r);
                    if (rn.is_op(K::ewadd) && rn.inputs.size() == 2 && rn.inputs[0] != rn.inputs[1]) {
                        const auto p = static_cast<std::size_t>(rn.inputs[static_cast<std::size_t>(r_slot) == 0 ? 1 : 0].node);
                        const auto rival = chain_head_reaching(L, p, r);
                        if (rival && *rival > i && L.at(*rival).is_op(K::conv2d) && takes_operand(*rival)) continue;
                    }
                    return r;
                }
        } else if (!elementwise(n)) {
            break;
        }
    }
    return std::nullopt;
}

// The chain's operators run inside node i's step, whose output y is their value.
inline void absorb_chain(lowering& L, const post_chain& c, std::size_t i, const tref& y) {
    for (std::size_t k = 0; k < c.nodes.size(); ++k) {
        L.absorb(c.nodes[k], i, y);
        for (std::size_t n : c.covered[k]) L.absorb(n, i, y);
        if (c.kinds[k] == post_chain::kind::binary)
            for (int s = 0; s < 2; ++s)
                if (auto negation = L.negation(c.nodes[k], s)) L.fuse(*negation, i);
    }
}

// Chain operators [from, end) as post-ops.
inline void append_post_ops(dn::post_ops& po, const post_chain& c, std::size_t from, std::size_t end) {
    for (std::size_t k = from; k < end; ++k) switch (c.kinds[k]) {
            case post_chain::kind::eltwise: po.append_eltwise(c.ops[k].first, c.eltwise_ab[k].first, c.eltwise_ab[k].second); break;
            case post_chain::kind::binary: po.append_binary(c.ops[k].first, c.ops[k].second.md); break;
            case post_chain::kind::sum: po.append_sum(1.f); break;
        }
}
// The run-time operands of chain operators [from, end) that are binary
// post-ops: post-op k - from + `first` reads chain operator k's.
inline void add_post_op_args(std::vector<std::pair<int, tref>>& args, const post_chain& c, std::size_t from, int first) {
    for (std::size_t k = from; k < c.nodes.size(); ++k)
        if (c.kinds[k] == post_chain::kind::binary)
            args.push_back({DNNL_ARG_ATTR_MULTIPLE_POST_OP(first + static_cast<int>(k - from)) | DNNL_ARG_SRC_1, c.ops[k].second});
}

// A step for node i: primitive `pd` (built by `make(attr)`) reading `args`,
// writing a fresh tensor, which it returns. `fuse`: with the elementwise
// chain after node i as post-ops (fusible_chain with run-time operands)
// where oneDNN runs the combination with the same kernel as `pd`; the
// chain's operators are absorbed (their value is the step's output), node
// i's value the caller sets.
template <class Prim, class PD, class Make>
tref fused_elementwise(lowering& L, std::size_t i, PD pd, const Make& make, std::vector<std::pair<int, tref>> args, std::string what,
                       bool fuse) {
    post_chain chain;
    if (fuse) chain = fusible_chain(L, i, 0, false, false, true);
    // A full-size operand in another layout than the output ends the chain:
    // oneDNN 3.2's pooling reads it as if it had the output's layout, under
    // the same kernel name (a channels-last pooling plus a row-major tensor
    // came out 30-40 % off; dnnl_ops_test "pooling post-ops in every layout").
    const dn::memory::desc dst = pd.dst_desc();
    for (std::size_t k = 0; k < chain.nodes.size(); ++k) {
        const dn::memory::desc& operand = chain.ops[k].second.md;
        if (chain.kinds[k] == post_chain::kind::binary && operand.get_dims() == dst.get_dims() && operand != dst) {
            chain.truncate(k);
            break;
        }
    }
    if (!chain.nodes.empty()) {
        try {
            dn::post_ops po;
            append_post_ops(po, chain, 0, chain.nodes.size());
            dn::primitive_attr at = L.attr();
            at.set_post_ops(po);
            auto fused = make(at);
            if (std::string_view(fused.impl_info_str()) == pd.impl_info_str()) pd = fused;
            else
                chain = {};
        } catch (const dn::error&) {  // more post-ops than it takes, or an operand it cannot read
            chain = {};
        }
    }
    tref y = L.fresh(pd.dst_desc());
    args.push_back({DNNL_ARG_DST, y});
    add_post_op_args(args, chain, 0, 0);
    if (!chain.nodes.empty()) what += " + " + std::to_string(chain.nodes.size()) + " fused";
    L.add<Prim>(i, pd, std::move(args), std::move(what));
    absorb_chain(L, chain, i, y);
    return y;
}

}  // namespace tsopt::backend::dnnl_impl
