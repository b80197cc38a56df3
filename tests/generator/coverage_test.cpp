// Issue #2's completeness criterion: every axiom of TASO's Table 2 (the first
// spec::taso_axiom_count entries of spec::all_axioms) whose sides fit in the
// N operators the committed snapshot was generated with is rediscovered or
// subsumed by the snapshot's rules.
//
// "Rediscovered or subsumed" is checked on concrete instances, with the
// library's own matcher and rule application: each axiom is instantiated on
// the generator's input tensors (gen::default_inputs) for every parameter
// value the enumeration would produce, and the two sides must be joinable by
// the emitted rules (lhs ->* G <-* rhs, breadth-first up to `max_depth`
// rewrites per side). One rewrite covers a rule identical to the axiom (up to
// renaming and direction) or a more general rule; several cover an axiom
// implied by composing rules. Each step is a proven rule, so joinability is a
// proof of the instance from the snapshot.
//
// Instances outside what the enumeration can produce (its typing discipline,
// square windows, constants tied to input extents, and TASO's disciplines
// when the snapshot's run used them: concat/split axes 0 and 1 only where
// parameters are representative and not lifted to variables, no operator
// reading one tensor twice) are not expected to be rediscovered and are
// skipped; axioms with no instance in scope at all are listed in
// `not_enumerable` with the reason.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

#include "gen.hpp"
#include "tsopt/rewrite/apply.hpp"
#include "tsopt/rewrite/from_axiom.hpp"
#include "tsopt/rewrite/match.hpp"
#include "tsopt/rewrite/model.hpp"
#include "tsopt/rules/generated_rules.hpp"
#include "tsopt/spec/axioms.hpp"

using namespace tsopt;
namespace sp = tsopt::spec;
using sp::op_kind;

