#pragma once
// The compiled form of a graph on oneDNN, and the lowering context the
// per-operator files (conv2d.hpp, matmul.hpp, ...) write into.
//
// A plan is a list of steps (a oneDNN primitive with its bound arguments, or
// a small custom function: memset, reference fallback) over buffers. A buffer
// is either persistent (weights and constants, folded once at compile time,
// plus their layout conversions) or lives in one arena whose offsets come
// from liveness-based memory planning: two buffers share bytes when their
// lifetimes (first step touching them .. last step reading them) do not
// overlap. Values carry a oneDNN memory descriptor, so a convolution may leave
// its result in a blocked layout (nChw16c) that the next convolution, pooling
// or eltwise reads directly; operators that need row-major data ask for it
// with `plain()`, which inserts one reorder per (value, layout), shared by
// every consumer.
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <climits>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "tsopt/backend/arena.hpp"
#include "tsopt/backend/backend.hpp"
#include "tsopt/backend/host_fallback.hpp"

namespace tsopt::backend::dnnl_impl {

namespace dn = ::dnnl;
using dims = dn::memory::dims;
using tag = dn::memory::format_tag;
inline constexpr auto f32 = dn::memory::data_type::f32;

inline dims to_dims(const shape& s) {
    dims d(s.begin(), s.end());
    if (d.empty()) d.push_back(1);  // rank-0 scalars are [1] to oneDNN
    return d;
}
inline std::int64_t elements(const dims& d) {
    std::int64_t n = 1;
    for (auto x : d) n *= x;
    return n;
}
inline dn::memory::desc plain_md(const dims& d) {
    dims st(d.size());
    std::int64_t acc = 1;
    for (std::size_t i = d.size(); i-- > 0;) { st[i] = acc; acc *= d[i]; }
    return dn::memory::desc(d, f32, st);
}
inline dn::memory::desc any_md(const dims& d) { return dn::memory::desc(d, f32, tag::any); }
inline bool is_plain(const dn::memory::desc& md) { return md == plain_md(md.get_dims()); }
// `d` with leading 1s up to rank r.
inline dims pad_front(dims d, std::size_t r) {
    while (d.size() < r) d.insert(d.begin(), 1);
    return d;
}

inline std::optional<dn::algorithm> act_algorithm(std::int32_t act) {
    switch (static_cast<spec::activation>(act)) {
        case spec::activation::relu: return dn::algorithm::eltwise_relu;
        case spec::activation::sigmoid: return dn::algorithm::eltwise_logistic;
        case spec::activation::tanh: return dn::algorithm::eltwise_tanh;
        default: return std::nullopt;
    }
}

// Part of the measurement cache's machine key: bump it when a lowering
// changes what an operator costs, so older measurements are not reused
// (2: contiguous split parts became views; 3: concat by memcpy, or in the
// layout its convolution inputs share; 4: oneDNN 3.2, a convolution's
// per-channel add as its bias; 5: 3x3 convolutions by Winograd; 6:
// contiguous slices became views; 7: weight matmuls of 2 to 64 rows as
// brgemm inner products; 8: elementwise chains after an elementwise
// operator as its post-ops; 9: unrolled Winograd transforms, and Winograd
// from 24 input channels and 32 output channels on; 10: memory-bound
// primitives under serial_bytes on one thread; 11: batchnorm as a binary
// multiply before oneDNN's batch normalization; 12: grouped convolutions
// keep a channels-last input's layout; 13: groups of 2 or 4 channels by
// tsopt's own kernel on AVX2; 14: weight matmuls of 65 to 128 rows and
// 2048 columns or more as brgemm inner products; 15: with AVX2 alone,
// Winograd F(2x2, 3x3) only on whole tiles; 16: the elementwise chain
// after a matmul (GELU, a residual add) as its post-ops; 17: the same after
// a pooling without an activation; 18: not after a row-major pooling, and
// no full-size post-op operand in another layout than the output's; 19:
// x + x and x * x as eltwise post-ops; 20: the chain goes on past an
// operator that asks for another layout; 21: channels-last depthwise
// convolutions below 512 channels in jit_dw instead of brdgmm_dw, a 1x1
// pooling window (with a pad and crops before it) as a strided copy, an
// unread split part not copied; 22: explicit layout conversions left to
// their readers, backend/arena.hpp bypass_layout_conversions; 23: a
// negation read once by a sum left to it, which subtracts; 24: steps in
// graph::run_order, a conv waiting for the operand its sum post-op adds;
// 25: a grouped convolution reading channels-last in the form timed fastest).
inline constexpr int lowering_revision = 26;

// One tensor as a step sees it: a buffer, where in it the tensor starts (a
// view: a split part that is contiguous in its input is read in place), and
// the layout it is read with.
struct tref {
    int buf = -1;
    dn::memory::desc md;
    std::size_t offset = 0;  // bytes into the buffer

