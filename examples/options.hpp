#pragma once
// The examples' command line: what the options set (settings) and parse(),
// which reads them with CLI11. parse() lives in options.cpp, compiled once
// into a library every example links, so that no example compiles CLI11.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tsopt/core/error.hpp"
#include "tsopt/rules/built_in.hpp"

namespace tsopt::examples {

struct usage_error : error {
    using error::error;
};

struct settings {
    std::string model;
    int batch = 1;
    int image = 0;       // 0: the paper's size (--quick: the smallest that builds)
    int width_div = 1;
    int depth_div = 1;
    int length = 0;      // RNN / BERT sequence length; 0: the paper's
    double budget = 30;  // search seconds
    double alpha = 1.05;
    std::string backend = "cpu";
    rules::built_in_set rules = rules::built_in_set::generated;
    bool quick = false;
    bool profile = false;  // print where end-to-end time goes, per operator kind
    int reps = 20;             // interleaved end-to-end rounds
    std::size_t top_k = 4;     // candidates verified on the board
    double tolerance = 1e-4;   // relative error allowed between original and optimized outputs
    std::size_t partition = 30;
    std::uint64_t seed = 1;
    bool help = false;
};

// Parses argv with CLI11; throws usage_error with a sentence naming the bad option.
settings parse(std::string_view model, int argc, char** argv);

}  // namespace tsopt::examples
