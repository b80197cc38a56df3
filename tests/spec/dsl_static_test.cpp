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
// Every operator's name finds it again, and names are unique.
consteval bool names_round_trip() {
    for (const op_decl* d : operators) {
        if (find_op(d->name) != d->kind) return false;
        if (d->name.empty() || d->math.empty()) return false;
    }
    return true;
}
static_assert(names_round_trip(), "every operator is found by its own name, and has a one-line math description");

// Declarations agree with their class: constants take no inputs; fixed-arity
// operators name each input; parameter lists fit the slots.
consteval bool declarations_are_well_formed() {
    for (const op_decl* d : operators) {
        if ((d->cls == op_class::constant) != (d->max_inputs == 0)) return false;
        if (d->num_params < 0 || d->num_params > max_params) return false;
        if (d->max_inputs <= tsopt::spec::max_inputs)
            for (int i = 0; i < d->max_inputs; ++i)
                if (d->input_names[static_cast<std::size_t>(i)].empty()) return false;
        for (int i = 0; i < d->num_params; ++i) {
            if (d->params[static_cast<std::size_t>(i)].name.empty()) return false;
            if (d->param_index(d->params[static_cast<std::size_t>(i)].name) != i) return false;  // unique
        }
    }
    return true;
}
static_assert(declarations_are_well_formed());
static_assert(decl(op_kind::split).num_outputs == 2 && decl(op_kind::concat).max_inputs > tsopt::spec::max_inputs);
static_assert(decl(op_kind::conv2d).param_index("dil_w") == conv2d_p::dil_w && decl(op_kind::conv2d).param_index("nope") == -1);
// Jointly linear is not multilinear: ewadd and concat are not linear in each input alone.
static_assert(decl(op_kind::matmul).multilinear && !decl(op_kind::ewadd).multilinear && !decl(op_kind::concat).multilinear);

// Constants are leaves with parameters only.
constexpr expr id = iconv(p0, p1, one);
static_assert(id.size == 1 && id.nodes[0].num_inputs == 0 && tensor_vars(id) == 0 && param_vars(id) == 2);
// Nesting keeps every node's inputs in topological order: conv2d(x, enlarge(w)).
constexpr expr ce = conv2d(one, one, same, none, x, enlarge(p0, p1, w));
static_assert(ce.size == 2 && ce.root == node_ref(1) && ce.nodes[1].inputs[1] == node_ref(0) && ce.nodes[1].inputs[0] == var_ref(0));
static_assert(tensor_vars(ce) == 4 && param_vars(ce) == 2);
// Pool parameters omitted at the end take their declared fallbacks (kh = kw = 3).
constexpr expr ap = apply(op_kind::avgpool, {}, {x});
static_assert(ap.nodes[0].params[pool_p::kh] == pconst(3) && ap.nodes[0].params[pool_p::kw] == pconst(3));
// A two-sided axiom with a side condition.
constexpr axiom swap = make_axiom("concat-swap",
                                  concat(p0, concat(p1, x, y), concat(p1, z, w)) == concat(p1, concat(p0, x, z), concat(p0, y, w)),
                                  {differ(p0, p1)});
static_assert(swap.num_where == 1 && swap.where[0].r == condition::rel::ne && swap.eq.lhs.size == 3 && tensor_vars(swap.eq.rhs) == 4);
// The largest expression that fits: max_expr_nodes operators.
constexpr expr r3 = relu(relu(relu(x)));
constexpr expr big = ewadd(ewadd(r3, r3), relu(r3));  // 7 + 4 + 1 nodes
static_assert(big.size == max_expr_nodes && big.root == node_ref(max_expr_nodes - 1));
}  // namespace