namespace {

// Axioms that fit in N operators but have no instance the enumeration can
// produce, so no generated rule can state them. Each entry says why; an axiom
// listed here that does get instances fails the test (the list must not hide
// anything).
const std::map<std::string, std::string> not_enumerable = {
    // smul's second operand is the scalar `s`; the enumeration never
    // multiplies a scalar by a scalar (smul needs a non-scalar first operand),
    // so smul(y, w) of two scalars does not occur.
    {"smul-assoc", "smul of two scalars is not enumerated"},
    // The matcher binds a commutative operator's operands in both orders and
    // graphs hash alike under it (graph::node_hashes): x + y and y + x are
    // one graph here, nothing to rediscover (rewrite_test checks the matcher).
    {"ewadd-comm", "x + y and y + x are one graph (commutative matching)"},
    {"ewmul-comm", "x * y and y * x are one graph (commutative matching)"},
    // iewmul() is the one-element tensor of ones, which broadcasts; generated
    // rules hold under TASO's typing (no broadcasting) and the enumeration
    // gives iewmul the extents of the tensor it multiplies.
    {"ewmul-iewmul-identity", "one-element iewmul broadcasts; the enumeration builds iewmul at the operand's shape"},
    // Pools take activations; iconv is a kernel (role weight), and the
    // enumeration never pools a kernel.
    {"avgpool-iconv-cpool", "pooling over a kernel (iconv) is not enumerated"},
    // iconv's kernel size is tied to a kernel input the graph reads, and
    // enlarge's target size to another kernel input it reads: conv(x,
    // iconv(c, c, k)) and conv(x, enlarge(u)) read no such kernel, so both
    // sides fit in 2 operators but the pair needs a third (reading w) to be
    // enumerated; at N=3 they are.
    {"conv-iconv-identity", "iconv's size must come from a kernel input the graph reads (needs 3 operators)"},
    {"conv-enlarge", "enlarge's size must come from another kernel input the graph reads (needs 3 operators)"},
};

// The generator's role discipline (generator/enumerate.cpp: which operator
// may take which role of tensor), mirrored on a concrete graph. Returns the
// role of every value, or nullopt when some node is outside the discipline.
std::optional<std::map<std::pair<int, int>, gen::role>> roles_of(const graph& g,
                                                                const std::map<std::string, gen::input_decl>& in) {
    using gen::role;
    std::map<std::pair<int, int>, role> r;
    auto role_of = [&](value v) { return r.at({v.node, v.output}); };
    for (std::size_t i : g.topological_order()) {
        const node& n = g.nodes[i];
        int id = static_cast<int>(i);
        if (n.kind == node_kind::input) {
            r[{id, 0}] = in.at(n.name).r;
            continue;
        }
        if (n.kind != node_kind::op) return std::nullopt;
        auto a = [&](int j) { return role_of(n.inputs[static_cast<std::size_t>(j)]); };
        role out = n.inputs.empty() ? role::weight : a(0);
        switch (n.op) {
            case op_kind::ewadd:
            case op_kind::ewmul:
                if (a(0) != a(1) || a(0) == role::scalar) return std::nullopt;
                break;
            case op_kind::smul:
                if (a(0) == role::scalar || a(1) != role::scalar) return std::nullopt;
                break;
            case op_kind::transpose:
                if (a(0) != role::matrix) return std::nullopt;
                break;
            case op_kind::relu:
                if (a(0) != role::matrix && a(0) != role::act) return std::nullopt;
                break;
            case op_kind::matmul:
                if (a(0) != role::matrix || a(1) != role::matrix) return std::nullopt;
                break;
            case op_kind::conv2d:
                if (a(0) != role::act || a(1) != role::weight) return std::nullopt;
                out = role::act;
                break;
            case op_kind::avgpool:
            case op_kind::maxpool:
                if (a(0) != role::act) return std::nullopt;
                break;
            case op_kind::concat:
            case op_kind::split:
                if (a(0) == role::scalar || (n.inputs.size() > 1 && a(0) != a(1))) return std::nullopt;
                break;
            case op_kind::enlarge:
                // Only kernel inputs are enlarged.
                if (a(0) != role::weight || g.at(n.inputs[0]).kind != node_kind::input) return std::nullopt;
                break;
            case op_kind::cpool:
            case op_kind::iconv: out = role::weight; break;
            case op_kind::imatmul: out = role::matrix; break;
            case op_kind::iewmul: return std::nullopt;  // shape-tied only (see not_enumerable)
            default: return std::nullopt;               // not enumerated
        }
        for (int o = 0; o < n.num_outputs(); ++o) r[{id, o}] = out;
    }
    return r;
}

// Parameters the enumeration produces for a node (generator/enumerate.cpp):
// domain values with square windows (a *_w slot equals its *_h twin), and
// derived parameters tied to the extents of an input the graph reads (a graph
// whose tie names an input it does not read is not recorded).
// The enumeration disciplines of the snapshot's run (gen::options), read
// from its listing's header ("max_ops 3 (representative parameters, ...)").
struct disciplines {
    bool representative_params = false;
    bool distinct_operands = false;
};

disciplines snapshot_disciplines() {
    std::string head;
    std::ifstream f(TSOPT_SOURCE_ROOT "/include/tsopt/rules/rules.txt");
    for (std::string line; std::getline(f, line);)
        if (line.starts_with("# max_ops ")) {
            head = line;
            break;
        }
    REQUIRE_MESSAGE(!head.empty(), "the committed listing has no '# max_ops' line");
    const auto cut = head.find(" rules:");
    head = head.substr(0, cut);
    return {head.find("representative parameters") != std::string::npos, head.find("distinct operands") != std::string::npos};
}

// A parameter value the snapshot covers under --representative-params: one
// the enumeration produces (gen::representative_value), or any value of a
// slot the generalization lifts to variables (param_decl::any_value).
bool representative(const sp::param_decl& pd, std::int32_t v) {
    return pd.any_value || gen::representative_value(pd.name, v);
}

bool enumerable_params(const graph& g, const node& n, const std::map<std::string, gen::input_decl>& by_name,
                       const disciplines& disc) {
    const sp::op_decl& d = sp::decl(n.op);
    auto has_extent = [&](auto pred) {
        for (const node& in : g.nodes)
            if (in.kind == node_kind::input && pred(by_name.at(in.name))) return true;
        return false;
    };
    switch (n.op) {
        case op_kind::iconv:
            return n.params[sp::iconv_p::co] == n.params[sp::iconv_p::ci] &&
                   has_extent([&](auto& i) { return i.r == gen::role::act && i.s[1] == n.params[sp::iconv_p::ci]; }) &&
                   has_extent([&](auto& i) {
                       return i.r == gen::role::weight && i.s[2] == i.s[3] && i.s[2] % 2 == 1 && i.s[2] == n.params[sp::iconv_p::k];
                   });
        case op_kind::cpool:
            return n.params[sp::cpool_p::kh] == n.params[sp::cpool_p::kw] &&
                   has_extent([&](auto& i) { return i.r == gen::role::act && i.s[1] == n.params[sp::cpool_p::c]; });
        case op_kind::imatmul:
            return has_extent([&](auto& i) {
                return i.r == gen::role::matrix && (i.s[0] == n.params[sp::imatmul_p::n] || i.s[1] == n.params[sp::imatmul_p::n]);
            });
        case op_kind::split: return true;  // its point comes from the concat it undoes
        case op_kind::enlarge: {
            const shape& w = g.shape_of(n.inputs[0]);
            auto kh = n.params[sp::enlarge_p::kh], kw = n.params[sp::enlarge_p::kw];
            return !(kh == w[2] && kw == w[3]) &&
                   has_extent([&](auto& i) { return i.r == gen::role::weight && i.s.rank == 4 && i.s[2] == kh && i.s[3] == kw; });
        }
        default: break;
    }
    for (int i = 0; i < d.num_params; ++i) {
        const auto& pd = d.params[static_cast<std::size_t>(i)];
        std::string_view nm = pd.name;
        std::string twin;
        if (nm == "kw") twin = "kh";
        else if (nm.size() > 2 && nm.substr(nm.size() - 2) == "_w") twin = std::string(nm.substr(0, nm.size() - 2)) + "_h";
        if (!twin.empty()) {
            int t = d.param_index(twin);
            if (t >= 0 && n.params[i] != n.params[t]) return false;
            continue;
        }
        const auto& dom = pd.domain;
        if (dom.empty() ? n.params[i] != pd.fallback : std::find(dom.begin(), dom.end(), n.params[i]) == dom.end())
            return false;
        if (disc.representative_params && !representative(pd, n.params[i])) return false;
    }
    if (n.op == op_kind::concat && n.params[sp::concat_p::axis] >= g.shape_of(n.inputs[0]).rank) return false;
    return true;
}

// An axiom side built on concrete inputs; nullopt when shape inference rejects it.
std::optional<graph> build_side(const sp::expr& e, const std::vector<int>& tvar_input,
                                const std::map<int, std::int32_t>& pvals, const std::vector<gen::input_decl>& inputs) {
    graph g;
    std::map<int, value> in;
    auto input_of = [&](int var) {
        int k = tvar_input[static_cast<std::size_t>(var)];
        auto it = in.find(k);
        if (it == in.end()) it = in.emplace(k, g.input(inputs[static_cast<std::size_t>(k)].name, inputs[static_cast<std::size_t>(k)].s)).first;
        return it->second;
    };
    std::vector<std::int32_t> node_id(static_cast<std::size_t>(e.size), -1);
    auto val = [&](sp::value_ref v) -> value {
        if (v.is_var) return input_of(v.index);
        return {node_id[static_cast<std::size_t>(v.index)], v.output};
    };
    try {
        for (int i = 0; i < e.size; ++i) {
            const sp::pattern_node& pn = e.nodes[static_cast<std::size_t>(i)];
            const sp::op_decl& d = sp::decl(pn.op);
            std::vector<value> args;
            for (int j = 0; j < pn.num_inputs; ++j) args.push_back(val(pn.inputs[static_cast<std::size_t>(j)]));
            sp::op_params p{};
            for (int s = 0; s < d.num_params; ++s) {
                const sp::param_term& t = pn.params[static_cast<std::size_t>(s)];
                switch (t.k) {
                    case sp::param_term::kind::constant: p[s] = t.value; break;
                    case sp::param_term::kind::variable: p[s] = pvals.at(t.value); break;
                    case sp::param_term::kind::dim_of: {
                        const shape& sh = g.shape_of(val(t.of));
                        if (t.dim >= sh.rank) return std::nullopt;
                        p[s] = static_cast<std::int32_t>(sh[t.dim]);
                        break;
                    }
                    case sp::param_term::kind::unused: p[s] = d.params[static_cast<std::size_t>(s)].fallback; break;
                }
            }
            if (pn.op == op_kind::split) {
                // The point recorded by the concat this split undoes (TASO's split).
                const node& c = g.at(args[0]);
                if (!c.is_op(op_kind::concat) || c.params[sp::concat_p::axis] != p[sp::split_p::axis]) return std::nullopt;
                p[sp::split_p::at] = static_cast<std::int32_t>(g.shape_of(c.inputs[0])[p[sp::split_p::axis]]);
            }
            node_id[static_cast<std::size_t>(i)] = g.add(pn.op, p, args)[0].node;
        }
    } catch (const error&) {
        return std::nullopt;
    }
    g.mark_output(val(e.root));
    return g;
}

// Every graph reachable from `start` in at most `depth` rewrites, by structural hash.
std::unordered_set<std::uint64_t> reachable(const graph& start, std::span<const rewrite::rule> rules, int depth) {
    std::unordered_set<std::uint64_t> seen{start.structural_hash()};
    std::vector<graph> frontier{start};
    for (int d = 0; d < depth && !frontier.empty(); ++d) {
        std::vector<graph> next;
        for (const graph& g : frontier) {
            rewrite::graph_index ix(g);
            for (const auto& r : rules)
                for (const auto& m : rewrite::find_matches(ix, r))
                    if (auto ng = rewrite::apply(ix, r, m))
                        if (seen.insert(ng->structural_hash()).second) next.push_back(std::move(*ng));
        }
        frontier = std::move(next);
    }
    return seen;
}

int distinct_nodes(const sp::expr& e) {
    std::vector<sp::pattern_node> nodes(e.nodes.begin(), e.nodes.begin() + e.size);
    std::vector<sp::value_ref> roots{e.root};
    return static_cast<int>(rewrite::detail::dedupe(std::move(nodes), roots).size());
}

// The N the snapshot was generated with, from its provenance ("(N<=2)").
int snapshot_max_ops() {
    auto rules = rules::generated();
    REQUIRE(!rules.empty());
    std::string_view p = rules[0].provenance;
    auto at = p.find("(N<=");
    REQUIRE_MESSAGE(at != std::string_view::npos, "no N in the snapshot provenance: ", p);
    return std::stoi(std::string(p.substr(at + 4)));
}

struct instance_result {
    long in_scope = 0, joined = 0;
    std::vector<std::string> failures;
};

// Every instance of an axiom on the generator's inputs that the enumeration
// could produce, checked for joinability.
instance_result check_axiom(const sp::axiom& a, std::span<const rewrite::rule> rules, int max_depth,
                            const disciplines& disc) {
    const auto inputs = gen::default_inputs();
    std::map<std::string, gen::input_decl> by_name;
    for (const auto& i : inputs) by_name[i.name] = i;
    // Variables and the candidate values of each parameter variable.
    int ntv = 0;
    std::map<int, std::set<std::int32_t>> pdom;
    for (const sp::expr* e : {&a.eq.lhs, &a.eq.rhs}) {
        auto note = [&](sp::value_ref v) { if (v.is_var) ntv = std::max(ntv, v.index + 1); };
        note(e->root);
        for (int i = 0; i < e->size; ++i) {
            const auto& n = e->nodes[static_cast<std::size_t>(i)];
            for (int j = 0; j < n.num_inputs; ++j) note(n.inputs[static_cast<std::size_t>(j)]);
            const auto& d = sp::decl(n.op);
            for (int s = 0; s < d.num_params; ++s) {
                const auto& t = n.params[static_cast<std::size_t>(s)];
                if (t.k == sp::param_term::kind::dim_of) note(t.of);
                if (t.k != sp::param_term::kind::variable) continue;
                std::set<std::int32_t> dom(d.params[static_cast<std::size_t>(s)].domain.begin(),
                                           d.params[static_cast<std::size_t>(s)].domain.end());
                // Domain-less slots (constants' extents) range over the inputs' extents.
                if (dom.empty())
                    for (const auto& in : inputs)
                        for (int k = 0; k < in.s.rank; ++k) dom.insert(static_cast<std::int32_t>(in.s[k]));
                auto it = pdom.find(t.value);
                if (it == pdom.end()) pdom.emplace(t.value, dom);
                else {
                    std::set<std::int32_t> both;
                    std::set_intersection(it->second.begin(), it->second.end(), dom.begin(), dom.end(),
                                          std::inserter(both, both.begin()));
                    it->second = both;
                }
            }
        }
    }
    std::vector<std::pair<int, std::vector<std::int32_t>>> pvars;
    for (auto& [v, dom] : pdom) pvars.push_back({v, {dom.begin(), dom.end()}});

    instance_result res;
    std::set<std::pair<std::uint64_t, std::uint64_t>> done;
    std::vector<int> tv(static_cast<std::size_t>(ntv), 0);
    const int ni = static_cast<int>(inputs.size());
    auto next_tv = [&] {
        for (auto& t : tv) {
            if (++t < ni) return true;
            t = 0;
        }
        return false;
    };
    do {
        std::vector<std::size_t> pi(pvars.size(), 0);
        for (bool more = true; more;) {
            std::map<int, std::int32_t> pv;
            for (std::size_t k = 0; k < pvars.size(); ++k) pv[pvars[k].first] = pvars[k].second[pi[k]];
            more = false;
            for (std::size_t k = 0; k < pi.size() && !more; ++k) {
                if (++pi[k] < pvars[k].second.size()) more = true;
                else pi[k] = 0;
            }
            bool conds = true;
            for (int c = 0; c < a.num_where; ++c) {
                const auto& w = a.where[static_cast<std::size_t>(c)];
                auto ev = [&](const sp::param_term& t) { return t.k == sp::param_term::kind::variable ? pv.at(t.value) : t.value; };
                conds &= (ev(w.a) == ev(w.b)) == (w.r == sp::condition::rel::eq);
            }
            if (!conds) continue;
            auto l = build_side(a.eq.lhs, tv, pv, inputs), r = build_side(a.eq.rhs, tv, pv, inputs);
            if (!l || !r || !(l->shape_of(l->outputs[0]) == r->shape_of(r->outputs[0]))) continue;
            bool in_scope = true;
            for (const graph* g : {&*l, &*r}) {
                if (!roles_of(*g, by_name)) in_scope = false;
                for (const node& n : g->nodes) {
                    if (n.kind != node_kind::op) continue;
                    if (!enumerable_params(*g, n, by_name, disc) || !rewrite::violates_typing(*g, n, sp::taso_typing).empty())
                        in_scope = false;
                    // --distinct-operands: no operator reads one tensor twice.
                    if (disc.distinct_operands && n.inputs.size() == 2 && n.inputs[0] == n.inputs[1]) in_scope = false;
                }
            }
            if (!in_scope) continue;
            // Both sides the same graph (ewadd(x, x) for ewadd-comm): nothing to rediscover.
            if (l->structural_hash() == r->structural_hash()) continue;
            // Instances equal up to renaming of same-role inputs are one.
            if (!done.insert({l->structural_hash(), r->structural_hash()}).second) continue;
            ++res.in_scope;
            std::uint64_t goal = r->structural_hash();
            bool ok = false;
            // Deepen both sides together: a direct rule is found at depth 1.
            for (int d = 1; d <= max_depth && !ok; ++d) {
                auto from_l = reachable(*l, rules, d);
                if (from_l.count(goal)) { ok = true; break; }
                auto from_r = reachable(*r, rules, d);
                for (auto h : from_r) ok |= from_l.count(h) > 0;
            }
            if (ok) ++res.joined;
            else if (res.failures.size() < 3) {
                std::ostringstream s;
                s << "instance (";
                for (int t = 0; t < ntv; ++t) s << (t ? ", " : "") << "?" << t << "=" << inputs[static_cast<std::size_t>(tv[t])].name;
                for (auto& [v, x] : pv) s << ", p" << v << "=" << x;
                s << ")";
                res.failures.push_back(s.str());
            }
        }
    } while (next_tv());
    return res;
}

}  // namespace

