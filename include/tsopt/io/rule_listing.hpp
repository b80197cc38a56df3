#pragma once
// The plain-text rule listing (docs/rules-format.md): one rule per line,
//
//   name: (relu (ewadd ?x ?y)) => ...
//   name: (tuple (conv2d{...} ?x ?w) (conv2d{...} ?x ?v)) => (tuple (split.0{...} ...) (split.1{...} ...))
//
// Source and target are S-expressions over operator names with parameters
// in braces and `?`-named tensor variables; `(tuple ...)` marks a
// multi-output rule. This header both writes and reads the format, so the
// generator's output and an engine's loader agree by construction. Loading
// reports the line and what is wrong (tsopt::error).
#include <charconv>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "tsopt/core/error.hpp"
#include "tsopt/rewrite/rule.hpp"
#include "tsopt/spec/registry.hpp"

namespace tsopt::io {

// A rule that owns its patterns; `view()` gives the optimizer's rule type.
struct listed_rule {
    std::string name;
    std::vector<spec::pattern_node> src, dst;
    std::vector<spec::value_ref> src_out, dst_out;
    int num_tensor_vars = 0;
    int num_param_vars = 0;
    std::string text;  // "src => dst", canonical
    bool multi_output() const { return src_out.size() > 1; }
    rewrite::rule view(std::string_view provenance = "loaded from a rule listing") const {
        return rewrite::rule{name, text, provenance, src, dst, src_out, dst_out, num_tensor_vars, num_param_vars};
    }
};

struct rule_listing {
    std::string spec_hash;  // from the "# spec-hash:" header line, if any
    std::vector<listed_rule> rules;
};

namespace listing_detail {

inline std::string var_name(int i) {
    static constexpr std::string_view base[] = {"x", "y", "z", "w", "u", "v", "a", "b", "c", "d", "e", "f"};
    if (i < 12) return std::string(base[i]);
    return "t" + std::to_string(i);
}

struct printer {
    std::span<const spec::pattern_node> nodes;
    mutable int depth = 0;
    std::string ref(spec::value_ref r) const {
        if (r.is_var) return "?" + var_name(r.index);
        if (r.index < 0 || r.index >= static_cast<int>(nodes.size())) throw error("rule listing: node reference out of range");
        if (++depth > 4 * static_cast<int>(nodes.size()) + 8) throw error("rule listing: cyclic pattern (a node refers to itself)");
        auto s = node(nodes[static_cast<std::size_t>(r.index)], r.output);
        --depth;
        return s;
    }
    std::string term(const spec::param_term& t) const {
        using K = spec::param_term::kind;
        switch (t.k) {
            case K::constant: return std::to_string(t.value);
            case K::variable: return "$" + std::to_string(t.value);
            case K::dim_of: return "dim(" + ref(t.of) + "," + std::to_string(t.dim) + ")";
            default: return "_";
        }
    }
    std::string node(const spec::pattern_node& n, int output) const {
        const auto& d = spec::decl(n.op);
        std::string s = "(" + std::string(d.name);
        if (d.num_outputs > 1) s += "." + std::to_string(output);
        std::string ps;
        for (int i = 0; i < d.num_params; ++i) {
            const auto& t = n.params[static_cast<std::size_t>(i)];
            if (t.k == spec::param_term::kind::unused) continue;
            ps += (ps.empty() ? "" : ",") + std::string(d.params[static_cast<std::size_t>(i)].name) + "=" + term(t);
        }
        if (!ps.empty()) s += "{" + ps + "}";
        for (int i = 0; i < n.num_inputs; ++i) s += " " + ref(n.inputs[static_cast<std::size_t>(i)]);
        return s + ")";
    }
    std::string outputs(std::span<const spec::value_ref> outs) const {
        if (outs.size() == 1) return ref(outs[0]);
        std::string s = "(tuple";
        for (auto r : outs) s += " " + ref(r);
        return s + ")";
    }
};

class parser {
public:
    parser(std::string_view text, std::string where) : s_(text), where_(std::move(where)) {}

