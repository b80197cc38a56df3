#pragma once
// Measured per-operator times of the oneDNN backend: the shared measurement
// cache (backend/measure_cache.hpp: entries keyed by cost::op_key plus which
// inputs are constant, atomic rewrites, corrupt files ignored), its file keyed
// by the machine built here: backend name, oneDNN version, CPU model from
// /proc/cpuinfo.
#include <fstream>
#include <string>
#include <string_view>

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

inline std::string machine_id(std::string_view backend) {
    return std::string(backend) + " | oneDNN " + onednn_version() + " | " + cpu_model();
}

// The measurement cache (backend/measure_cache.hpp), one file per machine_id.
using measure_cache = backend::measure_cache;

}  // namespace tsopt::backend::dnnl_impl