    // The same bytes read with another descriptor.
    tref as(const dn::memory::desc& d) const { return {buf, d, offset}; }
};

struct buffer {
    std::size_t bytes = 0;
    bool persistent = false;
    const float* external = nullptr;  // persistent: weight / folded constant data owned elsewhere
    std::shared_ptr<const tensor<float>> source;  // persistent: the constant `external` points into (kept alive)
    std::shared_ptr<std::vector<float>> own;      // persistent: converted constants (shared_conversions)
    std::size_t offset = 0;           // arena buffers: planned offset
    int first = INT_MAX, last = INT_MIN;  // arena buffers: lifetime in steps
};

using custom_fn = std::function<void(std::span<float* const> in, std::span<float* const> out)>;

struct step {
    std::int32_t node = -1;
    bool conversion = false;  // a layout conversion, not the node's own work
    std::string what;
    std::string impl;  // oneDNN's implementation name (primitives only)
    std::optional<dn::primitive> prim;
    std::vector<std::pair<int, tref>> args;
    std::size_t scratch = 0;
    dn::memory::desc scratch_md;
    custom_fn fn;
    std::vector<tref> fin, fout;
    // bound by plan::finalize
    std::unordered_map<int, dn::memory> mem;
    std::vector<float*> pin, pout;
    // Run on the calling thread alone: a memory-bound primitive over fewer
    // bytes than serial_bytes, whose fork and join would cost more than
    // the second thread saves (set by plan::finalize).
    bool serial = false;
};

// Below this many bytes written, an elementwise, reorder, concat, pooling or
// softmax primitive runs on one thread. On the 2-vCPU Xeon an SRU time step
// ([1,1024] adds, multiplies and sigmoids) took 0.9 us on one thread and
// 2.1 us on two (the SRU model: 4.5 -> 3.5 ms at 2 threads). With the
// bound at 64 KB GoogLeNet and NASNet-Mobile lost 1-3 %; at 32 KB neither did.
inline constexpr std::size_t serial_bytes = std::size_t{32} << 10;

// Memory-bound primitives whose work is proportional to their output.
inline bool memory_bound(dn::primitive::kind k) {
    using K = dn::primitive::kind;
    return k == K::eltwise || k == K::binary || k == K::reorder || k == K::concat || k == K::sum ||
           k == K::softmax || k == K::pooling || k == K::shuffle;
}

// Sets the OpenMP threads of the calling thread's next parallel regions
// (oneDNN's included) for one scope. Without OpenMP, oneDNN's runtime is not
// ours to narrow and the scope does nothing.
class thread_limit {
public:
    explicit thread_limit(bool serial) {
#ifdef _OPENMP
        if (!serial) return;
        before_ = omp_get_max_threads();
        if (before_ > 1) omp_set_num_threads(1);
#else
        (void)serial;
#endif
    }
    ~thread_limit() {
#ifdef _OPENMP
        if (before_ > 1) omp_set_num_threads(before_);
#endif
    }
    thread_limit(const thread_limit&) = delete;
    thread_limit& operator=(const thread_limit&) = delete;

private:
    int before_ = 0;
};

struct plan_stats {
    std::size_t planned_bytes = 0;     // arena size after memory planning
    std::size_t naive_bytes = 0;       // sum of every arena buffer
    std::size_t persistent_bytes = 0;  // converted constants (weights are read in place)
    std::size_t scratch_bytes = 0;     // one scratchpad shared by all primitives
    std::size_t primitives = 0, conversions = 0, custom_steps = 0, fallbacks = 0;
    std::size_t fused_ops = 0;  // operators run as post-ops of their producer's primitive
    std::size_t shared_conversions = 0;  // converted constants another plan of the backend already held
};

class plan {
public:
    dn::engine eng;
    dn::stream strm;
    std::vector<buffer> bufs;
    std::vector<step> steps;
    std::vector<tref> inputs;                      // in g.inputs() order
    std::vector<std::pair<tref, shape>> outputs;   // plain, in g.outputs order
    std::vector<std::pair<std::int32_t, std::int32_t>> fused;  // (node, the node whose primitive runs it)
    plan_stats stats;

