// TASO's own rule set against tsopt's (issue #19's target: at least 95 % of
// TASO's rules are in tsopt's default generated set or derivable from it).
//
// TASO's generator writes its rules as a protobuf (graph_subst.pb); the
// Tensat project publishes the same rules as text, one equation per rule:
//
//   matmul(matmul(input_1,input_4),input_5)==matmul(input_1,matmul(input_4,input_5))
//
// (uwplse/tensat, taso_rules.txt). This benchmark reads that file (not
// shipped with tsopt: pass its path), builds both sides of every equation on
// TASO's generator inputs (src/generator/generator.cc: input_1..3 [2,4],
// input_4..6 [4,4], input_7..9 [2,4,5,5], input_10..12 [4,4,3,3], input_13..15
// [4,4,1,3], input_16..18 [4,4,3,1], input_19 [4,1,3,3], input_20 a scalar),
// groups the equations equal up to a renaming of same-shaped inputs and
// direction, evaluates both sides on random inputs (a class that differs is
// reported apart), and checks each with tsopt's rules through the library's
// matcher and rule application (as tests/generator/coverage_test.cpp does for
// TASO's axioms):
//   in the set      one rule application turns one side into the other
//   in sequence     two rule applications do (a rule and one more rewrite)
//   one rewrite     the two sides meet after at most one rewrite each
//   --depth K       ... at most K rewrites each (reported per depth)
// Every rewrite is a proven rule, so a joined equation is proven from tsopt's
// set. Equations tsopt cannot build (an operator it lacks, a shape its
// operators reject) are counted apart with the reason.
//
// usage: taso_rule_coverage TASO_RULES.txt [--multi MULTI_RULES.txt] [--rules LISTING]...
//                           [--with-default] [--depth K] [--missing N]
//   --multi   TASO's multi-output rules (Tensat's multi_rules.txt)
//   --rules   tsopt-gen listings (loaded and checked like tsopt optimize
//             --rules), their union; default: the built-in default set
//   --with-default  the built-in default set as well as the listings
//   --depth   rewrites per side to try (default 2)
//   --missing print up to N equations not joined (default 20)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

#include "tsopt/backend/reference/executor.hpp"
#include "tsopt/rewrite/apply.hpp"
#include "tsopt/rewrite/match.hpp"
#include "tsopt/rewrite/rule_index.hpp"
#include "tsopt/rules/default.hpp"
#include "tsopt/rules/load.hpp"

using namespace tsopt;
namespace sp = tsopt::spec;
using sp::op_kind;

namespace {

// One side of an equation as written: an operator with its integer
// parameters and operands, or an input (`input_K`, no parameters).
struct term {
    std::string op;
    std::vector<std::int32_t> ints;
    std::vector<term> args;
};

class parser {
public:
    explicit parser(std::string_view s) : s_(s) {}
    bool done() {
        skip();
        return i_ >= s_.size();
    }
    // lhs==rhs; throws error naming the offset.
    std::pair<term, term> equation() {
        term l = expr();
        skip();
        if (s_.substr(i_, 2) != "==") fail("'=='");
        i_ += 2;
        term r = expr();
        return {std::move(l), std::move(r)};
    }
    std::size_t offset() const { return i_; }

private:
    void skip() {
        while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
    }
    [[noreturn]] void fail(const std::string& want) {
        throw error("TASO rules: expected " + want + " at character " + std::to_string(i_) + ": '" +
                    std::string(s_.substr(i_, 40)) + "'");
    }
    term expr() {
        skip();
        term t;
        while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_')) t.op += s_[i_++];
        skip();
        // An empty name before '(' is kept: the builder refuses it by name
        // (Tensat's file has one such equation, `relu(input_1)==(0,...)`).
        if (i_ >= s_.size() || s_[i_] != '(') {
            if (t.op.empty()) fail("an operator or input name");
            return t;  // an input
        }
        ++i_;
        for (bool first = true;; first = false) {
            skip();
            if (i_ < s_.size() && s_[i_] == ')') {
                ++i_;
                return t;
            }
            if (!first) {
                if (s_[i_] != ',') fail("',' or ')'");
                ++i_;
                skip();
            }
            if (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) || s_[i_] == '-')) {
                std::size_t used = 0;
                t.ints.push_back(std::stoi(std::string(s_.substr(i_, 12)), &used));
                i_ += used;
            } else {
                t.args.push_back(expr());
            }
        }
    }
    std::string_view s_;
    std::size_t i_ = 0;
};

