#pragma once
// A host interpreter of cudnn_impl plans: executes every step of a plan on
// the CPU with the exact semantics of the call it stands for (cuBLAS's
// column-major GEMM with transpose flags and strided batches, the kernels'
// strided walks, cudaMemcpy2D, cuDNN's conv/pool/softmax geometry), over one
// host arena laid out by the plan's memory planning. Vertices run in any
// order compatible with the schedule's happens-before relation, so a wrong
// lowering, a wrong layout, or two live buffers sharing bytes shows up as a
// wrong result — without a GPU.
#include <cmath>
#include <cstring>

#include "tsopt/backend/cudnn/compile.hpp"

namespace tsopt::test::cuda {

using namespace tsopt::backend::cudnn_impl;

class plan_emulator {
public:
    explicit plan_emulator(const plan& p) : p_(p), arena_(p.stats.arena_bytes / sizeof(float) + 1, std::nanf("")) {
        own_.resize(p.bufs.size());
        for (std::size_t b = 0; b < p.bufs.size(); ++b) {
            const buffer& x = p.bufs[b];
            if (x.kind == buffer_kind::arena) continue;
            own_[b].assign(x.bytes / sizeof(float) + 1, std::nanf(""));
            if (x.kind == buffer_kind::persistent) std::copy(x.data->data.begin(), x.data->data.end(), own_[b].begin());
        }
    }

    // Runs the plan. prefer_last_stream: among vertices ready under the
    // happens-before relation, run the one on the highest stream first (an
    // order far from the plain topological one).
    std::vector<tensor<float>> run(std::span<const tensor<float>> in, bool prefer_last_stream) {
        for (std::size_t k = 0; k < p_.inputs.size(); ++k) std::copy(in[k].data.begin(), in[k].data.end(), ptr(p_.inputs[k]));
        for (int v : order(prefer_last_stream))
            for (int s : p_.vertex_steps[static_cast<std::size_t>(v)]) exec(p_.steps[static_cast<std::size_t>(s)]);
        std::vector<tensor<float>> out;
        for (auto& r : p_.outputs) {
            tensor<float> t(r.logical);
            std::copy(ptr(r), ptr(r) + t.size(), t.data.begin());
            out.push_back(std::move(t));
        }
        return out;
    }

private:
    float* ptr(const tref& r) {
        const buffer& b = p_.bufs[static_cast<std::size_t>(r.buf)];
        if (b.kind == buffer_kind::arena) return arena_.data() + b.offset / sizeof(float);
        return own_[static_cast<std::size_t>(r.buf)].data();
    }

    std::vector<int> order(bool prefer_last_stream) const {
        const auto& s = p_.schedule;
        const std::size_t n = s.stream_of.size();
        std::vector<std::vector<int>> hb(n);
        std::vector<int> indeg(n, 0);
        for (auto& st : s.streams)
            for (std::size_t k = 0; k + 1 < st.size(); ++k) hb[static_cast<std::size_t>(st[k])].push_back(st[k + 1]);
        for (auto e : s.events) hb[static_cast<std::size_t>(e.producer)].push_back(e.consumer);
        for (auto& h : hb)
            for (int v : h) ++indeg[static_cast<std::size_t>(v)];
        std::vector<int> ready, out;
        for (std::size_t v = 0; v < n; ++v)
            if (!indeg[v]) ready.push_back(static_cast<int>(v));
        while (!ready.empty()) {
            auto it = std::max_element(ready.begin(), ready.end(), [&](int a, int b) {
                int sa = s.stream_of[static_cast<std::size_t>(a)], sb = s.stream_of[static_cast<std::size_t>(b)];
                return prefer_last_stream ? (sa != sb ? sa < sb : a > b) : a > b;
            });
            int v = *it;
            ready.erase(it);
            out.push_back(v);
            for (int w : hb[static_cast<std::size_t>(v)])
                if (--indeg[static_cast<std::size_t>(w)] == 0) ready.push_back(w);
        }
        return out;
    }