    explicit plan(dn::engine e) : eng(std::move(e)), strm(eng) {}
    plan(const plan&) = delete;
    plan& operator=(const plan&) = delete;

    float* ptr(int b) {
        buffer& x = bufs[static_cast<std::size_t>(b)];
        if (!x.persistent) return reinterpret_cast<float*>(arena_ + x.offset);
        return x.external ? const_cast<float*>(x.external) : x.own->data();
    }
    float* ptr(const tref& r) { return reinterpret_cast<float*>(reinterpret_cast<std::byte*>(ptr(r.buf)) + r.offset); }

    // Memory planning (greedy by size over lifetime intervals) and binding of
    // every step argument to its address.
    void finalize() {
        const int nsteps = static_cast<int>(steps.size());
        auto touch = [&](int b, int s) {
            buffer& x = bufs[static_cast<std::size_t>(b)];
            x.first = std::min(x.first, s);
            x.last = std::max(x.last, s);
        };
        for (int s = 0; s < nsteps; ++s) {
            for (auto& [arg, r] : steps[static_cast<std::size_t>(s)].args) touch(r.buf, s);
            for (auto& r : steps[static_cast<std::size_t>(s)].fin) touch(r.buf, s);
            for (auto& r : steps[static_cast<std::size_t>(s)].fout) touch(r.buf, s);
        }
        for (auto& r : inputs) touch(r.buf, -1);
        for (auto& [r, s] : outputs) touch(r.buf, nsteps);
        std::vector<int> order;
        for (std::size_t b = 0; b < bufs.size(); ++b) {
            buffer& x = bufs[b];
            x.bytes = (x.bytes + 63) / 64 * 64;
            if (x.persistent) {
                stats.persistent_bytes += x.own ? x.own->size() * sizeof(float) : 0;
                continue;
            }
            if (x.first > x.last) continue;  // never used
            stats.naive_bytes += x.bytes;
            order.push_back(static_cast<int>(b));
        }
        auto overlap = [](const buffer& x, const buffer& y) { return x.first <= y.last && y.first <= x.last; };  // step lifetimes
        stats.planned_bytes = std::max(stats.planned_bytes, place_in_arena(bufs, std::move(order), overlap));
        std::size_t scratch = 0;
        for (auto& s : steps) scratch = std::max(scratch, s.scratch);
        stats.scratch_bytes = scratch;
        storage_.assign(stats.planned_bytes + scratch + 128, std::byte{0});
        auto base = reinterpret_cast<std::uintptr_t>(storage_.data());
        arena_ = storage_.data() + ((64 - base % 64) % 64);
        std::byte* scratch_ptr = arena_ + (stats.planned_bytes + 63) / 64 * 64;
        for (auto& s : steps) {
            for (auto& [arg, r] : s.args) s.mem.emplace(arg, dn::memory(r.md, eng, ptr(r)));
            if (s.scratch) s.mem.emplace(DNNL_ARG_SCRATCHPAD, dn::memory(s.scratch_md, eng, scratch_ptr));
            for (auto& r : s.fin) s.pin.push_back(ptr(r));
            for (auto& r : s.fout) s.pout.push_back(ptr(r));
            if (s.prim) ++(s.conversion ? stats.conversions : stats.primitives);
            else ++stats.custom_steps;
            if (s.prim && memory_bound(s.prim->get_kind())) {
                const auto dst = std::find_if(s.args.begin(), s.args.end(), [](auto& a) { return a.first == DNNL_ARG_DST; });
                s.serial = dst != s.args.end() && dst->second.md.get_size() < serial_bytes;
            }
        }
    }

