#pragma once
// matmul on cuBLAS (cublasGemmStridedBatchedEx, fp32 compute unless TF32 is
// allowed). cuBLAS is column-major; a row-major m x n matrix is a
// column-major n x m one, so a row-major C = A B is computed as the
// column-major C^T = B^T A^T (the transposed-operand trick). Operands stored
// col-major (TASO's layouts, node.out_layout of their producer) are read
// through the transpose flags, and a col-major output (this node's
// out_layout) is the column-major product C = A B directly: no data moves.
//
// Batch axes broadcast: every output batch gets (offset of A, offset of B),
// and consecutive batches whose offsets advance by constant strides form one
// strided-batched call (one call for the usual shapes, stride 0 for a shared
// rank-2 operand). The fused activation runs in place afterwards.
#include "tsopt/backend/cudnn/plan.hpp"

namespace tsopt::backend::cudnn_impl {

// Runs of (count, offsets, strides) covering offsets[0..n) in order.
inline std::vector<gemm_step::run> batch_runs(const std::vector<std::array<std::int64_t, 3>>& offs) {
    std::vector<gemm_step::run> runs;
    for (std::size_t t = 0; t < offs.size();) {
        gemm_step::run r{1, offs[t][0], offs[t][1], offs[t][2], 0, 0, 0};
        std::size_t u = t + 1;
        if (u < offs.size()) {
            r.a_stride = offs[u][0] - offs[t][0];
            r.b_stride = offs[u][1] - offs[t][1];
            r.c_stride = offs[u][2] - offs[t][2];
            while (u < offs.size() && offs[u][0] - offs[u - 1][0] == r.a_stride && offs[u][1] - offs[u - 1][1] == r.b_stride &&
                   offs[u][2] - offs[u - 1][2] == r.c_stride)
                ++u;
            r.count = static_cast<std::int64_t>(u - t);
        }
        runs.push_back(r);
        t = u;
    }
    return runs;
}

inline void lower_matmul(lowering& L, std::size_t i) {
    const node& n = L.at(i);
    const shape &as = L.in_shape(i, 0), &bs = L.in_shape(i, 1), &os = L.out_shape(i);
    tref a = L.in(i, 0), b = L.in(i, 1);
    if (a.layout == phys::nhwc) a = L.row(a, i);
    if (b.layout == phys::nhwc) b = L.row(b, i);
    const std::int64_t m = as[as.rank - 2], k = as[as.rank - 1], nn = bs[bs.rank - 1];
    const bool a_col = a.layout == phys::col, b_col = b.layout == phys::col;
    const bool c_col = wanted(n.out_layout, os.rank) == phys::col;
    tref c = L.fresh(os, c_col ? phys::col : phys::row);

    gemm_step s{};
    s.act = n.params[spec::matmul_p::act];
    // Per output batch: element offsets of A, B, C.
    shape ob = os, ab = as, bb = bs;
    ob.rank -= 2;
    ab.rank -= 2;
    bb.rank -= 2;
    std::vector<std::array<std::int64_t, 3>> offs;
    spec::detail::for_each_broadcast(ob, ab, bb, [&](std::int64_t bo, std::int64_t ba, std::int64_t bbi) {
        offs.push_back({ba * m * k, bbi * k * nn, bo * m * nn});
    });
    if (!c_col) {
        // C^T (n x m) = B^T (n x k) * A^T (k x m)
        s.a = b;
        s.b = a;
        s.m = nn;
        s.n = m;
        s.trans_a = b_col;
        s.lda = b_col ? k : nn;
        s.trans_b = a_col;
        s.ldb = a_col ? m : k;
        s.ldc = nn;
        for (auto& o : offs) std::swap(o[0], o[1]);
    } else {
        // C (m x n) = A (m x k) * B (k x n)
        s.a = a;
        s.b = b;
        s.m = m;
        s.n = nn;
        s.trans_a = !a_col;
        s.lda = a_col ? m : k;
        s.trans_b = !b_col;
        s.ldb = b_col ? k : nn;
        s.ldc = m;
    }
    s.k = k;
    s.c = c;
    for (std::int64_t v : {s.m, s.n, s.k, s.lda, s.ldb, s.ldc})
        if (v > INT_MAX) throw refused("matrix extent too large for cuBLAS's 32-bit arguments");
    s.runs = batch_runs(offs);
    L.add(i, s, "matmul");
    L.finish(i, 0, c);
}

}  // namespace tsopt::backend::cudnn_impl
