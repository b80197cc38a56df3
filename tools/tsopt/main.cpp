// tsopt: the command-line front end of the library (docs/cli.md).
//   tsopt optimize IN.onnx -o OUT.onnx    tsopt inspect IN.onnx
//   tsopt bench IN.onnx [OPT.onnx]        tsopt rules [--filter S]
// Thin: parsing, progress and printing (dispatch.cpp and the *_command.cpp
// files); the work is tsopt::optimize, the ONNX importer/exporter, the
// backends and the DOT writer.
#include <csignal>

#include "commands.hpp"

int main(int argc, char** argv) {
    // Past `ulimit -f`, write(2) fails with EFBIG instead of killing the
    // process, so the atomic writer removes its temporary and reports it.
    std::signal(SIGXFSZ, SIG_IGN);
    return tsopt::cli::run_command_line(argc, argv);
}