    void run_step(step& s) {
        thread_limit limit(s.serial);
        execute(s);
    }
    void run_steps() {
        // Consecutive serial steps share one narrowing of the threads.
        for (std::size_t k = 0; k < steps.size();) {
            const bool serial = steps[k].serial;
            thread_limit limit(serial);
            do execute(steps[k++]);
            while (k < steps.size() && steps[k].serial == serial);
        }
        strm.wait();
    }
    void load_inputs(std::span<const tensor<float>> in) {
        for (std::size_t i = 0; i < inputs.size(); ++i)
            std::memcpy(ptr(inputs[i]), in[i].data.data(), in[i].data.size() * sizeof(float));
    }
    std::vector<tensor<float>> read_outputs() {
        std::vector<tensor<float>> out;
        for (auto& [r, s] : outputs) {
            tensor<float> t(s);
            std::memcpy(t.data.data(), ptr(r), t.data.size() * sizeof(float));
            out.push_back(std::move(t));
        }
        return out;
    }
    std::vector<tensor<float>> run(std::span<const tensor<float>> in) {
        load_inputs(in);
        run_steps();
        return read_outputs();
    }

private:
    void execute(step& s) {
        if (s.prim) s.prim->execute(strm, s.mem);
        else {
            strm.wait();
            s.fn(s.pin, s.pout);
        }
    }

    std::vector<std::byte> storage_;
    std::byte* arena_ = nullptr;
};

using backend::opaque_fn;
using backend::opaque_map;

// Constants converted to another layout (a convolution's weights into
// oneDNN's blocked format), shared by the plans of one backend: candidates of
// one model share most weight tensors, and each plan holding its own copy of
// every converted weight made pick_fastest's peak grow by the model's size
// per candidate. An entry is used only while its source tensor is alive (so
// its address names it) and some plan still holds the converted data.
struct shared_conversions {
    // A copy that only moves the data (lowering::placed) has from == to and
    // names where in a cache line it starts; a conversion has placement 0.
    struct entry {
        std::weak_ptr<const tensor<float>> source;
        std::size_t offset;
        dn::memory::desc from, to;
        std::size_t placement;
        std::weak_ptr<std::vector<float>> data;
    };
    std::vector<entry> entries;

    std::shared_ptr<std::vector<float>> find(const std::shared_ptr<const tensor<float>>& src, std::size_t offset,
                                             const dn::memory::desc& from, const dn::memory::desc& to,
                                             std::size_t placement = 0) {
        std::erase_if(entries, [](const entry& e) { return e.source.expired() || e.data.expired(); });
        for (const auto& e : entries)
            if (e.source.lock() == src && e.offset == offset && e.from == from && e.to == to && e.placement == placement)
                return e.data.lock();
        return nullptr;
    }
    void add(const std::shared_ptr<const tensor<float>>& src, std::size_t offset, const dn::memory::desc& from,
             const dn::memory::desc& to, const std::shared_ptr<std::vector<float>>& data, std::size_t placement = 0) {
        entries.push_back({src, offset, from, to, placement, data});
    }
};

// Choices of how operators are lowered (dnnl::options carries them).
// Where one of tsopt's own kernels runs instead of oneDNN's: on the CPUs
// where it was measured faster (automatic), everywhere it applies (always:
// tests on any machine), or nowhere.
enum class kernel_use { automatic, always, never };

// Times the ways one operator can run and names the one to take: `key`
// names the operator's configuration, `names` the ways, run(k) runs way k
// once. Returns the index of the fastest (0 unless another is clearly
// faster). The dnnl backend's remembers the times in its measurement cache,
// so a configuration is timed once per machine and compiles the same way
// after (dnnl::options::timed_choices).
using lowering_timer =
    std::function<std::size_t(const std::string& key, std::span<const std::string> names, const std::function<void(std::size_t)>& run)>;

struct lowering_options {
    bool winograd = true;  // 3x3 stride-1 convolutions by Winograd where they qualify (winograd.hpp)
    kernel_use small_groups = kernel_use::automatic;  // grouped convolutions of 2 or 4 channels per group (grouped_conv.hpp)
    // Where set, the choices that depend on the CPU are timed (the form of a
    // grouped convolution reading channels-last: grouped_conv_choice.hpp);
    // else fixed rules make them.
    lowering_timer time_choices = {};
};

class lowering;
// A native lowering of an opaque operator type (backend::dnnl::
// opaque_lowerings, e.g. the ONNX ones of onnx_ops.hpp): false, or throwing
// refused / dnnl::error, where it does not handle the node's configuration
// (the node then runs on its host implementation).
using opaque_lowering = std::function<bool(lowering&, std::size_t)>;
using opaque_lowering_map = std::map<std::string, opaque_lowering, std::less<>>;

// An opaque operator that is one oneDNN eltwise on its first input (ONNX
// Clip with constant bounds, HardSwish, ...): run as an eltwise step, or as
// a post-op of the convolution before it (MobileNet's conv -> Clip(0, 6)).
struct eltwise_form {
    dn::algorithm alg;
    float alpha = 0.f, beta = 0.f;
    std::string what;
    // Nodes after this one that the same eltwise stands for, in order (GELU
    // as exporters write it starts at a Div: Erf, + 1, * x, * 0.5); the last
    // one's value is the form's. They read only each other, this node and
    // its input, so a producer of that input runs all of them as one post-op.
    std::vector<std::size_t> covers = {};
};
// nullopt where the node's configuration is not one eltwise (a bound that
// is not a constant scalar, another domain).
using opaque_eltwise = std::function<std::optional<eltwise_form>(const lowering&, std::size_t)>;
using opaque_eltwise_map = std::map<std::string, opaque_eltwise, std::less<>>;

// The lowering context: graph values to buffers, with helpers for the
// operator files.
class lowering {
public:
    plan& p;
    const graph& g;
    const opaque_map& opaque;
    const opaque_lowering_map& native;  // opaque types with a oneDNN lowering
    const opaque_eltwise_map& elementwise;  // opaque types that are one eltwise
    std::vector<bool> constant;
    std::vector<std::vector<tref>> vals;  // per node, per output
    std::vector<std::vector<std::shared_ptr<const tensor<float>>>> cvals;  // folded constants
    std::vector<std::vector<std::pair<std::int32_t, std::int32_t>>> consumers;  // g.consumers()
    std::vector<bool> absorbed;  // runs as a post-op of an earlier node's primitive: nothing to lower
    // A smul by -1 left to the sum that reads it, which subtracts its
    // operand instead (eltwise.hpp, leave_negation_to_sum): no value of its own.
    std::vector<bool> negated;
    shared_conversions* shared = nullptr;  // the backend's, when it has one
    lowering_options options;

