// tsopt-gen: generates, verifies and emits graph substitution rules over
// tsopt's operators (the command line is gen::cli_main, cli.cpp).
#include "gen.hpp"

int main(int argc, char** argv) { return tsopt::gen::cli_main(argc, argv); }
