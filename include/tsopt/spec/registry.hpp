#pragma once
// The table of every declared operator, indexed by op_kind, and the lookups
// every stage uses (by kind, by name) plus checked shape inference and
// evaluation entry points.
#include <cctype>
#include <optional>
#include <string>
#include <vector>

#include "tsopt/core/error.hpp"
#include "tsopt/spec/ops/concat_split.hpp"
#include "tsopt/spec/ops/constants.hpp"
#include "tsopt/spec/ops/conv.hpp"
#include "tsopt/spec/ops/elementwise.hpp"
#include "tsopt/spec/ops/matmul.hpp"
#include "tsopt/spec/ops/overwrite.hpp"
#include "tsopt/spec/ops/pool.hpp"
#include "tsopt/spec/ops/reshape_transpose.hpp"
#include "tsopt/spec/ops/slice.hpp"
#include "tsopt/spec/ops/softmax.hpp"

namespace tsopt::spec {

inline constexpr std::array<const op_decl*, op_count> operators{
    &ewadd_decl, &ewmul_decl, &smul_decl, &transpose_decl, &matmul_decl, &conv2d_decl, &enlarge_decl,
    &relu_decl, &avgpool_decl, &maxpool_decl, &concat_decl, &split_decl,
    &cpool_decl, &iconv_decl, &imatmul_decl, &iewmul_decl,
    &sigmoid_decl, &tanh_decl, &batchnorm_decl, &reshape_decl, &softmax_decl, &pad_decl,
    &slice_decl, &overwrite_decl, &reorder_decl};

namespace detail {
consteval bool registry_is_consistent() {
    for (int i = 0; i < op_count; ++i) {
        const op_decl& d = *operators[static_cast<std::size_t>(i)];
        if (static_cast<int>(d.kind) != i) return false;
        // (Non-null shape/semantics/flops pointers are checked by tests/spec:
        // GCC cannot compare function addresses in constant expressions under
        // -fsanitize=address.)
        if (d.num_outputs < 1 || d.num_outputs > max_outputs) return false;
        if (d.min_inputs > d.max_inputs) return false;
    }
    return true;
}
}  // namespace detail
static_assert(detail::registry_is_consistent(),
              "spec::operators must list every op_kind in enum order, with valid arities");

// ---------------------------------------------------------------------------
// Operators an engine declares (kinds from first_extension_kind): registered
// once at start-up, before graphs, rules or the generator name them, and
// looked up like the built-in ones from then on. Registration is not
// synchronised with lookups: register before starting threads.
namespace detail {
inline std::array<const op_decl*, max_op_kinds - first_extension_kind>& extension_table() {
    static std::array<const op_decl*, max_op_kinds - first_extension_kind> t{};
    return t;
}
[[noreturn]] inline void undeclared_kind(op_kind k) {
    throw error("operator kind " + std::to_string(static_cast<int>(k)) +
                " is not declared (an engine's own operator must be registered with spec::register_operator first)");
}
}  // namespace detail

// Whether kind k names a built-in or a registered operator.
inline bool is_declared(op_kind k) {
    const int i = static_cast<int>(k);
    if (i < op_count) return true;
    return i >= first_extension_kind && detail::extension_table()[static_cast<std::size_t>(i - first_extension_kind)];
}

constexpr const op_decl& decl(op_kind k) {
    if (static_cast<int>(k) < op_count) return *operators[static_cast<std::size_t>(k)];
    if (!is_declared(k)) detail::undeclared_kind(k);
    return *detail::extension_table()[static_cast<std::size_t>(static_cast<int>(k) - first_extension_kind)];
}
constexpr std::string_view name(op_kind k) { return decl(k).name; }

// The registered operators, in kind order.
inline std::vector<const op_decl*> extension_operators() {
    std::vector<const op_decl*> r;
    for (const op_decl* d : detail::extension_table())
        if (d) r.push_back(d);
    return r;
}
// Built-in operators, then the registered ones.
inline std::vector<const op_decl*> all_operators() {
    std::vector<const op_decl*> r(operators.begin(), operators.end());
    for (const op_decl* d : extension_operators()) r.push_back(d);
    return r;
}

constexpr std::optional<op_kind> find_op(std::string_view n) {
    for (const op_decl* d : operators)
        if (d->name == n) return d->kind;
    if (!std::is_constant_evaluated())
        for (const op_decl* d : detail::extension_table())
            if (d && d->name == n) return d->kind;
    return std::nullopt;
}

// Throws unless kind k is registered as the operator `expected_name`: rules
// and listings naming an engine's operator by kind check it so.
inline void require_operator(op_kind k, std::string_view expected_name) {
    if (!is_declared(k))
        throw error("rules name the engine's operator '" + std::string(expected_name) + "' (kind " +
                    std::to_string(static_cast<int>(k)) + "), which this program has not registered (spec::register_operator)");
    if (decl(k).name != expected_name)
        throw error("rules name operator '" + std::string(expected_name) + "' as kind " + std::to_string(static_cast<int>(k)) +
                    ", but this program registered '" + std::string(decl(k).name) + "' there: regenerate the rules");
}

// Declares an engine's own operator. `d` must outlive every use (a
// namespace-scope constexpr op_decl does). Registering the same declaration
// again is a no-op; anything else that would make kinds or names ambiguous,
// or a declaration the generator and the backends cannot use, is an error
// naming the problem.
inline void register_operator(const op_decl& d) {
    const std::string who = "spec::register_operator('" + std::string(d.name) + "'): ";
    const int k = static_cast<int>(d.kind);
    if (k < first_extension_kind || k >= max_op_kinds)
        throw error(who + "its kind " + std::to_string(k) + " is not an extension kind (use spec::extension_kind(i), i < " +
                    std::to_string(max_op_kinds - first_extension_kind) + ")");
    auto& slot = detail::extension_table()[static_cast<std::size_t>(k - first_extension_kind)];
    if (slot == &d) return;
    if (slot)
        throw error(who + "kind " + std::to_string(k) + " is already taken by operator '" + std::string(slot->name) + "'");
    if (d.name.empty()) throw error(who + "an operator needs a name");
    for (char c : d.name)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_'))
            throw error(who + "names are letters, digits and '_' (rule listings and headers print them)");
    if (auto other = find_op(d.name)) throw error(who + "the name is already declared (kind " + std::to_string(int(*other)) + ")");
    if (!d.infer || !d.eval_float || !d.eval_modp || !d.flops)
        throw error(who + "a declaration needs its shape rule, both reference semantics (float and modp) and its FLOPs");
    if (d.num_outputs < 1 || d.num_outputs > max_outputs || d.min_inputs < 0 || d.min_inputs > d.max_inputs ||
        d.max_inputs > spec::max_inputs || d.num_params < 0 || d.num_params > max_params)
        throw error(who + "arity out of range (inputs 0.." + std::to_string(spec::max_inputs) + ", outputs 1.." +
                    std::to_string(max_outputs) + ", parameters 0.." + std::to_string(max_params) + ")");
    if (d.commutative && !(d.min_inputs == 2 && d.max_inputs == 2))
        throw error(who + "commutative operators take exactly two inputs");
    slot = &d;
}

// Shape inference that reports arity problems too. Returns "" on success.
inline std::string infer_shapes(op_kind k, const op_params& p, std::span<const shape> in, std::span<shape> out) {
    const op_decl& d = decl(k);
    if (static_cast<int>(in.size()) < d.min_inputs || static_cast<int>(in.size()) > d.max_inputs)
        return detail::cat(d.name, " takes ", d.min_inputs == d.max_inputs ? detail::cat(d.min_inputs)
                                                                          : detail::cat(d.min_inputs, "..", d.max_inputs),
                           " inputs, got ", in.size());
    if (static_cast<int>(out.size()) != d.num_outputs) return detail::cat(d.name, " has ", d.num_outputs, " outputs");
    return d.infer(p, in, out);
}

// Evaluates one operator instance on concrete tensors; throws tsopt::error
// naming the operator when the shapes are invalid.
template <class T>
std::vector<tensor<T>> evaluate(op_kind k, const op_params& p, std::span<const tensor<T>* const> in) {
    const op_decl& d = decl(k);
    std::vector<shape> ins;
    for (auto* t : in) ins.push_back(t->shape);
    std::array<shape, max_outputs> outs;
    auto out_span = std::span<shape>(outs.data(), static_cast<std::size_t>(d.num_outputs));
    if (auto e = infer_shapes(k, p, ins, out_span); !e.empty()) throw error(std::string(d.name) + ": " + e);
    std::vector<tensor<T>> result;
    for (auto& s : out_span) result.emplace_back(s);
    d.template eval<T>()(p, in, result);
    return result;
}

}  // namespace tsopt::spec
