#pragma once
// The host-only half of the cuDNN/cuBLAS backend: what a graph compiles to,
// decided without touching the GPU (so it is testable on any machine).
//
// A plan is
//   * a list of steps, each a plain description of one library call or kernel
//     (conv, pool, activation, gemm, binary, permute, copy2d, ...) over
//     buffer references, attached to one operator vertex of the graph's
//     operator DAG (parallel::operator_dag);
//   * a stream schedule over those vertices: one stream in topological order
//     (sequential plans), or Nimble's assignment (parallel::assign_streams)
//     with its cross-stream events (multi-stream plans);
//   * buffers: persistent ones (weights and constants folded at compile time,
//     uploaded once), dedicated ones (graph inputs and outputs), and arena
//     buffers whose offsets come from memory planning. Two arena buffers share
//     bytes only when every vertex touching one happens before (stream order +
//     events) the vertex writing the other, so sharing is safe under
//     concurrent streams too.
//
// Layouts. A value is stored in a physical layout: row-major (NCHW), col-major
// (last two axes swapped, TASO's matmul layouts) or NHWC. node.out_layout says
// how a node's output is stored, and the plan honours it: operators produce it
// natively where the library can (matmul: col-major through the transposed-
// operand trick; conv/pool: NHWC descriptors), otherwise a conversion
// (permute) follows. A consumer that cannot read a layout gets one conversion
// per (value, layout), attached to the producer's vertex so every consumer is
// ordered after it. A transpose swapping the last two axes of a value stored
// the other way round is a view (no step), as rewrite/layout.hpp prices it.
#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "tsopt/backend/backend.hpp"
#include "tsopt/backend/host_fallback.hpp"
#include "tsopt/backend/parallel/stream_assignment.hpp"