    [[noreturn]] void fail(const std::string& what) const {
        throw error(where_ + ": " + what + " (at column " + std::to_string(pos_ + 1) + ")");
    }
    void ws() {
        while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t')) ++pos_;
    }
    bool eat(std::string_view t) {
        ws();
        if (s_.substr(pos_, t.size()) == t) { pos_ += t.size(); return true; }
        return false;
    }
    void expect(std::string_view t) {
        if (!eat(t)) fail("expected '" + std::string(t) + "'");
    }
    std::string ident() {
        ws();
        std::size_t b = pos_;
        while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_' || s_[pos_] == '-')) ++pos_;
        if (b == pos_) fail("expected a name");
        return std::string(s_.substr(b, pos_ - b));
    }
    std::int64_t integer() {
        ws();
        std::int64_t v = 0;
        auto r = std::from_chars(s_.data() + pos_, s_.data() + s_.size(), v);
        if (r.ec != std::errc{}) fail("expected an integer");
        pos_ = static_cast<std::size_t>(r.ptr - s_.data());
        return v;
    }
    bool at_end() { ws(); return pos_ >= s_.size(); }
    std::size_t pos() const { return pos_; }

    // One side of a rule into `nodes` (hash-consed: a repeated
    // sub-expression is one node).
    std::vector<spec::value_ref> side(std::vector<spec::pattern_node>& nodes, std::map<std::string, int>& vars,
                                      bool may_add_vars, int& max_param_var) {
        nodes_ = &nodes; vars_ = &vars; may_add_ = may_add_vars; max_pvar_ = &max_param_var;
        ws();
        std::size_t save = pos_;
        if (eat("(") && eat("tuple") && pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == ')')) {
            std::vector<spec::value_ref> outs;
            while (!eat(")")) {
                if (at_end()) fail("unterminated (tuple ...)");
                outs.push_back(expr());
            }
            if (outs.size() < 2) fail("(tuple ...) needs at least two outputs");
            return outs;
        }
        pos_ = save;
        return {expr()};
    }

private:
    spec::value_ref expr() {
        ws();
        if (eat("?")) {
            std::string n = ident();
            auto it = vars_->find(n);
            if (it == vars_->end()) {
                if (!may_add_) fail("target uses variable ?" + n + " that the source does not bind");
                int id = static_cast<int>(vars_->size());
                if (id > 0x7fff) fail("too many variables");
                it = vars_->emplace(n, id).first;
            }
            return spec::var_ref(it->second);
        }
        expect("(");
        std::string opname = ident();
        auto k = spec::find_op(opname);
        if (!k) fail("unknown operator '" + opname + "'");
        const auto& d = spec::decl(*k);
        int output = 0;
        if (eat(".")) {
            output = static_cast<int>(integer());
            if (output < 0 || output >= d.num_outputs)
                fail(opname + " has " + std::to_string(d.num_outputs) + " output(s), not output " + std::to_string(output));
        } else if (d.num_outputs > 1)
            fail(opname + " has several outputs: write " + opname + ".0 or " + opname + ".1");
        spec::pattern_node n;
        n.op = *k;
        if (eat("{")) {
            if (!eat("}")) {
                do {
                    std::string pn = ident();
                    int slot = d.param_index(pn);
                    if (slot < 0) fail(opname + " has no parameter '" + pn + "'");
                    expect("=");
                    n.params[static_cast<std::size_t>(slot)] = term();
                } while (eat(","));
                expect("}");
            }
        }
        int nin = 0;
        while (!eat(")")) {
            if (at_end()) fail("unterminated (" + opname + " ...)");
            if (nin >= spec::max_inputs) fail(opname + ": more than " + std::to_string(spec::max_inputs) + " inputs");
            n.inputs[static_cast<std::size_t>(nin++)] = expr();
        }
        if (nin < d.min_inputs || nin > std::min(d.max_inputs, spec::max_inputs))
            fail(opname + " takes " + std::to_string(d.min_inputs) +
                 (d.min_inputs == d.max_inputs ? "" : ".." + std::to_string(std::min(d.max_inputs, spec::max_inputs))) +
                 " inputs, got " + std::to_string(nin));
        n.num_inputs = static_cast<std::uint8_t>(nin);
        for (std::size_t i = 0; i < nodes_->size(); ++i)
            if ((*nodes_)[i] == n) return spec::node_ref(static_cast<int>(i), output);
        if (nodes_->size() > 0x7fff) fail("too many nodes");
        nodes_->push_back(n);
        return spec::node_ref(static_cast<int>(nodes_->size() - 1), output);
    }
    spec::param_term term() {
        ws();
        if (eat("dim(")) {
            auto r = expr();
            expect(",");
            auto d = integer();
            if (d < 0 || d >= max_rank) fail("dim index " + std::to_string(d) + " out of range 0.." + std::to_string(max_rank - 1));
            expect(")");
            return spec::pdim(r, static_cast<int>(d));
        }
        if (eat("$")) {
            auto v = integer();
            if (v < 0 || v > 64) fail("parameter variable $" + std::to_string(v) + " out of range");
            *max_pvar_ = std::max(*max_pvar_, static_cast<int>(v) + 1);
            return spec::pvar(static_cast<int>(v));
        }
        if (eat("_")) return {};
        auto v = integer();
        if (v < INT32_MIN || v > INT32_MAX) fail("parameter value out of the int32 range");
        return spec::pconst(static_cast<std::int32_t>(v));
    }

