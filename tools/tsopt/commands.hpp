#pragma once
// The subcommands of `tsopt`. Each takes argv with argv[first] the first
// argument after the subcommand's name, returns an exit code (cli.hpp) and
// reports failures by throwing cli::failure.
#include <string_view>

namespace tsopt::cli {

// The whole command line (argv[0] the program, argv[1] the subcommand):
// runs it and returns the exit code; messages go to stdout and stderr.
int run_command_line(int argc, char** argv);

int optimize_command(int argc, char** argv, int first);
int inspect_command(int argc, char** argv, int first);
int bench_command(int argc, char** argv, int first);
int rules_command(int argc, char** argv, int first);
int replay_command(int argc, char** argv, int first);

extern const std::string_view optimize_help;
extern const std::string_view inspect_help;
extern const std::string_view bench_help;
extern const std::string_view rules_help;
extern const std::string_view replay_help;

}  // namespace tsopt::cli
