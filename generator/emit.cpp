// Emission: rule names, the text listing and the constexpr C++ header.
#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include "gen.hpp"
#include "tsopt/spec/axioms.hpp"
#include "tsopt/spec/spec_hash.hpp"

namespace tsopt::gen {

std::string spec_hash() { return spec::spec_hash(); }

bool source_connected(const io::listed_rule& r) {
    // Union-find over source nodes and tensor variables (variables after the nodes).
    const std::size_t n = r.src.size();
    std::vector<std::size_t> parent(n + static_cast<std::size_t>(r.num_tensor_vars));
    for (std::size_t i = 0; i < parent.size(); ++i) parent[i] = i;
    auto find = [&](std::size_t x) {
        while (parent[x] != x) x = parent[x] = parent[parent[x]];
        return x;
    };
    auto join = [&](std::size_t a, std::size_t b) { parent[find(a)] = find(b); };
    for (std::size_t i = 0; i < n; ++i)
        for (int k = 0; k < r.src[i].num_inputs; ++k) {
            const auto& in = r.src[i].inputs[static_cast<std::size_t>(k)];
            join(i, in.is_var ? n + static_cast<std::size_t>(in.index) : static_cast<std::size_t>(in.index));
        }
    for (std::size_t i = 1; i < n; ++i)
        if (find(i) != find(0)) return false;
    return true;
}

namespace {
// One side of a rule with each node written out as the expression computing
// it (a DAG as a tree: patterns have at most a few nodes), operand texts of a
// commutative node sorted; variables keep their numbers, as both sides share
// them. `node[i]`: node i's text; `outputs`: the side's outputs.
struct side_texts {
    std::vector<std::string> node;
    std::string outputs;
};
// `rename`, when given, renumbers variable i as rename[i].
side_texts expression_texts(const io::listed_rule& r, const std::vector<spec::pattern_node>& nodes,
                            const std::vector<spec::value_ref>& outs, std::span<const int> rename = {}) {
    side_texts s;
    auto& memo = s.node;
    memo.resize(nodes.size());
    std::function<const std::string&(std::size_t)> node_text;
    auto value_text = [&](const spec::value_ref& v) -> std::string {
        if (v.is_var)
            return "?" + std::to_string(static_cast<std::size_t>(v.index) < rename.size()
                                            ? rename[static_cast<std::size_t>(v.index)]
                                            : v.index);
        return node_text(static_cast<std::size_t>(v.index)) + "#" + std::to_string(v.output);
    };
    node_text = [&](std::size_t i) -> const std::string& {
        if (i >= nodes.size()) throw error("generator: rule " + r.name + " refers to node " + std::to_string(i));
        if (memo[i].empty()) {
            const spec::pattern_node& p = nodes[i];
            const spec::op_decl& d = spec::decl(p.op);
            std::string t = std::string(d.name) + "{";
            for (int k = 0; k < d.num_params; ++k) {
                const auto& term = p.params[static_cast<std::size_t>(k)];
                using K = spec::param_term::kind;
                switch (term.k) {
                    case K::unused: t += "_"; break;
                    case K::constant: t += std::to_string(term.value); break;
                    case K::variable: t += "$" + std::to_string(term.value); break;
                    case K::dim_of: t += "dim(" + value_text(term.of) + "," + std::to_string(term.dim) + ")"; break;
                }
                t += ",";
            }
            t += "}(";
            std::vector<std::string> args;
            for (int k = 0; k < p.num_inputs; ++k) args.push_back(value_text(p.inputs[static_cast<std::size_t>(k)]));
            if (d.commutative) std::sort(args.begin(), args.end());
            for (const auto& a : args) t += a + ";";
            memo[i] = t + ")";
        }
        return memo[i];
    };
    for (std::size_t i = 0; i < nodes.size(); ++i) node_text(i);
    for (const auto& o : outs) s.outputs += value_text(o) + " | ";
    return s;
}

// Whether the pattern below `P[p]` and the target below `T[n]` can bind the
// same graph: same operators, no two constant parameters that differ, and
// the same below, a tensor variable on either side standing for anything
// (variables bound twice are not required to agree: an over-estimate).
bool unifies(const std::vector<spec::pattern_node>& P, std::size_t p, const std::vector<spec::pattern_node>& T, std::size_t n) {
    const spec::pattern_node &a = P.at(p), &b = T.at(n);
    if (a.op != b.op || a.num_inputs != b.num_inputs) return false;
    for (std::size_t k = 0; k < a.params.size(); ++k)
        if (a.params[k].k == spec::param_term::kind::constant && b.params[k].k == spec::param_term::kind::constant &&
            a.params[k].value != b.params[k].value)
            return false;
    auto operand = [&](int ka, int kb) {
        const spec::value_ref &x = a.inputs[static_cast<std::size_t>(ka)], &y = b.inputs[static_cast<std::size_t>(kb)];
        if (x.is_var || y.is_var) return true;
        return x.output == y.output && unifies(P, static_cast<std::size_t>(x.index), T, static_cast<std::size_t>(y.index));
    };
    bool in_order = true;
    for (int k = 0; k < a.num_inputs && in_order; ++k) in_order = operand(k, k);
    if (in_order) return true;
    return spec::decl(a.op).commutative && a.num_inputs == 2 && operand(0, 1) && operand(1, 0);
}

// A rule's node expressions on both sides, and how many more copies of each
// the target has than the source (negative: fewer).
struct rule_expressions {
    side_texts src, dst;
    std::map<std::string, long> surplus;
};
rule_expressions expressions_of(const io::listed_rule& r) {
    rule_expressions e{expression_texts(r, r.src, r.src_out), expression_texts(r, r.dst, r.dst_out), {}};
    for (const auto& t : e.dst.node) ++e.surplus[t];
    for (const auto& t : e.src.node) --e.surplus[t];
    return e;
}

bool only_adds(const rule_expressions& e) {
    return e.dst.node.size() > e.src.node.size() &&
           std::all_of(e.surplus.begin(), e.surplus.end(), [](const auto& t) { return t.second >= 0; });
}

// The target's nodes that are not source nodes (every copy of an expression
// the target has more of than the source).
std::vector<std::size_t> added_nodes(const rule_expressions& e) {
    std::vector<std::size_t> added;
    for (std::size_t i = 0; i < e.dst.node.size(); ++i)
        if (e.surplus.at(e.dst.node[i]) > 0) added.push_back(i);
    return added;
}

// may_enable with r's added nodes already found.
bool may_enable_over(std::span<const std::size_t> added, const io::listed_rule& r, const io::listed_rule& other) {
    for (std::size_t n : added)
        for (std::size_t p = 0; p < other.src.size(); ++p)
            if (unifies(other.src, p, r.dst, n)) return true;
    return false;
}
}  // namespace

commutative_key commutative_form(const io::listed_rule& r) {
    commutative_key k{expression_texts(r, r.src, r.src_out).outputs, expression_texts(r, r.dst, r.dst_out).outputs};
    // Variables are numbered by where they first appear in the printed
    // source, and a commutative operator prints its operands in whatever
    // order the rule was found in, so one rule may come numbered two ways:
    // `(ewadd (relu ?x) ?y)` and `(ewadd ?x (relu ?y))` are one source. A
    // renaming of the variables also leaves what a rule matches and builds
    // unchanged (x <-> y in x + y: the matcher binds every match both ways
    // round, so `x + y => f(x, y)` builds what `x + y => f(y, x)` does). So
    // the key is the least (source, target) over every renaming, up to five
    // variables (120 renamings). Only commutative operators make the
    // numbering ambiguous, so rules whose source has none keep their own.
    const auto vars = static_cast<std::size_t>(r.num_tensor_vars);
    const bool commutative_source = std::any_of(r.src.begin(), r.src.end(), [](const spec::pattern_node& p) {
        return spec::decl(p.op).commutative;
    });
    if (!commutative_source || vars < 2 || vars > 5) return k;
    std::vector<int> rename(vars);
    for (std::size_t i = 0; i < vars; ++i) rename[i] = static_cast<int>(i);
    while (std::next_permutation(rename.begin(), rename.end())) {
        std::string src = expression_texts(r, r.src, r.src_out, rename).outputs;
        if (src > k.src) continue;
        std::string dst = expression_texts(r, r.dst, r.dst_out, rename).outputs;
        if (src < k.src || dst < k.dst) k = {std::move(src), std::move(dst)};
    }
    return k;
}

bool only_adds_operators(const io::listed_rule& r) { return only_adds(expressions_of(r)); }

bool may_enable(const io::listed_rule& r, const io::listed_rule& other) {
    return may_enable_over(added_nodes(expressions_of(r)), r, other);
}

std::vector<bool> cost_raising_dead_ends(std::span<const io::listed_rule* const> rules) {
    const std::size_t n = rules.size();
    std::map<commutative_key, std::vector<std::size_t>> by_key;
    for (std::size_t i = 0; i < n; ++i) by_key[commutative_form(*rules[i])].push_back(i);
    std::vector<bool> adds(n), dead(n, false);
    std::vector<std::vector<std::size_t>> enables(n);  // what rule i may enable, but itself and its reverse
    for (std::size_t i = 0; i < n; ++i) {
        const io::listed_rule& r = *rules[i];
        const rule_expressions e = expressions_of(r);
        if (!(adds[i] = only_adds(e))) continue;
        const std::vector<std::size_t> added = added_nodes(e);
        std::set<std::size_t> own{i};
        try {
            // Undoing the step (anywhere the reverse matches over what it
            // added) leads back to a graph the step started from.
            auto back = canonical_rule(io::format_rule_text(r.dst, r.dst_out, r.src, r.src_out));
            if (auto it = by_key.find(commutative_form(back)); it != by_key.end()) own.insert(it->second.begin(), it->second.end());
        } catch (const error&) {
            // The reverse binds a variable only the target reads: none.
        }
        for (std::size_t j = 0; j < n; ++j)
            if (!own.count(j) && may_enable_over(added, r, *rules[j])) enables[i].push_back(j);
    }
    // Rules that enable only such rules are such rules too (a fixpoint: a
    // chain of them never lowers a cost and ends where nothing else applies).
    for (bool changed = true; changed;) {
        changed = false;
        for (std::size_t i = 0; i < n; ++i)
            if (adds[i] && !dead[i] && std::all_of(enables[i].begin(), enables[i].end(), [&](std::size_t j) { return dead[j]; }))
                dead[i] = changed = true;
    }
    return dead;
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
    hashing::fnv1a f;
    f.text(r.text).text(reverse_text);
    return ops(r.src) + "-to-" + ops(r.dst) + "-" + hashing::hex(f.value, 10);
}
io::listed_rule canonical(rule_patterns p) {
    // Outputs in the order of their printed source expressions.
    std::vector<std::size_t> ord(p.src_out.size());
    for (std::size_t i = 0; i < ord.size(); ++i) ord[i] = i;
    auto key = [&](std::size_t i) { return io::format_rule_text(p.src, std::span(&p.src_out[i], 1), p.dst, std::span(&p.dst_out[i], 1)); };
    std::sort(ord.begin(), ord.end(), [&](auto x, auto y) { return key(x) < key(y); });
    auto so = p.src_out, dout = p.dst_out;
    for (std::size_t i = 0; i < ord.size(); ++i) { p.src_out[i] = so[ord[i]]; p.dst_out[i] = dout[ord[i]]; }
    return canonical_rule(io::format_rule_text(p.src, p.src_out, p.dst, p.dst_out));
}
}  // namespace

