#pragma once
// The analytical cost model: a roofline estimate per operator that needs no
// device.
//
//   time(op) = max(FLOPs / (peak * efficiency), bytes / bandwidth) * layout
//              + launch overhead + reorders/transposes of its inputs
//
// FLOPs come from the operator's declaration (op_decl::flops), bytes from
// the shapes (every input read once, every output written once, 4 bytes an
// element). Rules:
//   * inputs and weights cost nothing; operators whose inputs are all
//     constant (graph::constant_mask) cost nothing: they are folded before
//     inference;
//   * data-movement operators cost their bytes; reshape is a view (launch
//     overhead only);
//   * a fused activation (conv2d/matmul `act`) adds one FLOP per output
//     element, far less than a separate activation's read+write and launch;
//   * layouts (see nhwc_factor for the reasons): a conv2d computing in NHWC
//     runs `nhwc_pointwise_factor` (0.6) of its NCHW time when it is 1x1 or
//     grouped/depthwise, `nhwc_conv_factor` (0.9) for other convolutions, and
//     the NCHW time when its input has fewer channels than one vector
//     (`vector_lanes`); a channel concat in NHWC costs `nhwc_concat_factor`
//     (1.5) of the NCHW copy; pools, activations and element-wise operators
//     are bandwidth-bound and cost the same in both. A `reorder` node (the
//     explicit conversion) costs its bytes like any copy. A non-constant
//     input whose producer's layout differs from the layout the operator
//     works in costs the same reorder, charged to the reader (an implicit
//     conversion, which backends insert themselves). matmul works in
//     row-major: a column-major operand costs a transpose unless it is
//     constant (re-laid out once, at preprocessing) or
//     `machine::fused_transpose` says the GEMM reads transposed operands for
//     free;
//   * opaque operators: bytes only (their FLOPs are unknown), plus a launch.
//
// The model is additive (graph_cost = sum of operator_cost) and satisfies
// cost::cost_model. op_flops / op_bytes are reused by cost::multi_dim.
#include <algorithm>
#include <array>

#include "tsopt/cost/cost_model.hpp"

namespace tsopt::cost {

// Machine parameters. Defaults: this project's 2-core AVX-512 EPYC, about
// 100 GFLOP/s fp32 per core, ~20 GB/s of memory bandwidth for two cores, a
// few microseconds per kernel (primitive) call.
struct machine {
    double cores = 2;
    double gflops_per_core = 100;      // peak fp32
    double compute_efficiency = 0.7;   // fraction of peak a good kernel reaches
    double bandwidth_gbs = 20;         // GB/s
    double launch_us = 3;              // per kernel call
    double nhwc_conv_factor = 0.9;        // NHWC k x k dense conv2d time relative to NCHW
    double nhwc_pointwise_factor = 0.6;   // NHWC 1x1 or grouped/depthwise conv2d relative to NCHW
    double nhwc_concat_factor = 1.5;      // NHWC channel concat relative to NCHW
    double vector_lanes = 16;             // fp32 lanes of one SIMD register (AVX-512)
    bool fused_transpose = false;      // matmul reads column-major operands for free
    double bytes_per_element = 4;      // fp32

    double peak_flops_per_ms() const { return cores * gflops_per_core * 1e9 * compute_efficiency / 1e3; }
    double bytes_per_ms() const { return bandwidth_gbs * 1e9 / 1e3; }

    void check() const {
        if (!(cores > 0) || !(gflops_per_core > 0) || !(compute_efficiency > 0) || !(bandwidth_gbs > 0) ||
            !(launch_us >= 0) || !(nhwc_conv_factor > 0) || !(nhwc_pointwise_factor > 0) || !(nhwc_concat_factor > 0) ||
            !(vector_lanes > 0) || !(bytes_per_element > 0))
            throw error("cost::machine: cores, gflops_per_core, compute_efficiency, bandwidth_gbs, nhwc_conv_factor, "
                        "nhwc_pointwise_factor, nhwc_concat_factor, vector_lanes and bytes_per_element must be positive "
                        "and launch_us non-negative");
    }
};

namespace detail {
inline std::vector<shape> input_shapes(const graph& g, const node& n) {
    std::vector<shape> s;
    for (value v : n.inputs) s.push_back(g.shape_of(v));
    return s;
}
inline std::int32_t fused_activation(const node& n) {
    if (n.kind != node_kind::op) return 0;
    switch (n.op) {
        case spec::op_kind::conv2d: return n.params[spec::conv2d_p::act];
        case spec::op_kind::matmul: return n.params[spec::matmul_p::act];
        default: return 0;
    }
}
}  // namespace detail

// Floating-point operations of node i (0 for inputs, weights, opaque nodes).
inline double op_flops(const graph& g, std::size_t i) {
    const node& n = g.nodes[i];
    if (n.kind != node_kind::op) return 0;
    auto in = detail::input_shapes(g, n);
    double f = static_cast<double>(spec::decl(n.op).flops(n.params, in, n.shapes));
    if (detail::fused_activation(n) != 0)
        for (const shape& s : n.shapes) f += static_cast<double>(s.elements());
    return f;
}

// Elements node i reads and writes (0 for inputs and weights; reshape is a
// view and moves nothing).
inline double op_elements_moved(const graph& g, std::size_t i) {
    const node& n = g.nodes[i];
    if (n.kind == node_kind::input || n.kind == node_kind::weight) return 0;
    if (n.is_op(spec::op_kind::reshape)) return 0;
    double e = 0;
    for (value v : n.inputs) e += static_cast<double>(g.shape_of(v).elements());
    for (const shape& s : n.shapes) e += static_cast<double>(s.elements());
    return e;
}

// Bytes node i reads and writes under machine m.
inline double op_bytes(const graph& g, std::size_t i, const machine& m = {}) {
    return op_elements_moved(g, i) * m.bytes_per_element;
}

class analytical {
public:
    static constexpr bool additive = true;