    lowering(plan& pl, const graph& gr, const opaque_map& op, const opaque_lowering_map& nat, const opaque_eltwise_map& elt,
             shared_conversions* sh = nullptr, lowering_options o = {})
        : p(pl), g(gr), opaque(op), native(nat), elementwise(elt), constant(gr.constant_mask()), vals(gr.size()), cvals(gr.size()),
          consumers(gr.consumers()), absorbed(gr.size(), false), negated(gr.size(), false), shared(sh), options(o) {}

    // Node `into` runs node `n` inside its primitive; n's value is `r`.
    void absorb(std::size_t n, std::size_t into, const tref& r) {
        fuse(n, into);
        set(n, 0, r);
    }
    // ... where n has no value of its own (a pad the pooling reads through).
    void fuse(std::size_t n, std::size_t into) {
        absorbed[n] = true;
        p.fused.push_back({static_cast<std::int32_t>(n), static_cast<std::int32_t>(into)});
        ++p.stats.fused_ops;
    }
    bool is_graph_output(std::size_t n) const {
        for (value v : g.outputs)
            if (static_cast<std::size_t>(v.node) == n) return true;
        return false;
    }
    // Whether output o of node n is read: by another node or as a graph output.
    bool output_read(std::size_t n, std::int32_t o) const {
        for (value v : g.outputs)
            if (static_cast<std::size_t>(v.node) == n && v.output == o) return true;
        for (const auto& [reader, slot] : consumers[n])
            if (g.nodes[static_cast<std::size_t>(reader)].inputs[static_cast<std::size_t>(slot)].output == o) return true;
        return false;
    }