io::listed_rule canonical_rule(const std::string& text) {
    auto r = io::parse_rule_line("r: " + text, "<generated rule>");
    // Parsing renumbers variables by first appearance; a second round makes
    // the printed names follow that order too.
    return io::parse_rule_line("r: " + r.text, "<generated rule>");
}

std::optional<io::listed_rule> changed_outputs_only(const io::listed_rule& r) {
    if (r.src_out.size() < 2) return std::nullopt;
    rule_patterns rest{r.src, r.dst, {}, {}};
    for (std::size_t k = 0; k < r.src_out.size(); ++k) {
        if (expression_texts(r, r.src, {r.src_out[k]}).outputs == expression_texts(r, r.dst, {r.dst_out[k]}).outputs) continue;
        rest.src_out.push_back(r.src_out[k]);
        rest.dst_out.push_back(r.dst_out[k]);
    }
    if (rest.src_out.empty() || rest.src_out.size() == r.src_out.size()) return std::nullopt;
    try {
        return canonical(std::move(rest));
    } catch (const error&) {
        return std::nullopt;  // the outputs left need a variable only a dropped one binds
    }
}

std::string rule_pair_name(const io::listed_rule& r, const io::listed_rule* reverse) {
    if (!reverse) return rule_name(r, "");
    // Which direction is the "-rev" one follows from the two canonical
    // texts alone (the larger source first, then the smaller text), not
    // from how the candidate pair happened to be oriented: two pairs
    // stating one rule (e.g. over other inputs, one derived and one
    // proven) give it one name, whatever options are on.
    bool r_first = !(reverse->src.size() > r.src.size() || (reverse->src.size() == r.src.size() && reverse->text < r.text));
    return r_first ? rule_name(r, reverse->text) : rule_name(*reverse, r.text) + "-rev";
}