    analytical() = default;
    explicit analytical(machine m) : m_(m) { m_.check(); }
    const machine& params() const { return m_; }

    // Estimated milliseconds of node i; 0 for inputs, weights and folded
    // weight-only operators.
    double operator_cost(const graph& g, std::size_t i) const {
        if (!runs_at_inference(g, i)) return 0;
        return raw_cost(g, i, nullptr);
    }
    // The same with g.constant_mask() precomputed (pricing many nodes).
    double operator_cost(const graph& g, std::size_t i, const std::vector<bool>& constant) const {
        if (!runs_at_inference(g, i, constant)) return 0;
        return raw_cost(g, i, &constant);
    }
    double graph_cost(const graph& g) const {
        auto constant = g.constant_mask();
        double t = 0;
        for (std::size_t i = 0; i < g.size(); ++i) t += operator_cost(g, i, constant);
        return t;
    }

    // The estimate for an operator node regardless of constant folding.
    double raw_cost(const graph& g, std::size_t i, const std::vector<bool>* constant = nullptr) const {
        const node& n = g.nodes[i];
        if (n.kind == node_kind::input || n.kind == node_kind::weight) return 0;
        const double launch = m_.launch_us / 1e3;
        const double bytes = op_bytes(g, i, m_);
        const double compute = op_flops(g, i) / m_.peak_flops_per_ms();
        double t = std::max(compute, bytes / m_.bytes_per_ms());
        t *= nhwc_factor(g, n);
        t += launch;
        t += reorder_cost(g, i, constant);
        return t;
    }

    // Time of operator n in its layout relative to NCHW (1 when the layout
    // does not matter). Why these shapes of the curve:
    //  * NHWC keeps a pixel's channels contiguous. A 1x1 convolution is then a
    //    plain GEMM [N*H*W, C] x [C, K] with unit-stride loads, and a
    //    depthwise/grouped one vectorizes across channels; in NCHW both walk
    //    short spatial rows with edge handling, so NHWC wins most there
    //    (oneDNN, XNNPACK and cuDNN's tensor-core paths prefer channels-last
    //    for exactly these).
    //  * k x k dense convolutions gain less: NCHW kernels block channels
    //    internally anyway, NHWC only saves that blocking.
    //  * With fewer input channels than one vector (an RGB stem) channels-last
    //    fills no SIMD register: no gain.
    //  * Channel concat in NCHW copies each input as one block per image; in
    //    NHWC every pixel interleaves a run of each input's channels: many
    //    short copies.
    //  * Pools, activations and element-wise operators stream their bytes the
    //    same way in both layouts (bandwidth-bound).
    double nhwc_factor(const graph& g, const node& n) const {
        if (n.kind != node_kind::op || n.out_layout != spec::layout::nhwc || n.shapes[0].rank != 4) return 1;
        if (n.is_op(spec::op_kind::conv2d)) {
            const shape &x = g.shape_of(n.inputs[0]), &w = g.shape_of(n.inputs[1]);
            if (static_cast<double>(x[1]) < m_.vector_lanes) return 1;
            const bool pointwise = w[2] == 1 && w[3] == 1, grouped = x[1] != w[1];
            return pointwise || grouped ? m_.nhwc_pointwise_factor : m_.nhwc_conv_factor;
        }
        if (n.is_op(spec::op_kind::concat) && n.params[spec::concat_p::axis] == 1) return m_.nhwc_concat_factor;
        return 1;
    }

    // Cost of bringing node i's inputs into the layout it computes in.
    double reorder_cost(const graph& g, std::size_t i, const std::vector<bool>* constant = nullptr) const {
        const node& n = g.nodes[i];
        if (n.kind != node_kind::op) return 0;
        const spec::op_decl& d = spec::decl(n.op);
        // Operators whose purpose is moving data handle any layout themselves
        // (reorder is the conversion), except a concat in an image layout.
        if ((d.cls == spec::op_class::data_movement && d.layouts != spec::image_layouts) || d.cls == spec::op_class::constant)
            return 0;
        double t = 0;
        for (std::size_t s = 0; s < n.inputs.size(); ++s) {
            value v = n.inputs[s];
            const node& p = g.at(v);
            const auto j = static_cast<std::size_t>(v.node);
            const bool is_constant = constant ? (*constant)[j] : (p.kind != node_kind::input && !runs_at_inference(g, j));
            if (is_constant) continue;  // weights and folded operators are re-laid out at preprocessing
            const shape& sh = g.shape_of(v);
            if (sh.rank < 2) continue;
            spec::layout want = n.out_layout;
            if (want == spec::layout::nhwc && sh.rank != 4) want = spec::layout::nchw;  // NHWC is for images only
            if (n.is_op(spec::op_kind::matmul)) {
                want = spec::layout::row_major;
                if (m_.fused_transpose) continue;
            } else if (n.is_op(spec::op_kind::conv2d) && s == 1) {
                continue;  // the filter: reordered with the weights or by the kernel itself
            }
            const spec::layout have = p.out_layout == spec::layout::nhwc && sh.rank != 4 ? spec::layout::nchw : p.out_layout;
            if (have == want) continue;
            t += 2.0 * static_cast<double>(sh.elements()) * m_.bytes_per_element / m_.bytes_per_ms() + m_.launch_us / 1e3;
        }
        return t;
    }

private:
    machine m_{};
};
static_assert(cost_model<analytical>);
static_assert(is_additive_v<analytical>);

}  // namespace tsopt::cost
