#pragma once
// Rules from axioms, for tests and hand-written rule sets:
//
//   rewrite::rule_set rs;
//   rs.add(axiom);                       // "name" (lhs => rhs) and "name-rev" when valid
//   rs.add(axiom, {extra conditions});   // e.g. equal(pdim(y, 2), pdim(z, 2))
//   rs.add_rule("fuse", src, dst, src_out, dst_out);   // multi-output pattern data
//   search.rules(rs.rules());
//
// A direction is a valid rule when its source is an operator (not a bare
// variable) and its target uses only tensor and parameter variables the
// source binds. Identical nodes inside one side are merged first, so that
// split0(x) and split1(x) denote the two outputs of one split, as in a graph.
// The set owns every pattern and string, so rules stay valid while the set
// lives; take rules() again after adding (the span itself may move).
#include <deque>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tsopt/rewrite/rule.hpp"
#include "tsopt/spec/axiom_dsl.hpp"
#include "tsopt/spec/axioms.hpp"

namespace tsopt::rewrite {

namespace detail {

// "(ewadd ?0 (ewadd ?1 ?2))" with parameters as [p0 3 d(?1,2)].
inline std::string term_text(const spec::param_term& t) {
    using K = spec::param_term::kind;
    switch (t.k) {
        case K::constant: return std::to_string(t.value);
        case K::variable: return "p" + std::to_string(t.value);
        case K::dim_of:
            return "dim(" + (t.of.is_var ? "?" + std::to_string(t.of.index) : "#" + std::to_string(t.of.index)) + "," +
                   std::to_string(t.dim) + ")";
        default: return "_";
    }
}
inline std::string pattern_text(std::span<const spec::pattern_node> pat, spec::value_ref v) {
    if (v.is_var) return "?" + std::to_string(v.index);
    const auto& p = pat[static_cast<std::size_t>(v.index)];
    const auto& d = spec::decl(p.op);
    std::string s = "(" + std::string(d.name);
    if (d.num_outputs > 1) s += "_" + std::to_string(v.output);
    if (d.num_params > 0) {
        s += " [";
        for (int i = 0; i < d.num_params; ++i) s += (i ? " " : "") + term_text(p.params[static_cast<std::size_t>(i)]);
        s += "]";
    }
    for (int i = 0; i < p.num_inputs; ++i) s += " " + pattern_text(pat, p.inputs[static_cast<std::size_t>(i)]);
    return s + ")";
}

// Merges identical nodes of a topological pattern; remaps `roots` too.
inline std::vector<spec::pattern_node> dedupe(std::vector<spec::pattern_node> pat, std::vector<spec::value_ref>& roots) {
    std::vector<spec::pattern_node> out;
    std::vector<int> remap(pat.size(), -1);
    auto fix = [&](spec::value_ref& v) {
        if (!v.is_var && v.index >= 0) v.index = static_cast<std::int16_t>(remap[static_cast<std::size_t>(v.index)]);
    };
    for (std::size_t i = 0; i < pat.size(); ++i) {
        spec::pattern_node p = pat[i];
        for (int s = 0; s < p.num_inputs; ++s) fix(p.inputs[static_cast<std::size_t>(s)]);
        for (auto& t : p.params)
            if (t.k == spec::param_term::kind::dim_of) fix(t.of);
        int found = -1;
        for (std::size_t j = 0; j < out.size() && found < 0; ++j)
            if (out[j] == p) found = static_cast<int>(j);
        if (found < 0) {
            found = static_cast<int>(out.size());
            out.push_back(p);
        }
        remap[i] = found;
    }
    for (auto& r : roots) fix(r);
    return out;
}

inline void collect_vars(std::span<const spec::pattern_node> pat, std::span<const spec::value_ref> roots,
                         std::vector<bool>& tv, std::vector<bool>& pv) {
    auto t = [&](int i) { if (static_cast<std::size_t>(i) >= tv.size()) tv.resize(static_cast<std::size_t>(i) + 1); tv[static_cast<std::size_t>(i)] = true; };
    auto p = [&](int i) { if (static_cast<std::size_t>(i) >= pv.size()) pv.resize(static_cast<std::size_t>(i) + 1); pv[static_cast<std::size_t>(i)] = true; };
    for (const auto& n : pat) {
        for (int s = 0; s < n.num_inputs; ++s)
            if (n.inputs[static_cast<std::size_t>(s)].is_var) t(n.inputs[static_cast<std::size_t>(s)].index);
        for (const auto& pt : n.params) {
            if (pt.k == spec::param_term::kind::variable) p(pt.value);
            if (pt.k == spec::param_term::kind::dim_of && pt.of.is_var) t(pt.of.index);
        }
    }
    for (auto r : roots)
        if (r.is_var) t(r.index);
}

}  // namespace detail

// Conditions saying tensors a and b have the same shape (same rank, same
// extents): rules proven for equal shapes must not fire where element-wise
// operators would broadcast.
inline std::vector<spec::condition> same_shape(spec::value_ref a, spec::value_ref b) {
    std::vector<spec::condition> r;
    for (int d = 0; d < max_rank; ++d) r.push_back({spec::pdim(a, d), spec::pdim(b, d), spec::condition::rel::eq});
    return r;
}

class rule_set {
public:
    rule_set() = default;
    rule_set(const rule_set&) = delete;  // rules() views point into this object
    rule_set& operator=(const rule_set&) = delete;
    rule_set(rule_set&&) = default;
    rule_set& operator=(rule_set&&) = default;

