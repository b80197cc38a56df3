// tsopt-gen: generates, verifies and emits graph substitution rules over
// tsopt's operators (the command line is gen::cli_main, cli.cpp).
#include "gen.hpp"

#ifdef TSOPT_GEN_MIMALLOC
#include <mimalloc.h>
#endif

int main(int argc, char** argv) {
#ifdef TSOPT_GEN_MIMALLOC
    // A call into mimalloc keeps the library linked under --as-needed:
    // its malloc, not glibc's, then serves the process (meson option
    // gen_allocator).
    (void)mi_version();
#endif
    return tsopt::gen::cli_main(argc, argv);
}
