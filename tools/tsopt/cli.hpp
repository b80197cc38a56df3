#pragma once
// The `tsopt` command's plumbing: exit codes, the error types that map onto
// them, and a small option parser (`--name value`, `--name=value`, flags,
// positionals, `--` ends options). No optimization logic lives here.
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "tsopt/core/error.hpp"

namespace tsopt::cli {

// Exit codes (also in `tsopt --help` and docs/cli.md).
enum exit_code : int {
    ok = 0,
    usage = 1,                // unknown command or option, missing or bad value
    bad_input = 2,            // input file missing, unreadable, not ONNX, or not supported
    mismatch = 3,             // the optimized model's outputs differ from the original's
    backend_unavailable = 4,  // --backend cuda without a CUDA build or device
    write_failed = 5,         // an output file (-o, --report, --dot) could not be written
    internal = 6,             // anything else (a bug: please report it)
};

inline constexpr std::string_view exit_codes_text =
    "exit codes:\n"
    "  0  success\n"
    "  1  usage error (unknown command or option, missing or bad value)\n"
    "  2  bad input file (missing, unreadable, not an ONNX model, or unsupported)\n"
    "  3  verification failed: optimized outputs differ from the original's\n"
    "  4  backend unavailable (--backend cuda without a CUDA build or GPU)\n"
    "  5  an output file could not be written\n"
    "  6  internal error\n";

struct failure : error {
    exit_code code;
    failure(exit_code c, const std::string& what) : error(what), code(c) {}
};
inline failure usage_error(const std::string& s) { return {exit_code::usage, s}; }
inline failure input_error(const std::string& s) { return {exit_code::bad_input, s}; }
inline failure mismatch_error(const std::string& s) { return {exit_code::mismatch, s}; }
inline failure backend_error(const std::string& s) { return {exit_code::backend_unavailable, s}; }
inline failure write_error(const std::string& s) { return {exit_code::write_failed, s}; }

// An option a subcommand accepts: its spelling(s) and whether it takes a value.
struct option_spec {
    std::string name;        // "--budget"
    bool takes_value = true;
    std::string alias = {};  // "-o"
};

class args {
public:
    // Parses argv[first..argc); throws usage_error naming the offending option.
    args(int argc, char** argv, int first, const std::vector<option_spec>& spec) {
        bool options_done = false;
        for (int i = first; i < argc; ++i) {
            std::string_view a = argv[i];
            if (options_done || a.size() < 2 || a[0] != '-') {
                positional_.emplace_back(a);
                continue;
            }
            if (a == "--") {
                options_done = true;
                continue;
            }
            std::string name(a), inline_value;
            bool has_inline = false;
            if (auto eq = a.find('='); a.starts_with("--") && eq != std::string_view::npos) {
                name = std::string(a.substr(0, eq));
                inline_value = std::string(a.substr(eq + 1));
                has_inline = true;
            }
            const option_spec* s = nullptr;
            for (const auto& o : spec)
                if (o.name == name || (!o.alias.empty() && o.alias == name)) s = &o;
            if (!s) throw usage_error("unknown option '" + std::string(a) + "'");
            if (!s->takes_value) {
                if (has_inline) throw usage_error(s->name + " takes no value");
                flags_.insert(s->name);
                continue;
            }
            if (!has_inline) {
                if (i + 1 >= argc) throw usage_error(s->name + ": missing value");
                inline_value = argv[++i];
            }
            if (values_.count(s->name)) throw usage_error(s->name + " given twice");
            values_[s->name] = inline_value;
        }
    }

    const std::vector<std::string>& positional() const { return positional_; }
    bool flag(const std::string& name) const { return flags_.count(name) > 0; }
    bool has(const std::string& name) const { return values_.count(name) > 0; }
    std::string str(const std::string& name, const std::string& fallback = {}) const {
        auto it = values_.find(name);
        return it == values_.end() ? fallback : it->second;
    }
    // A finite decimal number (no hex, no infinity, no surrounding blanks);
    // `low` is the smallest value allowed (inclusive unless `strict`).
    double number(const std::string& name, double fallback, double low, bool strict = false) const {
        auto it = values_.find(name);
        if (it == values_.end()) return fallback;
        const std::string& s = it->second;
        double v = 0;
        auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, std::chars_format::general);
        if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v))
            throw usage_error(name + ": expected a decimal number, got '" + s + "'");
        if (strict ? !(v > low) : !(v >= low))
            throw usage_error(name + ": must be " + (strict ? "greater than " : "at least ") + trim(low) + ", got " + s);
        return v;
    }
    std::int64_t integer(const std::string& name, std::int64_t fallback, std::int64_t low,
                         std::int64_t high = std::numeric_limits<std::int64_t>::max()) const {
        auto it = values_.find(name);
        if (it == values_.end()) return fallback;
        return parse_integer(name, it->second, low, high);
    }
    // Like `choice` in argparse.
    std::string one_of(const std::string& name, const std::string& fallback, const std::vector<std::string>& allowed) const {
        std::string v = str(name, fallback);
        for (const auto& a : allowed)
            if (a == v) return v;
        std::string list;
        for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
        throw usage_error(name + ": expected one of " + list + ", got '" + v + "'");
    }

    // A decimal integer in [low, high]: digits with an optional '-', nothing
    // else (no '+', blanks or hex); out of 64-bit range is an error too.
    static std::int64_t parse_integer(const std::string& name, const std::string& s, std::int64_t low,
                                      std::int64_t high = std::numeric_limits<std::int64_t>::max()) {
        std::int64_t v = 0;
        auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 10);
        if (ec == std::errc::result_out_of_range)
            throw usage_error(name + ": " + s + " is out of range (" + std::to_string(low) + ".." + std::to_string(high) + ")");
        if (s.empty() || ec != std::errc() || end != s.data() + s.size())
            throw usage_error(name + ": expected a decimal integer, got '" + s + "'");
        if (v < low) throw usage_error(name + ": must be at least " + std::to_string(low) + ", got " + s);
        if (v > high) throw usage_error(name + ": must be at most " + std::to_string(high) + ", got " + s);
        return v;
    }

private:
    static std::string trim(double v) {
        std::string s = std::to_string(v);
        while (s.find('.') != std::string::npos && (s.back() == '0' || s.back() == '.')) {
            bool dot = s.back() == '.';
            s.pop_back();
            if (dot) break;
        }
        return s;
    }
    std::vector<std::string> positional_;
    std::map<std::string, std::string> values_;
    std::set<std::string> flags_;
};

}  // namespace tsopt::cli
