// Weight matmuls ([m, k] x [k, n], the weight constant) timed on the
// configured oneDNN for every implementation it offers with the weights'
// layout left to it (`any`, reference kernels skipped), and for those that
// read the weights row-major, with the weights 32-byte aligned (+0) and 16
// bytes past a cache line (+16): what decides where the oneDNN plan places
// constant weights (backend/dnnl/matmul.hpp, gemm_weight_placement; figures
// in docs/benchmarks.md, "Where the weights lie"); then the same product as
// a oneDNN inner product (y = x W^T, weights in the layout each of its
// implementations asks): what decides which one runs it
// (backend/dnnl/matmul.hpp, prefer_inner_product; docs/benchmarks.md,
// "Inner product or matmul"). The shapes: zoo_bert's linear layers,
// neighbours of them in rows, depth and row stride, and BERT-base's.
//
//   OMP_NUM_THREADS=1 build/bench/dnnl_matmul_weights
//
// With --cold, instead: the matmul (weights placed as the plan places them)
// and the inner product (weights in its blocked layout) in alternation, the
// caches flushed before every run as a model's other weights flush them
// between two inferences, best and median of 25 runs each, for products of
// 64 to 384 rows (BERT-base's, zoo_bert's and neighbours): what extended
// prefer_inner_product past 64 rows.
//
//   OMP_NUM_THREADS=1 build/bench/dnnl_matmul_weights --cold
#include <oneapi/dnnl/dnnl.hpp>

#include "tsopt/backend/dnnl/matmul.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

using namespace dnnl;
using tag = memory::format_tag;

// One timed execution, in ms.
double run_ms(primitive& p, stream& st, std::unordered_map<int, memory>& args) {
    const auto a = std::chrono::steady_clock::now();
    p.execute(st, args);
    st.wait();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
}

// Median of `runs` timed executions, after warm-up, in ms.
double time_ms(primitive& p, stream& st, std::unordered_map<int, memory>& args, int runs) {
    for (int i = 0; i < 5; ++i) p.execute(st, args);
    st.wait();
    std::vector<double> t;
    for (int i = 0; i < runs; ++i) t.push_back(run_ms(p, st, args));
    std::nth_element(t.begin(), t.begin() + runs / 2, t.end());
    return t[static_cast<std::size_t>(runs / 2)];
}

// A page-aligned block with `offset` bytes of slack in front.
struct placed {
    void* raw = nullptr;
    float* at = nullptr;
    placed(std::size_t bytes, std::size_t offset) {
        if (posix_memalign(&raw, 4096, bytes + 8192) != 0) std::abort();
        at = reinterpret_cast<float*>(static_cast<char*>(raw) + offset);
        std::memset(at, 0, bytes);
        for (std::size_t i = 0; i < bytes / sizeof(float); i += 7) at[i] = 0.001f * static_cast<float>(i % 97);
    }
    ~placed() { std::free(raw); }
    placed(const placed&) = delete;
    placed& operator=(const placed&) = delete;
};

struct shape { memory::dim m, k, n; };

// Best and median of a step's run times.
std::pair<double, double> best_median(std::vector<double> ms) {
    std::sort(ms.begin(), ms.end());
    return {ms.front(), ms[ms.size() / 2]};
}

