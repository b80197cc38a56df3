#pragma once
// The reference backend: executes any graph with the operators' reference
// semantics (simple loops, no speed goal). It defines the truth every
// optimized graph and every other backend is checked against.
//
// Image layouts are executed for real: a rank-4 value whose producer's
// out_layout is NHWC is held in NHWC order (its tensor's shape is the
// physical [N, H, W, C]), and operators computing in NHWC (rewrite/layout.hpp:
// conv2d, pools, activations, ewadd/ewmul, concat) run NHWC kernels on such
// buffers, so a wrong layout decision or a missing conversion shows up as a
// wrong result, not as nothing. A `reorder` node permutes the buffer. An
// operator reading a value in the other layout converts it on the fly (the
// implicit conversion other backends insert). Inputs are given and outputs
// returned in NCHW. Column-major matrices are a cost-model matter only and
// are held row-major.
#include <functional>
#include <map>

#include "tsopt/backend/backend.hpp"

namespace tsopt::backend {

namespace ref_layout {

// Axis of the NHWC buffer holding logical NCHW axis a.
constexpr int physical_axis(int a) { constexpr int m[4] = {0, 3, 1, 2}; return m[a]; }

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

// conv2d on an NHWC input into an NHWC output; the filter stays [Cout, Cin/g, kh, kw].
inline tensor<float> conv2d_nhwc(const spec::op_params& p, const tensor<float>& x, const tensor<float>& w, const shape& out_nchw) {
    using namespace spec::conv2d_p;
    const std::int64_t N = x.shape[0], H = x.shape[1], W = x.shape[2], C = x.shape[3];
    const std::int64_t CO = w.shape[0], CI = w.shape[1], KH = w.shape[2], KW = w.shape[3];
    const std::int64_t OH = out_nchw[2], OW = out_nchw[3], COG = CO / (C / CI);
    const std::int64_t sh = p[stride_h], sw = p[stride_w], dh = p[dil_h], dw = p[dil_w];
    auto pm = static_cast<spec::pad_mode>(p[pad]);
    const std::int64_t ph = spec::detail::window_pad(KH, dh, pm), pw = spec::detail::window_pad(KW, dw, pm);
    tensor<float> o(shape{N, OH, OW, CO});
    for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t oy = 0; oy < OH; ++oy)
            for (std::int64_t ox = 0; ox < OW; ++ox)
                for (std::int64_t co = 0; co < CO; ++co) {
                    const std::int64_t g = co / COG;
                    float acc = 0;
                    for (std::int64_t ky = 0; ky < KH; ++ky) {
                        const std::int64_t iy = oy * sh - ph + ky * dh;
                        if (iy < 0 || iy >= H) continue;
                        for (std::int64_t kx = 0; kx < KW; ++kx) {
                            const std::int64_t ix = ox * sw - pw + kx * dw;
                            if (ix < 0 || ix >= W) continue;
                            const float* ip = x.data.data() + ((n * H + iy) * W + ix) * C + g * CI;
                            for (std::int64_t ci = 0; ci < CI; ++ci) acc += w[((co * CI + ci) * KH + ky) * KW + kx] * ip[ci];
                        }
                    }
                    o[((n * OH + oy) * OW + ox) * CO + co] = spec::detail::activate(acc, p[act]);
                }
    return o;
}

// avgpool (padding counted) / maxpool on NHWC.
inline tensor<float> pool_nhwc(const spec::op_params& p, bool is_max, const tensor<float>& x, const shape& out_nchw) {
    using namespace spec::pool_p;
    const std::int64_t N = x.shape[0], H = x.shape[1], W = x.shape[2], C = x.shape[3];
    const std::int64_t OH = out_nchw[2], OW = out_nchw[3], KH = p[kh], KW = p[kw];
    auto pm = static_cast<spec::pad_mode>(p[pad]);
    const std::int64_t ph = spec::detail::window_pad(KH, 1, pm), pw = spec::detail::window_pad(KW, 1, pm);
    const float inv = scalar_traits<float>::reciprocal(KH * KW);
    tensor<float> o(shape{N, OH, OW, C});
    for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t oy = 0; oy < OH; ++oy)
            for (std::int64_t ox = 0; ox < OW; ++ox)
                for (std::int64_t c = 0; c < C; ++c) {
                    float acc = 0;
                    bool first = true;
                    for (std::int64_t ky = 0; ky < KH; ++ky) {
                        const std::int64_t iy = oy * p[stride_h] - ph + ky;
                        if (iy < 0 || iy >= H) continue;
                        for (std::int64_t kx = 0; kx < KW; ++kx) {
                            const std::int64_t ix = ox * p[stride_w] - pw + kx;
                            if (ix < 0 || ix >= W) continue;
                            const float v = x[((n * H + iy) * W + ix) * C + c];
                            if (is_max) { acc = first ? v : std::max(acc, v); first = false; }
                            else acc += v;
                        }
                    }
                    if (!is_max) acc *= inv;
                    o[((n * OH + oy) * OW + ox) * C + c] = spec::detail::activate(acc, p[act]);
                }
    return o;
}

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