// TASO's generator inputs by number (generator.cc's main), and the class of
// inputs a renaming may exchange (equal shape and role).
struct taso_input {
    shape s;
    int cls;
};
std::optional<taso_input> taso_input_of(int k) {
    if (k >= 1 && k <= 3) return taso_input{shape{2, 4}, 0};
    if (k >= 4 && k <= 6) return taso_input{shape{4, 4}, 1};
    if (k >= 7 && k <= 9) return taso_input{shape{2, 4, 5, 5}, 2};
    if (k >= 10 && k <= 12) return taso_input{shape{4, 4, 3, 3}, 3};
    if (k >= 13 && k <= 15) return taso_input{shape{4, 4, 1, 3}, 4};
    if (k >= 16 && k <= 18) return taso_input{shape{4, 4, 3, 1}, 5};
    if (k == 19) return taso_input{shape{4, 1, 3, 3}, 6};
    if (k == 20) return taso_input{shape{1}, 7};  // TASO's 0-d scalar; tsopt's scalars are [1]
    return std::nullopt;
}
const int class_first[] = {1, 4, 7, 10, 13, 16, 19, 20};

int input_number(const std::string& name) {
    if (!name.starts_with("input_")) return -1;
    try {
        return std::stoi(name.substr(6));
    } catch (...) {
        return -1;
    }
}

// TASO's parameter encodings -> tsopt's (spec/dsl.hpp).
std::int32_t pad_of(std::int32_t taso) {  // TASO PD_MODE_SAME 0, VALID 1
    if (taso == 0) return static_cast<std::int32_t>(sp::pad_mode::same);
    if (taso == 1) return static_cast<std::int32_t>(sp::pad_mode::valid);
    throw error("unknown TASO padding mode " + std::to_string(taso));
}
std::int32_t act_of(std::int32_t taso) {  // TASO AC_MODE_NONE 0, SIGMOID 1, RELU 2, TANH 3
    switch (taso) {
        case 0: return static_cast<std::int32_t>(sp::activation::none);
        case 1: return static_cast<std::int32_t>(sp::activation::sigmoid);
        case 2: return static_cast<std::int32_t>(sp::activation::relu);
        case 3: return static_cast<std::int32_t>(sp::activation::tanh);
        default: throw error("unknown TASO activation " + std::to_string(taso));
    }
}

// Builds one side into `g` (shared with the other side, so equal inputs are
// one node), common subterms once (TASO's graphs are DAGs written out as
// trees). `rename` maps TASO input numbers. Throws error with the reason.
class builder {
public:
    builder(graph& g, const std::map<int, int>& rename) : g_(g), rename_(rename) {}

