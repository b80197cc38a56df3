#pragma once
// An engine's operators and axioms for the `tsopt` command: a shared library
// the command loads with `--plugin FILE` (docs/cli.md), as ONNX Runtime loads
// a custom-operator library. The library defines its entry point with
// TSOPT_PLUGIN and registers through the host the command hands it:
//
//   #include <tsopt/plugin.hpp>
//   TSOPT_PLUGIN([](const tsopt::plugin_host& host) {
//       host.register_operator(myengine::neg_decl);
//       host.register_axioms(myengine::axioms);
//   })
//
// Registering through the host (not spec::register_operator directly) puts
// the declarations in the command's own tables: the library's copy of the
// header-only registry is a different one unless the dynamic linker merges
// them. The declarations must be built against the same tsopt version (the
// entry point refuses another) and live as long as the library (namespace-
// scope constexpr objects do; the command never unloads a plugin).
#include <exception>
#include <span>
#include <string>
#include <string_view>

#include "tsopt/spec/axioms.hpp"
#include "tsopt/version.hpp"

namespace tsopt {

struct plugin_host {
    const char* version;  // the command's TSOPT_VERSION_STRING
    void (*register_operator)(const spec::op_decl&);
    void (*register_axioms)(std::span<const spec::axiom>);
};

// The command's side: its registry behind a plugin_host.
inline const plugin_host& this_program_host() {
    static const plugin_host host{TSOPT_VERSION_STRING, [](const spec::op_decl& d) { spec::register_operator(d); },
                                  [](std::span<const spec::axiom> a) { spec::register_axioms(a); }};
    return host;
}

}  // namespace tsopt

extern "C" {
// nullptr when registered, otherwise why not (the command prints it).
typedef const char* (*tsopt_plugin_register_fn)(const tsopt::plugin_host*);
}

// Defines the plugin's entry point, tsopt_plugin_register, around `fn`
// (callable with a const plugin_host&); a tsopt::error it throws becomes the
// message the command prints.
#define TSOPT_PLUGIN(fn)                                                                                        \
    extern "C" __attribute__((visibility("default"))) const char* tsopt_plugin_register(const tsopt::plugin_host* host) { \
        static std::string why;                                                                                 \
        if (std::string_view(host->version) != TSOPT_VERSION_STRING)                                            \
            return (why = std::string("built against tsopt " TSOPT_VERSION_STRING ", the command is ") + host->version).c_str(); \
        try {                                                                                                   \
            (fn)(*host);                                                                                        \
        } catch (const std::exception& e) {                                                                     \
            return (why = e.what()).c_str();                                                                    \
        }                                                                                                       \
        return nullptr;                                                                                         \
    }
