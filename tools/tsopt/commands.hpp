#pragma once
// The subcommands of `tsopt`. Each takes argv with argv[first] the first
// argument after the subcommand's name, returns an exit code (cli.hpp) and
// reports failures by throwing cli::failure.
#include <string_view>

namespace tsopt::cli {

int optimize_command(int argc, char** argv, int first);
int inspect_command(int argc, char** argv, int first);
int bench_command(int argc, char** argv, int first);
int rules_command(int argc, char** argv, int first);

extern const std::string_view optimize_help;
extern const std::string_view inspect_help;
extern const std::string_view bench_help;
extern const std::string_view rules_help;

}  // namespace tsopt::cli