    // Adds the axiom left to right, and its "-rev" twin when that direction is
    // a valid rule. Returns how many rules were added (0 to 2).
    int add(const spec::axiom& a, std::initializer_list<spec::condition> extra = {}, bool reverse = true) {
        return add(a, std::vector<spec::condition>(extra), reverse);
    }
    // Extra conditions measuring tensor variables the axiom does not use are
    // left out for it, so one list (e.g. same_shape(x, y)) can serve a family.
    int add(const spec::axiom& a, const std::vector<spec::condition>& extra, bool reverse = true) {
        std::vector<spec::condition> where(a.where.begin(), a.where.begin() + a.num_where);
        const int nv = std::max(spec::tensor_vars(a.eq.lhs), spec::tensor_vars(a.eq.rhs));
        auto uses = [&](const spec::param_term& t) {
            return t.k != spec::param_term::kind::dim_of || !t.of.is_var || t.of.index < nv;
        };
        for (const auto& c : extra)
            if (uses(c.a) && uses(c.b)) where.push_back(c);
        int n = 0;
        const auto model = model_of(a);
        n += add_direction(std::string(a.name), a.eq.lhs, a.eq.rhs, where, "axiom " + std::string(a.name), model);
        if (reverse)
            n += add_direction(std::string(a.name) + "-rev", a.eq.rhs, a.eq.lhs, where,
                               "axiom " + std::string(a.name) + ", reversed", model);
        return n;
    }
    // Adds only the given direction of an axiom (no twin); throws when it is
    // not a valid rule.
    void add_one_way(const spec::axiom& a, std::initializer_list<spec::condition> extra = {}) {
        std::vector<spec::condition> where(a.where.begin(), a.where.begin() + a.num_where);
        where.insert(where.end(), extra.begin(), extra.end());
        if (!add_direction(std::string(a.name), a.eq.lhs, a.eq.rhs, where, "axiom " + std::string(a.name), model_of(a)))
            throw error("axiom '" + std::string(a.name) + "' is not a valid left-to-right rule");
    }

    // Adds hand-written pattern data (multi-output rules). Throws naming the
    // rule when the target uses variables the source does not bind.
    void add_rule(std::string name, std::vector<spec::pattern_node> src, std::vector<spec::pattern_node> dst,
                  std::vector<spec::value_ref> src_out, std::vector<spec::value_ref> dst_out,
                  std::vector<spec::condition> where = {}, std::string provenance = "hand-written",
                  std::uint8_t model = spec::taso_typing) {
        if (!push(std::move(name), std::move(src), std::move(dst), std::move(src_out), std::move(dst_out), std::move(where),
                  std::move(provenance), model))
            throw error("rule '" + owned_.back()->name + "' is invalid: its source must be operators and its target may use "
                        "only variables the source binds");
    }

    std::span<const rule> rules() const { return views_; }
    std::size_t size() const { return views_.size(); }
    const rule& operator[](std::size_t i) const { return views_[i]; }
    const rule& find(std::string_view name) const {
        for (const rule& r : views_)
            if (r.name == name) return r;
        throw error("rule set has no rule named '" + std::string(name) + "'");
    }

private:
    // Axioms of the validated set carry the typing they need; an axiom
    // written elsewhere (a test's) is taken at its word as full-semantics.
    static std::uint8_t model_of(const spec::axiom& a) { return spec::typing_needed(a.name); }

