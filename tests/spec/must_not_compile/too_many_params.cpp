// expect: more parameters than the operator declares
// matmul declares one parameter (the activation); passing two must stop the build.
#include "tsopt/spec/axiom_dsl.hpp"

using namespace tsopt::spec;
using namespace tsopt::spec::vars;

#ifdef TSOPT_CONTROL
constexpr expr e = apply(op_kind::matmul, {none}, {x, y});
#else
constexpr expr e = apply(op_kind::matmul, {none, one}, {x, y});
#endif
