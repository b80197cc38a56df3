#pragma once
// Host-only compilation of a graph into a cudnn_impl::plan (plan.hpp): no
// CUDA call is made here, so plans can be built and checked on any machine.
//
//   auto p = cudnn_impl::compile_plan(g, /*multi_stream=*/true, {});
//   assert(cudnn_impl::check_plan(g, *p).empty());
//
// Walks the graph in topological order: inputs get dedicated buffers,
// weights and weight-only operators are folded on the host (reference
// semantics) into persistent buffers, every other node is lowered by its file
// in this folder; a configuration a lowering refuses, and any opaque node,
// runs on the host with a one-time warning. Then the stream schedule is
// chosen (one stream, or parallel::assign_streams) and arena memory planned.
#include "tsopt/backend/arena.hpp"
#include "tsopt/backend/cudnn/binary.hpp"
#include "tsopt/backend/cudnn/conv2d.hpp"
#include "tsopt/backend/cudnn/data_movement.hpp"
#include "tsopt/backend/cudnn/eltwise.hpp"
#include "tsopt/backend/cudnn/matmul.hpp"
#include "tsopt/backend/cudnn/pool.hpp"

namespace tsopt::backend::cudnn_impl {

inline void lower_node(lowering& L, std::size_t i) {
    const node& n = L.at(i);
    if (n.kind == node_kind::opaque) return L.host(i, "opaque operator", false);
    using K = spec::op_kind;
    auto m = L.checkpoint();
    try {
        switch (n.op) {
            case K::conv2d: return lower_conv2d(L, i);
            case K::matmul: return lower_matmul(L, i);
            case K::avgpool:
            case K::maxpool: return lower_pool(L, i);
            case K::relu: return lower_unary(L, i, 1);
            case K::sigmoid: return lower_unary(L, i, 2);
            case K::tanh: return lower_unary(L, i, 3);
            case K::ewadd:
            case K::ewmul: return lower_binary(L, i);
            case K::smul: return lower_smul(L, i);
            case K::batchnorm: return lower_batchnorm(L, i);
            case K::softmax: return lower_softmax(L, i);
            case K::concat: return lower_concat(L, i);
            case K::split: return lower_split(L, i);
            case K::slice: return lower_slice(L, i);
            case K::transpose: return lower_transpose(L, i);
            case K::enlarge: return lower_enlarge(L, i);
            case K::pad: return lower_pad(L, i);
            case K::reshape: return lower_reshape(L, i);
            case K::reorder: return lower_reorder(L, i);
            default: throw refused("no GPU lowering for this operator");  // constants are folded before
        }
    } catch (const refused& e) {
        L.rollback(m, i);
        L.host(i, e.what(), true);
    }
}

// Calls f(ref, written) for every tensor a step touches.
template <class F>
void for_each_ref(const step_body& b, F&& f) {
    std::visit(
        [&](const auto& s) {
            using S = std::decay_t<decltype(s)>;
            if constexpr (std::is_same_v<S, conv_step>) { f(s.x, false); f(s.w, false); f(s.y, true); }
            else if constexpr (std::is_same_v<S, pool_step>) { f(s.x, false); f(s.y, true); }
            else if constexpr (std::is_same_v<S, act_step>) { f(s.x, false); f(s.y, true); }
            else if constexpr (std::is_same_v<S, gemm_step>) { f(s.a, false); f(s.b, false); f(s.c, true); }
            else if constexpr (std::is_same_v<S, binary_step>) { f(s.a, false); f(s.b, false); f(s.y, true); }
            else if constexpr (std::is_same_v<S, smul_step>) { f(s.x, false); f(s.s, false); f(s.y, true); }
            else if constexpr (std::is_same_v<S, batchnorm_step>) { f(s.x, false); f(s.scale, false); f(s.shift, false); f(s.y, true); }
            else if constexpr (std::is_same_v<S, permute_step>) { f(s.x, false); f(s.y, true); }
            else if constexpr (std::is_same_v<S, pad_step>) { f(s.x, false); f(s.y, true); }
            else if constexpr (std::is_same_v<S, copy2d_step>) { f(s.src, false); f(s.dst, true); }
            else if constexpr (std::is_same_v<S, softmax_step>) { f(s.x, false); f(s.y, true); }
            else if constexpr (std::is_same_v<S, host_step>) {
                for (auto& r : s.ins) f(r, false);
                for (auto& r : s.outs) f(r, true);
            }
        },
        b);
}

// Happens-before between DAG vertices under a schedule (stream order and
// events, transitively): reach[u] has bit v when u's work completes before
// v's starts.
inline std::vector<std::vector<std::uint64_t>> happens_before(const parallel::stream_schedule& s, std::size_t n) {
    std::vector<std::vector<int>> hb(n);
    for (auto& st : s.streams)
        for (std::size_t k = 0; k + 1 < st.size(); ++k) hb[static_cast<std::size_t>(st[k])].push_back(st[k + 1]);
    for (auto e : s.events) hb[static_cast<std::size_t>(e.producer)].push_back(e.consumer);
    return parallel::detail::reachability(hb, parallel::detail::topological(hb));
}
inline bool reaches(const std::vector<std::vector<std::uint64_t>>& r, int u, int v) {
    return (r[static_cast<std::size_t>(u)][static_cast<std::size_t>(v) / 64] >> (v % 64)) & 1u;
}

// Buffer a is done before buffer b is first written: every vertex touching a
// happens strictly before b's writer.
inline bool done_before(const buffer& a, const buffer& b, const std::vector<std::vector<std::uint64_t>>& hb) {
    for (int t : a.touched)
        if (t == b.writer || !reaches(hb, t, b.writer)) return false;
    return true;
}

// Liveness over the schedule's happens-before order, then greedy placement
// by decreasing size: a buffer may reuse bytes of any buffer it is ordered
// with.
inline void plan_memory(plan& p) {
    for (auto& b : p.bufs) {
        b.touched.clear();
        b.writer = -1;
    }
    for (auto& s : p.steps)
        for_each_ref(s.body, [&](const tref& r, bool written) {
            buffer& b = p.bufs[static_cast<std::size_t>(r.buf)];
            if (b.kind != buffer_kind::arena) return;
            b.touched.push_back(s.vertex);
            if (written && b.writer < 0) b.writer = s.vertex;
        });
    for (auto& b : p.bufs) {
        std::sort(b.touched.begin(), b.touched.end());
        b.touched.erase(std::unique(b.touched.begin(), b.touched.end()), b.touched.end());
        b.bytes = (b.bytes + 255) / 256 * 256;
    }
    auto hb = happens_before(p.schedule, p.dag.node_of.size());
    std::vector<int> order;
    for (std::size_t b = 0; b < p.bufs.size(); ++b) {
        const buffer& x = p.bufs[b];
        if (x.kind == buffer_kind::persistent) p.stats.persistent_bytes += x.bytes;
        else if (x.kind != buffer_kind::arena) p.stats.io_bytes += x.bytes;
        else if (x.writer >= 0) {
            p.stats.naive_bytes += x.bytes;
            order.push_back(static_cast<int>(b));
        }
    }
    auto unordered = [&](const buffer& x, const buffer& y) { return !done_before(x, y, hb) && !done_before(y, x, hb); };
    p.stats.arena_bytes = std::max(p.stats.arena_bytes, place_in_arena(p.bufs, std::move(order), unordered));
}

inline std::unique_ptr<plan> compile_plan(const graph& g, bool multi_stream, const opaque_map& opaque) {
    g.validate();
    auto pp = std::make_unique<plan>();
    plan& p = *pp;
    p.multi_stream = multi_stream;
    p.dag = parallel::operator_dag(g);
    const int nv = static_cast<int>(p.dag.node_of.size());
    if (multi_stream) {
        p.schedule = parallel::assign_streams(p.dag.succ);
    } else {
        p.schedule.stream_of.assign(static_cast<std::size_t>(nv), 0);
        p.schedule.streams.emplace_back();
        for (int v = 0; v < nv; ++v) p.schedule.streams[0].push_back(v);  // dag vertices are in topological order
    }
    lowering L(p, g, opaque);
    const std::vector<bool> live = live_nodes(g);
    for (std::size_t i : g.topological_order()) {
        const node& n = g.nodes[i];
        if (n.kind == node_kind::input) {
            L.set(i, 0, {L.new_buffer(buffer_kind::input, static_cast<std::size_t>(n.shapes[0].elements()) * sizeof(float)), n.shapes[0], phys::row});
            continue;
        }
        if (!live[i]) continue;
        L.current = L.vertex_of[i];
        if (n.kind == node_kind::weight) {
            L.cvals[i] = {n.data};
            L.set(i, 0, L.constant_buffer(n.data));
        } else if (L.constant[i]) {
            std::vector<const tensor<float>*> args;
            for (value v : n.inputs) args.push_back(L.cvals[static_cast<std::size_t>(v.node)][static_cast<std::size_t>(v.output)].get());
            auto res = spec::evaluate<float>(n.op, n.params, args);
            for (std::size_t o = 0; o < res.size(); ++o) {
                L.cvals[i].push_back(std::make_shared<const tensor<float>>(std::move(res[o])));
                L.set(i, static_cast<int>(o), L.constant_buffer(L.cvals[i].back(), wanted(n.out_layout, res[o].shape.rank)));
            }
        } else {
            lower_node(L, i);
            for (auto& r : L.vals[i])
                if (p.bufs[static_cast<std::size_t>(r.buf)].kind == buffer_kind::arena && L.producer_vertex(r) < 0)
                    L.note_producer(r.buf, L.current);
        }
    }
    for (value v : g.inputs()) p.inputs.push_back(L.vals[static_cast<std::size_t>(v.node)][0]);
    for (value v : g.outputs) {
        tref r = L.vals[static_cast<std::size_t>(v.node)][static_cast<std::size_t>(v.output)];
        // A conversion to row-major runs with the producer (or, for a view of
        // a graph input, with the viewing node).
        L.current = L.producer_vertex(r) >= 0 ? L.producer_vertex(r) : L.vertex_of[static_cast<std::size_t>(v.node)];
        r = L.row(r, static_cast<std::size_t>(v.node));
        buffer& b = p.bufs[static_cast<std::size_t>(r.buf)];
        if (b.kind == buffer_kind::arena) b.kind = buffer_kind::output;  // never shared, read after the run
        p.outputs.push_back(r);
    }
    p.vertex_steps.assign(static_cast<std::size_t>(nv), {});
    for (std::size_t s = 0; s < p.steps.size(); ++s) {
        if (p.steps[s].vertex < 0 || p.steps[s].vertex >= nv) throw error("internal error: step '" + p.steps[s].what + "' of node " + std::to_string(p.steps[s].node) + " has no vertex");
        p.vertex_steps[static_cast<std::size_t>(p.steps[s].vertex)].push_back(static_cast<int>(s));
        p.stats.conversions += p.steps[s].conversion;
    }
    p.stats.steps = p.steps.size();
    p.stats.streams = p.schedule.num_streams();
    p.stats.events = p.schedule.events.size();
    plan_memory(p);
    return pp;
}

// Everything a plan promises, checked without a GPU. Returns "" when valid,
// otherwise what is wrong.
inline std::string check_plan(const graph& g, const plan& p) {
    auto dag = parallel::operator_dag(g);
    if (dag.node_of != p.dag.node_of) return "plan's operator DAG differs from the graph's";
    if (auto e = parallel::check_schedule(p.dag.succ, p.schedule); !e.empty()) return "schedule: " + e;
    if (!p.multi_stream && p.schedule.num_streams() > 1) return "sequential plan uses several streams";
    const int nv = static_cast<int>(p.dag.node_of.size());
    std::string err;
    for (std::size_t s = 0; s < p.steps.size() && err.empty(); ++s) {
        const step& st = p.steps[s];
        if (st.vertex < 0 || st.vertex >= nv) return "step " + std::to_string(s) + " (" + st.what + ") has no vertex";
        for_each_ref(st.body, [&](const tref& r, bool) {
            if (!err.empty()) return;
            if (r.buf < 0 || static_cast<std::size_t>(r.buf) >= p.bufs.size()) {
                err = "step " + std::to_string(s) + " (" + st.what + ") refers to a missing buffer";
                return;
            }
            if (p.bufs[static_cast<std::size_t>(r.buf)].bytes < static_cast<std::size_t>(r.elements()) * sizeof(float))
                err = "step " + std::to_string(s) + " (" + st.what + "): buffer " + std::to_string(r.buf) + " is smaller than " +
                      r.logical.str();
        });
    }
    if (!err.empty()) return err;
    std::size_t steps_seen = 0;
    for (auto& vs : p.vertex_steps) steps_seen += vs.size();
    if (steps_seen != p.steps.size()) return "vertex_steps does not cover every step exactly once";
    if (p.inputs.size() != g.inputs().size() || p.outputs.size() != g.outputs.size()) return "wrong number of inputs or outputs";
    for (std::size_t k = 0; k < p.outputs.size(); ++k)
        if (!(p.outputs[k].logical == g.shape_of(g.outputs[k])) || p.outputs[k].layout != phys::row)
            return "output " + std::to_string(k) + " is not row-major of the graph's shape";
    auto hb = happens_before(p.schedule, static_cast<std::size_t>(nv));
    for (std::size_t a = 0; a < p.bufs.size(); ++a) {
        const buffer& x = p.bufs[a];
        if (x.kind != buffer_kind::arena || x.writer < 0) continue;
        if (x.offset + x.bytes > p.stats.arena_bytes) return "arena buffer " + std::to_string(a) + " exceeds the arena";
        for (std::size_t b = a + 1; b < p.bufs.size(); ++b) {
            const buffer& y = p.bufs[b];
            if (y.kind != buffer_kind::arena || y.writer < 0) continue;
            bool overlap = x.offset < y.offset + y.bytes && y.offset < x.offset + x.bytes;
            if (overlap && !done_before(x, y, hb) && !done_before(y, x, hb))
                return "arena buffers " + std::to_string(a) + " and " + std::to_string(b) + " share bytes but may be live together";
        }
    }
    return {};
}

}  // namespace tsopt::backend::cudnn_impl