    struct owned {
        std::string name, text, provenance;
        std::vector<spec::pattern_node> src, dst;
        std::vector<spec::value_ref> src_out, dst_out;
        std::vector<spec::condition> where;
    };

    int add_direction(std::string name, const spec::expr& from, const spec::expr& to, const std::vector<spec::condition>& where,
                      std::string prov, std::uint8_t model) {
        if (from.root.is_var) return 0;
        std::vector<spec::pattern_node> s(from.nodes.begin(), from.nodes.begin() + from.size);
        std::vector<spec::pattern_node> d(to.nodes.begin(), to.nodes.begin() + to.size);
        bool ok = push(std::move(name), std::move(s), std::move(d), {from.root}, {to.root}, where, std::move(prov), model);
        if (!ok) {
            owned_.pop_back();
            return 0;
        }
        return 1;
    }

    bool push(std::string name, std::vector<spec::pattern_node> src, std::vector<spec::pattern_node> dst,
              std::vector<spec::value_ref> src_out, std::vector<spec::value_ref> dst_out, std::vector<spec::condition> where,
              std::string prov, std::uint8_t model) {
        auto o = std::make_unique<owned>();
        o->name = std::move(name);
        o->provenance = std::move(prov);
        o->src = detail::dedupe(std::move(src), src_out);
        o->dst = detail::dedupe(std::move(dst), dst_out);
        o->src_out = std::move(src_out);
        o->dst_out = std::move(dst_out);
        o->where = std::move(where);
        owned_.push_back(std::move(o));
        owned& w = *owned_.back();
        bool valid = !w.src.empty() && w.src_out.size() == w.dst_out.size() && !w.src_out.empty();
        for (auto v : w.src_out) valid = valid && !v.is_var;
        std::vector<bool> st, sp, dt, dp;
        detail::collect_vars(w.src, w.src_out, st, sp);
        detail::collect_vars(w.dst, w.dst_out, dt, dp);
        // Conditions may only read what the source binds.
        for (const auto& c : w.where) {
            for (const auto* t : {&c.a, &c.b}) {
                if (t->k == spec::param_term::kind::variable)
                    valid = valid && static_cast<std::size_t>(t->value) < sp.size() && sp[static_cast<std::size_t>(t->value)];
                if (t->k == spec::param_term::kind::dim_of && t->of.is_var)
                    valid = valid && static_cast<std::size_t>(t->of.index) < st.size() && st[static_cast<std::size_t>(t->of.index)];
                if (t->k == spec::param_term::kind::dim_of && !t->of.is_var) valid = valid && t->of.index < static_cast<int>(w.src.size());
            }
        }
        // dim_of terms in the source may only measure tensors the source binds.
        for (std::size_t i = 0; i < dt.size(); ++i) valid = valid && (!dt[i] || (i < st.size() && st[i]));
        for (std::size_t i = 0; i < dp.size(); ++i) valid = valid && (!dp[i] || (i < sp.size() && sp[i]));
        if (!valid) return false;
        std::string text;
        for (std::size_t i = 0; i < w.src_out.size(); ++i) text += (i ? ", " : "") + detail::pattern_text(w.src, w.src_out[i]);
        text += " => ";
        for (std::size_t i = 0; i < w.dst_out.size(); ++i) text += (i ? ", " : "") + detail::pattern_text(w.dst, w.dst_out[i]);
        w.text = std::move(text);
        rule r;
        r.name = w.name;
        r.text = w.text;
        r.provenance = w.provenance;
        r.src = w.src;
        r.dst = w.dst;
        r.src_out = w.src_out;
        r.dst_out = w.dst_out;
        r.num_tensor_vars = static_cast<int>(std::max(st.size(), dt.size()));
        r.num_param_vars = static_cast<int>(std::max(sp.size(), dp.size()));
        r.where = w.where;
        r.needs = model;
        views_.push_back(r);
        return true;
    }

    std::deque<std::unique_ptr<owned>> owned_;
    std::vector<rule> views_;
};

}  // namespace tsopt::rewrite