int cold(engine& eng, stream& st) {
    const shape shapes[] = {{64, 1024, 4096}, {64, 4096, 1024}, {96, 768, 3072},  {128, 512, 2048}, {128, 768, 768},
                            {128, 768, 2304}, {128, 768, 3072}, {128, 768, 4096}, {128, 1024, 1024}, {128, 1024, 3072},
                            {128, 1024, 4096}, {128, 3072, 768}, {196, 768, 3072}, {256, 768, 3072}, {384, 768, 3072}};
    const auto f32 = memory::data_type::f32;
    std::vector<char> flush(64u << 20);
    std::printf("%-22s %24s %24s %7s %s\n", "[m, k] x [k, n]", "matmul best/median ms", "inner product best/median", "gain",
                "prefer_inner_product");
    for (const shape& s : shapes) {
        memory::desc src({s.m, s.k}, f32, tag::ab), dst({s.m, s.n}, f32, tag::ab);
        matmul::primitive_desc mpd(eng, src, memory::desc({s.k, s.n}, f32, tag::any), dst);
        inner_product_forward::primitive_desc ipd(eng, prop_kind::forward_inference, src, memory::desc({s.n, s.k}, f32, tag::any),
                                                  dst);
        placed wm_raw(mpd.weights_desc().get_size(),
                      mpd.weights_desc() == memory::desc({s.k, s.n}, f32, tag::ab) ? tsopt::backend::dnnl_impl::gemm_weight_placement(s.m, s.n) : 0);
        placed wi_raw(ipd.weights_desc().get_size(), 0);
        memory a(src, eng), y(dst, eng), wm(mpd.weights_desc(), eng, wm_raw.at), wi(ipd.weights_desc(), eng, wi_raw.at);
        std::memset(a.get_data_handle(), 0, src.get_size());
        matmul mm(mpd);
        inner_product_forward ip(ipd);
        std::unordered_map<int, memory> margs{{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, y}},
            iargs{{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, wi}, {DNNL_ARG_DST, y}};
        std::vector<double> tm, ti;
        auto cold_run_ms = [&](primitive& p, std::unordered_map<int, memory>& args) {
            for (std::size_t i = 0; i < flush.size(); i += 64) flush[i] = static_cast<char>(flush[i] + 1);
            return run_ms(p, st, args);
        };
        for (int r = 0; r < 25; ++r) {
            tm.push_back(cold_run_ms(mm, margs));
            ti.push_back(cold_run_ms(ip, iargs));
        }
        const auto [mb, mmed] = best_median(tm);
        const auto [ib, imed] = best_median(ti);
        char what[32], mcell[48], icell[48];
        std::snprintf(what, sizeof what, "[%ld, %ld] x [%ld, %ld]", static_cast<long>(s.m), static_cast<long>(s.k), static_cast<long>(s.k),
                      static_cast<long>(s.n));
        std::snprintf(mcell, sizeof mcell, "%.3f / %.3f (%s)", mb, mmed, mpd.impl_info_str());
        std::snprintf(icell, sizeof icell, "%.3f / %.3f (%s)", ib, imed, ipd.impl_info_str());
        std::printf("%-22s %24s %24s %6.2fx %s\n", what, mcell, icell, mmed / imed,
                    tsopt::backend::dnnl_impl::prefer_inner_product(s.m, s.k, s.n) ? "yes" : "no");
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc > 1 && std::string(argv[1]) == "--cold") {
        engine eng(engine::kind::cpu, 0);
        stream st(eng);
        return cold(eng, st);
    }
    const shape shapes[] = {{64, 1024, 1024}, {64, 1024, 4096}, {64, 4096, 1024},                 // zoo_bert
                            {8, 1024, 1024},  {16, 1024, 1024}, {24, 1024, 1024}, {32, 1024, 1024}, {256, 1024, 1024},
                            {64, 256, 256},   {64, 512, 512},   {64, 2048, 512},  {64, 1000, 1000}, {64, 1024, 1000},
                            {128, 768, 768},  {128, 768, 2304}, {128, 768, 3072}, {128, 3072, 768},  // BERT-base
                            {1, 1024, 1024},  {1, 2048, 1000}, {2, 1024, 1024}, {4, 256, 256},  {48, 1024, 1024},
                            {64, 1024, 3072}, {64, 2048, 1024}, {64, 3072, 1024}, {96, 1024, 1024}, {128, 1024, 1024},
                            {32, 1024, 3072}};  // zoo_rnntc's input projections
    const std::size_t offsets[] = {0, 16};
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress shows through a pipe
    engine eng(engine::kind::cpu, 0);
    stream st(eng);
    const auto* v = version();
    std::printf("oneDNN %d.%d.%d, median of 41 runs; plain weights at page offsets (bytes) or in the layout the implementation asks\n",
                v->major, v->minor, v->patch);
    const auto f32 = memory::data_type::f32;
    for (const shape& s : shapes) {
        std::printf("[%ld, %ld] x [%ld, %ld]\n", static_cast<long>(s.m), static_cast<long>(s.k), static_cast<long>(s.k),
                    static_cast<long>(s.n));
        memory::desc src({s.m, s.k}, f32, tag::ab), wany({s.k, s.n}, f32, tag::any), wplain({s.k, s.n}, f32, tag::ab),
            dst({s.m, s.n}, f32, tag::ab);
        memory a(src, eng), y(dst, eng);
        std::memset(a.get_data_handle(), 0, src.get_size());
        matmul::primitive_desc pd(eng, src, wany, dst);
        for (int impl = 0;; ++impl) {
            const std::string name = pd.impl_info_str();
            // The reference implementation takes seconds a run and is never chosen.
            if (name.rfind("ref", 0) == 0) {
                if (!pd.next_impl()) break;
                continue;
            }
            const bool plain = pd.weights_desc() == wplain;
            const std::size_t bytes = pd.weights_desc().get_size();
            matmul mm(pd);
            std::string line = "  " + name + (plain ? " (plain)" : " (blocked)") + ":";
            for (std::size_t off : plain ? std::vector<std::size_t>(std::begin(offsets), std::end(offsets))
                                         : std::vector<std::size_t>{0}) {
                placed w(bytes, off);
                memory wm(pd.weights_desc(), eng, w.at);
                std::unordered_map<int, memory> args{{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, y}};
                char cell[64];
                std::snprintf(cell, sizeof cell, "  +%zu %.3f ms", off, time_ms(mm, st, args, 41));
                line += cell;
            }
            std::printf("%s\n", line.c_str());
            if (!pd.next_impl()) break;
        }
        inner_product_forward::primitive_desc ipd(eng, prop_kind::forward_inference, src, memory::desc({s.n, s.k}, f32, tag::any),
                                                  dst);
        for (;;) {
            const std::string name = ipd.impl_info_str();
            if (name.rfind("ref", 0) != 0) {
                inner_product_forward ip(ipd);
                placed w(ipd.weights_desc().get_size(), 0);
                memory wm(ipd.weights_desc(), eng, w.at);
                std::unordered_map<int, memory> args{{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, y}};
                std::printf("  inner product %s: %.3f ms\n", name.c_str(), time_ms(ip, st, args, 41));
            }
            if (!ipd.next_impl()) break;
        }
    }
}
