#pragma once
// Measured per-operator times of the oneDNN backend: the shared measurement
// cache (backend/measure_cache.hpp: entries keyed by cost::op_key plus which
// inputs are constant, atomic rewrites, corrupt files ignored), its file keyed
// by the machine built here: backend name, oneDNN version, CPU model from
// /proc/cpuinfo, and the number of threads oneDNN runs on.
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "tsopt/backend/dnnl/plan.hpp"
#include "tsopt/backend/measure_cache.hpp"

namespace tsopt::backend::dnnl_impl {

inline std::string cpu_model() {
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("model name", 0) == 0) {
            auto c = line.find(':');
            if (c != std::string::npos) {
                auto v = line.substr(c + 1);
                v.erase(0, v.find_first_not_of(" \t"));
                return v;
            }
        }
    return "unknown cpu";
}

inline std::string onednn_version() {
    const dn::version_t* v = dn::version();
    return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) + " (" + v->hash + ")";
}

// The threads oneDNN's OpenMP runtime gives a primitive. A time taken on 2
// threads is not a time on 1: without this in the key, a 1-thread run of
// NasNet-A reused a 2-thread run's end-to-end times to choose its output.
inline int compute_threads() {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    // oneDNN's OpenMP runtime reads the same variable (first list element).
    if (const char* e = std::getenv("OMP_NUM_THREADS"); e && *e) {
        const int n = std::atoi(e);
        if (n > 0) return n;
    }
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
#endif
}

inline std::string machine_id(std::string_view backend) {
    return std::string(backend) + " | oneDNN " + onednn_version() + " | " + cpu_model() + " | " +
           std::to_string(compute_threads()) + " threads";
}

// The measurement cache (backend/measure_cache.hpp), one file per machine_id.
using measure_cache = backend::measure_cache;

}  // namespace tsopt::backend::dnnl_impl
