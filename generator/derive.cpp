// Incremental verification (TASO's approach, docs/verification.md): a
// candidate pair whose two sides are joinable with already-proven rules is
// derived from them, without a Z3 query. And the candidates Z3 cannot bound
// that are settled before it (opaque constants, below).
#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <random>
#include <ranges>
#include <unordered_map>
#include <unordered_set>

#include "gen.hpp"
#include "tsopt/core/tensor.hpp"
#include "tsopt/rewrite/apply.hpp"
#include "tsopt/rewrite/match.hpp"
#include "tsopt/spec/axioms.hpp"

namespace tsopt::gen {

graph to_graph(const mgraph& m, const options& o, bool second, std::span<const int> out_order) {
    const auto ins = second ? second_shapes(o.inputs) : o.inputs;
    graph g;
    std::vector<value> val(m.shapes.size(), value{-1, 0});
    std::vector<shape> sh;
    for (int i = 0; i < m.num_inputs; ++i) {
        sh.push_back(ins[static_cast<std::size_t>(i)].s);
        if (m.vars >> i & 1) val[static_cast<std::size_t>(i)] = g.input(ins[static_cast<std::size_t>(i)].name, ins[static_cast<std::size_t>(i)].s);
    }
    for (const auto& op : m.ops) {
        const auto& p0 = param_values(op.pidx);
        auto p = second ? params_for_shapes(op, p0, sh) : p0;
        std::vector<value> args;
        for (int i = 0; i < op.nin; ++i) args.push_back(val[op.in[static_cast<std::size_t>(i)]]);
        auto outs = g.add(op.kind, p, std::move(args));
        for (auto v : outs) {
            val[sh.size()] = v;
            sh.push_back(g.shape_of(v));
        }
    }
    auto mark = [&](int t) { g.mark_output(val[static_cast<std::size_t>(t)]); };
    if (out_order.empty())
        for (int t : m.outputs) mark(t);
    else
        for (int k : out_order) mark(m.outputs[static_cast<std::size_t>(k)]);
    return g;
}

// ---------------------------------------------------------------- rule_base
struct rule_base::stored {
    io::listed_rule r;
    rewrite::rule view;
    rewrite::match_plan plan;
    std::uint64_t ops_mask = 0;  // operator kinds the source needs
    // Domain of each parameter variable (the slots it fills, both sides):
    // the rule is proven for these values only (docs/verification.md).
    std::vector<std::vector<std::int32_t>> domains;
};

rule_base::rule_base(const options& o, int depth, std::size_t max_frontier, std::size_t effort)
    : o_(o), depth_(depth), max_frontier_(max_frontier), effort_(effort > 0 ? effort : std::numeric_limits<std::size_t>::max()) {}
rule_base::~rule_base() = default;

namespace {
std::uint64_t kind_bit(spec::op_kind k) { return std::uint64_t{1} << (static_cast<unsigned>(k) % 64); }

rule_base::anchor anchor_of(const rewrite::rule& r) {
    const spec::pattern_node& root = r.src.back();
    const auto& d = spec::decl(root.op);
    rule_base::anchor a;
    a.op = root.op;
    a.num_inputs = root.num_inputs;
    for (int k = 0; k < d.num_params; ++k) {
        const auto& t = root.params[static_cast<std::size_t>(k)];
        if (t.k != spec::param_term::kind::constant) continue;
        // split's point 0 in a pattern matches any point (rewrite/match).
        if (root.op == spec::op_kind::split && k == spec::split_p::at && t.value == 0) continue;
        a.constant_slots |= 1u << k;
        a.constants[k] = t.value;
    }
    for (int k = 0; k < root.num_inputs; ++k) {
        const auto& in = root.inputs[static_cast<std::size_t>(k)];
        a.input_kind[static_cast<std::size_t>(k)] = in.is_var ? -1 : static_cast<int>(r.src[static_cast<std::size_t>(in.index)].op);
        a.input_output[static_cast<std::size_t>(k)] = in.is_var ? 0 : in.output;
    }
    return a;
}

rule_base::anchor_shape anchor_shape_of(const rule_base::anchor& a) {
    rule_base::anchor_shape s{a.num_inputs, a.constant_slots, 0};
    for (int k = 0; k < a.num_inputs; ++k)
        if (a.input_kind[static_cast<std::size_t>(k)] >= 0) s.operator_inputs |= 1u << k;
    return s;
}

// The values an anchor of shape `s` fixes, hashed in one order for anchors
// and nodes alike: a node and an anchor that agree there have one key (a
// collision only offers rules that then match nothing).
std::uint64_t key_start(spec::op_kind op, const rule_base::anchor_shape& s) {
    std::uint64_t h = hashing::combine(static_cast<std::uint64_t>(op), static_cast<std::uint64_t>(s.num_inputs));
    h = hashing::combine(h, s.constant_slots);
    return hashing::combine(h, s.operator_inputs);
}

std::uint64_t anchor_key(const rule_base::anchor& a) {
    const auto s = anchor_shape_of(a);
    std::uint64_t h = key_start(a.op, s);
    for (int k = 0; k < spec::max_params; ++k)
        if (s.constant_slots >> k & 1) h = hashing::combine(h, static_cast<std::uint32_t>(a.constants[k]));
    for (int k = 0; k < a.num_inputs; ++k)
        if (s.operator_inputs >> k & 1)
            h = hashing::combine(h, static_cast<std::uint64_t>(a.input_kind[static_cast<std::size_t>(k)]) << 8 |
                                        static_cast<std::uint64_t>(a.input_output[static_cast<std::size_t>(k)]));
    return h;
}

// The key of graph node n under shape s; nullopt where no anchor of that
// shape can fit it (other arity, an operator slot fed by a non-operator).
std::optional<std::uint64_t> node_key(const graph& g, const node& n, const rule_base::anchor_shape& s) {
    if (n.inputs.size() != static_cast<std::size_t>(s.num_inputs)) return std::nullopt;
    std::uint64_t h = key_start(n.op, s);
    for (int k = 0; k < spec::max_params; ++k)
        if (s.constant_slots >> k & 1) h = hashing::combine(h, static_cast<std::uint32_t>(n.params[k]));
    for (int k = 0; k < s.num_inputs; ++k) {
        if (!(s.operator_inputs >> k & 1)) continue;
        const value v = n.inputs[static_cast<std::size_t>(k)];
        const node& src = g.nodes[static_cast<std::size_t>(v.node)];
        if (src.kind != node_kind::op) return std::nullopt;
        h = hashing::combine(h, static_cast<std::uint64_t>(static_cast<int>(src.op)) << 8 | static_cast<std::uint64_t>(v.output));
    }
    return h;
}
}  // namespace

void rule_base::anchors_for(const graph& g, std::uint64_t kinds_mask, std::vector<anchor_ref>& out) const {
    out.clear();
    for (const node& n : g.nodes) {
        if (n.kind != node_kind::op) continue;
        for (const auto& s : shapes_of_kind_[static_cast<std::size_t>(n.op)]) {
            auto key = node_key(g, n, s);
            if (!key) continue;
            auto it = anchors_by_key_.find(*key);
            if (it == anchors_by_key_.end()) continue;
            for (anchor_ref r : it->second)
                if ((groups_[static_cast<std::size_t>(r >> 32)].ops_mask & ~kinds_mask) == 0) out.push_back(r);
        }
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
}

void rule_base::add(const io::listed_rule& r) {
    auto s = std::make_unique<stored>();
    s->r = r;
    s->view = s->r.view("proven rule (incremental verification)");
    s->plan = rewrite::match_plan(s->view);
    for (const auto& n : s->r.src) s->ops_mask |= kind_bit(n.op);
    s->domains.resize(static_cast<std::size_t>(s->r.num_param_vars));
    std::vector<char> seen(s->domains.size(), 0);
    for (const auto* side : {&s->r.src, &s->r.dst})
        for (const auto& n : *side) {
            const auto& d = spec::decl(n.op);
            for (int i = 0; i < d.num_params; ++i) {
                if (n.op == spec::op_kind::split && i == spec::split_p::at) continue;  // not encoded (its concat's)
                const auto& t = n.params[static_cast<std::size_t>(i)];
                const auto& dom = d.params[static_cast<std::size_t>(i)].domain;
                if (t.k != spec::param_term::kind::variable || dom.empty() || d.params[static_cast<std::size_t>(i)].any_value)
                    continue;
                auto v = static_cast<std::size_t>(t.value);
                if (v >= s->domains.size()) continue;
                std::vector<std::int32_t> sd(dom.begin(), dom.end());
                std::sort(sd.begin(), sd.end());
                if (!seen[v]) { s->domains[v] = sd; seen[v] = 1; continue; }
                std::vector<std::int32_t> both;
                std::set_intersection(s->domains[v].begin(), s->domains[v].end(), sd.begin(), sd.end(), std::back_inserter(both));
                s->domains[v] = both;
            }
        }
    for (std::size_t v = 0; v < seen.size(); ++v)
        if (!seen[v]) s->domains[v] = {-1};  // marker: unconstrained
    auto [it, fresh] = group_of_mask_.try_emplace(s->ops_mask, groups_.size());
    if (fresh) groups_.push_back({s->ops_mask, {}});
    // The rule joins its group's anchor, found by the anchor's key (a group
    // holds thousands at N=5), or a new one.
    auto a = anchor_of(s->view);
    auto& in = groups_[it->second].by_anchor;
    auto& same_key = anchors_by_key_[anchor_key(a)];
    auto found = std::find_if(same_key.begin(), same_key.end(), [&](anchor_ref ref) {
        return ref >> 32 == it->second && in[ref & 0xffffffffu].a == a;
    });
    anchored* b = found != same_key.end() ? &in[*found & 0xffffffffu] : nullptr;
    if (!b) {
        same_key.push_back((static_cast<anchor_ref>(it->second) << 32) | in.size());
        b = &in.emplace_back(anchored{a, {}});
        const anchor_shape sh = anchor_shape_of(a);
        auto& shapes = shapes_of_kind_[static_cast<std::size_t>(a.op)];
        if (std::find(shapes.begin(), shapes.end(), sh) == shapes.end()) shapes.push_back(sh);
    }
    b->rules.push_back(s.get());
    rules_.push_back(std::move(s));
}

std::size_t rule_base::size() const { return rules_.size(); }

namespace {
// A necessary condition for a match, checked without building a matcher
// (thousands of rules are tried on every graph and most cannot match): some
// node of the graph has the kind, arity and constant parameters of the
// source's last pattern node (where matching anchors), and its inputs at the
// pattern's operator slots come from operators of the right kinds.
// `nodes`: the graph nodes the matcher is to start from, in node order:
// those that fit the anchor in their operands' order or, for a commutative
// operator (matched both ways), exchanged.
bool may_match(const graph& g, const rewrite::graph_index& ix, const rule_base::anchor& a, std::vector<std::int32_t>& nodes) {
    nodes.clear();
    const bool commutes = a.num_inputs == 2 && spec::decl(a.op).commutative;
    bool in_order = false;
    for (std::int32_t n : ix.of_kind(a.op)) {
        const node& gn = g.nodes[static_cast<std::size_t>(n)];
        if (gn.inputs.size() != static_cast<std::size_t>(a.num_inputs)) continue;
        bool ok = true;
        for (int k = 0; k < spec::max_params && ok; ++k)
            if (a.constant_slots >> k & 1) ok = gn.params[k] == a.constants[k];
        if (!ok) continue;
        auto inputs_fit = [&](bool swapped) {
            for (int k = 0; k < a.num_inputs; ++k) {
                if (a.input_kind[static_cast<std::size_t>(k)] < 0) continue;
                value v = gn.inputs[static_cast<std::size_t>(swapped ? 1 - k : k)];
                const node& src = g.nodes[static_cast<std::size_t>(v.node)];
                if (src.kind != node_kind::op || static_cast<int>(src.op) != a.input_kind[static_cast<std::size_t>(k)] ||
                    v.output != a.input_output[static_cast<std::size_t>(k)])
                    return false;
            }
            return true;
        };
        const bool here = inputs_fit(false);
        in_order = in_order || here;
        if (here || (commutes && inputs_fit(true))) nodes.push_back(n);
    }
    // Some node must fit in its operands' order (a derivation does not yet
    // try a rule whose only fits are exchanged: it would find more joins).
    return in_order;
}

std::size_t operator_count(const graph& g) {
    return static_cast<std::size_t>(std::ranges::count_if(g.nodes, [](const node& n) { return n.kind == node_kind::op; }));
}

struct expander {
    const rule_base& base;
    std::size_t max_frontier;
    std::size_t max_ops;
    // Applications this join may still preview (rule_base's effort cap);
    // `exhausted` once it has previewed them all.
    std::size_t effort_left;
    bool exhausted;
    std::vector<rule_base::anchor_ref> anchors;  // reused from graph to graph
    std::vector<std::int32_t> anchor_nodes;
    // One rewrite from every graph of the frontier; new graphs (by structural
    // hash) join `seen`, the first max_frontier of them `next`. Returns true
    // as soon as a new graph is one of `goal` (the other side's graphs).
    // Every graph reached, by structural hash: the graph it was rewritten
    // from and the rule that did it (none for the side itself), so that a
    // join can name the rules on its path.
    struct link {
        std::uint64_t from = 0;
        const rule_base::stored* rule = nullptr;
    };
    using reached = std::unordered_map<std::uint64_t, link>;
    // Returns the hash of the graph where the sides meet, if they do.
    std::optional<std::uint64_t> step(const std::vector<graph>& frontier, reached& seen, const reached& goal,
                                      std::vector<graph>& next) {
        next.clear();
        for (const graph& g : frontier) {
            const auto gh = g.structural_hash();
            std::uint64_t mask = 0;
            for (const node& n : g.nodes)
                if (n.kind == node_kind::op) mask |= kind_bit(n.op);
            rewrite::graph_index ix(g);
            base.anchors_for(g, mask, anchors);
            for (rule_base::anchor_ref ref : anchors) {
                const auto& an = base.groups()[static_cast<std::size_t>(ref >> 32)].by_anchor[ref & 0xffffffffu];
                if (!may_match(g, ix, an.a, anchor_nodes)) continue;
                for (const auto* sp : an.rules) {
                    const auto& s = *sp;
                    std::optional<std::uint64_t> joined;
                    // Most graphs reached were reached before: each is told
                    // by its preview's hash and made only for the frontier.
                    rewrite::for_each_match(
                        ix, s.view,
                        [&](const rewrite::match& m) {
                            if (!in_domains(s, m)) return true;
                            auto pa = rewrite::prepare_apply(ix, s.view, m);
                            if (!pa) return true;
                            if (effort_left == 0) {
                                exhausted = true;
                                return false;
                            }
                            --effort_left;
                            auto v = rewrite::preview(*pa);
                            if (!v || v->operators > max_ops) return true;
                            const auto h = v->structural_hash;
                            if (!seen.emplace(h, link{gh, &s}).second) return true;
                            if (goal.count(h)) {
                                joined = h;
                                return false;
                            }
                            if (next.size() < max_frontier) {
                                auto ng = rewrite::make_applied(std::move(*pa));
                                if (!ng) throw error("rule '" + s.r.name + "': its application previewed acyclic but made a cycle");
                                next.push_back(std::move(*ng));
                            }
                            return true;
                        },
                        std::span<const std::int32_t>(anchor_nodes), &s.plan);
                    if (joined) return joined;
                    if (exhausted) return std::nullopt;
                }
            }
        }
        return std::nullopt;
    }
    // The match binds the rule's parameter variables to values it was proven for.
    static bool in_domains(const rule_base::stored& s, const rewrite::match& m) {
        for (std::size_t v = 0; v < s.domains.size(); ++v) {
            if (s.domains[v].size() == 1 && s.domains[v][0] == -1) continue;
            if (v < m.param_bound.size() && m.param_bound[v] &&
                !std::binary_search(s.domains[v].begin(), s.domains[v].end(), m.params[v]))
                return false;
        }
        return true;
    }
};

}  // namespace

namespace {
// The names of the rules on the path from a side to the graph `h` it reached.
void rules_on_path(const expander::reached& seen, std::uint64_t h, std::vector<std::string>& names) {
    for (auto it = seen.find(h); it != seen.end() && it->second.rule; it = seen.find(it->second.from))
        names.push_back(it->second.rule->r.name);
}
}  // namespace

bool rule_base::joinable(const graph& a, const graph& b, std::vector<std::string>* used, int depth, std::size_t max_ops) const {
    const auto ha = a.structural_hash(), hb = b.structural_hash();
    if (ha == hb) return true;
    expander::reached sa{{ha, {}}}, sb{{hb, {}}};
    if (rules_.empty()) return false;
    expander ex{*this, max_frontier_, max_ops, effort_, false, {}, {}};
    std::vector<graph> fa{a}, fb{b}, next;
    auto joined = [&](std::uint64_t h) {
        if (used) {
            rules_on_path(sa, h, *used);
            rules_on_path(sb, h, *used);
        }
        return true;
    };
    // Deepen the two sides in turn: a rule stating the pair directly joins
    // after one step.
    for (int d = 0, depth_here = depth < 0 ? depth_ : depth; d < depth_here; ++d) {
        if (!fa.empty()) {
            if (auto h = ex.step(fa, sa, sb, next)) return joined(*h);
            fa.swap(next);
        }
        if (!fb.empty() && !ex.exhausted) {
            if (auto h = ex.step(fb, sb, sa, next)) return joined(*h);
            fb.swap(next);
        }
        if (ex.exhausted) {
            capped_.fetch_add(1, std::memory_order_relaxed);
            return false;
        }
        if (fa.empty() && fb.empty()) break;
    }
    return false;
}

bool rule_base::derivable(const pair& p, std::vector<std::string>* used, int depth) const {
    if (rules_.empty()) return false;
    std::vector<int> ident(p.a.outputs.size()), perm(p.perm.begin(), p.perm.end());
    for (std::size_t i = 0; i < ident.size(); ++i) ident[i] = static_cast<int>(i);
    std::vector<std::string> names;
    for (bool second : {false, true}) {
        if (second && !o_.two_shapes) break;
        graph a, b;
        try {
            a = to_graph(p.a, o_, second, ident);
            b = to_graph(p.b, o_, second, perm);
        } catch (const error&) {
            return false;  // not buildable at this configuration: no derivation claimed
        }
        const std::size_t max_ops = p.a.outputs.size() > 1 ? std::max(operator_count(a), operator_count(b))
                                                           : std::numeric_limits<std::size_t>::max();
        if (!joinable(a, b, &names, depth, max_ops)) return false;
    }
    if (used) {
        std::sort(names.begin(), names.end());
        names.erase(std::unique(names.begin(), names.end()), names.end());
        *used = std::move(names);
    }
    return true;
}

// ---------------------------------------------------------------- opaque constants
namespace {

// Parameter slots of a constant operator that the patterns turn into dim_of
// terms (tied to extents, patterns.cpp); the others are literal constants in
// the Z3 encoding.
bool tied_slot(const gop& op, int slot) {
    using spec::op_kind;
    switch (op.kind) {
        case op_kind::cpool: return op.tie[0] != no_tensor && slot == spec::cpool_p::c;
        case op_kind::iconv:
            return (op.tie[0] != no_tensor && (slot == spec::iconv_p::co || slot == spec::iconv_p::ci)) ||
                   (op.tie[1] != no_tensor && slot == spec::iconv_p::k);
        case op_kind::imatmul: return op.tie[0] != no_tensor && slot == spec::imatmul_p::n;
        case op_kind::iewmul: return op.tie[0] != no_tensor && slot >= spec::iewmul_p::d0;
        default: return false;
    }
}

// Whether some axiom of the proof base has a node of the same operator whose
// parameters could equal this one's: a constant slot on both sides must hold
// the same value (a variable or dim_of slot could take any).
bool reached_by_axioms(const gop& op) {
    const auto& pv = param_values(op.pidx);
    const auto& d = spec::decl(op.kind);
    const std::span<const spec::axiom> base(spec::taso_model_axioms), own = spec::extension_axioms();
    for (const auto& ax : std::views::join(std::array{base, own}))
        for (const spec::expr* e : {&ax.eq.lhs, &ax.eq.rhs})
            for (int k = 0; k < e->size; ++k) {
                const auto& n = e->nodes[static_cast<std::size_t>(k)];
                if (n.op != op.kind) continue;
                bool fits = true;
                for (int s = 0; s < d.num_params && fits; ++s) {
                    const auto& t = n.params[static_cast<std::size_t>(s)];
                    std::int32_t axv;
                    if (t.k == spec::param_term::kind::constant) axv = t.value;
                    else if (t.k == spec::param_term::kind::unused) axv = d.params[static_cast<std::size_t>(s)].fallback;
                    else continue;
                    if (!tied_slot(op, s) && pv[s] != axv) fits = false;
                }
                if (fits) return true;
            }
    return false;
}

// Float evaluation with the outputs of the listed operators replaced by
// random tensors (one per structurally distinct operator, shared by both graphs).
std::vector<tensor<float>> eval_replacing(const mgraph& g, std::span<const tensor<float>> inputs,
                                          const std::vector<char>& opaque, std::uint64_t seed) {
    std::vector<tensor<float>> v(inputs.begin(), inputs.end());
    v.resize(g.shapes.size());
    int t = g.num_inputs;
    for (std::size_t k = 0; k < g.ops.size(); ++k) {
        const auto& op = g.ops[k];
        const auto& d = spec::decl(op.kind);
        if (opaque[k]) {
            std::mt19937_64 rng(seed ^ g.shash[static_cast<std::size_t>(t)]);
            std::uniform_real_distribution<float> u(-1.f, 1.f);
            tensor<float> r(g.shapes[static_cast<std::size_t>(t)]);
            for (auto& x : r.data) x = u(rng);
            v[static_cast<std::size_t>(t)] = std::move(r);
            t += d.num_outputs;
            continue;
        }
        std::array<const tensor<float>*, 2> ip{};
        for (int i = 0; i < op.nin; ++i) ip[static_cast<std::size_t>(i)] = &v[op.in[static_cast<std::size_t>(i)]];
        std::vector<tensor<float>> res;
        for (int j = 0; j < d.num_outputs; ++j) res.emplace_back(g.shapes[static_cast<std::size_t>(t + j)]);
        d.template eval<float>()(param_values(op.pidx), std::span<const tensor<float>* const>(ip.data(), op.nin), res);
        for (int j = 0; j < d.num_outputs; ++j) v[static_cast<std::size_t>(t + j)] = std::move(res[static_cast<std::size_t>(j)]);
        t += d.num_outputs;
    }
    return v;
}

}  // namespace

std::string opaque_constants_refute(const pair& p, const options& o) {
    std::vector<char> oa(p.a.ops.size(), 0), ob(p.b.ops.size(), 0);
    std::string which;
    bool any = false;
    for (auto [g, flags] : {std::pair{&p.a, &oa}, std::pair{&p.b, &ob}})
        for (std::size_t k = 0; k < g->ops.size(); ++k) {
            const auto& op = g->ops[k];
            if (op.nin != 0 || reached_by_axioms(op)) continue;
            (*flags)[k] = 1;
            any = true;
            if (which.empty()) which = std::string(spec::decl(op.kind).name);
        }
    if (!any) return {};
    std::mt19937_64 rng(o.seed ^ 0x0bacull);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (int trial = 0; trial < 2; ++trial) {
        std::vector<tensor<float>> in;
        for (const auto& d : o.inputs) {
            tensor<float> t(d.s);
            for (auto& x : t.data) x = u(rng);
            in.push_back(std::move(t));
        }
        std::uint64_t seed = rng();
        auto va = eval_replacing(p.a, in, oa, seed), vb = eval_replacing(p.b, in, ob, seed);
        for (std::size_t i = 0; i < p.a.outputs.size(); ++i) {
            const auto& x = va[static_cast<std::size_t>(p.a.outputs[i])];
            const auto& y = vb[static_cast<std::size_t>(p.b.outputs[static_cast<std::size_t>(p.perm[i])])];
            if (!(x.shape == y.shape) || relative_error(x, y) > o.tolerance)
                return "not provable: no axiom reaches " + which +
                       " with these parameters, so a proof would hold for any tensor in its place, and the pair differs "
                       "with a random tensor there";
        }
    }
    return {};
}

}  // namespace tsopt::gen
