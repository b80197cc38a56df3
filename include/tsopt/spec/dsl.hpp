#pragma once
// The operator-declaration DSL. Each operator is declared exactly once, as a
// constexpr `op_decl`: its inputs, outputs, parameters with their finite
// generation domains, shape rule, reference semantics in both number systems,
// and cost facts. The generator, the Z3 verifier, the matcher, the cost models,
// the backends and the ONNX mapping all read these declarations; none keeps a
// list of its own.
//
// Adding an operator to tsopt: add its name to `op_kind` below, write one file
// in spec/ops/ with its `op_decl`, list it in spec/registry.hpp (a
// static_assert there checks the order), and give it axioms in
// spec/axioms.hpp. An engine adds its own without editing tsopt: an `op_decl`
// of kind `extension_kind(i)`, registered at run time (spec/registry.hpp
// `register_operator`), with axioms registered beside it (docs/install.md,
// "Your own operators").
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "tsopt/core/shape.hpp"
#include "tsopt/core/tensor.hpp"

namespace tsopt::spec {

enum class op_kind : std::uint8_t {
    // TASO's Table 1: the operators rules are generated over.
    ewadd, ewmul, smul, transpose, matmul, conv2d, enlarge, relu, avgpool, maxpool, concat, split,
    cpool, iconv, imatmul, iewmul,
    // Further operators users' models need.
    sigmoid, tanh, batchnorm, reshape, softmax, pad,
    // Sub-tensor operators of PET's correction kernels (pet/correction.hpp).
    slice, overwrite,
    // Explicit layout conversion (rewrite/layout.hpp): the identity on values.
    reorder,
    count_
};
inline constexpr int op_count = static_cast<int>(op_kind::count_);
// Operators an engine declares itself (spec::register_operator): op_kind
// values from first_extension_kind up, one per declaration, so graphs, rules
// and the generator carry them like the built-in ones.
inline constexpr int first_extension_kind = 128;
inline constexpr int max_op_kinds = 256;  // every op_kind value: tables indexed by kind
consteval op_kind extension_kind(int i) {
    if (i < 0 || first_extension_kind + i >= max_op_kinds) throw "spec::extension_kind: index beyond the 128 extension kinds";
    return static_cast<op_kind>(first_extension_kind + i);
}
constexpr bool is_extension(op_kind k) { return static_cast<int>(k) >= first_extension_kind; }

inline constexpr int max_params = 8;
inline constexpr int max_inputs = 4;   // in patterns and declarations (concat is variadic in graphs)
inline constexpr int max_outputs = 2;  // split

// Parameter values an operator instance carries. Which slot means what is
// declared by the operator's `params` list.
struct op_params {
    std::array<std::int32_t, max_params> v{};
    constexpr std::int32_t operator[](int i) const { return v[static_cast<std::size_t>(i)]; }
    constexpr std::int32_t& operator[](int i) { return v[static_cast<std::size_t>(i)]; }
    friend constexpr bool operator==(const op_params&, const op_params&) = default;
};

enum class pad_mode : std::int32_t { valid = 0, same = 1 };
enum class activation : std::int32_t { none = 0, relu = 1, sigmoid = 2, tanh = 3 };

// Tensor layouts an operator may be asked to produce / consume.
enum class layout : std::uint8_t { row_major = 0, col_major = 1, nchw = 0, nhwc = 2 };
using layout_mask = std::uint8_t;
inline constexpr layout_mask any_layout = 0xff;
// NCHW or NHWC: operators on image tensors whose kernels exist in both
// (conv, pools, activations, element-wise, channel concat). NHWC applies to
// rank-4 values only; other ranks stay in the default layout.
inline constexpr layout_mask image_layouts = static_cast<layout_mask>((1 << int(layout::nchw)) | (1 << int(layout::nhwc)));

struct param_decl {
    std::string_view name;
    // Values the rule generator enumerates. Empty: the parameter is not
    // enumerated and takes `fallback` (e.g. reshape targets, split points that
    // the generator derives from concat history).
    std::span<const std::int32_t> domain{};
    std::int32_t fallback = 0;
    // Every axiom over this slot holds for each value the shape rule accepts,
    // not only the domain's (strides, dilations, padding mode, pool windows;
    // not transpose permutations or enlarge sizes, whose axioms hold for the
    // domain only,
    // nor the fused activation, which axioms relate as none and relu, nor
    // concat/split axes: unguarded, the axioms with the shape facts prove
    // split0(concat(x, y)) == y). The Z3 verifier leaves a
    // parameter variable here unguarded, so tsopt-gen emits rules that keep
    // such slots variables and match a model's stride 3 or dilation 2 too
    // (docs/verification.md, "Parameter variables"); axiom validation checks
    // the values of `probe` beyond the domain.
    bool any_value = false;
    std::span<const std::int32_t> probe{};
};

// Shape rule: fills `out` (num_outputs entries) or returns a message naming
// the violated condition. Returning instead of throwing keeps the generator's
// enumeration loop cheap, since most candidate applications are invalid.
using shape_fn = std::string (*)(const op_params&, std::span<const shape> in, std::span<shape> out);

template <class T>
using eval_fn = void (*)(const op_params&, std::span<const tensor<T>* const> in, std::span<tensor<T>> out);

// Floating-point operations of one instance (cost models read this).
using flops_fn = std::int64_t (*)(const op_params&, std::span<const shape> in, std::span<const shape> out);

enum class op_class : std::uint8_t {
    elementwise,  // pointwise, possibly broadcasting
    linear,       // multi-linear in its inputs (PET's subprograms)
    data_movement,
    nonlinear,
    constant,     // no inputs; value fixed by parameters
};

struct op_decl {
    op_kind kind;
    std::string_view name;
    std::string_view math;  // one-line meaning, shown in listings and errors
    int min_inputs = 1;
    int max_inputs = 1;  // > spec::max_inputs means variadic in graphs
    int num_outputs = 1;
    std::array<std::string_view, spec::max_inputs> input_names{};
    std::array<param_decl, max_params> params{};
    int num_params = 0;
    op_class cls = op_class::nonlinear;
    bool multilinear = false;   // linear in each input separately (PET)
    // Two inputs whose order does not change the value (an axiom states it):
    // the matcher binds a pattern node of it in both operand orders, so no
    // rule needs a copy per order (rewrite/detail/match_impl.hpp) and
    // tsopt-gen emits one rule per class of rules equal up to operand order.
    bool commutative = false;
    layout_mask layouts = any_layout;
    // Whether the rule generator enumerates this operator.
    bool generated = true;
    shape_fn infer = nullptr;
    eval_fn<float> eval_float = nullptr;
    eval_fn<modp> eval_modp = nullptr;
    flops_fn flops = nullptr;

