// expect: output index beyond the operator's outputs
// split has outputs 0 and 1; asking for output 2 must stop the build.
#include "tsopt/spec/axiom_dsl.hpp"

using namespace tsopt::spec;
using namespace tsopt::spec::vars;

#ifdef TSOPT_CONTROL
constexpr expr e = apply(op_kind::split, {p0}, {x}, 1);
#else
constexpr expr e = apply(op_kind::split, {p0}, {x}, 2);
#endif