namespace tsopt::backend::cudnn_impl {

// ---- layouts ---------------------------------------------------------------

enum class phys : std::uint8_t { row = 0, col = 1, nhwc = 2 };

inline const char* to_string(phys p) { return p == phys::row ? "row-major" : p == phys::col ? "col-major" : "NHWC"; }

// The physical layout node.out_layout asks for, for a value of rank r
// (col-major needs rank >= 2, NHWC rank 4; otherwise row-major).
inline phys wanted(spec::layout l, int rank) {
    if (l == spec::layout::col_major && rank >= 2) return phys::col;
    if (l == spec::layout::nhwc && rank == 4) return phys::nhwc;
    return phys::row;
}

// Logical axis stored at physical axis k.
inline std::array<int, max_rank> phys_axes(phys p, int rank) {
    std::array<int, max_rank> a{};
    for (int k = 0; k < rank; ++k) a[static_cast<std::size_t>(k)] = k;
    if (p == phys::col && rank >= 2) std::swap(a[static_cast<std::size_t>(rank - 2)], a[static_cast<std::size_t>(rank - 1)]);
    if (p == phys::nhwc && rank == 4) a = {0, 2, 3, 1};
    return a;
}
inline shape phys_shape(const shape& logical, phys p) {
    auto ax = phys_axes(p, logical.rank);
    shape s;
    for (int k = 0; k < logical.rank; ++k) s.push_back(logical[ax[static_cast<std::size_t>(k)]]);
    return s;
}
// Element stride of each logical axis in a buffer stored in layout p.
inline std::array<std::int64_t, max_rank> logical_strides(const shape& logical, phys p) {
    shape ps = phys_shape(logical, p);
    auto pst = strides_of(ps);
    auto ax = phys_axes(p, logical.rank);
    std::array<std::int64_t, max_rank> st{};
    for (int k = 0; k < logical.rank; ++k) st[static_cast<std::size_t>(ax[static_cast<std::size_t>(k)])] = pst[static_cast<std::size_t>(k)];
    return st;
}

// ---- values, buffers, steps -------------------------------------------------

// One tensor as a step sees it: a buffer, the logical shape, the layout.
struct tref {
    int buf = -1;
    shape logical;
    phys layout = phys::row;
    std::int64_t elements() const { return logical.elements(); }
};

enum class buffer_kind : std::uint8_t { arena, persistent, input, output };

struct buffer {
    buffer_kind kind = buffer_kind::arena;
    std::size_t bytes = 0;
    std::size_t offset = 0;                      // arena: planned offset
    std::shared_ptr<const tensor<float>> data;   // persistent: host data uploaded once (physical order)
    int writer = -1;                             // arena: vertex whose step writes it first
    std::vector<int> touched;                    // arena: vertices whose steps read or write it (sorted, unique)
};

// Geometry shared by the strided kernels (mirrors kernels::strided, kept
// CUDA-free here).
struct walk {
    int rank = 0;
    std::array<std::int64_t, max_rank> dims{}, a{}, b{};
};

struct conv_step {
    tref x, w, y;
    int n, c, h, wd, k, kh, kw, oh, ow, pad_h, pad_w, sh, sw, dh, dw, groups;
    std::int32_t act;
};
struct pool_step {
    tref x, y;
    bool max;
    int kh, kw, sh, sw, ph, pw;
    std::int32_t act;
};
struct act_step {  // y = act(x), elementwise (in place allowed)
    tref x, y;
    std::int32_t act;
};
struct gemm_step {  // column-major cuBLAS call(s), see matmul.hpp
    tref a, b, c;   // a, b: cuBLAS's first and second operand
    bool trans_a, trans_b;
    std::int64_t m, n, k, lda, ldb, ldc;
    struct run {
        std::int64_t count, a_off, b_off, c_off, a_stride, b_stride, c_stride;
    };
    std::vector<run> runs;
    std::int32_t act;
};
struct binary_step {
    tref a, b, y;
    int op;      // kernels::add / kernels::mul
    bool flat;   // same shape and layout: no index arithmetic
    walk geom;
};
struct smul_step { tref x, s, y; };
struct batchnorm_step {
    tref x, scale, shift, y;
    std::int64_t c, inner;
};
struct permute_step {
    tref x, y;
    walk geom;  // dims: y's physical extents; a: x's stride per y physical axis
};
struct pad_step {
    tref x, y;
    std::int64_t outer, h, w, oh, ow, top, left;
};
struct copy2d_step {  // cudaMemcpy2DAsync, in elements
    tref src, dst;
    std::int64_t src_off, dst_off, width, height, src_pitch, dst_pitch;
};
struct softmax_step {
    tref x, y;
    std::int64_t outer, n, inner;
};
using backend::opaque_fn;
using backend::opaque_map;
struct host_step {  // copy to host, run there (cudaLaunchHostFunc), copy back
    std::vector<tref> ins, outs;  // row-major
    node copy;                    // the node, for the reference semantics and messages
    opaque_fn impl;               // opaque implementation, or empty: spec::evaluate
};

using step_body = std::variant<conv_step, pool_step, act_step, gemm_step, binary_step, smul_step, batchnorm_step,
                               permute_step, pad_step, copy2d_step, softmax_step, host_step>;

struct step {
    int vertex = -1;          // operator DAG vertex it runs with
    std::int32_t node = -1;   // graph node it belongs to
    bool conversion = false;  // a layout conversion, not the node's own work
    std::string what;
    step_body body;
};

struct plan_stats {
    std::size_t arena_bytes = 0;       // after memory planning
    std::size_t naive_bytes = 0;       // sum of every arena buffer
    std::size_t persistent_bytes = 0;  // weights and folded constants
    std::size_t io_bytes = 0;          // dedicated input and output buffers
    std::size_t steps = 0, conversions = 0, views = 0, host_steps = 0;
    std::size_t streams = 0, events = 0;
};

struct plan {
    bool multi_stream = false;
    parallel::op_dag dag;                 // vertices = operator nodes
    parallel::stream_schedule schedule;   // over dag vertices
    std::vector<std::vector<int>> vertex_steps;  // per vertex, its steps in launch order
    std::vector<step> steps;
    std::vector<buffer> bufs;
    std::vector<tref> inputs;   // in g.inputs() order (dedicated, row-major)
    std::vector<tref> outputs;  // in g.outputs order, row-major
    plan_stats stats;
};

// Thrown by a lowering that cannot handle a configuration: the node then runs
// on the host (reference semantics) with a one-time warning.
struct refused : error {
    using error::error;
};

// ---- lowering context ---------------------------------------------------------

class lowering {
public:
    plan& p;
    const graph& g;
    const opaque_map& opaque;
    std::vector<bool> constant;
    std::vector<std::vector<tref>> vals;                                    // per node, per output
    std::vector<std::vector<std::shared_ptr<const tensor<float>>>> cvals;  // folded constants (logical, row-major)
    std::vector<int> vertex_of;                                            // graph node -> dag vertex (-1: none)
    int current = -1;                                                      // vertex being lowered

    lowering(plan& pl, const graph& gr, const opaque_map& op)
        : p(pl), g(gr), opaque(op), constant(gr.constant_mask()), vals(gr.size()), cvals(gr.size()), vertex_of(gr.size(), -1) {
        for (std::size_t v = 0; v < p.dag.node_of.size(); ++v) vertex_of[p.dag.node_of[v]] = static_cast<int>(v);
    }