    value build(const term& t) {
        std::string key = t.op;
        std::vector<value> a;
        for (const term& c : t.args) a.push_back(build(c));
        for (auto v : t.ints) key += "," + std::to_string(v);
        for (value v : a) key += "|" + std::to_string(v.node) + ":" + std::to_string(v.output);
        if (auto it = memo_.find(key); it != memo_.end()) return it->second;
        value v = make(t, a);
        memo_.emplace(key, v);
        return v;
    }

private:
    void want(const term& t, std::size_t ints, std::size_t args) {
        if (t.ints.size() != ints || t.args.size() != args)
            throw error(t.op + " takes " + std::to_string(ints) + " parameters and " + std::to_string(args) + " operands");
    }
    value op(op_kind k, sp::op_params p, std::vector<value> args, int output = 0) {
        return g_.add(k, p, args).at(static_cast<std::size_t>(output));
    }
    value make(const term& t, const std::vector<value>& a) {
        const std::string& o = t.op;
        sp::op_params p{};
        if (int k = input_number(o); k > 0) {
            auto r = rename_.find(k);
            const int named = r == rename_.end() ? k : r->second;
            auto in = taso_input_of(named);
            if (!in) throw error("unknown input " + o);
            return g_.input("input_" + std::to_string(named), in->s);
        }
        if (o == "ewadd" || o == "ewmul" || o == "matmul") {
            want(t, 0, 2);
            return op(o == "ewadd" ? op_kind::ewadd : o == "ewmul" ? op_kind::ewmul : op_kind::matmul, p, a);
        }
        if (o == "scalar_mul") {
            want(t, 0, 2);
            return op(op_kind::smul, p, a);
        }
        if (o == "relu" || o == "sigmoid" || o == "tanh") {
            want(t, 0, 1);
            return op(o == "relu" ? op_kind::relu : o == "sigmoid" ? op_kind::sigmoid : op_kind::tanh, p, a);
        }
        if (o == "transpose") {
            want(t, 0, 1);
            p[sp::transpose_p::perm] = sp::pack_perm({1, 0});
            return op(op_kind::transpose, p, a);
        }
        if (o == "conv2d") {  // stride_h, stride_w, padding, activation, input, weight
            want(t, 4, 2);
            p[sp::conv2d_p::stride_h] = t.ints[0];
            p[sp::conv2d_p::stride_w] = t.ints[1];
            p[sp::conv2d_p::pad] = pad_of(t.ints[2]);
            p[sp::conv2d_p::act] = act_of(t.ints[3]);
            p[sp::conv2d_p::dil_h] = p[sp::conv2d_p::dil_w] = 1;
            return op(op_kind::conv2d, p, a);
        }
        if (o == "pool2d_avg" || o == "pool2d_max") {  // kernel h, w, stride h, w, padding, input
            want(t, 5, 1);
            p[sp::pool_p::kh] = t.ints[0];
            p[sp::pool_p::kw] = t.ints[1];
            p[sp::pool_p::stride_h] = t.ints[2];
            p[sp::pool_p::stride_w] = t.ints[3];
            p[sp::pool_p::pad] = pad_of(t.ints[4]);
            p[sp::pool_p::act] = static_cast<std::int32_t>(sp::activation::none);
            return op(o == "pool2d_avg" ? op_kind::avgpool : op_kind::maxpool, p, a);
        }
        if (o == "concat") {  // axis, a, b
            want(t, 1, 2);
            p[sp::concat_p::axis] = t.ints[0];
            return op(op_kind::concat, p, a);
        }
        if (o == "split_0" || o == "split_1") {
            // TASO splits at the point its tensors' split history records
            // (SplitInfo, carried through operators from the concat that made it).
            want(t, 1, 1);
            auto at = split_point(a[0], t.ints[0]);
            if (!at) throw error("split of a tensor with no concat on its axis in its history (TASO's split point is unknown)");
            p[sp::split_p::axis] = t.ints[0];
            p[sp::split_p::at] = *at;
            return op(op_kind::split, p, a, o == "split_0" ? 0 : 1);
        }
        if (o == "enlarge") {  // kernel h, w, weight
            want(t, 2, 1);
            p[sp::enlarge_p::kh] = t.ints[0];
            p[sp::enlarge_p::kw] = t.ints[1];
            return op(op_kind::enlarge, p, a);
        }
        // TASO's constants take the extents of its generator's tensors
        // (ConstantIConvTemp(w4), ConstantPoolTemp(w13), ConstantIMMTemp(w1),
        // ConstantOneTemp(i1)).
        if (o == "const_iconv") {
            want(t, 2, 0);
            if (t.ints[0] != t.ints[1]) throw error("const_iconv with a non-square kernel");
            p[sp::iconv_p::co] = p[sp::iconv_p::ci] = 4;
            p[sp::iconv_p::k] = t.ints[0];
            return op(op_kind::iconv, p, {});
        }
        if (o == "const_pool") {
            want(t, 2, 0);
            p[sp::cpool_p::c] = 4;
            p[sp::cpool_p::kh] = t.ints[0];
            p[sp::cpool_p::kw] = t.ints[1];
            return op(op_kind::cpool, p, {});
        }
        if (o == "const_imm") {
            want(t, 0, 0);
            p[sp::imatmul_p::n] = 4;
            return op(op_kind::imatmul, p, {});
        }
        if (o == "const_one") {
            want(t, 0, 0);
            p[sp::iewmul_p::rank] = 4;
            const std::int32_t d[] = {2, 4, 5, 5};
            for (int i = 0; i < 4; ++i) p[sp::iewmul_p::d0 + i] = d[i];
            return op(op_kind::iewmul, p, {});
        }
        if (o.empty()) throw error("an operator without a name in the file");
        throw error("operator '" + o + "' has no tsopt counterpart here");
    }

