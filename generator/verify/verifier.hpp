#pragma once
// Z3 verifier for generated rules (TASO style). Tensors are values of one
// uninterpreted sort T; every operator output is an uninterpreted function
// over Int parameters and T inputs; the axioms (spec/axioms.hpp) become
// universally quantified equations with E-matching triggers. A candidate is
// proven when the negation of its output equalities is unsatisfiable under
// the axioms. See docs/verification.md.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tsopt/spec/axiom_dsl.hpp"

namespace tsopt::gen {

struct candidate {            // a rule proposed by the generator
    std::vector<spec::pattern_node> src, dst;      // topologically ordered
    std::vector<spec::value_ref> src_out, dst_out;  // src_out[i] must equal dst_out[i]
};

enum class verdict { proven, unproven, timeout };
struct verify_result {
    verdict v;
    double seconds;
    std::string detail;
    // Z3's deterministic resource count spent by this query ("rlimit count"
    // statistic): what --rlimit bounds, the same on any machine and load.
    std::uint64_t rlimit_used = 0;
    std::uint64_t instances = 0;  // quantifier instantiations
    std::uint64_t memory_mb = 0;  // Z3's peak memory ("max memory"), process-wide
    // Ended by the wall clock (the timeout) before a deterministic limit
    // (rlimit, instance cap) or an answer: the verdict would depend on
    // machine load. The generator aborts its run on such a query.
    bool wall_clock = false;
    // Proven through the candidate's transposed mirror (verifier::prove):
    // the mirror's proof spent this; rlimit_used is the step back's.
    std::uint64_t transposed_rlimit_used = 0;
};

// The candidate `lhs => rhs` of an equation (one output each).
candidate to_candidate(const spec::equation& eq);

class verifier {  // one per thread: a z3::context is not thread-safe
public:
    // rlimit > 0: each query is also bounded by Z3's deterministic resource
    // count, so the set of proven rules does not depend on machine load;
    // timeout_ms then only backstops a query that runs away. Each query then
    // also runs in a fresh Z3 context (unless reuse_solver): a context shared
    // with earlier queries (which differ with the thread a candidate lands
    // on) changes term ids and hence the search, and with it the resources a
    // proof needs.
    // shape_facts: also assert what the shape rules say about `dim` of each
    // operator's output (concat adds extents along its axis, element-wise
    // operators keep them, ...), which lemmas over constants need (the
    // redundancy check and rule generation use it).
    verifier(std::span<const spec::axiom> axioms, unsigned timeout_ms, unsigned rlimit = 0, bool shape_facts = false);
    ~verifier();
    verifier(verifier&&) noexcept;
    verifier& operator=(verifier&&) noexcept;

    // Parameter variables of the candidate range over the generation domains
    // of the slots they occupy (as the axioms' do); tensor variables and
    // parameters of domain-less and any_value slots are arbitrary.
    verify_result prove(const candidate& c);
    // An equation under its side conditions (used by the redundancy check).
    verify_result prove(const spec::axiom& a);

    std::size_t axiom_count() const;
    // Caps quantifier instantiations per query (0: none): deterministic like
    // the rlimit, and what bounds queries whose E-matching explodes.
    void limit_instances(unsigned n);
    // Model-based quantifier instantiation (Z3's default: on). Off, a query
    // Z3 cannot refute by E-matching ends as soon as E-matching saturates.
    void use_mbqi(bool on);
    // One solver for all queries, the axioms asserted once and each query in
    // its own push/pop scope. Z3 preprocesses the axioms once instead of per
    // query (under an rlimit about 42k of its resources and 8 ms, the whole
    // cost of most proofs). Sound either way, but a verdict near the rlimit
    // may then depend on the queries the solver answered before: the same
    // sequence of queries gives the same verdicts.
    void reuse_solver(bool on);

    // A candidate over 2-D matrices (matmul, smul, ewadd, ewmul, relu,
    // transpose, concat, imatmul) that Z3 does not prove is tried once more
    // through its transposed mirror (every matrix transposed, so matmul's
    // operands swap): when Z3 proves the mirror, and then the candidate
    // assuming the mirror's instance at the transposed variables, it is
    // proven. Each query within the same limits; on by default.
    void try_transposed(bool on);

private:
    struct impl;
    impl& fresh();
    verify_result prove_direct(const candidate& c, const candidate* known);
    bool transposed_ = true;
    std::unique_ptr<impl> p_;
};

const char* to_string(verdict v);

}  // namespace tsopt::gen
