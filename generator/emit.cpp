// Emission: rule names, the text listing and the constexpr C++ header.
#include <algorithm>
#include <sstream>

#include "gen.hpp"
#include "tsopt/spec/axioms.hpp"

namespace tsopt::gen {

namespace {
struct fnv {
    std::uint64_t h = 1469598103934665603ull;
    void bytes(const void* p, std::size_t n) {
        auto* c = static_cast<const unsigned char*>(p);
        for (std::size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 1099511628211ull;
    }
    void str(std::string_view s) { num(s.size()); bytes(s.data(), s.size()); }
    void num(std::int64_t v) { bytes(&v, sizeof v); }
    void ref(const spec::value_ref& r) { num(r.index); num(r.output); num(r.is_var); }
    void node(const spec::pattern_node& n) {
        num(static_cast<int>(n.op));
        num(n.num_inputs);
        for (auto& r : n.inputs) ref(r);
        for (auto& p : n.params) { num(static_cast<int>(p.k)); num(p.dim); ref(p.of); num(p.value); }
    }
};
std::string hex(std::uint64_t v, int digits = 16) {
    static const char* d = "0123456789abcdef";
    std::string s(static_cast<std::size_t>(digits), '0');
    for (int i = digits - 1; i >= 0; --i, v >>= 4) s[static_cast<std::size_t>(i)] = d[v & 15];
    return s;
}
}  // namespace

std::string spec_hash() {
    fnv f;
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
    return hex(f.h);
}

namespace {
// "conv2d-conv2d-to-concat-conv2d-split-1a2b3c": the operators of each side
// and a hash of the canonical text (stable across runs and orderings).
std::string rule_name(const io::listed_rule& r, std::string_view reverse_text) {
    auto ops = [](const std::vector<spec::pattern_node>& ns) {
        std::string s;
        for (auto& n : ns) s += (s.empty() ? "" : "-") + std::string(spec::name(n.op));
        return s.empty() ? std::string("input") : s;
    };
    fnv f;
    f.str(r.text);
    f.str(reverse_text);
    return ops(r.src) + "-to-" + ops(r.dst) + "-" + hex(f.h, 10);
}
io::listed_rule canonical(rule_patterns p) {
    // Outputs in the order of their printed source expressions.
    std::vector<std::size_t> ord(p.src_out.size());
    for (std::size_t i = 0; i < ord.size(); ++i) ord[i] = i;
    auto key = [&](std::size_t i) { return io::format_rule_text(p.src, std::span(&p.src_out[i], 1), p.dst, std::span(&p.dst_out[i], 1)); };
    std::sort(ord.begin(), ord.end(), [&](auto x, auto y) { return key(x) < key(y); });
    auto so = p.src_out, dout = p.dst_out;
    for (std::size_t i = 0; i < ord.size(); ++i) { p.src_out[i] = so[ord[i]]; p.dst_out[i] = dout[ord[i]]; }
    auto text = io::format_rule_text(p.src, p.src_out, p.dst, p.dst_out);
    auto r = io::parse_rule_line("r: " + text, "<generated rule>");
    // Parsing renumbers variables by first appearance; a second round makes
    // the printed names follow that order too.
    return io::parse_rule_line("r: " + r.text, "<generated rule>");
}
}  // namespace

std::vector<emitted_rule> name_rules(const rule_patterns& forward, const rule_patterns& backward, bool forward_ok,
                                     bool backward_ok, const std::string& provenance, bool proven) {
    std::vector<emitted_rule> out;
    if (!forward_ok && !backward_ok) return out;
    auto f = canonical(forward_ok ? forward : backward);
    bool two_way = forward_ok && backward_ok && !backward.src.empty();
    io::listed_rule b;
    if (two_way) {
        b = canonical(backward);
        // Which direction is the "-rev" one follows from the two canonical
        // texts alone (the larger source first, then the smaller text), not
        // from how the candidate pair happened to be oriented: two pairs
        // stating one rule (e.g. over other inputs, one derived and one
        // proven) give it one name, whatever options are on.
        bool swap = b.src.size() > f.src.size() || (b.src.size() == f.src.size() && b.text < f.text);
        if (swap) std::swap(f, b);
    }
    // The name hashes both directions: one source can have several targets.
    std::string base = rule_name(f, two_way ? b.text : "");
    f.name = base;
    out.push_back({f, provenance, proven});
    if (two_way) {
        b.name = base + "-rev";
        out.push_back({b, provenance, proven});
    }
    return out;
}

std::string render_listing(std::span<const emitted_rule> rules, const std::string& hash, const std::string& summary) {
    std::ostringstream s;
    s << "# tsopt rule listing v1 -- generated by tsopt-gen, do not edit (docs/rules-format.md)\n"
      << "# spec-hash: " << hash << "\n";
    std::istringstream sum(summary);
    for (std::string line; std::getline(sum, line);) s << "# " << line << "\n";
    // Each rule preceded by its provenance (a comment: loaders skip it).
    for (auto& r : rules) s << "# " << r.provenance << "\n" << io::format_rule_line(r.r) << "\n";
    return s.str();
}

std::string render_unproven_listing(std::span<const std::string> lines, const std::string& hash, const std::string& summary) {
    std::ostringstream s;
    s << "# tsopt candidate listing -- NOT PROVEN, for inspection only, never applied (docs/generator.md)\n"
      << "# Every candidate is commented out: a rule listing loader reads no rule from this file.\n"
      << "# spec-hash: " << hash << "\n";
    std::istringstream sum(summary);
    for (std::string line; std::getline(sum, line);) s << "# " << line << "\n";
    for (auto& l : lines) s << "# NOT PROVEN " << l << "\n";
    return s.str();
}

namespace {
void ref_init(std::ostream& s, const spec::value_ref& r) { s << "{" << r.index << "," << int(r.output) << "," << (r.is_var ? "true" : "false") << "}"; }
void node_init(std::ostream& s, const spec::pattern_node& n) {
    s << "{K::" << spec::name(n.op) << "," << int(n.num_inputs) << ",{{";
    for (int i = 0; i < n.num_inputs; ++i) {
        if (i) s << ",";
        ref_init(s, n.inputs[static_cast<std::size_t>(i)]);
    }
    s << "}},{{";
    int last = -1;
    for (int i = 0; i < spec::max_params; ++i)
        if (n.params[static_cast<std::size_t>(i)].k != spec::param_term::kind::unused) last = i;
    static const char* kinds[] = {"kU", "kC", "kV", "kD"};
    for (int i = 0; i <= last; ++i) {
        const auto& p = n.params[static_cast<std::size_t>(i)];
        if (i) s << ",";
        s << "{" << kinds[static_cast<int>(p.k)];
        if (p.k == spec::param_term::kind::dim_of) { s << "," << int(p.dim) << ","; ref_init(s, p.of); s << "}"; }
        else if (p.k != spec::param_term::kind::unused) s << ",0,{}," << p.value << "}";
        else s << "}";
    }
    s << "}}}";
}
}  // namespace

std::string render_header(std::span<const emitted_rule> rules, const std::string& hash, const std::string& summary,
                          std::uint64_t unproven, bool verified) {
    for (auto& r : rules)
        if (!r.proven || r.provenance.find("NOT PROVEN") != std::string::npos ||
            (r.provenance.find("proven by Z3") == std::string::npos && r.provenance.find("derived") == std::string::npos))
            throw error("generator: refusing to emit the unproven rule " + r.r.name + " into the header");
    std::ostringstream s;
    s << "// DO NOT EDIT: generated by tsopt-gen (generator/, docs/generator.md).\n"
         "// Regenerated by the build when the operator spec or the axioms change;\n"
         "// the committed snapshot lets engines use tsopt without Z3.\n";
    std::istringstream sum(summary);
    for (std::string line; std::getline(sum, line);) s << "//   " << line << "\n";
    s << "#pragma once\n#include <array>\n#include <cstddef>\n#include <span>\n#include <string_view>\n\n#include \"tsopt/rewrite/rule.hpp\"\n\n"
         "namespace tsopt::rules {\n\n"
         "// Hash of the operator declarations and axioms the rules were proven against.\n"
         "inline constexpr std::string_view generated_spec_hash = \""
      << hash << "\";\n"
         "// Every rule in this header was proven by Z3, or derived by rewriting from rules\n"
         "// proven by Z3 (its provenance says which); tsopt-gen never emits others here.\n"
         "// generated_verified: verification ran (false: built with --no-verify, no rules).\n"
         "inline constexpr bool generated_verified = "
      << (verified ? "true" : "false") << ";\n"
         "inline constexpr std::size_t generated_rule_count = " << rules.size() << ";\n"
         "// Candidates that were not proven (unproven, timed out or not verified): left out.\n"
         "inline constexpr std::size_t generated_unproven_candidates = " << unproven << ";\n\n"
         "namespace generated_detail {\nusing K = spec::op_kind;\n"
         "// param_term kinds: unused, constant, variable, dim_of\n"
         "inline constexpr auto kU = spec::param_term::kind::unused, kC = spec::param_term::kind::constant,\n"
         "                      kV = spec::param_term::kind::variable, kD = spec::param_term::kind::dim_of;\n";
    // Flat arrays: every rule's nodes and outputs.
    std::vector<std::size_t> src_off, dst_off, sout_off, dout_off;
    s << "inline constexpr spec::pattern_node nodes[] = {\n";
    std::size_t n = 0;
    for (auto& r : rules) {
        src_off.push_back(n);
        for (auto& x : r.r.src) { node_init(s, x); s << ",\n"; ++n; }
        dst_off.push_back(n);
        for (auto& x : r.r.dst) { node_init(s, x); s << ",\n"; ++n; }
    }
    if (n == 0) s << "{},\n";
    s << "};\ninline constexpr spec::value_ref outs[] = {\n";
    std::size_t m = 0;
    for (auto& r : rules) {
        sout_off.push_back(m);
        for (auto& x : r.r.src_out) { ref_init(s, x); s << ","; ++m; }
        dout_off.push_back(m);
        for (auto& x : r.r.dst_out) { ref_init(s, x); s << ","; ++m; }
        s << "\n";
    }
    if (m == 0) s << "{},\n";
    s << "};\n";
    std::vector<std::string> provs;
    for (auto& r : rules)
        if (std::find(provs.begin(), provs.end(), r.provenance) == provs.end()) provs.push_back(r.provenance);
    for (std::size_t i = 0; i < provs.size(); ++i) s << "inline constexpr std::string_view prov" << i << " = \"" << provs[i] << "\";\n";
    s << "}  // namespace generated_detail\n\n";
    s << "inline constexpr std::array<rewrite::rule, " << rules.size() << "> generated_rules{{\n";
    for (std::size_t i = 0; i < rules.size(); ++i) {
        const auto& r = rules[i].r;
        auto pi = std::find(provs.begin(), provs.end(), rules[i].provenance) - provs.begin();
        s << "    // " << r.text << "\n";
        s << "    {\"" << r.name << "\", \"" << r.text << "\", generated_detail::prov" << pi << ", "
          << "{generated_detail::nodes + " << src_off[i] << ", " << r.src.size() << "}, ";
        if (r.dst.empty()) s << "{}, ";
        else s << "{generated_detail::nodes + " << dst_off[i] << ", " << r.dst.size() << "}, ";
        s << "{generated_detail::outs + " << sout_off[i] << ", " << r.src_out.size() << "}, "
          << "{generated_detail::outs + " << dout_off[i] << ", " << r.dst_out.size() << "}, " << r.num_tensor_vars << ", "
          << r.num_param_vars << "},\n";
    }
    s << "}};\n\n// Every generated rule, each proven (by Z3 or by rewriting with Z3-proven rules);\n"
         "// the optimizer's registration entry point.\n"
         "inline std::span<const rewrite::rule> generated() { return generated_rules; }\n\n"
         "}  // namespace tsopt::rules\n";
    return s.str();
}

}  // namespace tsopt::gen