    // Where TASO's generator would split v along `axis`: the extent of the
    // first operand of the concat on that axis that v's values come from,
    // followed through the operators as its SplitInfo is (generator.cc's
    // compute functions: element-wise operators keep it, matmul takes rows
    // from its left and columns from its right operand, conv2d the batch
    // from its input and the channels from its kernel's outputs, transpose
    // swaps the two).
    std::optional<std::int32_t> split_point(value v, int axis) const {
        const node& n = g_.at(v);
        if (n.kind != node_kind::op) return std::nullopt;
        auto from = [&](std::size_t i, int ax) { return split_point(n.inputs[i], ax); };
        switch (n.op) {
            case op_kind::concat:
                if (n.params[sp::concat_p::axis] == axis) return static_cast<std::int32_t>(g_.shape_of(n.inputs[0])[axis]);
                return from(0, axis);
            case op_kind::ewadd:
            case op_kind::ewmul:
                if (auto s = from(0, axis)) return s;
                return from(1, axis);
            case op_kind::relu:
            case op_kind::sigmoid:
            case op_kind::tanh:
            case op_kind::smul: return from(0, axis);
            case op_kind::avgpool:
            case op_kind::maxpool:
            case op_kind::enlarge: return axis <= 1 ? from(0, axis) : std::nullopt;
            case op_kind::matmul: return axis == 0 ? from(0, 0) : axis == 1 ? from(1, 1) : std::nullopt;
            case op_kind::conv2d: return axis == 0 ? from(0, 0) : axis == 1 ? from(1, 0) : std::nullopt;
            case op_kind::transpose: return axis <= 1 ? from(0, 1 - axis) : std::nullopt;
            default: return std::nullopt;
        }
    }

    graph& g_;
    const std::map<int, int>& rename_;
    std::map<std::string, value> memo_;
};

// One TASO rule: a single equation, or (TASO's multi-output rules) two
// equations whose right sides are the two halves of one split, built as one
// graph with two outputs per side.
struct taso_rule {
    std::vector<term> lhs, rhs;
};

// Both sides on their own graphs; nullopt with `why` when tsopt rejects them.
struct built {
    graph lhs, rhs;
};
std::optional<built> build_equation(const taso_rule& t, const std::map<int, int>& rename, std::string& why) {
    try {
        built b;
        for (auto [side, g] : {std::pair{&t.lhs, &b.lhs}, std::pair{&t.rhs, &b.rhs}}) {
            builder bl(*g, rename);
            for (const term& out : *side) g->mark_output(bl.build(out));
            g->validate();
        }
        for (std::size_t i = 0; i < b.lhs.outputs.size(); ++i)
            if (!(b.lhs.shape_of(b.lhs.outputs[i]) == b.rhs.shape_of(b.rhs.outputs[i]))) {
                why = "the two sides have different shapes in tsopt";
                return std::nullopt;
            }
        return b;
    } catch (const error& e) {
        why = e.what();
        return std::nullopt;
    }
}