    static float activate(float x, std::int32_t a) {
        switch (a) {
            case 1: return x > 0 ? x : 0;
            case 2: return 1.f / (1.f + std::exp(-x));
            case 3: return std::tanh(x);
            default: return x;
        }
    }
    // Index of logical element (n, c, h, w) in a 4-d buffer stored in layout l.
    static std::int64_t at4(const tref& r, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
        auto st = logical_strides(r.logical, r.layout);
        return n * st[0] + c * st[1] + h * st[2] + w * st[3];
    }
    static std::int64_t walk_offset(const walk& g, std::int64_t i, std::int64_t& ob) {
        std::int64_t oa = 0;
        ob = 0;
        for (int d = g.rank - 1; d >= 0; --d) {
            std::int64_t c = i % g.dims[static_cast<std::size_t>(d)];
            i /= g.dims[static_cast<std::size_t>(d)];
            oa += c * g.a[static_cast<std::size_t>(d)];
            ob += c * g.b[static_cast<std::size_t>(d)];
        }
        return oa;
    }

    void exec(const step& st) {
        std::visit([&](const auto& s) { run_step(s); }, st.body);
    }

    void run_step(const conv_step& s) {
        const float *x = ptr(s.x), *w = ptr(s.w);
        float* y = ptr(s.y);
        const int cg = s.c / s.groups, kg = s.k / s.groups;
        for (int n = 0; n < s.n; ++n)
            for (int k = 0; k < s.k; ++k)
                for (int oy = 0; oy < s.oh; ++oy)
                    for (int ox = 0; ox < s.ow; ++ox) {
                        double acc = 0;
                        const int g = k / kg;
                        for (int ci = 0; ci < cg; ++ci)
                            for (int ky = 0; ky < s.kh; ++ky)
                                for (int kx = 0; kx < s.kw; ++kx) {
                                    int iy = oy * s.sh - s.pad_h + ky * s.dh, ix = ox * s.sw - s.pad_w + kx * s.dw;
                                    if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.wd) continue;
                                    acc += double(w[at4(s.w, k, ci, ky, kx)]) * x[at4(s.x, n, g * cg + ci, iy, ix)];
                                }
                        y[at4(s.y, n, k, oy, ox)] = activate(static_cast<float>(acc), s.act);
                    }
    }
    void run_step(const pool_step& s) {
        const float* x = ptr(s.x);
        float* y = ptr(s.y);
        const shape &xs = s.x.logical, &ys = s.y.logical;
        for (std::int64_t n = 0; n < ys[0]; ++n)
            for (std::int64_t c = 0; c < ys[1]; ++c)
                for (std::int64_t oy = 0; oy < ys[2]; ++oy)
                    for (std::int64_t ox = 0; ox < ys[3]; ++ox) {
                        float acc = s.max ? -INFINITY : 0.f;
                        for (int ky = 0; ky < s.kh; ++ky)
                            for (int kx = 0; kx < s.kw; ++kx) {
                                std::int64_t iy = oy * s.sh - s.ph + ky, ix = ox * s.sw - s.pw + kx;
                                if (iy < 0 || iy >= xs[2] || ix < 0 || ix >= xs[3]) continue;
                                float v = x[at4(s.x, n, c, iy, ix)];
                                acc = s.max ? std::max(acc, v) : acc + v;
                            }
                        if (!s.max) acc /= float(s.kh * s.kw);
                        y[at4(s.y, n, c, oy, ox)] = activate(acc, s.act);
                    }
    }
    void run_step(const act_step& s) {
        const float* x = ptr(s.x);
        float* y = ptr(s.y);
        for (std::int64_t i = 0; i < s.x.elements(); ++i) y[i] = activate(x[i], s.act);
    }
    // cuBLAS semantics: column-major C(m x n) = op(A)(m x k) op(B)(k x n).
    void run_step(const gemm_step& s) {
        const float *A = ptr(s.a), *B = ptr(s.b);
        float* C = ptr(s.c);
        for (const auto& r : s.runs)
            for (std::int64_t t = 0; t < r.count; ++t) {
                const float* a = A + r.a_off + t * r.a_stride;
                const float* b = B + r.b_off + t * r.b_stride;
                float* c = C + r.c_off + t * r.c_stride;
                for (std::int64_t i = 0; i < s.m; ++i)
                    for (std::int64_t j = 0; j < s.n; ++j) {
                        double acc = 0;
                        for (std::int64_t l = 0; l < s.k; ++l)
                            acc += double(s.trans_a ? a[l + i * s.lda] : a[i + l * s.lda]) * (s.trans_b ? b[j + l * s.ldb] : b[l + j * s.ldb]);
                        c[i + j * s.ldc] = static_cast<float>(acc);
                    }
            }
        if (s.act)
            for (std::int64_t i = 0; i < s.c.elements(); ++i) C[i] = activate(C[i], s.act);
    }
    void run_step(const binary_step& s) {
        const float *a = ptr(s.a), *b = ptr(s.b);
        float* y = ptr(s.y);
        for (std::int64_t i = 0; i < s.y.elements(); ++i) {
            std::int64_t ib = i, ia = i;
            if (!s.flat) ia = walk_offset(s.geom, i, ib);
            y[i] = s.op == 0 ? a[ia] + b[ib] : a[ia] * b[ib];
        }
    }
    void run_step(const smul_step& s) {
        const float *x = ptr(s.x), v = *ptr(s.s);
        float* y = ptr(s.y);
        for (std::int64_t i = 0; i < s.y.elements(); ++i) y[i] = x[i] * v;
    }
    void run_step(const batchnorm_step& s) {
        const float *x = ptr(s.x), *sc = ptr(s.scale), *sh = ptr(s.shift);
        float* y = ptr(s.y);
        for (std::int64_t i = 0; i < s.y.elements(); ++i) {
            std::int64_t c = (i / s.inner) % s.c;
            y[i] = x[i] * sc[c] + sh[c];
        }
    }
    void run_step(const permute_step& s) {
        const float* x = ptr(s.x);
        float* y = ptr(s.y);
        for (std::int64_t i = 0; i < s.y.elements(); ++i) {
            std::int64_t ob;
            y[i] = x[walk_offset(s.geom, i, ob)];
        }
    }
    void run_step(const pad_step& s) {
        const float* x = ptr(s.x);
        float* y = ptr(s.y);
        for (std::int64_t o = 0; o < s.outer; ++o)
            for (std::int64_t oy = 0; oy < s.oh; ++oy)
                for (std::int64_t ox = 0; ox < s.ow; ++ox) {
                    std::int64_t iy = oy - s.top, ix = ox - s.left;
                    y[(o * s.oh + oy) * s.ow + ox] = (iy >= 0 && iy < s.h && ix >= 0 && ix < s.w) ? x[(o * s.h + iy) * s.w + ix] : 0.f;
                }
    }
    void run_step(const copy2d_step& s) {
        const float* src = ptr(s.src) + s.src_off;
        float* dst = ptr(s.dst) + s.dst_off;
        for (std::int64_t r = 0; r < s.height; ++r) std::memmove(dst + r * s.dst_pitch, src + r * s.src_pitch, static_cast<std::size_t>(s.width) * sizeof(float));
    }
    void run_step(const softmax_step& s) {
        const float* x = ptr(s.x);
        float* y = ptr(s.y);
        for (std::int64_t o = 0; o < s.outer; ++o)
            for (std::int64_t i = 0; i < s.inner; ++i) {
                auto at = [&](std::int64_t k) { return (o * s.n + k) * s.inner + i; };
                float mx = x[at(0)];
                for (std::int64_t k = 1; k < s.n; ++k) mx = std::max(mx, x[at(k)]);
                double sum = 0;
                for (std::int64_t k = 0; k < s.n; ++k) sum += std::exp(double(x[at(k)] - mx));
                for (std::int64_t k = 0; k < s.n; ++k) y[at(k)] = static_cast<float>(std::exp(double(x[at(k)] - mx)) / sum);
            }
    }
    void run_step(const host_step& s) {
        std::vector<tensor<float>> args;
        std::vector<const tensor<float>*> argp;
        for (auto& r : s.ins) args.emplace_back(r.logical, std::vector<float>(ptr(r), ptr(r) + r.elements()));
        for (auto& a : args) argp.push_back(&a);
        auto res = s.impl ? s.impl(s.copy, argp) : spec::evaluate<float>(s.copy.op, s.copy.params, argp);
        for (std::size_t k = 0; k < res.size(); ++k) std::copy(res[k].data.begin(), res[k].data.end(), ptr(s.outs[k]));
    }

    const plan& p_;
    std::vector<float> arena_;
    std::vector<std::vector<float>> own_;
};

}  // namespace tsopt::test::cuda