    const node& at(std::size_t i) const { return g.nodes[i]; }
    tref in(std::size_t i, int slot) const {
        value v = g.nodes[i].inputs[static_cast<std::size_t>(slot)];
        return vals[static_cast<std::size_t>(v.node)][static_cast<std::size_t>(v.output)];
    }
    const shape& in_shape(std::size_t i, int slot) const { return g.shape_of(g.nodes[i].inputs[static_cast<std::size_t>(slot)]); }
    const shape& out_shape(std::size_t i, int o = 0) const { return g.nodes[i].shapes[static_cast<std::size_t>(o)]; }
    bool is_persistent(const tref& r) const { return p.bufs[static_cast<std::size_t>(r.buf)].kind == buffer_kind::persistent; }
    void set(std::size_t i, int out, tref r) {
        auto& v = vals[i];
        if (v.size() < g.nodes[i].shapes.size()) v.resize(g.nodes[i].shapes.size());
        v[static_cast<std::size_t>(out)] = std::move(r);
    }

    int new_buffer(buffer_kind k, std::size_t bytes) {
        buffer b;
        b.kind = k;
        b.bytes = std::max<std::size_t>(bytes, 4);
        p.bufs.push_back(std::move(b));
        return static_cast<int>(p.bufs.size() - 1);
    }
    tref fresh(const shape& logical, phys layout = phys::row) {
        return {new_buffer(buffer_kind::arena, static_cast<std::size_t>(logical.elements()) * sizeof(float)), logical, layout};
    }
    // A persistent buffer holding `t` (logical, row-major) stored in layout l.
    tref constant_buffer(std::shared_ptr<const tensor<float>> t, phys l = phys::row) {
        const shape logical = t->shape;
        if (l != phys::row) t = std::make_shared<const tensor<float>>(host_relayout(*t, l));
        int b = new_buffer(buffer_kind::persistent, t->data.size() * sizeof(float));
        p.bufs[static_cast<std::size_t>(b)].data = std::move(t);
        return {b, logical, l};
    }

    int add(std::size_t node, step_body body, std::string what, bool conversion = false, int vertex = -2) {
        step s;
        s.vertex = vertex == -2 ? current : vertex;
        s.node = static_cast<std::int32_t>(node);
        s.conversion = conversion;
        s.what = std::move(what);
        s.body = std::move(body);
        p.steps.push_back(std::move(s));
        return static_cast<int>(p.steps.size() - 1);
    }

    // Permute step: y (layout yl) = x read with logical axis perm (y's logical
    // axis i is x's logical axis perm[i]).
    tref permute(const tref& x, const std::array<int, max_rank>& perm, const shape& ylogical, phys yl, std::size_t node,
                 bool conversion, int vertex = -2) {
        tref y = fresh(ylogical, yl);
        auto xst = logical_strides(x.logical, x.layout);
        auto yax = phys_axes(yl, ylogical.rank);
        permute_step s{x, y, {}};
        s.geom.rank = ylogical.rank;
        for (int k = 0; k < ylogical.rank; ++k) {
            int la = yax[static_cast<std::size_t>(k)];
            s.geom.dims[static_cast<std::size_t>(k)] = ylogical[la];
            s.geom.a[static_cast<std::size_t>(k)] = xst[static_cast<std::size_t>(perm[static_cast<std::size_t>(la)])];
        }
        add(node, s, conversion ? std::string("layout ") + to_string(x.layout) + " -> " + to_string(yl) : "transpose",
            conversion, vertex);
        return y;
    }

    // `r` stored in layout l: itself, or a conversion (host-side for
    // constants; otherwise a step on the producer's vertex, shared by every
    // consumer asking for the same layout).
    tref as(const tref& r, phys l, std::size_t consumer) {
        if (r.layout == l) return r;
        if (r.logical.rank < 2 || (l == phys::nhwc && r.logical.rank != 4) || (r.layout == phys::nhwc && r.logical.rank != 4))
            return {r.buf, r.logical, l};  // degenerate: same bytes
        for (auto& [from, to, owner] : conversions_)
            if (from.buf == r.buf && from.layout == r.layout && to.layout == l && (owner < 0 || owner == current)) return to;
        if (is_persistent(r)) {
            auto src = p.bufs[static_cast<std::size_t>(r.buf)].data;
            tensor<float> logical = host_to_logical(*src, r);
            tref out = constant_buffer(std::make_shared<const tensor<float>>(std::move(logical)), l);
            conversions_.push_back({r, out, -1});
            return out;
        }
        int pv = producer_vertex(r);
        int vertex = pv >= 0 ? pv : current;
        std::array<int, max_rank> id{};
        for (int k = 0; k < max_rank; ++k) id[static_cast<std::size_t>(k)] = k;
        tref out = permute(r, id, r.logical, l, consumer, true, vertex);
        conversions_.push_back({r, out, pv >= 0 ? -1 : current});
        return out;
    }
    tref row(const tref& r, std::size_t consumer) { return as(r, phys::row, consumer); }
    tref row_in(std::size_t i, int slot) { return row(in(i, slot), i); }
    // A row-major value viewed with other extents (same elements): reshape.
    tref view(const tref& r, const shape& s, std::size_t consumer) {
        tref x = row(r, consumer);
        if (x.elements() != s.elements())
            throw error(g.nodes[consumer].describe() + ": internal error: cannot view " + x.logical.str() + " as " + s.str());
        return {x.buf, s, phys::row};
    }
    // Stores output o of node i in the layout its out_layout asks for.
    void finish(std::size_t i, int o, const tref& r) {
        phys want = wanted(g.nodes[i].out_layout, r.logical.rank);
        if (r.layout == want) return set(i, o, r);
        std::array<int, max_rank> id{};
        for (int k = 0; k < max_rank; ++k) id[static_cast<std::size_t>(k)] = k;
        set(i, o, permute(r, id, r.logical, want, i, true));
    }

