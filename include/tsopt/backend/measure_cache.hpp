#pragma once
// Measured per-operator times of a backend, in memory and on disk; shared by
// the oneDNN and the cuDNN backends. Host-only (no library calls).
//
//   backend::measure_cache c("dnnl", machine,
//                            backend::measure_cache::file_for(backend::default_cache_dir(), "dnnl", machine));
//   std::string key = backend::measure_key(g, i, g.constant_mask());
//   if (auto hit = c.find(key)) return *hit;
//   c.put(key, ms);                           // rewrites the file
//
// An entry is keyed by the operator configuration (cost::op_key plus which
// inputs are constant); the file holding it is keyed by the machine string
// (backend name, library versions, CPU or GPU model: the backend builds it),
// both in its name (`<backend>-measure-<fnv64 of machine>.tsv`) and in its
// header line, so a time measured on one machine is never reused on another.
// File format:
//   tsopt-measure-cache v1
//   machine<TAB><machine>
//   <key><TAB><milliseconds>        one per entry, 17 significant digits
// The file is rewritten atomically (temporary + rename) after each new
// measurement. A file that cannot be parsed is reported once on stderr and
// ignored (and replaced at the next save); it never stops the program.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <vector>
#include <unistd.h>

#include "tsopt/core/hash.hpp"
#include "tsopt/cost/cache.hpp"
#include "tsopt/io/atomic_file.hpp"

namespace tsopt::backend {

// $TSOPT_CACHE_DIR, else $XDG_CACHE_HOME/tsopt, else ~/.cache/tsopt; empty
// when none is set.
inline std::filesystem::path default_cache_dir() {
    if (const char* d = std::getenv("TSOPT_CACHE_DIR"); d && *d) return d;
    if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return std::filesystem::path(d) / "tsopt";
    if (const char* d = std::getenv("HOME"); d && *d) return std::filesystem::path(d) / ".cache" / "tsopt";
    return {};
}

// The configuration of node i that its time depends on: cost::op_key (kind,
// parameters, input shapes and layouts, output layout), plus which inputs are
// constant (their layout conversion or upload is done once at compile time,
// so they change what runs). `constant` is g.constant_mask(). Tabs and line
// breaks become spaces (the file is one entry per line, tab-separated).
inline std::string measure_key(const graph& g, std::size_t i, const std::vector<bool>& constant) {
    std::string k = cost::op_key::of(g, i).str() + "|const=";
    for (value v : g.nodes[i].inputs) k += constant[static_cast<std::size_t>(v.node)] ? '1' : '0';
    for (char& c : k)
        if (c == '\t' || c == '\n' || c == '\r') c = ' ';
    return k;
}

class measure_cache {
public:
    std::size_t hits = 0, misses = 0, loaded = 0;

    // `backend` names the backend in messages; file empty: in memory only.
    measure_cache(std::string_view backend, std::string machine, std::filesystem::path file)
        : backend_(backend), machine_(std::move(machine)), file_(std::move(file)) {
        load();
    }
    // The file of `machine`'s measurements by `backend` in dir (empty when dir is).
    static std::filesystem::path file_for(const std::filesystem::path& dir, std::string_view backend, const std::string& machine) {
        if (dir.empty()) return {};
        return dir / (std::string(backend) + "-measure-" + hashing::hex(hashing::fnv1a_of(machine)) + ".tsv");
    }
    const std::filesystem::path& file() const { return file_; }
    const std::string& machine() const { return machine_; }
    std::size_t size() const { return map_.size(); }
    bool contains(const std::string& key) const { return map_.count(key) > 0; }  // no hit/miss counted

    std::optional<double> find(const std::string& key) {
        auto it = map_.find(key);
        if (it == map_.end()) {
            ++misses;
            return std::nullopt;
        }
        ++hits;
        return it->second;
    }
    // Plausible operator times: a nanosecond (timer resolution) to an hour.
    // A time outside them in the file means the file is corrupt.
    static constexpr double min_ms = 1e-6, max_ms = 3.6e6;

    void put(const std::string& key, double ms) {
        map_[key] = std::clamp(ms, min_ms, max_ms);
        save();
    }

private:
    static constexpr std::string_view magic = "tsopt-measure-cache v1";

    void warn(const std::string& why) const {
        std::cerr << "tsopt " << backend_ << ": ignoring measurement cache " << file_ << ": " << why << "\n";
    }
    void load() {
        if (file_.empty()) return;
        std::error_code ec;
        if (!std::filesystem::exists(file_, ec)) return;
        std::ifstream f(file_);
        std::string line;
        if (!std::getline(f, line) || line != magic) return warn("unknown header (corrupt or another format)");
        if (!std::getline(f, line) || line != "machine\t" + machine_) return warn("written for another machine");
        std::unordered_map<std::string, double> m;
        for (int no = 3; std::getline(f, line); ++no) {
            auto tab = line.rfind('\t');
            char* end = nullptr;
            double ms = tab == std::string::npos ? NAN : std::strtod(line.c_str() + tab + 1, &end);
            if (tab == std::string::npos || tab == 0 || end == line.c_str() + tab + 1 || *end != '\0' || !std::isfinite(ms))
                return warn("line " + std::to_string(no) + " is not 'key<TAB>milliseconds'");
            if (ms < min_ms || ms > max_ms)
                return warn("line " + std::to_string(no) + ": " + line.substr(tab + 1) + " ms is outside " +
                            "the plausible range of an operator time (1 ns to 1 hour)");
            m[line.substr(0, tab)] = ms;
        }
        map_ = std::move(m);
        loaded = map_.size();
    }
    void save() {
        if (file_.empty() || save_failed_) return;
        std::error_code ec;
        std::filesystem::create_directories(file_.parent_path(), ec);
        std::ostringstream text;
        text << magic << "\nmachine\t" << machine_ << "\n";
        text.precision(17);  // exact round trip: a reloaded time equals the measured one
        for (auto& [k, v] : map_) text << k << "\t" << v << "\n";
        try {
            io::write_file_atomically(file_, text.str());
        } catch (const error& e) {
            save_failed_ = true;
            std::cerr << "tsopt " << backend_ << ": " << e.what() << "; keeping measurements in memory only\n";
        }
    }

    std::string backend_;
    std::string machine_;
    std::filesystem::path file_;
    std::unordered_map<std::string, double> map_;
    bool save_failed_ = false;
};

}  // namespace tsopt::backend