void inputs_of(const term& t, std::set<int>& out) {
    if (int k = input_number(t.op); k > 0) out.insert(k);
    for (const term& c : t.args) inputs_of(c, out);
}
void ops_of(const term& t, std::set<std::string>& out) {
    if (input_number(t.op) < 0) out.insert(t.op);
    for (const term& c : t.args) ops_of(c, out);
}

// Every renaming of the inputs an equation reads onto the first inputs of
// their class, in every order.
std::vector<std::map<int, int>> renamings(const std::set<int>& used) {
    std::map<int, std::vector<int>> by_class;
    for (int k : used) {
        auto in = taso_input_of(k);
        by_class[in ? in->cls : -1].push_back(k);
    }
    std::vector<std::map<int, int>> out{{}};
    for (auto& [cls, ks] : by_class) {
        if (cls < 0) continue;
        std::vector<int> targets;
        for (std::size_t i = 0; i < ks.size(); ++i) targets.push_back(class_first[cls] + static_cast<int>(i));
        std::vector<std::map<int, int>> next;
        std::sort(targets.begin(), targets.end());
        do {
            for (const auto& m : out) {
                auto m2 = m;
                for (std::size_t i = 0; i < ks.size(); ++i) m2[ks[i]] = targets[i];
                next.push_back(std::move(m2));
            }
        } while (std::next_permutation(targets.begin(), targets.end()));
        out = std::move(next);
    }
    return out;
}

// Whether both sides compute the same on random inputs (tsopt's reference
// semantics, relative error 1e-4): a TASO rule that holds only in TASO's
// verification model (its relu is x(x+1)+1 there) or a mistaken reading of
// the file would show here.
bool agrees_numerically(const graph& l, const graph& r) {
    std::mt19937_64 rng(1);
    std::map<std::string, tensor<float>> by_name;
    auto inputs_for = [&](const graph& g) {
        std::vector<tensor<float>> in;
        for (value v : g.inputs()) {
            const node& n = g.at(v);
            auto it = by_name.find(n.name);
            if (it == by_name.end()) it = by_name.emplace(n.name, random_float(g.shape_of(v), rng)).first;
            in.push_back(it->second);
        }
        return in;
    };
    backend::reference ref;
    auto a = ref.execute(l, inputs_for(l)), b = ref.execute(r, inputs_for(r));
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (!(a[i].shape == b[i].shape) || relative_error(a[i], b[i]) > 1e-4) return false;
    return true;
}

class joiner {
public:
    explicit joiner(std::span<const rewrite::rule> rules) : rules_(rules), index_(rules) {}

    // Graphs one rewrite away, by structural hash.
    std::vector<graph> step(const graph& g) {
        std::vector<graph> out;
        rewrite::graph_index ix(g);
        index_.for_each_candidate(ix, [&](std::size_t ri, std::span<const std::int32_t> anchors) {
            const rewrite::rule& r = rules_[ri];
            for (const auto& m : rewrite::find_matches(ix, r, std::numeric_limits<std::size_t>::max(), anchors, index_.plan(ri)))
                if (auto ng = rewrite::apply(ix, r, m)) out.push_back(std::move(*ng));
            return true;
        });
        return out;
    }

