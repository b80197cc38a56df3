#pragma once
// Axiom validation by symbolic execution (TASO §4.2): every axiom is
// instantiated on small concrete shapes and every parameter value of the
// slots' generation domains; tensors become arrays of Z3 real variables, both
// sides run through the spec's own reference semantics (instantiated with a
// Z3-expression scalar, see symbolic.hpp), and Z3 proves the two results equal
// element by element. A redundancy check tries to prove each axiom from the
// others with the rule verifier.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "tsopt/spec/axiom_dsl.hpp"
#include "verifier.hpp"

namespace tsopt::gen {

struct check_options {
    int max_extent = 4;               // tensor extents 1..max_extent (TASO: 4)
    int min_rank = 2, max_rank = 4;   // ranks of tensor variables (one-element operands of smul: rank 0)
    // TASO's setting: ewadd/ewmul operands have equal shapes, conv2d is
    // ungrouped (unless its kernel is a constant operator), matmul is 2-D.
    // Off: full broadcasting/grouped/batched semantics (see the report of
    // which axioms need the restriction in docs/verification.md).
    std::uint8_t typing = spec::taso_typing;  // spec::typing bits assumed
    // Exhaustive: every shape combination. Otherwise `samples` randomly chosen
    // shape combinations for every combination of parameter values.
    bool exhaustive = false;
    int samples = 2;
    std::uint64_t seed = 1;
    unsigned timeout_ms = 20000;      // per instance
    long max_instances = 0;           // exhaustive mode: stop after this many (0: no limit)
};

struct axiom_report {
    std::string name;
    bool ok = false;
    long param_combinations = 0;
    long instances = 0;        // instances proven equal
    long shape_rejected = 0;   // partial shape assignments rejected by shape inference (skipped)
    std::string failure;       // first failing instance, when !ok
    double seconds = 0;
};

axiom_report check_axiom(const spec::axiom& a, const check_options& opt = {});
std::vector<axiom_report> check_axioms(std::span<const spec::axiom> axioms, const check_options& opt = {});

struct redundancy_report {
    std::string name;
    verify_result result;  // proven: the axiom follows from the others
};
// Tries to prove every axiom from all the others plus the verifier's shape
// facts (each query bounded by timeout_ms); `progress` sees each result as it
// comes.
std::vector<redundancy_report> find_redundant(std::span<const spec::axiom> axioms, unsigned timeout_ms,
                                              const std::function<void(const redundancy_report&)>& progress = {});

}  // namespace tsopt::gen