TEST_CASE("every TASO Table 2 axiom that fits in N operators is rediscovered or subsumed by the snapshot") {
    const int n = snapshot_max_ops();
    const disciplines disc = snapshot_disciplines();
    MESSAGE("snapshot: N=", n, std::string(disc.representative_params ? ", representative parameters" : ""),
            std::string(disc.distinct_operands ? ", distinct operands" : ""));
    const int max_depth = 2;  // rewrites from each side
    auto rules = rules::generated();
    std::vector<std::string> missing, checked;
    std::set<std::string> seen_exceptions;
    for (std::size_t i = 0; i < sp::taso_axiom_count; ++i) {
        const sp::axiom& a = sp::all_axioms[i];
        std::string name(a.name);
        if (distinct_nodes(a.eq.lhs) > n || distinct_nodes(a.eq.rhs) > n) continue;
        auto r = check_axiom(a, rules, max_depth, disc);
        auto ex = not_enumerable.find(name);
        if (ex != not_enumerable.end()) {
            seen_exceptions.insert(name);
            CHECK_MESSAGE(r.in_scope == 0, name, " is listed as not enumerable (", ex->second, ") but has ", r.in_scope,
                          " instances the enumeration produces: remove it from the list");
            continue;
        }
        MESSAGE(name, ": ", r.joined, "/", r.in_scope, " instances joined");
        if (r.in_scope == 0) {
            missing.push_back(name + ": no instance within the enumeration (add it to not_enumerable with the reason)");
            continue;
        }
        checked.push_back(name);
        if (r.joined < r.in_scope) {
            std::string f = name + ": " + std::to_string(r.in_scope - r.joined) + " of " + std::to_string(r.in_scope) +
                            " instances not joinable, e.g.";
            for (auto& s : r.failures) f += " " + s;
            missing.push_back(f);
        }
    }
    for (auto& [name, why] : not_enumerable)
        CHECK_MESSAGE(seen_exceptions.count(name), name, " is in not_enumerable but is not a Table 2 axiom fitting in N=", n);
    std::string report;
    for (auto& m : missing) report += "\n  " + m;
    CHECK_MESSAGE(missing.empty(), "axioms neither rediscovered nor subsumed:", report);
    CHECK(checked.size() >= 10);  // the criterion is not vacuous at N=2
}

TEST_CASE("the coverage check needs the rules: without them no non-trivial instance is joined") {
    for (std::string name : {"ewadd-assoc", "matmul-assoc", "conv-cpool-avgpool"}) {
        const sp::axiom* a = sp::find_axiom(name);
        REQUIRE(a != nullptr);
        auto r = check_axiom(*a, {}, 2, {});
        CHECK_MESSAGE(r.in_scope > 0, name);
        CHECK_MESSAGE(r.joined == 0, name);
    }
}
