// expect: every axiom needs a name
// Rules are named, never indexed: an axiom with an empty name must stop the build.
#include "tsopt/spec/axiom_dsl.hpp"

using namespace tsopt::spec;
using namespace tsopt::spec::vars;

#ifdef TSOPT_CONTROL
constexpr axiom a = make_axiom("ewadd-comm", ewadd(x, y) == ewadd(y, x));
#else
constexpr axiom a = make_axiom("", ewadd(x, y) == ewadd(y, x));
#endif