    // Whether one rule application turns one side into the other (direct),
    // whether two in sequence do (two_in_sequence: a rule of the set
    // composed with one more rewrite), and the smallest d <= max_depth at
    // which the sides meet with at most d rewrites each.
    struct verdict {
        bool direct = false, two_in_sequence = false;
        int depth = -1;  // -1: not joined within max_depth
    };
    verdict join(const graph& l, const graph& r, int max_depth) {
        verdict v;
        const std::uint64_t hl = l.structural_hash(), hr = r.structural_hash();
        std::unordered_set<std::uint64_t> from_l{hl}, from_r{hr};
        std::vector<graph> fl{l}, fr{r};
        for (int d = 1; d <= std::max(max_depth, 2); ++d) {
            expand(fl, from_l);
            expand(fr, from_r);
            const bool across = from_l.count(hr) || from_r.count(hl);
            if (d == 1) v.direct = across;
            if (d <= 2) v.two_in_sequence |= across;
            if (v.depth < 0 && d <= max_depth)
                for (auto h : from_r)
                    if (from_l.count(h)) {
                        v.depth = d;
                        break;
                    }
            if ((v.depth > 0 && d >= 2) || (fl.empty() && fr.empty())) break;
        }
        return v;
    }

private:
    void expand(std::vector<graph>& frontier, std::unordered_set<std::uint64_t>& seen) {
        std::vector<graph> next;
        for (const graph& g : frontier)
            for (graph& ng : step(g))
                if (seen.insert(ng.structural_hash()).second) next.push_back(std::move(ng));
        frontier = std::move(next);
    }
    std::span<const rewrite::rule> rules_;
    rewrite::rule_index index_;
};

std::string text_of(const term& t) {
    if (t.ints.empty() && t.args.empty() && input_number(t.op) > 0) return t.op;
    std::string s = t.op + "(";
    bool first = true;
    for (auto v : t.ints) s += (first ? "" : ",") + std::to_string(v), first = false;
    for (const term& c : t.args) s += (first ? "" : ",") + text_of(c), first = false;
    return s + ")";
}

std::string text_of(const taso_rule& r) {
    auto side = [](const std::vector<term>& ts) {
        std::string s;
        for (const term& t : ts) s += (s.empty() ? "" : " ; ") + text_of(t);
        return s;
    };
    return side(r.lhs) + " == " + side(r.rhs);
}

// The multi-output file's spelling (Tensat's multi_rules.txt) in the
// single-output file's: matmul's activation as a leading parameter, concat's
// rank after its axis, split_K(split(axis, x)).
term normalized(term t) {
    for (term& c : t.args) c = normalized(std::move(c));
    if ((t.op == "split_0" || t.op == "split_1") && t.ints.empty() && t.args.size() == 1 && t.args[0].op == "split") {
        term inner = std::move(t.args[0]);
        t.ints = inner.ints;
        t.args = std::move(inner.args);
    }
    if (t.op == "matmul" && t.ints.size() == 1) {
        if (t.ints[0] != 0) throw error("TASO rules: matmul with a fused activation is not read here");
        t.ints.clear();
    }
    if (t.op == "concat" && t.ints.size() == 2) t.ints.pop_back();  // the rank, which the operands give
    return t;
}

std::vector<std::pair<term, term>> read_equations(const std::string& path) {
    std::ifstream f(path);
    if (!f) throw error("cannot read " + path);
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string text = ss.str();
    // Tensat's S-expression files (converted*.txt) are another spelling.
    if (text.find("=>") != std::string::npos && text.find("==") == std::string::npos)
        throw error(path + ": an S-expression rule file; pass taso_rules.txt / multi_rules.txt (equations with '==')");
    parser p(text);
    std::vector<std::pair<term, term>> eqs;
    while (!p.done()) {
        auto [l, r] = p.equation();
        eqs.emplace_back(normalized(std::move(l)), normalized(std::move(r)));
    }
    return eqs;
}

