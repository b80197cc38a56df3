// expect: expression exceeds max_expr_nodes
// Twelve nested operators fit an expression (max_expr_nodes); thirteen must stop the build.
#include "tsopt/spec/axiom_dsl.hpp"

using namespace tsopt::spec;
using namespace tsopt::spec::vars;

consteval expr r4(expr a) { return relu(relu(relu(relu(a)))); }
#ifdef TSOPT_CONTROL
constexpr expr e = r4(r4(r4(x)));
static_assert(e.size == max_expr_nodes);
#else
constexpr expr e = r4(r4(r4(relu(x))));
#endif