    const node& at(std::size_t i) const { return g.nodes[i]; }
    // Opaque node (or engine's operator) i as one eltwise on its first
    // input, if its type is registered as one.
    std::optional<eltwise_form> eltwise_of(std::size_t i) const {
        const node& n = at(i);
        const auto type = registered_type(n);
        if (!type || n.inputs.empty() || n.num_outputs() != 1) return std::nullopt;
        auto it = elementwise.find(*type);
        return it == elementwise.end() ? std::nullopt : it->second(*this, i);
    }
    tref in(std::size_t i, int slot) const {
        value v = g.nodes[i].inputs[static_cast<std::size_t>(slot)];
        return vals[static_cast<std::size_t>(v.node)][static_cast<std::size_t>(v.output)];
    }
    // Input `slot` of node i already has a buffer (its producer came earlier
    // in the topological order).
    bool lowered(std::size_t i, int slot) const {
        value v = g.nodes[i].inputs[static_cast<std::size_t>(slot)];
        const auto& o = vals[static_cast<std::size_t>(v.node)];
        return static_cast<std::size_t>(v.output) < o.size() && o[static_cast<std::size_t>(v.output)].buf >= 0;
    }
    // The negation node i's input `slot` is, where it was left to i.
    std::optional<std::size_t> negation(std::size_t i, int slot) const {
        const auto p = static_cast<std::size_t>(g.nodes[i].inputs[static_cast<std::size_t>(slot)].node);
        return negated[p] ? std::optional<std::size_t>(p) : std::nullopt;
    }
    bool is_const(std::size_t i, int slot) const {
        return constant[static_cast<std::size_t>(g.nodes[i].inputs[static_cast<std::size_t>(slot)].node)];
    }
    const tensor<float>* const_tensor(std::size_t i, int slot) const {
        value v = g.nodes[i].inputs[static_cast<std::size_t>(slot)];
        auto& c = cvals[static_cast<std::size_t>(v.node)];
        return c.empty() ? nullptr : c[static_cast<std::size_t>(v.output)].get();
    }
    const shape& in_shape(std::size_t i, int slot) const { return g.shape_of(g.nodes[i].inputs[static_cast<std::size_t>(slot)]); }
    dims in_dims(std::size_t i, int slot) const { return to_dims(in_shape(i, slot)); }
    dims out_dims(std::size_t i, int out = 0) const { return to_dims(g.nodes[i].shapes[static_cast<std::size_t>(out)]); }
    void set(std::size_t i, int out, tref r) {
        auto& v = vals[i];
        if (v.size() < g.nodes[i].shapes.size()) v.resize(g.nodes[i].shapes.size());
        v[static_cast<std::size_t>(out)] = std::move(r);
    }
    bool persistent(const tref& r) const { return p.bufs[static_cast<std::size_t>(r.buf)].persistent; }

    int new_buffer(std::size_t bytes) {
        buffer b;
        b.bytes = bytes;
        p.bufs.push_back(std::move(b));
        return static_cast<int>(p.bufs.size() - 1);
    }
    tref fresh(const dn::memory::desc& md) { return {new_buffer(md.get_size()), md}; }
    tref constant_buffer(std::shared_ptr<const tensor<float>> t) {
        buffer b;
        b.persistent = true;
        b.bytes = t->data.size() * sizeof(float);
        b.external = t->data.data();
        b.source = t;
        p.bufs.push_back(std::move(b));
        return {static_cast<int>(p.bufs.size() - 1), plain_md(to_dims(t->shape))};
    }

    dn::primitive_attr attr(std::int32_t act = 0) const {
        dn::primitive_attr a;
        a.set_scratchpad_mode(dn::scratchpad_mode::user);
        if (auto alg = act_algorithm(act)) {
            dn::post_ops po;
            po.append_eltwise(*alg, 0.f, 0.f);
            a.set_post_ops(po);
        }
        return a;
    }

    // Adds a primitive step built from `pd` (PD::primitive-constructible).
    template <class Prim, class PD>
    void add(std::size_t node, const PD& pd, std::vector<std::pair<int, tref>> args, std::string what, bool conversion = false) {
        step s;
        s.node = static_cast<std::int32_t>(node);
        s.conversion = conversion;
        s.what = std::move(what);
        s.prim = Prim(pd);
        s.impl = pd.impl_info_str();
        s.args = std::move(args);
        s.scratch_md = pd.scratchpad_desc();
        s.scratch = s.scratch_md.get_size();
        for (const auto& [arg, r] : s.args)
            if (arg == DNNL_ARG_DST || arg == DNNL_ARG_TO) written(r);
        p.steps.push_back(std::move(s));
    }
    void custom(std::size_t node, custom_fn fn, std::vector<tref> ins, std::vector<tref> outs, std::string what) {
        for (const tref& r : outs) written(r);
        step s;
        s.node = static_cast<std::int32_t>(node);
        s.what = std::move(what);
        s.fn = std::move(fn);
        s.fin = std::move(ins);
        s.fout = std::move(outs);
        p.steps.push_back(std::move(s));
    }
    // Zero-fills a value's buffer (enlarge, pad write into its interior).
    void zero(std::size_t node, const tref& r) {
        std::size_t bytes = r.md.get_size();
        custom(node, [bytes](std::span<float* const>, std::span<float* const> out) { std::memset(out[0], 0, bytes); }, {}, {r},
               "zero");
    }