std::vector<emitted_rule> name_rules(const rule_patterns& forward, const rule_patterns& backward, bool forward_ok,
                                     bool backward_ok, const std::string& provenance, bool proven) {
    std::vector<emitted_rule> out;
    if (!forward_ok && !backward_ok) return out;
    auto f = canonical(forward_ok ? forward : backward);
    bool two_way = forward_ok && backward_ok && !backward.src.empty();
    if (!two_way) {
        f.name = rule_pair_name(f, nullptr);
        out.push_back({f, provenance, proven});
        return out;
    }
    // The name hashes both directions: one source can have several targets.
    auto b = canonical(backward);
    f.name = rule_pair_name(f, &b);
    b.name = rule_pair_name(b, &f);
    if (b.name.size() < f.name.size()) std::swap(f, b);  // the "-rev" one second
    out.push_back({f, provenance, proven});
    out.push_back({b, provenance, proven});
    return out;
}

namespace {
// Text built in a stream and handed to `out` about a mebibyte at a time.
struct piecewise {
    const text_sink& out;
    std::ostringstream s;
    void flush_if_big() {
        if (s.tellp() < (std::streamoff{1} << 20)) return;
        flush();
    }
    void flush() {
        out(s.view());
        s.str(std::string());
    }
};
std::string collected(auto&& write) {
    std::string text;
    write([&](std::string_view piece) { text.append(piece); });
    return text;
}
}  // namespace

