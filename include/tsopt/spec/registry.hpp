#pragma once
// The table of every declared operator, indexed by op_kind, and the lookups
// every stage uses (by kind, by name) plus checked shape inference and
// evaluation entry points.
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

constexpr const op_decl& decl(op_kind k) { return *operators[static_cast<std::size_t>(k)]; }
constexpr std::string_view name(op_kind k) { return decl(k).name; }

constexpr std::optional<op_kind> find_op(std::string_view n) {
    for (const op_decl* d : operators)
        if (d->name == n) return d->kind;
    return std::nullopt;
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
