// The engine's own rule generator: tsopt-gen's command line over tsopt's
// operators plus the engine's (myengine_ops.hpp), whose axioms join the
// proof base. Its options are tsopt-gen's (`--ops neg,sub,...`).
#include <gen.hpp>

#include "myengine_ops.hpp"

int main(int argc, char** argv) {
    myengine::register_spec();
    return tsopt::gen::cli_main(argc, argv);
}
