#pragma once
// The hash of the operator declarations and axioms: the version of the
// operator set a rule was proven against. tsopt-gen writes it into every
// listing and header it emits ("# spec-hash:", generated_spec_hash); a
// loader compares it with this binary's (rules/load.hpp), so rules proven
// against another operator set are refused.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tsopt/core/hash.hpp"
#include "tsopt/spec/axioms.hpp"
#include "tsopt/spec/registry.hpp"

namespace tsopt::spec {

namespace hash_detail {
// tsopt's FNV-1a (core/hash.hpp) with the framing of pattern values.
struct spec_hasher : hashing::fnv1a {
    void ref(const spec::value_ref& r) { number(r.index); number(r.output); number(r.is_var); }
    void node(const spec::pattern_node& n) {
        number(static_cast<int>(n.op));
        number(n.num_inputs);
        for (auto& r : n.inputs) ref(r);
        for (auto& p : n.params) { number(static_cast<int>(p.k)); number(p.dim); ref(p.of); number(p.value); }
    }
};

// The hash of the declarations and axioms, from FNV state `start`.
inline std::uint64_t spec_digest(std::uint64_t start, bool with_extensions = true) {
    spec_hasher f;
    f.value = start;
    // An engine's registered operators and axioms follow the built-in ones,
    // so the built-in set alone hashes as it always did.
    const std::vector<const spec::op_decl*> ops =
        with_extensions ? spec::all_operators() : std::vector<const spec::op_decl*>(spec::operators.begin(), spec::operators.end());
    for (const spec::op_decl* d : ops) {
        f.number(static_cast<int>(d->kind));
        f.text(d->name);
        f.text(d->math);
        f.number(d->min_inputs); f.number(d->max_inputs); f.number(d->num_outputs);
        f.number(d->num_params);
        for (int i = 0; i < d->num_params; ++i) {
            const auto& p = d->params[static_cast<std::size_t>(i)];
            f.text(p.name);
            f.number(p.fallback);
            f.number(static_cast<std::int64_t>(p.domain.size()));
            for (auto v : p.domain) f.number(v);
            f.number(p.any_value);
            f.number(static_cast<std::int64_t>(p.probe.size()));
            for (auto v : p.probe) f.number(v);
        }
        f.number(static_cast<int>(d->cls)); f.number(d->multilinear); f.number(d->commutative); f.number(d->generated);
    }
    std::vector<spec::axiom> axioms(spec::all_axioms.begin(), spec::all_axioms.end());
    if (with_extensions) axioms.insert(axioms.end(), spec::extension_axioms().begin(), spec::extension_axioms().end());
    for (const spec::axiom& a : axioms) {
        f.text(a.name);
        for (const spec::expr* e : {&a.eq.lhs, &a.eq.rhs}) {
            f.number(e->size);
            for (int i = 0; i < e->size; ++i) f.node(e->nodes[static_cast<std::size_t>(i)]);
            f.ref(e->root);
        }
        f.number(a.num_where);
        for (int i = 0; i < a.num_where; ++i) {
            const auto& c = a.where[static_cast<std::size_t>(i)];
            f.number(static_cast<int>(c.r));
            for (auto* t : {&c.a, &c.b}) { f.number(static_cast<int>(t->k)); f.number(t->dim); f.ref(t->of); f.number(t->value); }
        }
    }
    return f.value;
}

}  // namespace hash_detail

inline std::string spec_hash() { return hashing::hex(hash_detail::spec_digest(hashing::fnv_offset_basis)); }
// The built-in operators and axioms alone: what the shipped rules were proven
// against, still valid in a program that registered operators of its own.
inline std::string builtin_spec_hash() { return hashing::hex(hash_detail::spec_digest(hashing::fnv_offset_basis, false)); }

// The same operator set's hash as tsopt-gen wrote it before the library had
// one hash (core/hash.hpp): its FNV started from 1469598103934665603, a
// mistyped offset basis. rules/load.hpp still accepts listings that carry it
// for this very operator set; nothing writes it any more.
inline std::string spec_hash_before_one_hash() { return hashing::hex(hash_detail::spec_digest(1469598103934665603ull)); }

}  // namespace tsopt::spec