void write_listing(std::span<const emitted_rule> rules, const std::string& hash, const std::string& summary,
                   const text_sink& out) {
    piecewise p{out, {}};
    auto& s = p.s;
    s << "# tsopt rule listing v1 -- generated by tsopt-gen, do not edit (docs/rules-format.md)\n"
      << "# spec-hash: " << hash << "\n";
    std::istringstream sum(summary);
    for (std::string line; std::getline(sum, line);) s << "# " << line << "\n";
    // Each rule preceded by its provenance (a comment: loaders skip it).
    for (auto& r : rules) {
        s << "# " << r.provenance << "\n" << io::format_rule_line(r.r) << "\n";
        p.flush_if_big();
    }
    p.flush();
}

std::string render_listing(std::span<const emitted_rule> rules, const std::string& hash, const std::string& summary) {
    return collected([&](const text_sink& out) { write_listing(rules, hash, summary, out); });
}

void write_unproven_listing(std::span<const std::string> lines, const std::string& hash, const std::string& summary,
                            const text_sink& out) {
    std::ostringstream s;
    s << "# tsopt candidate listing -- NOT PROVEN, for inspection only, never applied (docs/generator.md)\n"
      << "# Every candidate is commented out: a rule listing loader reads no rule from this file.\n"
      << "# spec-hash: " << hash << "\n";
    std::istringstream sum(summary);
    for (std::string line; std::getline(sum, line);) s << "# " << line << "\n";
    out(s.str());
    for (const auto& l : lines) {
        out("# NOT PROVEN ");
        out(l);
        out("\n");
    }
}

