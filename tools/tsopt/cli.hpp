#pragma once
// The `tsopt` command's plumbing: exit codes, the error types that map onto
// them, and the option parser's interface (a thin layer over CLI11, cli.cpp).
// No optimization logic lives here.
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
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

// A subcommand's options, parsed by CLI11 (cli.cpp; CLI11 itself is
// included there only, so the commands compile without it). Each option is
// bound to the variable that receives it; the value rules are checked while
// parsing and a bad command line throws usage_error naming the option:
// `--name value`, `--name=value`, `-o value`; an option given twice is an
// error (flags may repeat); `--` ends options; the rest are positionals.
class options {
public:
    explicit options(std::string_view command);
    ~options();
    options(const options&) = delete;
    options& operator=(const options&) = delete;

    // `names` is CLI11's spelling list: "--quiet", "-o,--output".
    options& flag(const std::string& names, bool& target);
    options& text(const std::string& names, std::string& target);
    // Like `choice` in argparse.
    options& one_of(const std::string& names, std::string& target, std::vector<std::string> allowed);
    // A finite decimal number (no hex, no infinity, no surrounding blanks);
    // `low` is the smallest value allowed (inclusive unless `strict`).
    options& number(const std::string& names, double& target, double low, bool strict = false);
    // A decimal integer in [low, high] (parse_integer's rules).
    template <class T>
    options& integer(const std::string& names, T& target, std::int64_t low,
                     std::int64_t high = std::numeric_limits<std::int64_t>::max()) {
        return integer_to(names, [&target](std::int64_t v) { target = static_cast<T>(v); }, low, high);
    }
    // The arguments that are not options, in order.
    options& positionals(std::vector<std::string>& target);

    // Parses argv[first..argc) into the bound variables.
    void parse(int argc, char** argv, int first);
    // Whether the option (any of its spellings) was on the command line.
    bool given(const std::string& name) const;

    // A decimal integer in [low, high]: digits with an optional '-', nothing
    // else (no '+', blanks or hex); out of 64-bit range is an error too.
    // Throws usage_error naming `name`.
    static std::int64_t parse_integer(const std::string& name, const std::string& s, std::int64_t low,
                                      std::int64_t high = std::numeric_limits<std::int64_t>::max());

private:
    options& integer_to(const std::string& names, std::function<void(std::int64_t)> set, std::int64_t low,
                        std::int64_t high);
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace tsopt::cli