int run(int argc, char** argv) {
    std::string taso_path, multi_path;
    std::vector<std::string> listings;
    bool with_default = false;
    int depth = 2;
    std::size_t show_missing = 20;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) throw error(a + " needs a value");
            return argv[++i];
        };
        if (a == "--rules") listings.push_back(next());
        else if (a == "--with-default") with_default = true;
        else if (a == "--multi") multi_path = next();
        else if (a == "--depth") depth = std::stoi(next());
        else if (a == "--missing") show_missing = static_cast<std::size_t>(std::stoul(next()));
        else if (a == "-h" || a == "--help") {
            std::cout << "usage: taso_rule_coverage TASO_RULES.txt [--multi MULTI_RULES.txt] [--rules LISTING]... [--with-default]"
                         " [--depth K] [--missing N]\n";
            return 0;
        } else if (a.starts_with("-")) throw error("unknown option " + a);
        else taso_path = a;
    }
    if (taso_path.empty()) throw error("no TASO rules file given (Tensat's taso_rules.txt; see the comment at the top)");
    if (depth < 1) throw error("--depth must be at least 1");

    // The built-in default set, or the union of the listings given (with
    // the default set too under --with-default), each rule text once.
    std::vector<std::unique_ptr<rules::loaded_rules>> loaded;
    std::vector<rewrite::rule> rules;
    std::set<std::string_view> texts;
    std::string set_name;
    auto add = [&](std::span<const rewrite::rule> rs, const std::string& name) {
        for (const auto& r : rs)
            if (texts.insert(r.text).second) rules.push_back(r);
        set_name += (set_name.empty() ? "" : " + ") + name;
    };
    if (listings.empty() || with_default) add(rules::default_rules(), "the built-in default set");
    for (const auto& path : listings) {
        loaded.push_back(std::make_unique<rules::loaded_rules>(rules::load_listing(path)));
        add(loaded.back()->rules(), path);
    }
    std::cout << "tsopt rules: " << set_name << " (" << rules.size() << " rules)\n";

    std::vector<taso_rule> eqs;
    for (auto& [l, r] : read_equations(taso_path)) eqs.push_back({{std::move(l)}, {std::move(r)}});
    std::cout << "TASO equations: " << eqs.size() << " in " << taso_path << "\n";
    if (!multi_path.empty()) {
        // Consecutive equations whose right sides are split_0(X) and
        // split_1(X) of one X are one two-output rule.
        auto m = read_equations(multi_path);
        std::size_t pairs = 0, singles = 0;
        for (std::size_t i = 0; i < m.size(); ++i) {
            const bool paired = i + 1 < m.size() && m[i].second.op == "split_0" && m[i + 1].second.op == "split_1" &&
                                m[i].second.ints == m[i + 1].second.ints &&
                                text_of(m[i].second.args.at(0)) == text_of(m[i + 1].second.args.at(0));
            if (paired) {
                eqs.push_back({{m[i].first, m[i + 1].first}, {m[i].second, m[i + 1].second}});
                ++pairs, ++i;
            } else {
                eqs.push_back({{m[i].first}, {m[i].second}});
                ++singles;
            }
        }
        std::cout << "TASO multi-output file " << multi_path << ": " << pairs << " two-output rules, " << singles
                  << " single equations\n";
    }

    // Classes up to renaming and direction, keyed by the least hash pair,
    // each represented by its first equation.
    std::map<std::pair<std::uint64_t, std::uint64_t>, std::size_t> classes;
    std::map<std::string, std::size_t> not_built;  // reason -> equations
    std::size_t unbuilt_eqs = 0, trivial = 0;
    for (std::size_t e = 0; e < eqs.size(); ++e) {
        std::set<int> used;
        for (const auto* side : {&eqs[e].lhs, &eqs[e].rhs})
            for (const term& t : *side) inputs_of(t, used);
        std::optional<std::pair<std::uint64_t, std::uint64_t>> key;
        std::string why;
        for (const auto& m : renamings(used)) {
            auto b = build_equation(eqs[e], m, why);
            if (!b) break;
            std::pair<std::uint64_t, std::uint64_t> k{b->lhs.structural_hash(), b->rhs.structural_hash()};
            if (k.second < k.first) std::swap(k.first, k.second);
            if (!key || k < *key) key = k;
        }
        if (!key) {
            ++unbuilt_eqs;
            ++not_built[why];
            continue;
        }
        if (key->first == key->second) {
            ++trivial;  // equal graphs in tsopt (commutative operands)
            continue;
        }
        classes.try_emplace(*key, e);
    }
    std::cout << "distinct up to renaming and direction: " << classes.size() << " (plus " << trivial
              << " equations whose two sides are one graph in tsopt, commutative operands; " << unbuilt_eqs
              << " equations tsopt does not build)\n";
    for (auto& [why, n] : not_built) std::cout << "  not built (" << n << "): " << why << "\n";

    std::cout.flush();  // the progress line goes to stderr
    joiner j{std::span<const rewrite::rule>(rules)};
    std::size_t direct = 0, two_in_sequence = 0, done = 0;
    std::vector<std::size_t> at_depth(static_cast<std::size_t>(depth) + 1, 0);
    std::vector<std::size_t> missing, false_here;
    std::map<std::string, std::pair<std::size_t, std::size_t>> by_ops;  // operators -> joined, classes
    const auto t0 = std::chrono::steady_clock::now();
    for (auto& [key, e] : classes) {
        std::string why;
        auto b = build_equation(eqs[e], {}, why);
        if (!b) throw error("internal: equation " + std::to_string(e) + " built under a renaming but not as written: " + why);
        std::set<std::string> ops;
        for (const auto* side : {&eqs[e].lhs, &eqs[e].rhs})
            for (const term& t : *side) ops_of(t, ops);
        if (eqs[e].lhs.size() > 1) ops.insert("(two outputs)");
        std::string family;
        for (auto& o : ops) family += (family.empty() ? "" : "+") + o;
        if (!agrees_numerically(b->lhs, b->rhs)) {
            false_here.push_back(e);
            continue;
        }
        auto v = j.join(b->lhs, b->rhs, depth);
        direct += v.direct;
        two_in_sequence += v.two_in_sequence;
        if (v.depth > 0) ++at_depth[static_cast<std::size_t>(v.depth)];
        else missing.push_back(e);
        auto& fam = by_ops[family];
        fam.first += v.depth == 1 ? 1 : 0;
        ++fam.second;
        if (++done % 25 == 0 || done == classes.size())
            std::fprintf(stderr, "\r  checked %zu / %zu classes (%.1f s)", done, classes.size(),
                         std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::fprintf(stderr, "\n");
    if (!false_here.empty()) {
        std::cout << "\n" << false_here.size() << " of the " << classes.size()
                  << " classes compute different values on random inputs in tsopt's semantics (left out below):\n";
        for (std::size_t e : false_here) std::cout << "  " << text_of(eqs[e]) << "\n";
    }
    const std::size_t checked = classes.size() - false_here.size();
    const double n = static_cast<double>(checked);
    auto pct = [&](std::size_t x) { return n > 0 ? 100.0 * static_cast<double>(x) / n : 0.0; };
    std::cout << "\nof " << checked << " distinct TASO rules tsopt builds and finds true:\n";
    std::printf("  in the set (one rule application, either direction): %zu (%.1f %%)\n", direct, pct(direct));
    std::printf("  one rule of the set and one more rewrite, in sequence: %zu (%.1f %%)\n", two_in_sequence, pct(two_in_sequence));
    std::size_t cumulative = 0;
    for (int d = 1; d <= depth; ++d) {
        cumulative += at_depth[static_cast<std::size_t>(d)];
        std::printf("  joined within %d rewrite%s per side: %zu (%.1f %%)\n", d, d == 1 ? "" : "s", cumulative, pct(cumulative));
    }
    std::printf("  not joined within %d: %zu\n", depth, missing.size());
    std::cout << "\nby operators (joined within 1 rewrite per side / classes):\n";
    for (auto& [fam, c] : by_ops) std::printf("  %-48s %zu / %zu\n", fam.c_str(), c.first, c.second);
    if (!missing.empty() && show_missing > 0) {
        std::cout << "\nnot joined (first " << std::min(show_missing, missing.size()) << "):\n";
        for (std::size_t i = 0; i < missing.size() && i < show_missing; ++i)
            std::cout << "  " << text_of(eqs[missing[i]]) << "\n";
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        std::cerr << "taso_rule_coverage: " << e.what() << "\n";
        return 2;
    }
}