    // The vertex of the operator producing the buffer of r, if any.
    int producer_vertex(const tref& r) const {
        auto it = producer_.find(r.buf);
        return it == producer_.end() ? -1 : it->second;
    }
    void note_producer(int buf, int vertex) { producer_.emplace(buf, vertex); }

    // Runs node i on the host (reference semantics or a registered opaque
    // implementation) on row-major copies of its inputs.
    void host(std::size_t i, const std::string& why, bool warn);

    struct mark { std::size_t steps, bufs, conversions; };
    mark checkpoint() const { return {p.steps.size(), p.bufs.size(), conversions_.size()}; }
    void rollback(const mark& m, std::size_t i) {
        p.steps.resize(m.steps);
        p.bufs.resize(m.bufs);
        conversions_.resize(m.conversions);
        for (auto it = producer_.begin(); it != producer_.end();)
            it = it->first >= static_cast<int>(m.bufs) ? producer_.erase(it) : std::next(it);
        vals[i].clear();
    }

    // ---- host-side relayout of constants ----------------------------------
    static tensor<float> host_relayout(const tensor<float>& logical, phys l) {
        shape ps = phys_shape(logical.shape, l);
        tensor<float> out(ps);
        auto ax = phys_axes(l, logical.shape.rank);
        auto lst = strides_of(logical.shape);
        std::array<std::int64_t, max_rank> idx{};
        for (std::int64_t k = 0; k < out.size(); ++k) {
            std::int64_t src = 0;
            for (int d = 0; d < ps.rank; ++d) src += idx[static_cast<std::size_t>(d)] * lst[static_cast<std::size_t>(ax[static_cast<std::size_t>(d)])];
            out[k] = logical[src];
            for (int d = ps.rank - 1; d >= 0; --d) {
                if (++idx[static_cast<std::size_t>(d)] < ps[d]) break;
                idx[static_cast<std::size_t>(d)] = 0;
            }
        }
        return out;
    }
    static tensor<float> host_to_logical(const tensor<float>& stored, const tref& r) {
        if (r.layout == phys::row) return tensor<float>(r.logical, stored.data);
        tensor<float> out(r.logical);
        auto st = logical_strides(r.logical, r.layout);
        std::array<std::int64_t, max_rank> idx{};
        for (std::int64_t k = 0; k < out.size(); ++k) {
            std::int64_t src = 0;
            for (int d = 0; d < r.logical.rank; ++d) src += idx[static_cast<std::size_t>(d)] * st[static_cast<std::size_t>(d)];
            out[k] = stored[src];
            for (int d = r.logical.rank - 1; d >= 0; --d) {
                if (++idx[static_cast<std::size_t>(d)] < r.logical[d]) break;
                idx[static_cast<std::size_t>(d)] = 0;
            }
        }
        return out;
    }

private:
    struct conv_rec { tref from, to; int owner; };
    std::vector<conv_rec> conversions_;
    std::map<int, int> producer_;
};

inline void lowering::host(std::size_t i, const std::string& why, bool warn) {
    const node& n = g.nodes[i];
    opaque_fn impl = host_impl(opaque, n, "cudnn");
    if (!impl && warn) warn_once("cudnn", n, "runs on the host (reference semantics): " + why);
    host_step s;
    for (int k = 0; k < static_cast<int>(n.inputs.size()); ++k) s.ins.push_back(row_in(i, k));
    for (int o = 0; o < n.num_outputs(); ++o) s.outs.push_back(fresh(out_shape(i, o)));
    s.copy = n;
    s.impl = impl;
    auto outs = s.outs;
    add(i, std::move(s), "host: " + why);
    ++p.stats.host_steps;
    for (int o = 0; o < n.num_outputs(); ++o) finish(i, o, outs[static_cast<std::size_t>(o)]);
}

}  // namespace tsopt::backend::cudnn_impl
