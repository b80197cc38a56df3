// The `tsopt` command line, argv to exit code: the subcommand table, --help
// and --version, and the mapping of failures to exit codes and messages on
// stderr. main.cpp runs it as the program; the Python package runs the same
// function in-process (python/tsopt_module.cpp), so both behave alike.
#include <dlfcn.h>

#include <iostream>
#include <new>
#include <string>
#include <string_view>

#include "cli.hpp"
#include "commands.hpp"
#include "tsopt/plugin.hpp"
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
    "`tsopt <command> --help` describes a command's options. Every command also takes\n"
    "  --plugin FILE                  load an engine's own operators and axioms from a shared\n"
    "                                 library (include/tsopt/plugin.hpp); repeatable\n"
    "\n";

// An engine's operators (include/tsopt/plugin.hpp), registered before the
// command reads a model or a rule listing that names them.
void load_plugin(const std::string& path) {
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) throw input_error("--plugin: cannot load '" + path + "': " + dlerror());
    auto entry = reinterpret_cast<tsopt_plugin_register_fn>(dlsym(lib, "tsopt_plugin_register"));
    if (!entry) throw input_error("--plugin: '" + path + "' defines no tsopt_plugin_register (TSOPT_PLUGIN, include/tsopt/plugin.hpp)");
    if (const char* why = entry(&this_program_host())) throw input_error("--plugin: '" + path + "': " + why);
}

// Takes every `--plugin FILE` (or --plugin=FILE) after the command out of
// argv, loading each: the commands never see the option.
void load_plugins(int& argc, char** argv) {
    int kept = 2;
    for (int i = 2; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--") {
            while (i < argc) argv[kept++] = argv[i++];
            break;
        }
        if (a == "--plugin") {
            if (i + 1 >= argc) throw usage_error("--plugin needs a value (a shared library)");
            load_plugin(argv[++i]);
        } else if (a.starts_with("--plugin=")) {
            load_plugin(std::string(a.substr(9)));
        } else {
            argv[kept++] = argv[i];
        }
    }
    argc = kept;
}

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
        load_plugins(argc, argv);
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