    std::string_view s_;
    std::string where_;
    std::size_t pos_ = 0;
    std::vector<spec::pattern_node>* nodes_ = nullptr;
    std::map<std::string, int>* vars_ = nullptr;
    bool may_add_ = true;
    int* max_pvar_ = nullptr;
};

}  // namespace listing_detail

// "src => dst" for one rule (canonical when the rule came from the parser).
inline std::string format_rule_text(std::span<const spec::pattern_node> src, std::span<const spec::value_ref> src_out,
                                    std::span<const spec::pattern_node> dst, std::span<const spec::value_ref> dst_out) {
    return listing_detail::printer{src}.outputs(src_out) + " => " + listing_detail::printer{dst}.outputs(dst_out);
}

// Parses one rule line "name: src => dst"; `where` prefixes error messages.
inline listed_rule parse_rule_line(std::string_view line, const std::string& where) {
    listing_detail::parser p(line, where);
    listed_rule r;
    r.name = p.ident();
    p.expect(":");
    std::map<std::string, int> vars;
    int pv = 0;
    r.src_out = p.side(r.src, vars, true, pv);
    if (r.src.empty()) p.fail("the source must contain at least one operator");
    p.expect("=>");
    r.dst_out = p.side(r.dst, vars, false, pv);
    if (!p.at_end()) p.fail("unexpected text after the target");
    if (r.src_out.size() != r.dst_out.size())
        p.fail("source has " + std::to_string(r.src_out.size()) + " outputs but target has " + std::to_string(r.dst_out.size()));
    r.num_tensor_vars = static_cast<int>(vars.size());
    r.num_param_vars = pv;
    r.text = format_rule_text(r.src, r.src_out, r.dst, r.dst_out);
    return r;
}

// Parses a whole listing. Blank lines and '#' comments are skipped; a
// "# spec-hash: H" comment records the hash the rules were proven against.
inline rule_listing parse_rule_listing(std::string_view text, std::string_view source = "<rule listing>") {
    rule_listing out;
    std::map<std::string, int> names;
    int lineno = 0;
    for (std::size_t b = 0; b <= text.size();) {
        std::size_t e = text.find('\n', b);
        if (e == std::string_view::npos) e = text.size();
        std::string_view line = text.substr(b, e - b);
        b = e + 1;
        ++lineno;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        std::size_t f = line.find_first_not_of(" \t");
        if (f == std::string_view::npos) { if (e == text.size()) break; continue; }
        std::string where = std::string(source) + ":" + std::to_string(lineno);
        if (line[f] == '#') {
            constexpr std::string_view key = "# spec-hash:";
            if (line.substr(f, key.size()) == key) {
                auto h = line.substr(f + key.size());
                auto s = h.find_first_not_of(" \t");
                out.spec_hash = s == std::string_view::npos ? "" : std::string(h.substr(s));
            }
        } else {
            auto r = parse_rule_line(line.substr(f), where);
            if (auto [it, fresh] = names.emplace(r.name, lineno); !fresh)
                throw error(where + ": rule name '" + r.name + "' already used on line " + std::to_string(it->second));
            out.rules.push_back(std::move(r));
        }
        if (e == text.size()) break;
    }
    return out;
}

inline rule_listing load_rule_listing(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw error("cannot open rule listing '" + path + "'");
    std::stringstream ss;
    ss << f.rdbuf();
    return parse_rule_listing(ss.str(), path);
}

// One listing line for a rule.
inline std::string format_rule_line(const listed_rule& r) { return r.name + ": " + r.text; }

}  // namespace tsopt::io
