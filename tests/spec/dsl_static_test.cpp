// Compile-time tests of the operator/axiom DSL: this file passes by compiling.
#include "tsopt/spec/axiom_dsl.hpp"

namespace {
using namespace tsopt::spec;
using namespace tsopt::spec::vars;

constexpr axiom assoc = make_axiom("ewadd-assoc", ewadd(x, ewadd(y, z)) == ewadd(ewadd(x, y), z));
static_assert(assoc.eq.lhs.size == 2 && assoc.eq.rhs.size == 2);
static_assert(tensor_vars(assoc.eq.lhs) == 3 && param_vars(assoc.eq.lhs) == 0);
// Operators nest in topological order: the root is the last node.
static_assert(assoc.eq.lhs.root.index == 1 && !assoc.eq.lhs.root.is_var);
static_assert(assoc.eq.lhs.nodes[0].inputs[0] == var_ref(1));

constexpr axiom split_concat = make_axiom("split-concat", split1(p0, concat(p0, x, y)) == y);
static_assert(split_concat.eq.lhs.root.output == 1);
static_assert(param_vars(split_concat.eq.lhs) == 1);
static_assert(split_concat.eq.rhs.root == var_ref(1));

// Trailing parameters take the declared fallback (conv dilation = 1).
constexpr expr c = conv2d(one, one, same, none, x, w);
static_assert(c.nodes[0].params[conv2d_p::dil_h] == pconst(1));

static_assert(find_op("conv2d") == op_kind::conv2d && !find_op("no-such-op"));
static_assert(pack_perm({0, 2, 1}) != pack_perm({1, 0}) && perm_axis(pack_perm({0, 2, 1}), 1) == 2);
}  // namespace
