// expect: operator applied to the wrong number of inputs
// ewadd is binary; applying it to one input must stop the build.
#include "tsopt/spec/axiom_dsl.hpp"

using namespace tsopt::spec;
using namespace tsopt::spec::vars;

#ifdef TSOPT_CONTROL
constexpr expr e = apply(op_kind::ewadd, {}, {x, y});
#else
constexpr expr e = apply(op_kind::ewadd, {}, {x});
#endif