    constexpr int param_index(std::string_view n) const {
        for (int i = 0; i < num_params; ++i)
            if (params[static_cast<std::size_t>(i)].name == n) return i;
        return -1;
    }
    template <class T>
    constexpr eval_fn<T> eval() const {
        if constexpr (std::is_same_v<T, float>) return eval_float;
        else return eval_modp;
    }
};

// TASO's verification model types some operators more narrowly than their
// full semantics. Each restriction is one bit; an axiom (and a rule proven
// from it) that needs a restriction holds only where every node satisfies it.
enum typing : std::uint8_t {
    full_semantics = 0,
    no_broadcast = 1,    // ewadd/ewmul operands of equal shape (unless one is a one-element constant operator)
    ungrouped_conv = 2,  // conv2d with groups == 1 (unless its kernel is a constant operator)
    matmul_2d = 4,       // matmul operands of rank 2
    taso_typing = no_broadcast | ungrouped_conv | matmul_2d,
};

// ---------------------------------------------------------------------------
// Patterns: the plain-data form shared by axioms and generated rules. A
// pattern is a topologically ordered list of operator nodes over tensor
// variables (?x, ?y ...) with parameters that are constants, parameter
// variables, or an extent of a tensor in the same pattern.

struct value_ref {
    std::int16_t index = -1;   // node index, or tensor-variable index when `is_var`
    std::uint8_t output = 0;   // which output of the node (split has two)
    bool is_var = false;
    friend constexpr bool operator==(const value_ref&, const value_ref&) = default;
};
constexpr value_ref var_ref(int v) { return {static_cast<std::int16_t>(v), 0, true}; }
constexpr value_ref node_ref(int n, int out = 0) { return {static_cast<std::int16_t>(n), static_cast<std::uint8_t>(out), false}; }

struct param_term {
    enum class kind : std::uint8_t { unused, constant, variable, dim_of };
    kind k = kind::unused;
    std::int8_t dim = 0;   // dim_of: which extent of `of`
    value_ref of{};        // dim_of: the tensor measured
    std::int32_t value = 0;  // constant value, or parameter-variable index
    friend constexpr bool operator==(const param_term&, const param_term&) = default;
};
constexpr param_term pconst(std::int32_t v) { return {param_term::kind::constant, 0, {}, v}; }
constexpr param_term pvar(int i) { return {param_term::kind::variable, 0, {}, i}; }
constexpr param_term pdim(value_ref of, int d) { return {param_term::kind::dim_of, static_cast<std::int8_t>(d), of, 0}; }

struct pattern_node {
    op_kind op{};
    std::uint8_t num_inputs = 0;
    std::array<value_ref, spec::max_inputs> inputs{};
    std::array<param_term, max_params> params{};
    friend constexpr bool operator==(const pattern_node&, const pattern_node&) = default;
};

}  // namespace tsopt::spec
