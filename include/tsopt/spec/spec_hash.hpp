#pragma once
// The hash of the operator declarations and axioms: the version of the
// operator set a rule was proven against. tsopt-gen writes it into every
// listing and header it emits ("# spec-hash:", generated_spec_hash); a
// loader compares it with this binary's (rules/load.hpp), so rules proven
// against another operator set are refused.
#include <cstdint>
#include <string>
#include <string_view>

#include "tsopt/core/hash.hpp"
#include "tsopt/spec/axioms.hpp"
#include "tsopt/spec/registry.hpp"

namespace tsopt::spec {

namespace hash_detail {
// tsopt's FNV-1a (core/hash.hpp) with the framing of spec values.
struct spec_hasher : hashing::fnv1a {
    using fnv1a::fnv1a;
    void str(std::string_view s) { text(s); }
    void num(std::int64_t v) { number(v); }
    void ref(const spec::value_ref& r) { num(r.index); num(r.output); num(r.is_var); }
    void node(const spec::pattern_node& n) {
        num(static_cast<int>(n.op));
        num(n.num_inputs);
        for (auto& r : n.inputs) ref(r);
        for (auto& p : n.params) { num(static_cast<int>(p.k)); num(p.dim); ref(p.of); num(p.value); }
    }
};

// The hash of the declarations and axioms, from FNV state `start`.
inline std::uint64_t spec_digest(std::uint64_t start) {
    spec_hasher f;
    f.value = start;
    for (const spec::op_decl* d : spec::operators) {
        f.num(static_cast<int>(d->kind));
        f.str(d->name);
        f.str(d->math);
        f.num(d->min_inputs); f.num(d->max_inputs); f.num(d->num_outputs);
        f.num(d->num_params);
        for (int i = 0; i < d->num_params; ++i) {
            const auto& p = d->params[static_cast<std::size_t>(i)];
            f.str(p.name);
            f.num(p.fallback);
            f.num(static_cast<std::int64_t>(p.domain.size()));
            for (auto v : p.domain) f.num(v);
            f.num(p.any_value);
            f.num(static_cast<std::int64_t>(p.probe.size()));
            for (auto v : p.probe) f.num(v);
        }
        f.num(static_cast<int>(d->cls)); f.num(d->multilinear); f.num(d->generated);
    }
    for (const spec::axiom& a : spec::all_axioms) {
        f.str(a.name);
        for (const spec::expr* e : {&a.eq.lhs, &a.eq.rhs}) {
            f.num(e->size);
            for (int i = 0; i < e->size; ++i) f.node(e->nodes[static_cast<std::size_t>(i)]);
            f.ref(e->root);
        }
        f.num(a.num_where);
        for (int i = 0; i < a.num_where; ++i) {
            const auto& c = a.where[static_cast<std::size_t>(i)];
            f.num(static_cast<int>(c.r));
            for (auto* t : {&c.a, &c.b}) { f.num(static_cast<int>(t->k)); f.num(t->dim); f.ref(t->of); f.num(t->value); }
        }
    }
    return f.value;
}

}  // namespace hash_detail

inline std::string spec_hash() { return hashing::hex(hash_detail::spec_digest(hashing::fnv_offset_basis)); }

// The same operator set's hash as tsopt-gen wrote it before the library had
// one hash (core/hash.hpp): its FNV started from 1469598103934665603, a
// mistyped offset basis. rules/load.hpp still accepts listings that carry it
// for this very operator set; nothing writes it any more.
inline std::string spec_hash_before_one_hash() { return hashing::hex(hash_detail::spec_digest(1469598103934665603ull)); }

}  // namespace tsopt::spec