std::string render_unproven_listing(std::span<const std::string> lines, const std::string& hash, const std::string& summary) {
    return collected([&](const text_sink& out) { write_unproven_listing(lines, hash, summary, out); });
}

namespace {
void ref_init(std::ostream& s, const spec::value_ref& r) { s << "{" << r.index << "," << int(r.output) << "," << (r.is_var ? "true" : "false") << "}"; }
void node_init(std::ostream& s, const spec::pattern_node& n) {
    // An engine's own operator by its kind number: generated() checks that
    // the program registered the same operator under it.
    if (spec::is_extension(n.op)) s << "{K(" << int(n.op) << ")," << int(n.num_inputs) << ",{{";
    else s << "{K::" << spec::name(n.op) << "," << int(n.num_inputs) << ",{{";
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
// A string_view initializer with its length spelled out: the constructor
// from a bare literal measures it with char_traits::length during constant
// evaluation, and over N=4's 9,058 rules those character loops alone pass
// GCC's -fconstexpr-ops-limit (the table failed to compile). The texts are
// written between quotes as they are, so a quote or backslash is refused.
std::string literal(std::string_view text) {
    if (text.find_first_of("\"\\\n") != std::string_view::npos)
        throw error("generator: '" + std::string(text) + "' cannot be written as a plain string literal");
    return "std::string_view{\"" + std::string(text) + "\", " + std::to_string(text.size()) + "}";
}
}  // namespace

bool valid_namespace(std::string_view ns) {
    std::size_t start = 0;
    while (true) {
        const std::size_t end = std::min(ns.find("::", start), ns.size());
        const std::string_view id = ns.substr(start, end - start);
        if (id.empty() || std::isdigit(static_cast<unsigned char>(id[0]))) return false;
        for (char ch : id)
            if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_') return false;
        if (end == ns.size()) return true;
        start = end + 2;
    }
}

std::string render_header(std::span<const emitted_rule> rules, const std::string& hash, const std::string& summary,
                          std::uint64_t unproven, bool verified, const std::string& ns) {
    return collected([&](const text_sink& out) { write_header(rules, hash, summary, unproven, verified, ns, out); });
}

void write_header(std::span<const emitted_rule> rules, const std::string& hash, const std::string& summary,
                  std::uint64_t unproven, bool verified, const std::string& ns, const text_sink& out) {
    if (!valid_namespace(ns)) throw error("generator: '" + ns + "' is not a C++ namespace name");
    for (auto& r : rules)
        if (!r.proven || !io::is_proof_record(r.provenance))
            throw error("generator: refusing to emit the unproven rule " + r.r.name + " into the header");
    piecewise p{out, {}};
    auto& s = p.s;
    s << "// DO NOT EDIT: generated by tsopt-gen (generator/, docs/generator.md).\n"
         "// Regenerated by the build when the operator spec or the axioms change;\n"
         "// the committed snapshot lets engines use tsopt without Z3.\n";
    std::istringstream sum(summary);
    for (std::string line; std::getline(sum, line);) s << "//   " << line << "\n";
    // The engine's own operators the rules name, by kind.
    std::vector<spec::op_kind> own;
    for (auto& r : rules)
        for (const auto* side : {&r.r.src, &r.r.dst})
            for (auto& x : *side)
                if (spec::is_extension(x.op) && std::find(own.begin(), own.end(), x.op) == own.end()) own.push_back(x.op);
    std::sort(own.begin(), own.end());
    s << "#pragma once\n#include <array>\n#include <cstddef>\n#include <span>\n#include <string_view>\n\n#include \"tsopt/rewrite/rule.hpp\"\n"
      << (!own.empty() ? "#include \"tsopt/spec/registry.hpp\"\n" : "") << "\n"
         "namespace " << ns << " {\n\n";
    // Outside tsopt::rules the names the tables use come in as aliases, so
    // the rest of the text is the same for every namespace.
    if (ns != "tsopt::rules") s << "namespace spec = ::tsopt::spec;\nnamespace rewrite = ::tsopt::rewrite;\n\n";
    s << "// Hash of the operator declarations and axioms the rules were proven against.\n"
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
        p.flush_if_big();
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
        p.flush_if_big();
    }
    if (m == 0) s << "{},\n";
    s << "};\n";
    // Each distinct provenance once, numbered in order of first use (at N=5,
    // ~10,000 of them over 230,000 rules: found by hash, not by a scan).
    std::vector<std::string_view> provs;
    std::unordered_map<std::string_view, std::size_t> prov_index;
    for (auto& r : rules)
        if (prov_index.try_emplace(r.provenance, provs.size()).second) provs.push_back(r.provenance);
    for (std::size_t i = 0; i < provs.size(); ++i) {
        s << "inline constexpr std::string_view prov" << i << " = " << literal(provs[i]) << ";\n";
        p.flush_if_big();
    }
    s << "}  // namespace generated_detail\n\n";
    s << "inline constexpr std::array<rewrite::rule, " << rules.size() << "> generated_rules{{\n";
    for (std::size_t i = 0; i < rules.size(); ++i) {
        const auto& r = rules[i].r;
        const auto pi = prov_index.at(rules[i].provenance);
        s << "    // " << r.text << "\n";
        s << "    {" << literal(r.name) << ", " << literal(r.text) << ", generated_detail::prov" << pi << ", "
          << "{generated_detail::nodes + " << src_off[i] << ", " << r.src.size() << "}, ";
        if (r.dst.empty()) s << "{}, ";
        else s << "{generated_detail::nodes + " << dst_off[i] << ", " << r.dst.size() << "}, ";
        s << "{generated_detail::outs + " << sout_off[i] << ", " << r.src_out.size() << "}, "
          << "{generated_detail::outs + " << dout_off[i] << ", " << r.dst_out.size() << "}, " << r.num_tensor_vars << ", "
          << r.num_param_vars << "},\n";
        p.flush_if_big();
    }
    s << "}};\n\n// Every generated rule, each proven (by Z3 or by rewriting with Z3-proven rules);\n"
         "// the optimizer's registration entry point.\n";
    if (own.empty()) {
        s << "inline std::span<const rewrite::rule> generated() { return generated_rules; }\n\n";
    } else {
        s << "// The rules name operators of the engine's own (spec::register_operator): each\n"
             "// must be registered under the kind it had when the rules were proven.\n"
             "inline std::span<const rewrite::rule> generated() {\n"
             "    static const bool registered = [] {\n";
        for (auto k : own) s << "        spec::require_operator(spec::op_kind(" << int(k) << "), " << literal(spec::name(k)) << ");\n";
        s << "        return true;\n"
             "    }();\n"
             "    (void)registered;\n"
             "    return generated_rules;\n"
             "}\n\n";
    }
    s << "}  // namespace " << ns << "\n";
    p.flush();
}

}  // namespace tsopt::gen