// Runs an NHWC-computing operator. `in` are its inputs as held; `nhwc[s]`
// says which are held NHWC. Returns the NHWC result.
inline tensor<float> run_nhwc(const node& n, std::span<const tensor<float>* const> in, const std::vector<bool>& nhwc) {
    using K = spec::op_kind;
    if (spec::decl(n.op).layouts != spec::image_layouts)
        throw error(n.describe() + ": asks for an NHWC output, but " + std::string(spec::name(n.op)) +
                    " has no NHWC kernel (only operators declaring image layouts do)");
    // Activations held NHWC; anything else (a rank < 4 broadcast operand, a
    // conv filter) as it is.
    std::vector<tensor<float>> own;
    own.reserve(in.size());
    std::vector<const tensor<float>*> x;
    for (std::size_t s = 0; s < in.size(); ++s) {
        const bool activation = !(n.is_op(K::conv2d) && s == 1);
        if (!activation && nhwc[s]) {
            own.push_back(to_nchw(*in[s]));  // a filter computed in NHWC: the kernel reads [Cout, Cin/g, kh, kw]
            x.push_back(&own.back());
        } else if (activation && in[s]->shape.rank == 4 && !nhwc[s]) {
            own.push_back(to_nhwc(*in[s]));
            x.push_back(&own.back());
        } else if (activation && in[s]->shape.rank < 4 && (n.is_op(K::ewadd) || n.is_op(K::ewmul))) {
            // Broadcasting aligns trailing axes: lift to rank 4 first, then permute.
            shape r4;
            for (int k = in[s]->shape.rank; k < 4; ++k) r4.push_back(1);
            for (auto d : in[s]->shape) r4.push_back(d);
            own.push_back(to_nhwc(tensor<float>(r4, in[s]->data)));
            x.push_back(&own.back());
        } else {
            x.push_back(in[s]);
        }
    }
    switch (n.op) {
        case K::conv2d: return conv2d_nhwc(n.params, *x[0], *x[1], n.shapes[0]);
        case K::avgpool: return pool_nhwc(n.params, false, *x[0], n.shapes[0]);
        case K::maxpool: return pool_nhwc(n.params, true, *x[0], n.shapes[0]);
        case K::concat: {
            spec::op_params p = n.params;
            p[spec::concat_p::axis] = physical_axis(p[spec::concat_p::axis]);
            return std::move(spec::evaluate<float>(K::concat, p, x)[0]);
        }
        default:
            // Element-wise: the same computation on the permuted buffers.
            return std::move(spec::evaluate<float>(n.op, n.params, x)[0]);
    }
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
                    if (L::computes_nhwc(n)) { vals[i] = {L::run_nhwc(n, args, nhwc)}; break; }
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