    // A step writes buffer r.buf: conversions read from it, or into it, before
    // that hold stale data (a sum post-op accumulates into its other operand's
    // buffer, whose earlier reorder a later reader would otherwise reuse).
    void written(const tref& r) {
        std::erase_if(conversions_, [&](const auto& c) { return c.first.buf == r.buf || c.second.buf == r.buf; });
    }

    // `r` in layout `md`: itself, or a reorder of it (done now for constants,
    // as a step otherwise), shared by every consumer asking for the same.
    tref convert(const tref& r, const dn::memory::desc& md, std::size_t node) {
        if (r.md == md) return r;
        for (auto& [src, dst] : conversions_)
            if (src.buf == r.buf && src.offset == r.offset && src.md == r.md && dst.md == md) return dst;
        dn::reorder::primitive_desc pd(p.eng, r.md, p.eng, md, attr());
        tref out;
        if (persistent(r)) {
            const auto& source = p.bufs[static_cast<std::size_t>(r.buf)].source;
            buffer b;
            b.persistent = true;
            b.bytes = md.get_size();
            if (shared && source) b.own = shared->find(source, r.offset, r.md, md);
            const bool reuse = b.own != nullptr;
            if (!reuse) b.own = std::make_shared<std::vector<float>>((md.get_size() + sizeof(float) - 1) / sizeof(float), 0.f);
            if (shared && source && !reuse) shared->add(source, r.offset, r.md, md, b.own);
            p.bufs.push_back(std::move(b));
            out = {static_cast<int>(p.bufs.size() - 1), md};
            conversions_.push_back({r, out});
            if (reuse) {
                ++p.stats.shared_conversions;
                return out;
            }
            std::vector<std::byte> scratch(pd.scratchpad_desc().get_size() + 64);
            std::unordered_map<int, dn::memory> args{{DNNL_ARG_FROM, dn::memory(r.md, p.eng, p.ptr(r))},
                                                     {DNNL_ARG_TO, dn::memory(md, p.eng, p.ptr(out))}};
            if (pd.scratchpad_desc().get_size())
                args.emplace(DNNL_ARG_SCRATCHPAD, dn::memory(pd.scratchpad_desc(), p.eng, scratch.data()));
            dn::reorder(pd).execute(p.strm, args);
            p.strm.wait();
            return out;
        }
        out = fresh(md);
        add<dn::reorder>(node, pd, {{DNNL_ARG_FROM, r}, {DNNL_ARG_TO, out}}, "reorder", true);
        conversions_.push_back({r, out});
        return out;
    }
    // Constant `r` read where its first byte lies `past` bytes after a
    // 64-byte boundary: itself when it does, else a copy placed so (shared by
    // the plans of one backend like converted weights). Some kernels pick
    // their algorithm by the operand's alignment (gemm_weight_placement).
    tref placed(const tref& r, std::size_t past) {
        if (past % 16 != 0 || past >= 64) throw error("internal error: a constant placed " + std::to_string(past) + " bytes into a cache line");
        const auto line_offset = [](const float* a) { return reinterpret_cast<std::uintptr_t>(a) % 64; };
        if (line_offset(p.ptr(r)) == past) return r;
        for (auto& [src, dst] : conversions_)
            if (src.buf == r.buf && src.offset == r.offset && src.md == r.md && dst.md == r.md && line_offset(p.ptr(dst)) == past)
                return dst;
        const auto& source = p.bufs[static_cast<std::size_t>(r.buf)].source;
        const std::size_t bytes = r.md.get_size();
        buffer b;
        b.persistent = true;
        b.bytes = bytes + 64;
        if (shared && source) b.own = shared->find(source, r.offset, r.md, r.md, past);
        const bool reuse = b.own != nullptr;
        if (!reuse) b.own = std::make_shared<std::vector<float>>((bytes + 64) / sizeof(float), 0.f);
        // operator new aligns to 16 bytes, so `past` (a multiple of 16) is reached
        const std::size_t skip = (past + 64 - line_offset(b.own->data())) % 64;
        if (!reuse) {
            std::memcpy(reinterpret_cast<std::byte*>(b.own->data()) + skip, p.ptr(r), bytes);
            if (shared && source) shared->add(source, r.offset, r.md, r.md, b.own, past);
        } else {
            ++p.stats.shared_conversions;
        }
        p.bufs.push_back(std::move(b));
        const tref out{static_cast<int>(p.bufs.size() - 1), r.md, skip};
        conversions_.push_back({r, out});
        return out;
    }
    // A constant computed from `source` (Winograd's transformed weights):
    // `fill` writes it row-major with extents `plain`, then it is reordered
    // to `to` now. Shared by the plans of one backend like converted
    // weights, keyed by the source tensor and (plain, to).
    tref derived_constant(const std::shared_ptr<const tensor<float>>& source, const dn::memory::desc& plain,
                          const dn::memory::desc& to, const std::function<void(float*)>& fill) {
        buffer b;
        b.persistent = true;
        b.bytes = to.get_size();
        if (shared) b.own = shared->find(source, 0, plain, to);
        if (b.own) ++p.stats.shared_conversions;
        else {
            std::vector<float> rows(static_cast<std::size_t>(elements(plain.get_dims())));
            fill(rows.data());
            b.own = std::make_shared<std::vector<float>>((to.get_size() + sizeof(float) - 1) / sizeof(float), 0.f);
            dn::reorder::primitive_desc pd(p.eng, plain, p.eng, to, attr());
            std::vector<std::byte> scratch(pd.scratchpad_desc().get_size() + 64);
            std::unordered_map<int, dn::memory> args{{DNNL_ARG_FROM, dn::memory(plain, p.eng, rows.data())},
                                                     {DNNL_ARG_TO, dn::memory(to, p.eng, b.own->data())}};
            if (pd.scratchpad_desc().get_size())
                args.emplace(DNNL_ARG_SCRATCHPAD, dn::memory(pd.scratchpad_desc(), p.eng, scratch.data()));
            dn::reorder(pd).execute(p.strm, args);
            p.strm.wait();
            if (shared) shared->add(source, 0, plain, to, b.own);
        }
        p.bufs.push_back(std::move(b));
        return {static_cast<int>(p.bufs.size() - 1), to};
    }
    // `r` as row-major data viewed with extents `d` (same element count).
    tref plain(const tref& r, const dims& d, std::size_t node) {
        tref x = is_plain(r.md) ? r : convert(r, plain_md(r.md.get_dims()), node);
        if (elements(d) != elements(x.md.get_dims()))
            throw error(g.nodes[node].describe() + ": internal error: cannot view " + std::to_string(elements(x.md.get_dims())) +
                        " elements as " + std::to_string(elements(d)));
        return x.as(plain_md(d));
    }
    tref plain_in(std::size_t i, int slot) { return plain(in(i, slot), in_dims(i, slot), i); }

