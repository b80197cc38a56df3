#pragma once
// The reference backend: executes any graph with the operators' reference
// semantics (simple loops, no speed goal). It defines the truth every
// optimized graph and every other backend is checked against.
//
// Image layouts are executed for real: a rank-4 value whose producer's
// out_layout is NHWC is held in NHWC order (its tensor's shape is the
// physical [N, H, W, C]), and operators computing in NHWC (rewrite/layout.hpp:
// conv2d, pools, activations, ewadd/ewmul, concat) read and write such
// buffers (their arithmetic is the declaration's, on NCHW copies), so a wrong
// layout decision or a missing conversion shows up as a wrong result, not as
// nothing. A `reorder` node permutes the buffer. An
// operator reading a value in the other layout converts it on the fly (the
// implicit conversion other backends insert). Inputs are given and outputs
// returned in NCHW. Column-major matrices are a cost-model matter only and
// are held row-major.
#include <functional>
#include <map>

#include "tsopt/backend/backend.hpp"

namespace tsopt::backend {

namespace ref_layout {

inline tensor<float> permute4(const tensor<float>& t, const int (&perm)[4]) {
    const shape& s = t.shape;
    shape o{s[perm[0]], s[perm[1]], s[perm[2]], s[perm[3]]};
    tensor<float> r(o);
    auto st = strides_of(s);
    std::int64_t k = 0;
    for (std::int64_t a = 0; a < o[0]; ++a)
        for (std::int64_t b = 0; b < o[1]; ++b)
            for (std::int64_t c = 0; c < o[2]; ++c)
                for (std::int64_t d = 0; d < o[3]; ++d)
                    r[k++] = t[a * st[perm[0]] + b * st[perm[1]] + c * st[perm[2]] + d * st[perm[3]]];
    return r;
}
inline tensor<float> to_nhwc(const tensor<float>& nchw) { return permute4(nchw, {0, 2, 3, 1}); }
inline tensor<float> to_nchw(const tensor<float>& nhwc) { return permute4(nhwc, {0, 3, 1, 2}); }

// Whether node n computes in NHWC (an image operator asked for NHWC output).
inline bool computes_nhwc(const node& n) {
    return n.kind == node_kind::op && !n.is_op(spec::op_kind::reorder) && n.out_layout == spec::layout::nhwc &&
           n.shapes[0].rank == 4;
}
// Whether a value produced by node p is held in NHWC order (graph inputs and
// weights are given in NCHW and held so).
inline bool held_nhwc(const node& p, int output) {
    return p.kind == node_kind::op && p.out_layout == spec::layout::nhwc && p.shapes[static_cast<std::size_t>(output)].rank == 4;
}

// Runs an NHWC-computing operator on its inputs converted to NCHW, with the
// declaration's own semantics, and returns the result in NHWC order: the
// values are held as the layout says (a missing conversion elsewhere still
// shows up as a wrong result) while the arithmetic is the spec's, not a
// second kernel restating it in another memory order.
inline tensor<float> run_nhwc(const node& n, std::span<const tensor<float>* const> nchw_in) {
    if (spec::decl(n.op).layouts != spec::image_layouts)
        throw error(n.describe() + ": asks for an NHWC output, but " + std::string(spec::name(n.op)) +
                    " has no NHWC kernel (only operators declaring image layouts do)");
    return to_nhwc(spec::evaluate<float>(n.op, n.params, nchw_in)[0]);
}

}  // namespace ref_layout

class reference {
public:
    static constexpr std::string_view name = "reference";

    // Implementations for opaque operators, by type name (optional).
    using opaque_fn = std::function<std::vector<tensor<float>>(const node&, std::span<const tensor<float>* const>)>;
    std::map<std::string, opaque_fn, std::less<>> opaque_impls;

    std::vector<tensor<float>> execute(const graph& g, std::span<const tensor<float>> in) const {
        check_inputs(g, in);
        std::vector<std::vector<tensor<float>>> vals(g.size());
        std::vector<int> uses(g.size(), 0);
        for (const node& n : g.nodes)
            for (value v : n.inputs) ++uses[static_cast<std::size_t>(v.node)];
        for (value v : g.outputs) ++uses[static_cast<std::size_t>(v.node)];
        std::vector<std::size_t> input_pos(g.size(), 0);
        for (std::size_t i = 0, k = 0; i < g.size(); ++i)
            if (g.nodes[i].kind == node_kind::input) input_pos[i] = k++;
        namespace L = ref_layout;
        for (std::size_t i : g.topological_order()) {
            const node& n = g.nodes[i];
            std::vector<const tensor<float>*> args;
            std::vector<bool> nhwc;
            for (value v : n.inputs) {
                args.push_back(&vals[static_cast<std::size_t>(v.node)][static_cast<std::size_t>(v.output)]);
                nhwc.push_back(L::held_nhwc(g.at(v), v.output));
            }
            // Inputs held NHWC, converted for an operator computing in NCHW.
            std::vector<tensor<float>> logical;
            logical.reserve(args.size());
            auto nchw_args = [&] {
                auto a = args;
                for (std::size_t s = 0; s < a.size(); ++s)
                    if (nhwc[s]) { logical.push_back(L::to_nchw(*a[s])); a[s] = &logical.back(); }
                return a;
            };
            switch (n.kind) {
                case node_kind::input: vals[i] = {in[input_pos[i]]}; break;
                case node_kind::weight: vals[i] = {*n.data}; break;
                case node_kind::op:
                    if (n.is_op(spec::op_kind::reorder)) {
                        const bool to = L::held_nhwc(n, 0);
                        vals[i] = {to == nhwc[0] ? *args[0] : to ? L::to_nhwc(*args[0]) : L::to_nchw(*args[0])};
                        break;
                    }
                    if (L::computes_nhwc(n)) { vals[i] = {L::run_nhwc(n, nchw_args())}; break; }
                    vals[i] = spec::evaluate<float>(n.op, n.params, nchw_args());
                    break;
                case node_kind::opaque: {
                    auto it = opaque_impls.find(n.opaque->type);
                    if (it == opaque_impls.end())
                        throw error(n.describe() + ": the reference backend has no implementation for opaque operator '" +
                                    n.opaque->type + "'");
                    vals[i] = it->second(n, nchw_args());
                    break;
                }
            }
            // Free inputs whose last consumer has run.
            for (value v : n.inputs)
                if (--uses[static_cast<std::size_t>(v.node)] == 0) vals[static_cast<std::size_t>(v.node)].clear();
        }
        std::vector<tensor<float>> out;
        for (value v : g.outputs) {
            const auto& t = vals[static_cast<std::size_t>(v.node)][static_cast<std::size_t>(v.output)];
            out.push_back(L::held_nhwc(g.at(v), v.output) ? L::to_nchw(t) : t);
        }
        return out;
    }
};
static_assert(executor<reference>);

// Random inputs for a graph (uniform in [-1, 1]), in execute() order.
inline std::vector<tensor<float>> random_inputs(const graph& g, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<tensor<float>> r;
    for (value v : g.inputs()) r.push_back(random_float(g.shape_of(v), rng));
    return r;
}

}  // namespace tsopt::backend
