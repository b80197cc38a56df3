#pragma once
// Shared helpers for the backend tests: run a graph on oneDNN and on the
// reference, and compare every output with the project's relative error.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include <unistd.h>

#include "tsopt/backend/dnnl/executor.hpp"
#include "tsopt/backend/reference/executor.hpp"

namespace tsopt::test {

// A fresh temporary folder for a backend's measurement cache, removed with
// everything in it when the test leaves its scope (a test run left one per
// process in /tmp before).
class fresh_cache_dir {
public:
    explicit fresh_cache_dir(const std::string& tag)
        : path_(std::filesystem::temp_directory_path() / ("tsopt-dnnl-test-" + tag + "-" + std::to_string(::getpid()))) {
        std::filesystem::remove_all(path_);
    }
    ~fresh_cache_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    fresh_cache_dir(const fresh_cache_dir&) = delete;
    fresh_cache_dir& operator=(const fresh_cache_dir&) = delete;
    operator const std::filesystem::path&() const { return path_; }
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

// Runs g on both backends with random inputs; checks every output's relative
// error against the reference and returns the largest.
inline double check_against_reference(const graph& g, double tol = 1e-4, std::uint64_t seed = 1,
                                      backend::dnnl* shared = nullptr) {
    auto in = backend::random_inputs(g, seed);
    auto want = backend::reference{}.execute(g, in);
    backend::dnnl local({.persist = false});
    backend::dnnl& b = shared ? *shared : local;
    auto got = b.execute(g, in);
    REQUIRE(got.size() == want.size());
    double worst = 0;
    for (std::size_t k = 0; k < got.size(); ++k) {
        INFO("output ", k, ": got shape ", got[k].shape.str(), ", expected ", want[k].shape.str());
        double e = relative_error(got[k], want[k]);
        CHECK(e <= tol);
        worst = std::max(worst, e);
    }
    return worst;
}

// The step of plan p that runs `node` itself (not a conversion of its operands).
inline const backend::dnnl_impl::step& own_step(const backend::dnnl_impl::plan& p, std::int32_t node) {
    const auto s = std::find_if(p.steps.begin(), p.steps.end(), [&](const auto& st) { return st.node == node && !st.conversion; });
    REQUIRE(s != p.steps.end());
    return *s;
}
// Argument `which` (DNNL_ARG_SRC, ...) of step s.
inline backend::dnnl_impl::tref step_arg(const backend::dnnl_impl::step& s, int which) {
    const auto it = std::find_if(s.args.begin(), s.args.end(), [&](const auto& a) { return a.first == which; });
    REQUIRE(it != s.args.end());
    return it->second;
}

}  // namespace tsopt::test
