#pragma once
// The device half of the cuDNN/cuBLAS backend: a host plan (compile.hpp)
// instantiated on the GPU, and AutoGraph's / Nimble's parallel runtime.
//
//   device_plan d(plan, settings);   // allocations, uploads, descriptors, algorithms, streams, events
//   d.load_inputs(in);  d.run();  d.read_outputs();
//
// Streams and events. One cudaStream per schedule stream, each with its own
// cuDNN and cuBLAS handle and workspaces (concurrent streams never share
// scratch memory). Vertices are issued in topological order onto their
// stream; schedule.events become cudaEventRecord after the producer's steps
// and cudaStreamWaitEvent before the consumer's.
//
// CUDA Graphs. With graph mode the whole issue sequence is captured once:
// stream 0 begins capture, records a fork event that every other stream
// waits on (which pulls it into the capture), the steps are issued as above,
// every other stream records a join event that stream 0 waits on, and stream
// 0 ends capture; the graph is instantiated and then replayed with one
// cudaGraphLaunch per run. The plan runs once eagerly before capture, so the
// libraries' lazy initialisation (module loading, heuristics) never happens
// inside a capture.
//
// Host steps (opaque operators, refused configurations) stay capturable:
// device->pinned copy, cudaLaunchHostFunc running the reference semantics,
// pinned->device copy. An exception inside the host function is kept and
// rethrown by sync(), naming the node.
//
// Every CUDA, cuDNN and cuBLAS call is checked; failures throw tsopt::error
// naming the call and the node.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstring>

#include "tsopt/backend/cudnn/compile.hpp"
#include "tsopt/backend/cudnn/kernels.hpp"

