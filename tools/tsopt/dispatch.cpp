// The `tsopt` command line, argv to exit code: the subcommand table, --help
// and --version, and the mapping of failures to exit codes and messages on
// stderr. main.cpp runs it as the program; the Python package runs the same
// function in-process (python/tsopt_module.cpp), so both behave alike.
#include <iostream>
#include <new>
#include <string>
#include <string_view>

#include "cli.hpp"
#include "commands.hpp"
#include "tsopt/version.hpp"

namespace tsopt::cli {
namespace {

constexpr std::string_view main_help =
    "usage: tsopt <command> [options]\n"
    "\n"
    "Rewrites ONNX models into faster equivalent ones with verified graph rewrite rules.\n"
    "\n"
    "commands:\n"
    "  optimize IN.onnx -o OUT.onnx   optimize a model, verify it, write it (and a report)\n"
    "  inspect IN.onnx                operators, input/output shapes, opaque operators, FLOPs\n"
    "  bench IN.onnx [OPT.onnx]       time one model, or two side by side, on a backend\n"
    "  rules                          list the rules built into this binary\n"
    "  replay IN.onnx --report R.json -o OUT.onnx   rebuild an optimized model from its report's rewrites\n"
    "\n"
    "`tsopt <command> --help` describes a command's options.\n"
    "\n";

}  // namespace

int run_command_line(int argc, char** argv) {
    if (argc < 2) {
        std::cerr << main_help << exit_codes_text;
        return exit_code::usage;
    }
    std::string_view cmd = argv[1];
    if (cmd == "--help" || cmd == "-h" || cmd == "help") {
        std::cout << main_help << exit_codes_text;
        return exit_code::ok;
    }
    if (cmd == "--version") {
        std::cout << "tsopt " TSOPT_VERSION_STRING "\n";
        return exit_code::ok;
    }
    struct entry {
        std::string_view name;
        int (*run)(int, char**, int);
        const std::string_view* help;
    };
    const entry commands[] = {{"optimize", optimize_command, &optimize_help},
                              {"inspect", inspect_command, &inspect_help},
                              {"bench", bench_command, &bench_help},
                              {"rules", rules_command, &rules_help},
                              {"replay", replay_command, &replay_help}};
    const entry* e = nullptr;
    for (const auto& c : commands)
        if (c.name == cmd) e = &c;
    if (!e) {
        std::cerr << "tsopt: unknown command '" << cmd << "'\n\n" << main_help;
        return exit_code::usage;
    }
    for (int i = 2; i < argc; ++i) {
        std::string_view a = argv[i];
        if (a == "--") break;
        if (a == "--help" || a == "-h") {
            std::cout << *e->help << "\n" << exit_codes_text;
            return exit_code::ok;
        }
    }
    try {
        return e->run(argc, argv, 2);
    } catch (const failure& f) {
        std::cerr << "tsopt " << cmd << ": error: " << f.what() << "\n";
        if (f.code == exit_code::usage) std::cerr << "(see `tsopt " << cmd << " --help`)\n";
        return f.code;
    } catch (const std::bad_alloc&) {
        std::cerr << "tsopt " << cmd << ": error: out of memory\n";
        return exit_code::internal;
    } catch (const std::exception& x) {
        std::cerr << "tsopt " << cmd << ": internal error: " << x.what() << "\n";
        return exit_code::internal;
    }
}

}  // namespace tsopt::cli
