#pragma once
// What a backend is. Every backend executes whole graphs; measuring backends
// also time single operator configurations for the measured cost models.
#include <concepts>
#include <span>
#include <string_view>
#include <vector>

#include "tsopt/core/graph.hpp"

namespace tsopt::backend {

// execute(g, inputs): `inputs` in the order of g.inputs(); returns one tensor
// per g.outputs entry.
template <class B>
concept executor = requires(B& b, const graph& g, std::span<const tensor<float>> in) {
    { b.execute(g, in) } -> std::same_as<std::vector<tensor<float>>>;
    { B::name } -> std::convertible_to<std::string_view>;
};

// measure(g, node): median time in milliseconds of node `node` of `g`
// (operator, parameters, input shapes, layout), cached by the backend.
template <class B>
concept measurer = executor<B> && requires(B& b, const graph& g, std::size_t node) {
    { b.measure(g, node) } -> std::convertible_to<double>;
};

// Checks the inputs handed to execute() against the graph's inputs.
inline void check_inputs(const graph& g, std::span<const tensor<float>> in) {
    auto ids = g.inputs();
    if (ids.size() != in.size())
        throw error("graph takes " + std::to_string(ids.size()) + " inputs, " + std::to_string(in.size()) + " given");
    for (std::size_t i = 0; i < ids.size(); ++i)
        if (!(g.shape_of(ids[i]) == in[i].shape))
            throw error("input '" + g.at(ids[i]).name + "' expects shape " + g.shape_of(ids[i]).str() + ", got " +
                        in[i].shape.str());
}

}  // namespace tsopt::backend
