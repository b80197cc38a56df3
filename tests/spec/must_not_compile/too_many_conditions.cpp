// expect: at most two side conditions
// An axiom carries at most two side conditions; a third must stop the build.
#include "tsopt/spec/axiom_dsl.hpp"

using namespace tsopt::spec;
using namespace tsopt::spec::vars;

#ifdef TSOPT_CONTROL
constexpr axiom a = make_axiom("concat-swap", concat(p0, concat(p1, x, y), concat(p1, z, w)) ==
                                                  concat(p1, concat(p0, x, z), concat(p0, y, w)),
                               {differ(p0, p1), equal(p0, p0)});
#else
constexpr axiom a = make_axiom("concat-swap", concat(p0, concat(p1, x, y), concat(p1, z, w)) ==
                                                  concat(p1, concat(p0, x, z), concat(p0, y, w)),
                               {differ(p0, p1), equal(p0, p0), equal(p1, p1)});
#endif