    // Runs node i with the reference semantics (or a registered opaque
    // implementation) on row-major copies of its inputs.
    void fallback(std::size_t i, const std::string& why) {
        const node& n = g.nodes[i];
        opaque_fn impl = host_impl(opaque, n, "dnnl");
        if (!impl) warn_once("dnnl", n, "runs on the reference implementation: " + why);
        std::vector<tref> ins, outs;
        std::vector<shape> in_shapes;
        for (int s = 0; s < static_cast<int>(n.inputs.size()); ++s) {
            ins.push_back(plain_in(i, s));
            in_shapes.push_back(in_shape(i, s));
        }
        for (int o = 0; o < n.num_outputs(); ++o) {
            outs.push_back(fresh(plain_md(out_dims(i, o))));
            set(i, o, outs.back());
        }
        node copy = n;
        auto fn = [copy, in_shapes, impl](std::span<float* const> pin, std::span<float* const> pout) {
            run_on_host(copy, impl, in_shapes, pin, pout);
        };
        custom(i, fn, ins, outs, "reference fallback");
        ++p.stats.fallbacks;
    }

    // Undo a half-lowered node (oneDNN refused a configuration part-way).
    struct mark { std::size_t steps, conversions; };
    mark checkpoint() const { return {p.steps.size(), conversions_.size()}; }
    void rollback(const mark& m, std::size_t i) {
        p.steps.resize(m.steps);
        conversions_.resize(m.conversions);
        vals[i].clear();
    }

private:
    std::vector<std::pair<tref, tref>> conversions_;
};

}  // namespace tsopt::backend::dnnl_impl
