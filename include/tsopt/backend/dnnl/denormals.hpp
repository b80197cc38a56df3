#pragma once
// Denormal floats flushed to zero for the length of one backend call.
//
// A float below 2^-126 is handled by a microcode assist on x86: an AVX-512 FMA
// with a denormal input or result runs tens of times slower. Trained models
// rarely make them, but random-weight ones do (tsopt's zoo ResNeXt-50 ran
// 7-13 % faster at 1 thread with them flushed), and so do real activations
// that decay through many layers. TensorFlow flushes them by default;
// ONNX Runtime (session.set_denormal_as_zero) and OpenVINO
// (CPU_DENORMALS_OPTIMIZATION) do it when asked. Flushing changes only
// values below 1.2e-38, each to a zero of the same sign.
//
// The mode lives in each thread's MXCSR (FTZ: results, DAZ: inputs), so the
// scope sets it on the calling thread and on every OpenMP worker that
// oneDNN's primitives and tsopt's Winograd kernels run on, and puts the
// caller's mode back on exit: the host program's own float arithmetic is not
// changed behind its back. Threads the OpenMP runtime starts inside the scope
// inherit the calling thread's mode (pthread_create copies the float
// environment). Elsewhere than x86 the scope does nothing (flushing() says so).
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64)
#include <xmmintrin.h>
#define TSOPT_HAVE_MXCSR 1
#endif

namespace tsopt::backend::dnnl_impl {

class denormals_flushed {
public:
    // Whether this build can flush denormals at all.
    static constexpr bool flushing() {
#ifdef TSOPT_HAVE_MXCSR
        return true;
#else
        return false;
#endif
    }

    explicit denormals_flushed(bool on) {
#ifdef TSOPT_HAVE_MXCSR
        if (!on) return;
        before_ = _mm_getcsr();
        if ((before_ & mxcsr_bits) == mxcsr_bits) return;  // already flushing (an enclosing scope, or the host program)
        set_ = true;
        apply_everywhere(true);
#else
        (void)on;
#endif
    }
    ~denormals_flushed() {
#ifdef TSOPT_HAVE_MXCSR
        if (set_) apply_everywhere(false);
#endif
    }
    denormals_flushed(const denormals_flushed&) = delete;
    denormals_flushed& operator=(const denormals_flushed&) = delete;

#ifdef TSOPT_HAVE_MXCSR
    static constexpr unsigned mxcsr_bits = 0x8040;  // FTZ (bit 15) | DAZ (bit 6)

private:
    // On exit the workers lose both bits: they had them only if the calling
    // thread had them (inherited at their start), and then set_ is false.
    void apply_everywhere(bool flush) const {
        const unsigned caller = flush ? (before_ | mxcsr_bits) : before_;
        _mm_setcsr(caller);
#ifdef _OPENMP
        if (omp_get_max_threads() > 1) {
#pragma omp parallel
            {
                if (omp_get_thread_num() != 0) _mm_setcsr(flush ? (_mm_getcsr() | mxcsr_bits) : (_mm_getcsr() & ~mxcsr_bits));
            }
        }
#endif
    }

    unsigned before_ = 0;
    bool set_ = false;
#endif
};

}  // namespace tsopt::backend::dnnl_impl
