#pragma once
// main() of the GPU test programs: exact fp32 (TF32 off in every NVIDIA
// library, before any of them initialises), then either run doctest or,
// without a usable CUDA device, report SKIPPED and exit 77 (meson's skip code).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>

#include "tsopt/backend/cudnn/executor.hpp"

int main(int argc, char** argv) {
    ::setenv("NVIDIA_TF32_OVERRIDE", "0", 1);
    if (!tsopt::backend::cudnn::available()) {
        std::printf("SKIPPED: %s; the cuDNN/cuBLAS backend's GPU tests need a CUDA device (nothing was run)\n",
                    tsopt::backend::cudnn::unavailable_reason().c_str());
        return 77;
    }
    std::printf("device: %s\n%s\n", tsopt::backend::cudnn_impl::device_name().c_str(),
                tsopt::backend::cudnn_impl::library_versions().c_str());
    doctest::Context ctx(argc, argv);
    return ctx.run();
}