namespace tsopt::backend::cudnn_impl {

// ---- error checking -----------------------------------------------------------

inline void check(cudaError_t e, const std::string& what) {
    if (e != cudaSuccess)
        throw error("cudnn backend: " + what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}
inline void check(cudnnStatus_t e, const std::string& what) {
    if (e != CUDNN_STATUS_SUCCESS) {
        char msg[512] = {};
        cudnnGetLastErrorString(msg, sizeof msg);
        throw error("cudnn backend: " + what + ": " + cudnnGetErrorString(e) + (msg[0] ? std::string(" (") + msg + ")" : ""));
    }
}
inline void check(cublasStatus_t e, const std::string& what) {
    if (e != CUBLAS_STATUS_SUCCESS)
        throw error("cudnn backend: " + what + ": " + cublasGetStatusName(e) + " (" + cublasGetStatusString(e) + ")");
}

// Number of usable CUDA devices; 0 (not an error) without a driver or GPU.
inline int device_count() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();  // clear the sticky error of a missing driver
        return 0;
    }
    return n;
}
// Why there is no device, for skip messages ("" when there is one).
inline std::string no_device_reason() {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    (void)cudaGetLastError();
    if (e != cudaSuccess) return std::string("no usable CUDA device: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
    if (n == 0) return "no CUDA device";
    return {};
}

inline std::string device_name(int dev = 0) {
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
    return std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ", " +
           std::to_string(prop.totalGlobalMem >> 20) + " MiB)";
}
inline std::string library_versions() {
    int cublas = 0, rt = 0;
    cublasGetProperty(MAJOR_VERSION, &cublas);
    int mi = 0, pa = 0;
    cublasGetProperty(MINOR_VERSION, &mi);
    cublasGetProperty(PATCH_LEVEL, &pa);
    cudaRuntimeGetVersion(&rt);
    return "cuDNN " + std::to_string(cudnnGetVersion()) + " | cuBLAS " + std::to_string(cublas) + "." + std::to_string(mi) + "." +
           std::to_string(pa) + " | CUDA runtime " + std::to_string(rt);
}

struct settings {
    bool allow_tf32 = false;          // false: exact fp32 (CUDNN_FMA_MATH, CUBLAS_COMPUTE_32F)
    bool find_conv_algorithms = false;  // true: cudnnFindConvolutionForwardAlgorithm (measured); false: heuristics (_v7)
    bool fuse_conv_relu = true;       // cudnnConvolutionBiasActivationForward for relu
    bool cuda_graph = true;           // capture once and replay
    std::size_t conv_workspace_limit = std::size_t(256) << 20;
    std::size_t cublas_workspace = std::size_t(32) << 20;  // per stream (NVIDIA's recommendation for Hopper)
};

// ---- RAII for descriptors --------------------------------------------------------

struct tensor_desc {
    cudnnTensorDescriptor_t d = nullptr;
    explicit tensor_desc(const std::string& what) { check(cudnnCreateTensorDescriptor(&d), what + ": cudnnCreateTensorDescriptor"); }
    ~tensor_desc() { if (d) cudnnDestroyTensorDescriptor(d); }
    tensor_desc(const tensor_desc&) = delete;
    tensor_desc& operator=(const tensor_desc&) = delete;
    void set4d(phys l, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, const std::string& what) {
        check(cudnnSetTensor4dDescriptor(d, l == phys::nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, int(n),
                                         int(c), int(h), int(w)),
              what + ": cudnnSetTensor4dDescriptor");
    }
};

// One stream of the schedule with everything its steps need.
struct stream_ctx {
    cudaStream_t stream = nullptr;
    cudnnHandle_t dnn = nullptr;
    cublasHandle_t blas = nullptr;
    void* blas_ws = nullptr;
    void* conv_ws = nullptr;
    std::size_t conv_ws_bytes = 0;
};

class device_plan {
public:
    std::shared_ptr<const plan> p;
    settings opt;

    device_plan(std::shared_ptr<const plan> pl, settings s) : p(std::move(pl)), opt(s) {
        try {
            allocate();
            make_streams();
            prepare_steps();
            make_events();
            run_eager();  // lazy library initialisation and fused-conv support probe happen here
            sync("first run");
            if (opt.cuda_graph) capture();
        } catch (...) {
            release();
            throw;
        }
    }
    ~device_plan() { release(); }
    device_plan(const device_plan&) = delete;
    device_plan& operator=(const device_plan&) = delete;

    float* ptr(const tref& r) const { return buf_ptr_[static_cast<std::size_t>(r.buf)]; }
    cudaStream_t main_stream() const { return ctx_[0].stream; }

    void load_inputs(std::span<const tensor<float>> in) {
        for (std::size_t k = 0; k < p->inputs.size(); ++k)
            check(cudaMemcpyAsync(ptr(p->inputs[k]), in[k].data.data(), in[k].data.size() * sizeof(float), cudaMemcpyHostToDevice,
                                  ctx_[0].stream),
                  "copying input " + std::to_string(k) + " to the device");
    }
    // One inference: graph replay, or eager issue over the streams.
    void run() {
        if (exec_) check(cudaGraphLaunch(exec_, ctx_[0].stream), "cudaGraphLaunch");
        else run_eager();
    }
    void sync(const std::string& what = "run") {
        for (auto& c : ctx_) check(cudaStreamSynchronize(c.stream), what + ": cudaStreamSynchronize");
        if (!host_error_.empty()) {
            std::string e = host_error_;
            host_error_.clear();
            throw error("cudnn backend: " + e);
        }
    }
    std::vector<tensor<float>> read_outputs() {
        std::vector<tensor<float>> out;
        for (std::size_t k = 0; k < p->outputs.size(); ++k) {
            tensor<float> t(p->outputs[k].logical);
            check(cudaMemcpyAsync(t.data.data(), ptr(p->outputs[k]), t.data.size() * sizeof(float), cudaMemcpyDeviceToHost,
                                  ctx_[0].stream),
                  "copying output " + std::to_string(k) + " to the host");
            out.push_back(std::move(t));
        }
        sync("reading outputs");
        return out;
    }
    std::vector<tensor<float>> execute(std::span<const tensor<float>> in) {
        load_inputs(in);
        run();
        return read_outputs();
    }

    // Launches the steps of one vertex on stream 0 (measurement of one node).
    void issue_vertex_on_main(int v, bool include_conversions) {
        for (int s : p->vertex_steps[static_cast<std::size_t>(v)])
            if (include_conversions || !p->steps[static_cast<std::size_t>(s)].conversion) launch_[static_cast<std::size_t>(s)](ctx_[0]);
    }
    bool captured() const { return exec_ != nullptr; }

private:
    // ---- memory ---------------------------------------------------------------
    void allocate() {
        check(cudaMalloc(&arena_, std::max<std::size_t>(p->stats.arena_bytes, 256)), "allocating the arena (" +
                                                                                         std::to_string(p->stats.arena_bytes) + " bytes)");
        buf_ptr_.assign(p->bufs.size(), nullptr);
        for (std::size_t b = 0; b < p->bufs.size(); ++b) {
            const buffer& x = p->bufs[b];
            if (x.kind == buffer_kind::arena) {
                buf_ptr_[b] = reinterpret_cast<float*>(static_cast<char*>(arena_) + x.offset);
                continue;
            }
            void* d = nullptr;
            check(cudaMalloc(&d, x.bytes), "allocating buffer " + std::to_string(b) + " (" + std::to_string(x.bytes) + " bytes)");
            owned_.push_back(d);
            buf_ptr_[b] = static_cast<float*>(d);
            if (x.kind == buffer_kind::persistent)
                check(cudaMemcpy(d, x.data->data.data(), x.data->data.size() * sizeof(float), cudaMemcpyHostToDevice),
                      "uploading constant buffer " + std::to_string(b));
        }
    }
    void* device_alloc(std::size_t bytes, const std::string& what) {
        void* d = nullptr;
        check(cudaMalloc(&d, std::max<std::size_t>(bytes, 256)), what);
        owned_.push_back(d);
        return d;
    }

    // ---- streams and handles --------------------------------------------------
    void make_streams() {
        ctx_.resize(std::max<std::size_t>(p->schedule.num_streams(), 1));
        for (std::size_t k = 0; k < ctx_.size(); ++k) {
            auto& c = ctx_[k];
            std::string what = "stream " + std::to_string(k);
            check(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking), what + ": cudaStreamCreateWithFlags");
            check(cudnnCreate(&c.dnn), what + ": cudnnCreate");
            check(cudnnSetStream(c.dnn, c.stream), what + ": cudnnSetStream");
            check(cublasCreate(&c.blas), what + ": cublasCreate");
            check(cublasSetStream(c.blas, c.stream), what + ": cublasSetStream");
            c.blas_ws = device_alloc(opt.cublas_workspace, what + ": cuBLAS workspace");
            check(cublasSetWorkspace(c.blas, c.blas_ws, opt.cublas_workspace), what + ": cublasSetWorkspace");  // after SetStream
            check(cublasSetMathMode(c.blas, opt.allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH), what + ": cublasSetMathMode");
            check(cublasSetPointerMode(c.blas, CUBLAS_POINTER_MODE_HOST), what + ": cublasSetPointerMode");
        }
    }
    void make_events() {
        auto mk = [&](const std::string& what) {
            cudaEvent_t e = nullptr;
            check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), what + ": cudaEventCreateWithFlags");
            events_.push_back(e);
            return e;
        };
        for (std::size_t k = 0; k < p->schedule.events.size(); ++k) sched_events_.push_back(mk("schedule event " + std::to_string(k)));
        for (std::size_t k = 0; k < ctx_.size(); ++k) {
            fork_.push_back(mk("fork event"));
            join_.push_back(mk("join event"));
        }
        waits_.assign(p->dag.node_of.size(), {});
        records_.assign(p->dag.node_of.size(), {});
        for (std::size_t k = 0; k < p->schedule.events.size(); ++k) {
            records_[static_cast<std::size_t>(p->schedule.events[k].producer)].push_back(static_cast<int>(k));
            waits_[static_cast<std::size_t>(p->schedule.events[k].consumer)].push_back(static_cast<int>(k));
        }
    }

    // ---- issuing ----------------------------------------------------------------
    std::string vertex_name(int v) const {
        return "node " + std::to_string(p->dag.node_of[static_cast<std::size_t>(v)]);
    }
    // Every vertex, in topological order, onto its stream, with the schedule's
    // events. Streams other than 0 first wait on stream 0's fork point and
    // end by joining back into it, so "stream 0 done" means "all done" (and a
    // capture started on stream 0 covers them all).
    void issue_all() {
        for (std::size_t k = 1; k < ctx_.size(); ++k) {
            check(cudaEventRecord(fork_[k], ctx_[0].stream), "cudaEventRecord (fork)");
            check(cudaStreamWaitEvent(ctx_[k].stream, fork_[k], 0), "cudaStreamWaitEvent (fork)");
        }
        const std::size_t nv = p->dag.node_of.size();
        for (std::size_t v = 0; v < nv; ++v) {
            auto& c = ctx_[static_cast<std::size_t>(p->schedule.stream_of[v])];
            for (int e : waits_[v])
                check(cudaStreamWaitEvent(c.stream, sched_events_[static_cast<std::size_t>(e)], 0),
                      vertex_name(static_cast<int>(v)) + ": cudaStreamWaitEvent");
            for (int s : p->vertex_steps[v]) launch_[static_cast<std::size_t>(s)](c);
            for (int e : records_[v])
                check(cudaEventRecord(sched_events_[static_cast<std::size_t>(e)], c.stream), vertex_name(static_cast<int>(v)) + ": cudaEventRecord");
        }
        for (std::size_t k = 1; k < ctx_.size(); ++k) {
            check(cudaEventRecord(join_[k], ctx_[k].stream), "cudaEventRecord (join)");
            check(cudaStreamWaitEvent(ctx_[0].stream, join_[k], 0), "cudaStreamWaitEvent (join)");
        }
    }
    void run_eager() { issue_all(); }

    void capture() {
        check(cudaStreamBeginCapture(ctx_[0].stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
        try {
            issue_all();
        } catch (...) {
            cudaGraph_t broken = nullptr;
            cudaStreamEndCapture(ctx_[0].stream, &broken);
            if (broken) cudaGraphDestroy(broken);
            (void)cudaGetLastError();
            throw;
        }
        check(cudaStreamEndCapture(ctx_[0].stream, &graph_), "cudaStreamEndCapture");
        check(cudaGraphInstantiate(&exec_, graph_, 0), "cudaGraphInstantiate");
        check(cudaGraphUpload(exec_, ctx_[0].stream), "cudaGraphUpload");
        sync("uploading the CUDA graph");
    }

    // ---- steps ---------------------------------------------------------------------
    using launcher = std::function<void(stream_ctx&)>;

    void prepare_steps() {
        std::vector<std::size_t> ws(ctx_.size(), 0);
        for (std::size_t s = 0; s < p->steps.size(); ++s) {
            const step& st = p->steps[s];
            const std::string what = "step '" + st.what + "' of node " + std::to_string(st.node);
            std::size_t need = 0;
            launch_.push_back(std::visit([&](const auto& b) { return prepare(b, what, need); }, st.body));
            auto& w = ws[static_cast<std::size_t>(p->schedule.stream_of[static_cast<std::size_t>(st.vertex)])];
            w = std::max(w, need);
        }
        for (std::size_t k = 0; k < ctx_.size(); ++k) {
            ctx_[k].conv_ws_bytes = ws[k];
            if (ws[k]) ctx_[k].conv_ws = device_alloc(ws[k], "stream " + std::to_string(k) + ": convolution workspace");
        }
    }
    static cudnnActivationMode_t act_mode(std::int32_t a) {
        switch (static_cast<spec::activation>(a)) {
            case spec::activation::relu: return CUDNN_ACTIVATION_RELU;
            case spec::activation::sigmoid: return CUDNN_ACTIVATION_SIGMOID;
            case spec::activation::tanh: return CUDNN_ACTIVATION_TANH;
            default: return CUDNN_ACTIVATION_IDENTITY;
        }
    }
    // In-place (or out-of-place) activation over `count` elements, any layout.
    launcher activation(std::int32_t act, const tref& x, const tref& y, const std::string& what) {
        if (x.elements() > INT_MAX) throw error("cudnn backend: " + what + ": tensor too large for cudnnActivationForward");
        auto desc = std::make_shared<tensor_desc>(what);
        desc->set4d(phys::row, 1, 1, 1, x.elements(), what);
        cudnnActivationDescriptor_t ad = nullptr;
        check(cudnnCreateActivationDescriptor(&ad), what + ": cudnnCreateActivationDescriptor");
        auto adesc = std::shared_ptr<cudnnActivationStruct>(ad, [](cudnnActivationDescriptor_t d) { cudnnDestroyActivationDescriptor(d); });
        check(cudnnSetActivationDescriptor(ad, act_mode(act), CUDNN_NOT_PROPAGATE_NAN, 0.0), what + ": cudnnSetActivationDescriptor");
        float* xp = ptr(x);
        float* yp = ptr(y);
        return [=](stream_ctx& c) {
            const float one = 1.f, zero = 0.f;
            check(cudnnActivationForward(c.dnn, adesc.get(), &one, desc->d, xp, &zero, desc->d, yp), what + ": cudnnActivationForward");
        };
    }

    launcher prepare(const conv_step& s, const std::string& what, std::size_t& need) {
        auto xd = std::make_shared<tensor_desc>(what), yd = std::make_shared<tensor_desc>(what), bd = std::make_shared<tensor_desc>(what);
        xd->set4d(s.x.layout, s.n, s.c, s.h, s.wd, what + " (input)");
        yd->set4d(s.y.layout, s.n, s.k, s.oh, s.ow, what + " (output)");
        bd->set4d(phys::row, 1, s.k, 1, 1, what + " (bias)");
        cudnnFilterDescriptor_t fd = nullptr;
        check(cudnnCreateFilterDescriptor(&fd), what + ": cudnnCreateFilterDescriptor");
        auto fdesc = std::shared_ptr<cudnnFilterStruct>(fd, [](cudnnFilterDescriptor_t d) { cudnnDestroyFilterDescriptor(d); });
        check(cudnnSetFilter4dDescriptor(fd, CUDNN_DATA_FLOAT, s.w.layout == phys::nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, s.k,
                                         s.c / s.groups, s.kh, s.kw),
              what + ": cudnnSetFilter4dDescriptor");
        cudnnConvolutionDescriptor_t cd = nullptr;
        check(cudnnCreateConvolutionDescriptor(&cd), what + ": cudnnCreateConvolutionDescriptor");
        auto cdesc = std::shared_ptr<cudnnConvolutionStruct>(cd, [](cudnnConvolutionDescriptor_t d) { cudnnDestroyConvolutionDescriptor(d); });
        check(cudnnSetConvolution2dDescriptor(cd, s.pad_h, s.pad_w, s.sh, s.sw, s.dh, s.dw, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
              what + ": cudnnSetConvolution2dDescriptor");
        check(cudnnSetConvolutionGroupCount(cd, s.groups), what + ": cudnnSetConvolutionGroupCount");
        check(cudnnSetConvolutionMathType(cd, opt.allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH), what + ": cudnnSetConvolutionMathType");
        int on = 0, oc = 0, oh = 0, ow = 0;
        check(cudnnGetConvolution2dForwardOutputDim(cd, xd->d, fd, &on, &oc, &oh, &ow), what + ": cudnnGetConvolution2dForwardOutputDim");
        if (on != s.n || oc != s.k || oh != s.oh || ow != s.ow)
            throw error("cudnn backend: " + what + ": cuDNN computes output [" + std::to_string(on) + "," + std::to_string(oc) + "," +
                        std::to_string(oh) + "," + std::to_string(ow) + "], the specification [" + std::to_string(s.n) + "," +
                        std::to_string(s.k) + "," + std::to_string(s.oh) + "," + std::to_string(s.ow) + "]");
        auto& h = ctx_[0].dnn;
        float* xp = ptr(s.x);
        float* wp = ptr(s.w);
        float* yp = ptr(s.y);
        cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
        bool chosen = false;
        constexpr int max_algos = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
        cudnnConvolutionFwdAlgoPerf_t perf[max_algos];
        int got = 0;
        if (opt.find_conv_algorithms)
            check(cudnnFindConvolutionForwardAlgorithm(h, xd->d, fd, cd, yd->d, max_algos, &got, perf), what + ": cudnnFindConvolutionForwardAlgorithm");
        else
            check(cudnnGetConvolutionForwardAlgorithm_v7(h, xd->d, fd, cd, yd->d, max_algos, &got, perf),
                  what + ": cudnnGetConvolutionForwardAlgorithm_v7");
        for (int k = 0; k < got && !chosen; ++k)
            if (perf[k].status == CUDNN_STATUS_SUCCESS && perf[k].memory <= opt.conv_workspace_limit &&
                (opt.allow_tf32 || (perf[k].mathType != CUDNN_TENSOR_OP_MATH && perf[k].mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))) {
                algo = perf[k].algo;
                chosen = true;
            }
        if (!chosen) throw error("cudnn backend: " + what + ": cuDNN offers no algorithm within the workspace limit");
        check(cudnnGetConvolutionForwardWorkspaceSize(h, xd->d, fd, cd, yd->d, algo, &need), what + ": cudnnGetConvolutionForwardWorkspaceSize");
        launcher act;
        if (s.act != 0) act = activation(s.act, s.y, s.y, what + " (activation)");
        float* zero_bias = nullptr;
        std::shared_ptr<cudnnActivationStruct> relu;
        if (s.act == 1 && opt.fuse_conv_relu) {
            zero_bias = static_cast<float*>(device_alloc(static_cast<std::size_t>(s.k) * sizeof(float), what + ": zero bias"));
            check(cudaMemset(zero_bias, 0, static_cast<std::size_t>(s.k) * sizeof(float)), what + ": cudaMemset (zero bias)");
            cudnnActivationDescriptor_t ad = nullptr;
            check(cudnnCreateActivationDescriptor(&ad), what + ": cudnnCreateActivationDescriptor");
            relu = std::shared_ptr<cudnnActivationStruct>(ad, [](cudnnActivationDescriptor_t d) { cudnnDestroyActivationDescriptor(d); });
            check(cudnnSetActivationDescriptor(ad, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0), what + ": cudnnSetActivationDescriptor");
        }
        // Decided by the eager first run (before any capture): whether cuDNN
        // supports the fused call for this configuration.
        auto fused = std::make_shared<int>(zero_bias ? -1 : 0);  // -1 unknown, 0 no, 1 yes
        return [=](stream_ctx& c) {
            const float one = 1.f, zero = 0.f;
            if (*fused != 0) {
                cudnnStatus_t st = cudnnConvolutionBiasActivationForward(c.dnn, &one, xd->d, xp, fdesc.get(), wp, cdesc.get(), algo,
                                                                         c.conv_ws, c.conv_ws_bytes, &zero, yd->d, yp, bd->d,
                                                                         zero_bias, relu.get(), yd->d, yp);
                if (st == CUDNN_STATUS_SUCCESS) {
                    *fused = 1;
                    return;
                }
                if (*fused == 1 || st != CUDNN_STATUS_NOT_SUPPORTED) check(st, what + ": cudnnConvolutionBiasActivationForward");
                *fused = 0;  // not supported here: separate activation from now on
            }
            check(cudnnConvolutionForward(c.dnn, &one, xd->d, xp, fdesc.get(), wp, cdesc.get(), algo, c.conv_ws, c.conv_ws_bytes, &zero,
                                          yd->d, yp),
                  what + ": cudnnConvolutionForward");
            if (act) act(c);
        };
    }

    launcher prepare(const pool_step& s, const std::string& what, std::size_t&) {
        const shape& xs = s.x.logical;
        const shape& ys = s.y.logical;
        auto xd = std::make_shared<tensor_desc>(what), yd = std::make_shared<tensor_desc>(what);
        xd->set4d(s.x.layout, xs[0], xs[1], xs[2], xs[3], what + " (input)");
        yd->set4d(s.y.layout, ys[0], ys[1], ys[2], ys[3], what + " (output)");
        cudnnPoolingDescriptor_t pd = nullptr;
        check(cudnnCreatePoolingDescriptor(&pd), what + ": cudnnCreatePoolingDescriptor");
        auto pdesc = std::shared_ptr<cudnnPoolingStruct>(pd, [](cudnnPoolingDescriptor_t d) { cudnnDestroyPoolingDescriptor(d); });
        check(cudnnSetPooling2dDescriptor(pd, s.max ? CUDNN_POOLING_MAX : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING,
                                          CUDNN_NOT_PROPAGATE_NAN, s.kh, s.kw, s.ph, s.pw, s.sh, s.sw),
              what + ": cudnnSetPooling2dDescriptor");
        int on = 0, oc = 0, oh = 0, ow = 0;
        check(cudnnGetPooling2dForwardOutputDim(pd, xd->d, &on, &oc, &oh, &ow), what + ": cudnnGetPooling2dForwardOutputDim");
        if (oh != ys[2] || ow != ys[3])
            throw error("cudnn backend: " + what + ": cuDNN computes a " + std::to_string(oh) + "x" + std::to_string(ow) +
                        " output, the specification " + std::to_string(ys[2]) + "x" + std::to_string(ys[3]));
        launcher act;
        if (s.act != 0) act = activation(s.act, s.y, s.y, what + " (activation)");
        float* xp = ptr(s.x);
        float* yp = ptr(s.y);
        return [=](stream_ctx& c) {
            const float one = 1.f, zero = 0.f;
            check(cudnnPoolingForward(c.dnn, pdesc.get(), &one, xd->d, xp, &zero, yd->d, yp), what + ": cudnnPoolingForward");
            if (act) act(c);
        };
    }

    launcher prepare(const act_step& s, const std::string& what, std::size_t&) {
        if (s.act == 0) {  // identity: a copy
            float* xp = ptr(s.x);
            float* yp = ptr(s.y);
            std::size_t bytes = static_cast<std::size_t>(s.x.elements()) * sizeof(float);
            return [=](stream_ctx& c) { check(cudaMemcpyAsync(yp, xp, bytes, cudaMemcpyDeviceToDevice, c.stream), what + ": cudaMemcpyAsync"); };
        }
        return activation(s.act, s.x, s.y, what);
    }

    launcher prepare(const gemm_step& s, const std::string& what, std::size_t&) {
        launcher act;
        if (s.act != 0) act = activation(s.act, s.c, s.c, what + " (activation)");
        const float* ap = ptr(s.a);
        const float* bp = ptr(s.b);
        float* cp = ptr(s.c);
        const cublasComputeType_t compute = opt.allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
        return [=](stream_ctx& c) {
            const float one = 1.f, zero = 0.f;
            for (const auto& r : s.runs)
                check(cublasGemmStridedBatchedEx(c.blas, s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, int(s.m),
                                                 int(s.n), int(s.k), &one, ap + r.a_off, CUDA_R_32F, int(s.lda), r.a_stride, bp + r.b_off,
                                                 CUDA_R_32F, int(s.ldb), r.b_stride, &zero, cp + r.c_off, CUDA_R_32F, int(s.ldc), r.c_stride,
                                                 int(r.count), compute, CUBLAS_GEMM_DEFAULT),
                      what + ": cublasGemmStridedBatchedEx");
            if (act) act(c);
        };
    }

    static kernels::strided to_kernel(const walk& w) {
        kernels::strided k;
        k.rank = w.rank;
        for (int d = 0; d < w.rank; ++d) {
            k.dims[d] = w.dims[static_cast<std::size_t>(d)];
            k.a[d] = w.a[static_cast<std::size_t>(d)];
            k.b[d] = w.b[static_cast<std::size_t>(d)];
        }
        return k;
    }

    launcher prepare(const binary_step& s, const std::string& what, std::size_t&) {
        const float *ap = ptr(s.a), *bp = ptr(s.b);
        float* yp = ptr(s.y);
        auto geom = to_kernel(s.geom);
        std::int64_t n = s.y.elements();
        int op = s.op;
        bool flat = s.flat;
        return [=](stream_ctx& c) { check(kernels::binary(op, ap, bp, yp, n, geom, flat, c.stream), what + ": binary kernel"); };
    }
    launcher prepare(const smul_step& s, const std::string& what, std::size_t&) {
        const float *xp = ptr(s.x), *sp = ptr(s.s);
        float* yp = ptr(s.y);
        std::int64_t n = s.y.elements();
        return [=](stream_ctx& c) { check(kernels::smul(xp, sp, yp, n, c.stream), what + ": smul kernel"); };
    }
    launcher prepare(const batchnorm_step& s, const std::string& what, std::size_t&) {
        const float *xp = ptr(s.x), *sc = ptr(s.scale), *sh = ptr(s.shift);
        float* yp = ptr(s.y);
        std::int64_t n = s.y.elements(), ch = s.c, inner = s.inner;
        return [=](stream_ctx& c) { check(kernels::batchnorm(xp, sc, sh, yp, n, ch, inner, c.stream), what + ": batchnorm kernel"); };
    }
    launcher prepare(const permute_step& s, const std::string& what, std::size_t&) {
        const float* xp = ptr(s.x);
        float* yp = ptr(s.y);
        auto geom = to_kernel(s.geom);
        std::int64_t n = s.y.elements();
        return [=](stream_ctx& c) { check(kernels::permute(xp, yp, n, geom, c.stream), what + ": permute kernel"); };
    }
    launcher prepare(const pad_step& s, const std::string& what, std::size_t&) {
        const float* xp = ptr(s.x);
        float* yp = ptr(s.y);
        pad_step g = s;
        return [=](stream_ctx& c) {
            check(kernels::pad2d(xp, yp, g.outer, g.h, g.w, g.oh, g.ow, g.top, g.left, c.stream), what + ": pad2d kernel");
        };
    }
    launcher prepare(const copy2d_step& s, const std::string& what, std::size_t&) {
        const float* sp = ptr(s.src) + s.src_off;
        float* dp = ptr(s.dst) + s.dst_off;
        const std::size_t f = sizeof(float);
        copy2d_step g = s;
        return [=](stream_ctx& c) {
            check(cudaMemcpy2DAsync(dp, static_cast<std::size_t>(g.dst_pitch) * f, sp, static_cast<std::size_t>(g.src_pitch) * f,
                                    static_cast<std::size_t>(g.width) * f, static_cast<std::size_t>(g.height), cudaMemcpyDeviceToDevice,
                                    c.stream),
                  what + ": cudaMemcpy2DAsync");
        };
    }
    launcher prepare(const softmax_step& s, const std::string& what, std::size_t&) {
        auto d = std::make_shared<tensor_desc>(what);
        d->set4d(phys::row, s.outer, s.n, s.inner, 1, what);
        const float* xp = ptr(s.x);
        float* yp = ptr(s.y);
        return [=](stream_ctx& c) {
            const float one = 1.f, zero = 0.f;
            check(cudnnSoftmaxForward(c.dnn, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &one, d->d, xp, &zero, d->d, yp),
                  what + ": cudnnSoftmaxForward");
        };
    }

    // Host step: pinned staging, device->host copies, the host function, copies back.
    struct host_job {
        const host_step* s = nullptr;
        std::vector<shape> in_shapes;  // of s->ins
        std::vector<float*> pin_in, pin_out;
        std::string* error = nullptr;
    };
    static void CUDART_CB run_host_job(void* arg) {
        auto* j = static_cast<host_job*>(arg);
        try {
            run_on_host(j->s->copy, j->s->impl, j->in_shapes, j->pin_in, j->pin_out);
        } catch (const std::exception& e) {
            if (j->error->empty()) *j->error = e.what();
        }
    }
    launcher prepare(const host_step& s, const std::string& what, std::size_t&) {
        auto job = std::make_shared<host_job>();
        job->s = &s;
        job->error = &host_error_;
        auto pinned = [&](std::int64_t n) {
            void* h = nullptr;
            check(cudaMallocHost(&h, std::max<std::size_t>(static_cast<std::size_t>(n) * sizeof(float), 4)), what + ": cudaMallocHost");
            pinned_.push_back(h);
            return static_cast<float*>(h);
        };
        std::vector<std::pair<float*, std::size_t>> dev_in, dev_out;
        for (auto& r : s.ins) {
            job->in_shapes.push_back(r.logical);
            job->pin_in.push_back(pinned(r.elements()));
            dev_in.push_back({ptr(r), static_cast<std::size_t>(r.elements()) * sizeof(float)});
        }
        for (auto& r : s.outs) {
            job->pin_out.push_back(pinned(r.elements()));
            dev_out.push_back({ptr(r), static_cast<std::size_t>(r.elements()) * sizeof(float)});
        }
        jobs_.push_back(job);
        return [=](stream_ctx& c) {
            for (std::size_t k = 0; k < dev_in.size(); ++k)
                check(cudaMemcpyAsync(job->pin_in[k], dev_in[k].first, dev_in[k].second, cudaMemcpyDeviceToHost, c.stream),
                      what + ": cudaMemcpyAsync (to host)");
            check(cudaLaunchHostFunc(c.stream, run_host_job, job.get()), what + ": cudaLaunchHostFunc");
            for (std::size_t k = 0; k < dev_out.size(); ++k)
                check(cudaMemcpyAsync(dev_out[k].first, job->pin_out[k], dev_out[k].second, cudaMemcpyHostToDevice, c.stream),
                      what + ": cudaMemcpyAsync (to device)");
        };
    }

    // ---- teardown (never throws) --------------------------------------------------------
    void release() noexcept {
        for (auto& c : ctx_)
            if (c.stream) cudaStreamSynchronize(c.stream);
        if (exec_) cudaGraphExecDestroy(exec_);
        if (graph_) cudaGraphDestroy(graph_);
        exec_ = nullptr;
        graph_ = nullptr;
        launch_.clear();  // descriptors die with the launchers
        for (auto e : events_) cudaEventDestroy(e);
        events_.clear();
        for (auto& c : ctx_) {
            if (c.blas) cublasDestroy(c.blas);
            if (c.dnn) cudnnDestroy(c.dnn);
            if (c.stream) cudaStreamDestroy(c.stream);
        }
        ctx_.clear();
        for (void* d : owned_) cudaFree(d);
        owned_.clear();
        for (void* h : pinned_) cudaFreeHost(h);
        pinned_.clear();
        if (arena_) cudaFree(arena_);
        arena_ = nullptr;
        (void)cudaGetLastError();
    }

    void* arena_ = nullptr;
    std::vector<void*> owned_, pinned_;
    std::vector<float*> buf_ptr_;
    std::vector<stream_ctx> ctx_;
    std::vector<launcher> launch_;
    std::vector<cudaEvent_t> events_, sched_events_, fork_, join_;
    std::vector<std::vector<int>> waits_, records_;
    std::vector<std::shared_ptr<host_job>> jobs_;
    std::string host_error_;
    cudaGraph_t graph_ = nullptr;
    cudaGraphExec_t exec_ = nullptr;
};

}  // namespace tsopt::backend::cudnn_impl
