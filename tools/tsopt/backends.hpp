#pragma once
// Picking the device backend a subcommand runs on: oneDNN on the CPU, or
// cuDNN/cuBLAS when this binary was built with the meson `cuda` option and a
// GPU is usable. Anything else is a backend_unavailable failure (exit 4).
#include <string>

#include "tsopt/backend/dnnl/executor.hpp"
#if defined(TSOPT_HAVE_CUDA)
#include "tsopt/backend/cudnn/executor.hpp"
#endif

#include "tsopt/backend/dnnl/onnx_ops.hpp"

#include "cli.hpp"
#include "common.hpp"

namespace tsopt::cli {

// The ONNX operators the importer keeps opaque, on a device backend: their
// host implementations, and on oneDNN native lowerings for the
// configurations those handle (backend/dnnl/onnx_ops.hpp).
template <class Backend>
void install_device_ops(Backend& b) {
    install_opaque_ops(b);
    if constexpr (std::is_same_v<Backend, backend::dnnl>) onnx::install_dnnl_lowerings(b);
}

inline constexpr bool cuda_built =
#if defined(TSOPT_HAVE_CUDA)
    true;
#else
    false;
#endif

// Calls f.template operator()<Backend>() for backend "cpu" or "cuda".
template <class F>
int with_device(const std::string& which, F&& f) {
    if (which == "cuda") {
#if defined(TSOPT_HAVE_CUDA)
        if (!backend::cudnn::available())
            throw backend_error("--backend cuda: " + backend::cudnn::unavailable_reason());
        return f.template operator()<backend::cudnn>();
#else
        throw backend_error(
            "--backend cuda: this tsopt was built without the CUDA backend; rebuild with `meson setup -Dcuda=enabled` on a "
            "machine with /usr/local/cuda (cuDNN, cuBLAS) and run it where a GPU is present, or use --backend cpu");
#endif
    }
    if (which != "cpu") throw usage_error("--backend: expected cpu or cuda, got '" + which + "'");
    return f.template operator()<backend::dnnl>();
}

template <class B>
constexpr const char* device_text() {
    if constexpr (B::name == std::string_view("dnnl")) return "cpu (oneDNN)";
    else return "cuda (cuDNN/cuBLAS)";
}

}  // namespace tsopt::cli
