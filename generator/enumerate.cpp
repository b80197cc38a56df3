// Depth-first enumeration of operator graphs with incremental evaluation in
// the modp number system (TASO's Algorithm 1, lines 1-11).
//
// Each DFS node adds one operator, evaluates it once on the fixed random
// inputs, and records the graph with its fingerprint. Two rules keep the
// enumeration small without losing graphs:
//  - no duplicated computation: an operator structurally identical to one
//    already present (same kind, parameters, inputs) is never added;
//  - canonical order: an operator that does not depend on the previous one
//    must have a larger structural hash. The topological order that always
//    picks the ready operator of smallest hash satisfies this, so every graph
//    is still reached; most of its other orders are not.
#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <unordered_map>

#include "gen.hpp"
#include "tsopt/core/hash.hpp"

namespace tsopt::gen {

std::vector<input_decl> default_inputs() {
    return {
        {"x", shape{1, 4, 6, 8}, role::act},    {"y", shape{1, 4, 6, 8}, role::act},
        {"w", shape{4, 4, 3, 3}, role::weight}, {"v", shape{4, 4, 3, 3}, role::weight},
        {"u", shape{4, 4, 1, 1}, role::weight}, {"a", shape{4, 4}, role::matrix},
        {"b", shape{4, 4}, role::matrix},       {"c", shape{4, 4}, role::matrix},
        {"s", shape{1}, role::scalar},
    };
}

std::vector<input_decl> second_shapes(std::span<const input_decl> in) {
    std::vector<input_decl> out(in.begin(), in.end());
    for (auto& d : out) {
        auto& s = d.s;
        switch (d.r) {
            case role::act:
                if (s.rank == 4) s = shape{s[0], std::max<std::int64_t>(1, s[1] - 1), s[2] + 1, s[3] + 1};
                break;
            case role::weight:
                if (s.rank == 4) s = shape{std::max<std::int64_t>(1, s[0] - 1), std::max<std::int64_t>(1, s[1] - 1), s[2] + 2, s[3] + 2};
                break;
            case role::matrix:
                if (s.rank == 2) s = shape{s[0] + 1, s[1] + 1};
                break;
            case role::scalar: break;
        }
    }
    return out;
}

spec::op_params params_for_shapes(const gop& op, const spec::op_params& p0, std::span<const shape> sh) {
    using spec::op_kind;
    auto p = p0;
    auto dim = [&](int tie, int d) { return static_cast<std::int32_t>(sh[static_cast<std::size_t>(op.tie[tie])][d]); };
    switch (op.kind) {
        case op_kind::split:
            if (op.tie[0] != no_tensor) p[spec::split_p::at] = dim(0, op.tie_dim[0]);
            break;
        case op_kind::enlarge:
            if (op.tie[0] != no_tensor) { p[spec::enlarge_p::kh] = dim(0, 2); p[spec::enlarge_p::kw] = dim(0, 3); }
            break;
        case op_kind::cpool:
            if (op.tie[0] != no_tensor) p[spec::cpool_p::c] = dim(0, 1);
            break;
        case op_kind::iconv:
            if (op.tie[0] != no_tensor) p[spec::iconv_p::co] = p[spec::iconv_p::ci] = dim(0, 1);
            if (op.tie[1] != no_tensor) p[spec::iconv_p::k] = dim(1, 2);
            break;
        case op_kind::imatmul:
            if (op.tie[0] != no_tensor) p[spec::imatmul_p::n] = dim(0, op.tie_dim[0]);
            break;
        case op_kind::iewmul:
            if (op.tie[0] != no_tensor)
                for (int i = 0; i < p[spec::iewmul_p::rank]; ++i) p[spec::iewmul_p::d0 + i] = dim(0, i);
            break;
        default: break;
    }
    return p;
}

// ---------------------------------------------------------------- params
namespace {
struct params_hash {
    std::size_t operator()(const spec::op_params& p) const {
        hashing::fnv1a h;
        for (auto v : p.v) h.number(v);
        return h.value;
    }
};
std::shared_mutex intern_mutex;
std::deque<spec::op_params>& param_store() {
    static std::deque<spec::op_params> s;  // stable element addresses
    return s;
}
std::unordered_map<spec::op_params, std::uint16_t, params_hash>& param_index() {
    static std::unordered_map<spec::op_params, std::uint16_t, params_hash> m;
    return m;
}
}  // namespace

const spec::op_params& param_values(std::uint16_t id) {
    std::shared_lock lk(intern_mutex);
    return param_store()[id];
}
std::uint16_t intern_params(const spec::op_params& p) {
    thread_local std::unordered_map<spec::op_params, std::uint16_t, params_hash> cache;
    if (auto it = cache.find(p); it != cache.end()) return it->second;
    std::unique_lock lk(intern_mutex);
    auto& m = param_index();
    auto it = m.find(p);
    std::uint16_t id;
    if (it != m.end()) id = it->second;
    else {
        if (param_store().size() >= 0xffff) throw error("generator: more than 65535 distinct parameter sets");
        id = static_cast<std::uint16_t>(param_store().size());
        param_store().push_back(p);
        m.emplace(p, id);
    }
    cache.emplace(p, id);
    return id;
}

// ---------------------------------------------------------------- hashing
namespace {
using hashing::mix64;
// The fingerprint's own combine step, kept with its constants although
// core/hash.hpp has one: bucket fingerprints order the candidates, and the
// order decides which representative of a class is verified first and what
// is derived from it. With hashing::combine here (and in candidates.cpp's
// shape combination) the build's N=3 set had 465 rules and 15 unknowns
// instead of 463 and 14, and lost the convolution shared-operand fusion
// without activation (docs/generator.md, "One hash").
constexpr std::uint64_t combine(std::uint64_t h, std::uint64_t v) { return mix64(h ^ (v + 0x632be59bd9b4e019ull + (h << 6))); }
std::uint64_t input_shash(int i) { return mix64(0xabcdef12345ull + static_cast<std::uint64_t>(i)); }

std::uint64_t op_shash(const gop& op, const spec::op_params& pv, std::span<const std::uint64_t> tensor_shash) {
    std::uint64_t h = mix64(static_cast<std::uint64_t>(op.kind) + 1);
    for (auto v : pv.v) h = combine(h, static_cast<std::uint32_t>(v));
    for (int i = 0; i < op.nin; ++i) h = combine(h, tensor_shash[op.in[i]]);
    for (int i = 0; i < 2; ++i)
        if (op.tie[i] != no_tensor) h = combine(combine(h, tensor_shash[op.tie[i]]), op.tie_dim[i]);
    return h;
}
}  // namespace

std::uint64_t tensor_hash(const tensor<modp>& t) {
    std::uint64_t h = mix64(static_cast<std::uint64_t>(t.shape.rank));
    for (int i = 0; i < t.shape.rank; ++i) h = combine(h, static_cast<std::uint64_t>(t.shape[i]));
    // Two lanes keep the inner loop cheap (an FNV-1a step per element and a
    // position-weighted sum); combined at the end. Seeds as combine's above.
    std::uint64_t a = 0x243f6a8885a308d3ull, b = 0x13198a2e03707344ull;
    for (std::size_t i = 0; i < t.data.size(); ++i) {
        a = (a ^ t.data[i].v) * hashing::fnv_prime;
        b = (b + t.data[i].v) * 0xff51afd7ed558ccdull + i;
    }
    return combine(combine(h, a), b);
}

std::uint64_t fingerprint(std::span<const std::uint64_t> output_hashes) {
    std::uint64_t f = 0x5eed;
    for (auto h : output_hashes) f += mix64(h);  // symmetric: independent of output order
    return mix64(f);
}

const std::vector<tensor<modp>>& fingerprint_inputs(const options& o, bool second) {
    static std::mutex m;
    static std::deque<std::pair<std::uint64_t, std::vector<tensor<modp>>>> cache;  // stable addresses
    std::lock_guard lk(m);
    auto ins = second ? second_shapes(o.inputs) : o.inputs;
    std::uint64_t seed = second ? o.seed ^ 0x2d5a9e1f3b7c4d61ull : o.seed;
    std::uint64_t key = seed;
    for (auto& in : ins) key = combine(key, hashing::fnv1a_of(in.name + in.s.str()));
    for (auto& [k, v] : cache)
        if (k == key) return v;
    std::mt19937_64 rng(seed);
    std::vector<tensor<modp>> v;
    for (auto& in : ins) v.push_back(random_modp(in.s, rng));
    cache.emplace_back(key, std::move(v));
    return cache.back().second;
}

// ---------------------------------------------------------------- state
bool representative_value(std::string_view param, std::int32_t v) {
    if (param.starts_with("stride")) return v == 1;
    if (param == "pad") return v == static_cast<std::int32_t>(spec::pad_mode::same);
    if (param == "axis") return v <= 1;
    return true;
}

namespace {

struct boundary {
    std::uint8_t axis, ref, ref_dim;
};

// Cartesian product of the parameter domains (fallback where a parameter is
// not enumerated). Windows are enumerated square: a parameter named *_w
// takes the value of its *_h twin (kh/kw too), which keeps stride and kernel
// combinations models use and divides the enumeration by 4 per operator.
std::vector<spec::op_params> domain_combos(const spec::op_decl& d, bool representative) {
    auto enumerated = [&](std::string_view n, std::int32_t v) { return !representative || representative_value(n, v); };
    auto twin = [&](int i) {
        std::string_view n = d.params[static_cast<std::size_t>(i)].name;
        std::string h;
        if (n == "kw") h = "kh";
        else if (n.size() > 2 && n.substr(n.size() - 2) == "_w") h = std::string(n.substr(0, n.size() - 2)) + "_h";
        else return -1;
        return d.param_index(h);
    };
    std::vector<spec::op_params> out{spec::op_params{}};
    for (int i = 0; i < d.num_params; ++i) {
        const auto& pd = d.params[static_cast<std::size_t>(i)];
        std::vector<spec::op_params> next;
        int tw = twin(i);
        for (auto& p : out) {
            if (tw >= 0 && tw < i) {
                auto q = p;
                q[i] = p[tw];
                next.push_back(q);
            } else if (pd.domain.empty()) {
                auto q = p;
                q[i] = pd.fallback;
                next.push_back(q);
            } else
                for (auto v : pd.domain) {
                    if (!enumerated(pd.name, v)) continue;
                    auto q = p;
                    q[i] = v;
                    next.push_back(q);
                }
        }
        out = std::move(next);
    }
    return out;
}

struct choice {
    gop op;
    spec::op_params p;
};

struct state {
    const options* o = nullptr;
    int I = 0;
    std::vector<shape> shapes;
    std::vector<role> roles;
    std::vector<tensor<modp>> vals;
    bool two = false;                   // second shape configuration
    std::vector<shape> shapes2;
    std::vector<tensor<modp>> vals2;
    std::vector<std::uint64_t> sh, vh;  // structural / value hash per tensor
    std::vector<std::vector<boundary>> bnd;
    std::vector<int> uses;
    std::vector<int> producer;
    std::vector<std::uint64_t> ancestors;  // per tensor: bitmask of the tensors it is computed from
    std::vector<gop> ops;
    std::vector<std::uint64_t> ops_sh;
    std::vector<int> first_out;
    int unconsumed = 0;  // op outputs not consumed
    std::array<std::vector<spec::op_params>, spec::max_op_kinds> combos;

    explicit state(const options& opt) : o(&opt), I(static_cast<int>(opt.inputs.size())) {
        const auto& fi = fingerprint_inputs(opt);
        two = opt.two_shapes;
        const auto* fi2 = two ? &fingerprint_inputs(opt, true) : nullptr;
        for (int i = 0; i < I; ++i) {
            shapes.push_back(opt.inputs[i].s);
            roles.push_back(opt.inputs[i].r);
            vals.push_back(fi[i]);
            sh.push_back(input_shash(i));
            vh.push_back(tensor_hash(fi[i]));
            if (two) {
                shapes2.push_back((*fi2)[i].shape);
                vals2.push_back((*fi2)[i]);
                vh.back() = combine(vh.back(), tensor_hash((*fi2)[i]));
            }
            bnd.emplace_back();
            uses.push_back(0);
            producer.push_back(-1);
            ancestors.push_back(0);
        }
        for (auto k : opt.ops) combos[static_cast<std::size_t>(k)] = domain_combos(spec::decl(k), opt.representative_params);
    }
    int num_tensors() const { return static_cast<int>(shapes.size()); }

    // An input satisfying `pred`, preferring one the graph already reads.
    template <class P>
    int pick_input(P pred) const {
        int first = -1;
        for (int i = 0; i < I; ++i)
            if (pred(i)) {
                if (uses[i] > 0) return i;
                if (first < 0) first = i;
            }
        return first;
    }

    void candidates(std::vector<choice>& out) const {
        using spec::op_kind;
        const int T = num_tensors();
        auto add = [&](op_kind k, std::initializer_list<int> in, const spec::op_params& p, int t0 = no_tensor,
                       int d0 = 0, int t1 = no_tensor, int d1 = 0) {
            choice c;
            c.op.kind = k;
            c.op.nin = static_cast<std::uint8_t>(in.size());
            int j = 0;
            for (int t : in) c.op.in[j++] = static_cast<std::uint8_t>(t);
            c.op.tie = {static_cast<std::uint8_t>(t0), static_cast<std::uint8_t>(t1)};
            c.op.tie_dim = {static_cast<std::uint8_t>(d0), static_cast<std::uint8_t>(d1)};
            c.p = p;
            out.push_back(c);
        };
        const bool distinct = o->distinct_operands;
        for (auto k : o->ops) {
            const auto& cs = combos[static_cast<std::size_t>(k)];
            switch (k) {
                case op_kind::ewadd:
                case op_kind::ewmul:
                    for (int a = 0; a < T; ++a)
                        for (int b = 0; b < T; ++b)
                            if (roles[a] == roles[b] && roles[a] != role::scalar && shapes[a] == shapes[b] && !(distinct && a == b))
                                add(k, {a, b}, cs[0]);
                    break;
                case op_kind::smul:
                    for (int a = 0; a < T; ++a)
                        for (int b = 0; b < T; ++b)
                            if (roles[a] != role::scalar && roles[b] == role::scalar) add(k, {a, b}, cs[0]);
                    break;
                case op_kind::transpose:
                case op_kind::relu:
                    for (int a = 0; a < T; ++a)
                        if (roles[a] == role::matrix || (k == op_kind::relu && roles[a] == role::act))
                            for (auto& p : cs) add(k, {a}, p);
                    break;
                case op_kind::matmul:
                    for (int a = 0; a < T; ++a)
                        for (int b = 0; b < T; ++b)
                            if (roles[a] == role::matrix && roles[b] == role::matrix && !(distinct && a == b))
                                for (auto& p : cs) add(k, {a, b}, p);
                    break;
                case op_kind::conv2d:
                    for (int a = 0; a < T; ++a)
                        for (int b = 0; b < T; ++b)
                            if (roles[a] == role::act && roles[b] == role::weight)
                                for (auto& p : cs) add(k, {a, b}, p);
                    break;
                case op_kind::avgpool:
                case op_kind::maxpool:
                    for (int a = 0; a < T; ++a)
                        if (roles[a] == role::act)
                            for (auto& p : cs) add(k, {a}, p);
                    break;
                case op_kind::concat:
                    for (int a = 0; a < T; ++a)
                        for (int b = 0; b < T; ++b)
                            if (roles[a] == roles[b] && roles[a] != role::scalar && !(distinct && a == b))
                                for (auto& p : cs)
                                    if (p[spec::concat_p::axis] < shapes[a].rank) add(k, {a, b}, p);
                    break;
                case op_kind::split:
                    for (int a = 0; a < T; ++a)
                        for (std::size_t i = 0; i < bnd[a].size(); ++i) {
                            const auto& bd = bnd[a][i];
                            bool seen = false;
                            for (std::size_t j = 0; j < i; ++j)
                                seen |= bnd[a][j].axis == bd.axis &&
                                        shapes[bnd[a][j].ref][bnd[a][j].ref_dim] == shapes[bd.ref][bd.ref_dim];
                            if (seen) continue;
                            spec::op_params p{};
                            p[spec::split_p::axis] = bd.axis;
                            p[spec::split_p::at] = static_cast<std::int32_t>(shapes[bd.ref][bd.ref_dim]);
                            add(k, {a}, p, bd.ref, bd.ref_dim);
                        }
                    break;
                case op_kind::enlarge:
                    // Only weights that are graph inputs are enlarged, to the size
                    // of another kernel input (the tie).
                    for (int a = 0; a < I; ++a)
                        if (roles[a] == role::weight && shapes[a].rank == 4)
                            for (auto& p : cs) {
                                auto kh = p[spec::enlarge_p::kh], kw = p[spec::enlarge_p::kw];
                                if (kh == shapes[a][2] && kw == shapes[a][3]) continue;
                                int t = pick_input([&](int i) {
                                    return roles[i] == role::weight && shapes[i].rank == 4 && shapes[i][2] == kh &&
                                           shapes[i][3] == kw;
                                });
                                if (t >= 0) add(k, {a}, p, t, 2);
                            }
                    break;
                case op_kind::cpool: {
                    // c = channels of an activation; window sizes from the pools' domains.
                    const auto& pd = spec::decl(op_kind::avgpool);
                    std::vector<std::int64_t> seen;
                    for (int t = 0; t < I; ++t) {
                        if (roles[t] != role::act) continue;
                        std::int64_t c = shapes[t][1];
                        if (std::find(seen.begin(), seen.end(), c) != seen.end()) continue;
                        seen.push_back(c);
                        int tt = pick_input([&](int i) { return roles[i] == role::act && shapes[i][1] == c; });
                        for (auto kh : pd.params[spec::pool_p::kh].domain)
                            for (auto kw : pd.params[spec::pool_p::kw].domain) {
                                spec::op_params p{};
                                p[spec::cpool_p::c] = static_cast<std::int32_t>(c);
                                p[spec::cpool_p::kh] = kh;
                                p[spec::cpool_p::kw] = kw;
                                add(k, {}, p, tt, 1);
                            }
                    }
                    break;
                }
                case op_kind::iconv: {
                    std::vector<std::int64_t> cs_seen, ks_seen;
                    for (int t = 0; t < I; ++t) {
                        if (roles[t] != role::act) continue;
                        std::int64_t c = shapes[t][1];
                        if (std::find(cs_seen.begin(), cs_seen.end(), c) != cs_seen.end()) continue;
                        cs_seen.push_back(c);
                        int tt = pick_input([&](int i) { return roles[i] == role::act && shapes[i][1] == c; });
                        ks_seen.clear();
                        for (int w = 0; w < I; ++w) {
                            if (roles[w] != role::weight || shapes[w][2] != shapes[w][3] || shapes[w][2] % 2 == 0) continue;
                            std::int64_t kk = shapes[w][2];
                            if (std::find(ks_seen.begin(), ks_seen.end(), kk) != ks_seen.end()) continue;
                            ks_seen.push_back(kk);
                            int tw = pick_input([&](int i) {
                                return roles[i] == role::weight && shapes[i][2] == kk && shapes[i][3] == kk;
                            });
                            spec::op_params p{};
                            p[spec::iconv_p::co] = p[spec::iconv_p::ci] = static_cast<std::int32_t>(c);
                            p[spec::iconv_p::k] = static_cast<std::int32_t>(kk);
                            add(k, {}, p, tt, 1, tw, 2);
                        }
                    }
                    break;
                }
                case op_kind::imatmul: {
                    std::vector<std::int64_t> seen;
                    for (int t = 0; t < I; ++t)
                        for (int d = 0; d < 2 && roles[t] == role::matrix; ++d) {
                            std::int64_t n = shapes[t][d];
                            if (std::find(seen.begin(), seen.end(), n) != seen.end()) continue;
                            seen.push_back(n);
                            int tt = -1, td = 0;
                            for (int dd = 0; dd < 2 && tt < 0; ++dd) {
                                tt = pick_input([&](int i) { return roles[i] == role::matrix && shapes[i][dd] == n; });
                                td = dd;
                            }
                            spec::op_params p{};
                            p[spec::imatmul_p::n] = static_cast<std::int32_t>(n);
                            add(k, {}, p, tt, td);
                        }
                    break;
                }
                case op_kind::iewmul: {
                    std::vector<shape> seen;
                    for (int t = 0; t < I; ++t) {
                        if (roles[t] == role::scalar) continue;
                        if (std::find(seen.begin(), seen.end(), shapes[t]) != seen.end()) continue;
                        seen.push_back(shapes[t]);
                        int tt = pick_input([&](int i) { return roles[i] == roles[t] && shapes[i] == shapes[t]; });
                        spec::op_params p{};
                        p[spec::iewmul_p::rank] = shapes[t].rank;
                        for (int i = 0; i < shapes[t].rank; ++i) p[spec::iewmul_p::d0 + i] = static_cast<std::int32_t>(shapes[t][i]);
                        add(k, {}, p, tt, 0);
                    }
                    break;
                }
                default:
                    if (spec::is_extension(k)) generic_candidates(k, cs, add);
                    break;  // built-ins not listed: not enumerated
            }
        }
    }

    // An engine's own operator (spec::register_operator): every operand
    // choice that is not a one-element scalar first, with every parameter
    // combination of its domains; its shape rule (push) refuses the rest.
    template <class Add>
    void generic_candidates(spec::op_kind k, const std::vector<spec::op_params>& cs, Add& add) const {
        const int T = num_tensors();
        const int arity = spec::decl(k).min_inputs;
        const bool distinct = o->distinct_operands;
        if (arity == 0)
            for (auto& p : cs) add(k, {}, p);
        else if (arity == 1)
            for (int a = 0; a < T; ++a) {
                if (roles[a] == role::scalar) continue;
                for (auto& p : cs) add(k, {a}, p);
            }
        else if (arity == 2)
            for (int a = 0; a < T; ++a)
                for (int b = 0; b < T; ++b) {
                    if (roles[a] == role::scalar || (distinct && a == b)) continue;
                    for (auto& p : cs) add(k, {a, b}, p);
                }
    }

    role out_role(const gop& op) const {
        using spec::op_kind;
        switch (op.kind) {
            case op_kind::conv2d: return role::act;
            case op_kind::cpool:
            case op_kind::iconv: return role::weight;
            case op_kind::imatmul: return role::matrix;
            case op_kind::iewmul: return roles[op.tie[0]];
            default: return roles[op.in[0]];
        }
    }

    // Boundaries (recorded concat points) of an operator's outputs.
    void out_boundaries(const gop& op, const spec::op_params& p, std::array<std::vector<boundary>, 2>& ob) const {
        using spec::op_kind;
        auto keep_axes = [&](int t, std::initializer_list<int> axes, std::vector<boundary>& o) {
            for (auto& b : bnd[t])
                if (std::find(axes.begin(), axes.end(), b.axis) != axes.end()) o.push_back(b);
        };
        auto at = [&](const boundary& b) { return shapes[b.ref][b.ref_dim]; };
        auto common = [&](int t1, int t2, int skip_axis, std::vector<boundary>& o) {
            for (auto& b : bnd[t1])
                if (b.axis != skip_axis)
                    for (auto& c : bnd[t2])
                        if (c.axis == b.axis && at(c) == at(b)) { o.push_back(b); break; }
        };
        switch (op.kind) {
            case op_kind::relu:
            case op_kind::smul: ob[0] = bnd[op.in[0]]; break;
            case op_kind::avgpool:
            case op_kind::maxpool:
            case op_kind::enlarge: keep_axes(op.in[0], {0, 1}, ob[0]); break;
            case op_kind::transpose:
                if (shapes[op.in[0]].rank == 2)
                    for (auto b : bnd[op.in[0]]) { b.axis = static_cast<std::uint8_t>(1 - b.axis); ob[0].push_back(b); }
                break;
            case op_kind::ewadd:
            case op_kind::ewmul: common(op.in[0], op.in[1], -1, ob[0]); break;
            case op_kind::conv2d:
                keep_axes(op.in[0], {0}, ob[0]);
                for (auto b : bnd[op.in[1]])
                    if (b.axis == 0) { b.axis = 1; ob[0].push_back(b); }
                break;
            case op_kind::matmul:
                keep_axes(op.in[0], {0}, ob[0]);
                for (auto b : bnd[op.in[1]])
                    if (b.axis == 1) ob[0].push_back(b);
                break;
            case op_kind::concat: {
                int ax = p[spec::concat_p::axis];
                for (auto& b : bnd[op.in[0]])
                    if (b.axis == ax) ob[0].push_back(b);
                common(op.in[0], op.in[1], ax, ob[0]);
                ob[0].push_back({static_cast<std::uint8_t>(ax), op.in[0], static_cast<std::uint8_t>(ax)});
                break;
            }
            case op_kind::split: {
                int ax = p[spec::split_p::axis];
                for (auto& b : bnd[op.in[0]]) {
                    if (b.axis != ax) { ob[0].push_back(b); ob[1].push_back(b); }
                    else if (at(b) < p[spec::split_p::at]) ob[0].push_back(b);
                }
                break;
            }
            default:
                // An engine's pointwise unary operator keeps its operand's shape.
                if (spec::is_extension(op.kind) && op.nin == 1 && spec::decl(op.kind).cls == spec::op_class::elementwise)
                    ob[0] = bnd[op.in[0]];
                break;
        }
    }

    // Tries to add the operator; false when shapes/roles/ordering forbid it.
    bool push(const choice& c) {
        const gop& op0 = c.op;
        std::array<shape, spec::max_outputs> outs;
        const auto& d = spec::decl(op0.kind);
        std::array<shape, 2> ins;
        for (int i = 0; i < op0.nin; ++i) ins[i] = shapes[op0.in[i]];
        auto os = std::span<shape>(outs.data(), static_cast<std::size_t>(d.num_outputs));
        if (!spec::infer_shapes(op0.kind, c.p, std::span<const shape>(ins.data(), op0.nin), os).empty()) return false;
        // The second shape configuration: the graph must type-check there too.
        std::array<shape, spec::max_outputs> outs2;
        auto os2 = std::span<shape>(outs2.data(), static_cast<std::size_t>(d.num_outputs));
        spec::op_params p2;
        if (two) {
            p2 = params_for_shapes(op0, c.p, shapes2);
            std::array<shape, 2> ins2;
            for (int i = 0; i < op0.nin; ++i) ins2[i] = shapes2[op0.in[i]];
            if (!spec::infer_shapes(op0.kind, p2, std::span<const shape>(ins2.data(), op0.nin), os2).empty()) return false;
        }
        {
            // Prune subtrees that can never get back to max_outputs outputs:
            // each later operator removes at most one unconsumed tensor.
            int after = unconsumed + d.num_outputs;
            for (int i = 0; i < op0.nin; ++i) {
                bool dup = i == 1 && op0.in[1] == op0.in[0];
                if (!dup && op0.in[i] >= I && uses[op0.in[i]] == 0) --after;
            }
            int left = o->max_ops - static_cast<int>(ops.size()) - 1;
            if (after - left > o->max_outputs) return false;
        }
        gop op = op0;
        op.pidx = intern_params(c.p);
        std::uint64_t h = op_shash(op, c.p, sh);
        for (auto x : ops_sh)
            if (x == h) return false;  // duplicated computation
        if (!ops.empty()) {
            int lo = first_out.back(), hi = num_tensors();
            bool dep = false;
            for (int i = 0; i < op.nin; ++i) dep |= op.in[i] >= lo && op.in[i] < hi;
            for (int i = 0; i < 2; ++i) dep |= op.tie[i] != no_tensor && op.tie[i] >= lo && op.tie[i] < hi;
            if (!dep && !(ops_sh.back() < h)) return false;
        }
        // Evaluate.
        std::array<const tensor<modp>*, 2> ip{};
        for (int i = 0; i < op.nin; ++i) ip[i] = &vals[op.in[i]];
        std::vector<tensor<modp>> res;
        res.reserve(static_cast<std::size_t>(d.num_outputs));
        for (auto& s : os) res.emplace_back(s);
        d.eval_modp(c.p, std::span<const tensor<modp>* const>(ip.data(), op.nin), res);
        std::vector<tensor<modp>> res2;
        if (two) {
            for (int i = 0; i < op.nin; ++i) ip[i] = &vals2[op.in[i]];
            res2.reserve(static_cast<std::size_t>(d.num_outputs));
            for (auto& s : os2) res2.emplace_back(s);
            d.eval_modp(p2, std::span<const tensor<modp>* const>(ip.data(), op.nin), res2);
        }
        std::array<std::vector<boundary>, 2> ob;
        out_boundaries(op, c.p, ob);
        role r = out_role(op);
        std::uint64_t anc = 0;
        for (int i = 0; i < op.nin; ++i) anc |= ancestors[op.in[i]] | (std::uint64_t{1} << op.in[i]);
        std::array<bool, 2> first_use{};
        for (int i = 0; i < op.nin; ++i) {
            first_use[i] = uses[op.in[i]] == 0;
            if (uses[op.in[i]]++ == 0 && op.in[i] >= I) --unconsumed;
        }
        first_out.push_back(num_tensors());
        for (int j = 0; j < d.num_outputs; ++j) {
            shapes.push_back(os[j]);
            roles.push_back(r);
            vh.push_back(tensor_hash(res[j]));
            vals.push_back(std::move(res[j]));
            if (two) {
                vh.back() = combine(vh.back(), tensor_hash(res2[j]));
                shapes2.push_back(os2[j]);
                vals2.push_back(std::move(res2[j]));
            }
            sh.push_back(combine(h, static_cast<std::uint64_t>(j)));
            bnd.push_back(std::move(ob[j]));
            uses.push_back(0);
            producer.push_back(static_cast<int>(ops.size()));
            ancestors.push_back(anc);
            ++unconsumed;
        }
        ops.push_back(op);
        ops_sh.push_back(h);
        if (o->distinct_values && reads_redundant_value(op, first_use)) {
            pop();
            return false;
        }
        return true;
    }

    bool same_value(int a, int b) const {
        return vh[a] == vh[b] && shapes[a] == shapes[b] && (!two || shapes2[a] == shapes2[b]);
    }
    bool computed_from(int t, int from) const { return (ancestors[t] >> from) & 1u; }

    // options::distinct_values, checked for what the operator just added
    // changed: a tensor read for the first time, or a new output equal to a
    // tensor already read. A consumed tensor t' with the value of another
    // tensor t not computed from t' makes the graph a detour: its readers
    // can read t instead (no cycle, as t does not depend on t'), by the
    // smaller rule anc(t') => anc(t), which the enumeration finds on its
    // own. Detours that end in an output (transpose(transpose(a)) == a) are
    // kept: they are such rules' source sides. The condition only grows
    // with the graph, so cutting the DFS here loses no graph that is kept.
    bool reads_redundant_value(const gop& op, const std::array<bool, 2>& first_use) const {
        const int T = num_tensors(), new_lo = first_out.back();
        for (int i = 0; i < op.nin; ++i) {
            if (!first_use[i]) continue;  // (a second read of one tensor is not a first use)
            int read = op.in[i];
            for (int t = 0; t < new_lo; ++t)
                if (t != read && same_value(t, read) && !computed_from(t, read)) return true;
        }
        for (int n = new_lo; n < T; ++n)
            for (int t = 0; t < new_lo; ++t)
                if (uses[t] > 0 && same_value(t, n) && !computed_from(n, t)) return true;
        return false;
    }

    void pop() {
        const gop op = ops.back();
        int n = num_tensors() - first_out.back();
        for (int j = 0; j < n; ++j) {
            shapes.pop_back(); roles.pop_back(); vals.pop_back(); vh.pop_back(); sh.pop_back();
            if (two) { shapes2.pop_back(); vals2.pop_back(); }
            bnd.pop_back(); uses.pop_back(); producer.pop_back(); ancestors.pop_back();
            --unconsumed;
        }
        for (int i = 0; i < op.nin; ++i)
            if (--uses[op.in[i]] == 0 && op.in[i] >= I) ++unconsumed;
        first_out.pop_back();
        ops.pop_back();
        ops_sh.pop_back();
    }

    // Whether the current graph is recorded, and its fingerprint.
    bool recordable(std::uint64_t& fp) const {
        if (unconsumed < 1 || unconsumed > o->max_outputs) return false;
        for (auto& op : ops)
            for (int i = 0; i < 2; ++i)
                if (op.tie[i] != no_tensor && op.tie[i] < I && uses[op.tie[i]] == 0) return false;
        std::array<std::uint64_t, 8> hs;
        int n = 0;
        for (int t = I; t < num_tensors(); ++t)
            if (uses[t] == 0) hs[n++] = vh[t];
        fp = fingerprint(std::span<const std::uint64_t>(hs.data(), n));
        return true;
    }
};

struct worker {
    state st;
    std::vector<gop>* pool;
    std::vector<std::uint64_t>* hash_pool;
    std::vector<graph_rec>* recs;
    std::uint8_t pool_id;
    std::uint64_t nodes = 0;
    std::atomic<std::uint64_t>* graph_counter;
    std::uint64_t seen = 0;  // graphs recordable, in any partition

    void record() {
        std::uint64_t fp;
        ++nodes;
        if (!st.recordable(fp)) return;
        ++seen;
        if (!in_partition(*st.o, fp)) return;
        graph_rec r;
        r.fp = fp;
        r.off = static_cast<std::uint32_t>(pool->size());
        if (pool->size() + st.ops.size() > 0xffffffffull) throw error("generator: graph pool exceeds 2^32 operators");
        r.nops = static_cast<std::uint8_t>(st.ops.size());
        r.pool = pool_id;
        pool->insert(pool->end(), st.ops.begin(), st.ops.end());
        if (hash_pool->size() + st.vh.size() > 0xffffffffull) throw error("generator: hash pool exceeds 2^32 tensors");
        r.hoff = static_cast<std::uint32_t>(hash_pool->size());
        hash_pool->insert(hash_pool->end(), st.vh.begin() + st.I, st.vh.end());
        recs->push_back(r);
        graph_counter->fetch_add(1, std::memory_order_relaxed);
    }
    void dfs() {
        if (static_cast<int>(st.ops.size()) >= st.o->max_ops) return;
        std::vector<choice> cs;
        st.candidates(cs);
        for (auto& c : cs) {
            if (!st.push(c)) continue;
            record();
            dfs();
            st.pop();
        }
    }
};

}  // namespace

enumeration enumerate(const options& o, const progress_fn& progress, process_team::counter* items) {
    if (o.max_ops < 1 || o.max_ops > max_graph_ops) throw error("generator: max_ops must be within 1.." + std::to_string(max_graph_ops));
    if (o.inputs.size() > 16) throw error("generator: at most 16 input tensors");
    if (o.partitions < 1 || o.partition >= o.partitions) throw error("generator: partition must be within 0..partitions-1");
    unsigned nt = o.threads ? o.threads : std::max(1u, std::thread::hardware_concurrency());
    nt = std::min(nt, 64u);
    enumeration e;
    e.pools.resize(nt + 1);
    e.hash_pools.resize(nt + 1);
    std::vector<std::vector<graph_rec>> recs(nt + 1);
    state root(o);
    e.input_hashes = root.vh;
    std::atomic<std::uint64_t> graphs{0}, nodes{0}, seen{0};
    // Work item 0, trivial graphs: one or more inputs as the outputs
    // (targets of rules such as split(concat(x, y)) => x, y).
    auto record_inputs_alone = [&] {
        int I = static_cast<int>(o.inputs.size());
        for (std::uint32_t m = 1; m < (1u << I); ++m) {
            int pc = std::popcount(m);
            if (pc > o.max_outputs) continue;
            std::vector<std::uint64_t> hs;
            for (int i = 0; i < I; ++i)
                if (m >> i & 1) hs.push_back(e.input_hashes[static_cast<std::size_t>(i)]);
            graph_rec r;
            r.fp = fingerprint(hs);
            r.trivial = static_cast<std::uint16_t>(m);
            r.pool = static_cast<std::uint8_t>(nt);
            ++seen;
            if (!in_partition(o, r.fp)) continue;
            recs[nt].push_back(r);
        }
    };
    // Items 1.. : the subtree below each first-level choice.
    std::vector<choice> top;
    root.candidates(top);
    const std::size_t total_items = top.size() + 1;
    // Items go to the workers from a local count or, with a team, through
    // a queue this thread keeps filled from the team's counter (only this
    // thread may talk to MPI).
    std::atomic<std::size_t> next{0}, done{0}, drawn{0};
    std::atomic<unsigned> finished{0};  // workers
    std::deque<std::size_t> queue;
    bool exhausted = false;
    std::mutex qm;
    std::condition_variable qcv;
    std::exception_ptr failure;
    std::atomic<bool> failed{false};  // ends the progress loop: a failed item never counts as done
    std::mutex fail_m;
    auto claim = [&](std::size_t& item) {
        if (!items) return (item = next.fetch_add(1)) < total_items;
        std::unique_lock lk(qm);
        qcv.wait(lk, [&] { return !queue.empty() || exhausted || failed; });
        if (queue.empty() || failed) return false;
        item = queue.front();
        queue.pop_front();
        qcv.notify_all();
        return true;
    };
    auto run = [&](unsigned id) {
        try {
            worker w{state(o), &e.pools[id], &e.hash_pools[id], &recs[id], static_cast<std::uint8_t>(id), 0, &graphs};
            for (std::size_t item; claim(item); done.fetch_add(1)) {
                if (item == 0) {
                    record_inputs_alone();
                } else if (w.st.push(top[item - 1])) {
                    w.record();
                    w.dfs();
                    w.st.pop();
                }
            }
            nodes += w.nodes;
            seen += w.seen;
        } catch (...) {
            std::lock_guard lk(fail_m);
            failure = std::current_exception();
            next = total_items;
            {
                std::lock_guard q(qm);  // a worker between its check and its wait still sees it
                failed = true;
            }
            qcv.notify_all();
        }
        finished.fetch_add(1);
    };
    {
        std::vector<std::jthread> ts;
        for (unsigned i = 0; i < nt; ++i) ts.emplace_back(run, i);
        auto last_report = std::chrono::steady_clock::now();
        auto report = [&] {
            if (!progress || std::chrono::steady_clock::now() - last_report < std::chrono::milliseconds(200)) return;
            last_report = std::chrono::steady_clock::now();
            progress(items ? drawn.load() : done.load(), total_items, graphs.load());
        };
        if (items) {
            // One item waiting per worker: a worker that finishes takes the
            // next at once, and no process holds items another could walk.
            for (;;) {
                {
                    std::unique_lock lk(qm);
                    qcv.wait_for(lk, std::chrono::milliseconds(50), [&] { return queue.size() < nt || failed; });
                    if (failed) break;
                    if (queue.size() >= nt) {
                        lk.unlock();
                        report();
                        continue;
                    }
                }
                std::uint64_t item = 0;
                try {
                    item = items->fetch_add(1);
                } catch (...) {  // the workers must not wait for items that never come
                    {
                        std::lock_guard lk(fail_m);
                        failure = std::current_exception();
                    }
                    {
                        std::lock_guard q(qm);
                        failed = true;
                    }
                    qcv.notify_all();
                    break;
                }
                std::lock_guard lk(qm);
                if (item >= total_items) {
                    exhausted = true;
                    qcv.notify_all();
                    break;
                }
                queue.push_back(static_cast<std::size_t>(item));
                drawn = static_cast<std::size_t>(item) + 1;
                qcv.notify_all();
            }
        }
        while (progress && finished.load() < nt) {
            report();
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    }
    if (failure) std::rethrow_exception(failure);
    if (progress) progress(total_items, total_items, graphs.load());
    std::size_t total = 0;
    for (auto& r : recs) total += r.size();
    e.graphs.reserve(total);
    for (auto& r : recs) {
        e.graphs.insert(e.graphs.end(), r.begin(), r.end());
        std::vector<graph_rec>().swap(r);
    }
    e.dfs_nodes = nodes.load();
    e.total_graphs += seen.load();
    return e;
}

// ---------------------------------------------------------------- materialize
namespace {
template <class T>
std::vector<tensor<T>> eval_all(const mgraph& g, std::span<const tensor<T>> inputs) {
    std::vector<tensor<T>> v(inputs.begin(), inputs.end());
    v.resize(g.shapes.size());
    int t = g.num_inputs;
    for (auto& op : g.ops) {
        const auto& d = spec::decl(op.kind);
        std::array<const tensor<T>*, 2> ip{};
        for (int i = 0; i < op.nin; ++i) ip[i] = &v[op.in[i]];
        std::vector<tensor<T>> res;
        for (int j = 0; j < d.num_outputs; ++j) res.emplace_back(g.shapes[t + j]);
        d.template eval<T>()(param_values(op.pidx), std::span<const tensor<T>* const>(ip.data(), op.nin), res);
        for (int j = 0; j < d.num_outputs; ++j) v[t + j] = std::move(res[j]);
        t += d.num_outputs;
    }
    return v;
}
}  // namespace

std::vector<tensor<float>> eval_float(const mgraph& g, std::span<const tensor<float>> inputs) { return eval_all<float>(g, inputs); }
std::vector<tensor<modp>> eval_modp(const mgraph& g, std::span<const tensor<modp>> inputs) { return eval_all<modp>(g, inputs); }

namespace {
// Everything of a graph but its value hashes.
mgraph build_structure(std::span<const gop> ops, std::uint16_t trivial, const options& o) {
    mgraph g;
    g.num_inputs = static_cast<int>(o.inputs.size());
    g.ops.assign(ops.begin(), ops.end());
    for (int i = 0; i < g.num_inputs; ++i) {
        g.shapes.push_back(o.inputs[i].s);
        g.producer.push_back(-1);
        g.out_index.push_back(0);
        g.uses.push_back(0);
        g.shash.push_back(input_shash(i));
    }
    for (std::size_t k = 0; k < g.ops.size(); ++k) {
        auto& op = g.ops[k];
        const auto& d = spec::decl(op.kind);
        std::array<shape, 2> ins, outs;
        for (int i = 0; i < op.nin; ++i) {
            ins[i] = g.shapes[op.in[i]];
            g.uses[op.in[i]]++;
            if (op.in[i] < g.num_inputs) g.vars |= 1u << op.in[i];
        }
        auto e = spec::infer_shapes(op.kind, param_values(op.pidx), std::span<const shape>(ins.data(), op.nin),
                                    std::span<shape>(outs.data(), static_cast<std::size_t>(d.num_outputs)));
        if (!e.empty()) throw error("generator: stored graph no longer type-checks: " + e);
        std::uint64_t h = op_shash(op, param_values(op.pidx), g.shash);
        for (int j = 0; j < d.num_outputs; ++j) {
            g.shapes.push_back(outs[j]);
            g.producer.push_back(static_cast<int>(k));
            g.out_index.push_back(j);
            g.uses.push_back(0);
            g.shash.push_back(combine(h, static_cast<std::uint64_t>(j)));
        }
    }
    if (g.ops.empty()) {
        for (int i = 0; i < g.num_inputs; ++i)
            if (trivial >> i & 1) { g.outputs.push_back(i); g.vars |= 1u << i; }
    } else
        for (int t = g.num_inputs; t < static_cast<int>(g.shapes.size()); ++t)
            if (g.uses[t] == 0) g.outputs.push_back(t);
    return g;
}
}  // namespace

mgraph materialize(std::span<const gop> ops, std::uint16_t trivial, const options& o) {
    mgraph g = build_structure(ops, trivial, o);
    auto vals = eval_modp(g, fingerprint_inputs(o));
    for (auto& v : vals) g.hash.push_back(tensor_hash(v));
    if (o.two_shapes) {
        // Values at the second shape configuration (derived parameters follow
        // their ties); a graph that does not type-check there gets a marker.
        const auto& in2 = fingerprint_inputs(o, true);
        std::vector<shape> sh2;
        for (auto& t : in2) sh2.push_back(t.shape);
        std::vector<tensor<modp>> v2(in2.begin(), in2.end());
        bool ok = true;
        for (auto& op : g.ops) {
            const auto& d = spec::decl(op.kind);
            auto p2 = params_for_shapes(op, param_values(op.pidx), sh2);
            std::array<shape, 2> ins, outs;
            std::array<const tensor<modp>*, 2> ip{};
            for (int i = 0; i < op.nin; ++i) { ins[i] = sh2[op.in[i]]; ip[i] = &v2[op.in[i]]; }
            auto os = std::span<shape>(outs.data(), static_cast<std::size_t>(d.num_outputs));
            if (!spec::infer_shapes(op.kind, p2, std::span<const shape>(ins.data(), op.nin), os).empty()) { ok = false; break; }
            std::vector<tensor<modp>> res;
            for (auto& s : os) res.emplace_back(s);
            d.eval_modp(p2, std::span<const tensor<modp>* const>(ip.data(), op.nin), res);
            for (int j = 0; j < d.num_outputs; ++j) { sh2.push_back(os[j]); v2.push_back(std::move(res[j])); }
        }
        for (std::size_t t = 0; t < g.hash.size(); ++t)
            g.hash[t] = combine(g.hash[t], ok ? tensor_hash(v2[t]) : 0xdeadull);
    }
    return g;
}

mgraph materialize(std::span<const gop> ops, std::uint16_t trivial, std::vector<std::uint64_t> hashes, const options& o) {
    mgraph g = build_structure(ops, trivial, o);
    if (hashes.size() != g.shapes.size())
        throw error("generator: a stored graph has " + std::to_string(hashes.size()) + " value hashes for " +
                    std::to_string(g.shapes.size()) + " tensors");
    g.hash = std::move(hashes);
    return g;
}

mgraph materialize(const enumeration& e, const graph_rec& r, const options& o) {
    std::span<const gop> ops;
    if (r.nops) ops = std::span<const gop>(e.pools[r.pool].data() + r.off, r.nops);
    mgraph g = build_structure(ops, r.trivial, o);
    g.hash = e.input_hashes;
    const auto& hp = e.hash_pools[r.pool];
    g.hash.insert(g.hash.end(), hp.begin() + r.hoff, hp.begin() + r.hoff + (g.shapes.size() - g.hash.size()));
    return g;
}

std::uint64_t structural_key(const mgraph& g, std::span<const int> rename) {
    std::vector<std::uint64_t> sh(g.shapes.size());
    for (int i = 0; i < g.num_inputs; ++i) sh[i] = input_shash(rename.empty() ? i : rename[i]);
    std::vector<std::uint64_t> ops_sh;
    int t = g.num_inputs;
    for (auto& op : g.ops) {
        std::uint64_t h = op_shash(op, param_values(op.pidx), sh);
        ops_sh.push_back(h);
        for (int j = 0; j < spec::decl(op.kind).num_outputs; ++j) sh[t++] = combine(h, static_cast<std::uint64_t>(j));
    }
    std::vector<std::uint64_t> outs;
    for (int o : g.outputs) outs.push_back(sh[o]);
    std::sort(ops_sh.begin(), ops_sh.end());
    std::sort(outs.begin(), outs.end());
    std::uint64_t k = 0x51;
    for (auto h : ops_sh) k = combine(k, h);
    k = combine(k, 0xfeed);
    for (auto h : outs) k = combine(k, h);
    return k;
}

std::string structural_text(const mgraph& g, std::span<const int> rename) {
    std::vector<std::string> st(g.shapes.size());
    for (int i = 0; i < g.num_inputs; ++i) st[i] = "%" + std::to_string(rename.empty() ? i : rename[i]);
    std::vector<std::string> ops_st;
    int t = g.num_inputs;
    for (auto& op : g.ops) {
        const auto& d = spec::decl(op.kind);
        std::string s(d.name);
        s += '{';
        for (int i = 0; i < d.num_params; ++i) s += (i ? "," : "") + std::to_string(param_values(op.pidx)[i]);
        s += "}(";
        for (int i = 0; i < op.nin; ++i) s += (i ? " " : "") + st[op.in[i]];
        for (int i = 0; i < 2; ++i)
            if (op.tie[i] != no_tensor) s += " ^" + st[op.tie[i]] + "." + std::to_string(op.tie_dim[i]);
        s += ')';
        ops_st.push_back(s);
        for (int j = 0; j < d.num_outputs; ++j) st[t++] = d.num_outputs > 1 ? s + "." + std::to_string(j) : s;
    }
    std::vector<std::string> outs;
    for (int o : g.outputs) outs.push_back(st[o]);
    std::sort(ops_st.begin(), ops_st.end());
    std::sort(outs.begin(), outs.end());
    std::string k;
    for (auto& s : ops_st) k += s + ";";
    k += " =>";
    for (auto& s : outs) k += " " + s;
    return k;
}

std::string describe(const mgraph& g, const options& o) {
    std::vector<std::string> names;
    for (auto& in : o.inputs) names.push_back(in.name);
    std::string s;
    int t = g.num_inputs;
    for (auto& op : g.ops) {
        const auto& d = spec::decl(op.kind);
        std::string lhs = "t" + std::to_string(t) + (d.num_outputs > 1 ? ",t" + std::to_string(t + 1) : "");
        std::string args;
        for (int i = 0; i < op.nin; ++i) args += (i ? "," : "") + (op.in[i] < g.num_inputs ? names[op.in[i]] : "t" + std::to_string(op.in[i]));
        std::string ps;
        const auto& pv = param_values(op.pidx);
        for (int i = 0; i < d.num_params; ++i) ps += (i ? "," : "") + std::to_string(pv[i]);
        s += lhs + "=" + std::string(d.name) + "[" + ps + "](" + args + "); ";
        while (names.size() < static_cast<std::size_t>(t)) names.push_back("");
        for (int j = 0; j < d.num_outputs; ++j) names.push_back("t" + std::to_string(t + j));
        t += d.num_outputs;
    }
    s += "out:";
    for (int x : g.outputs) s += " " + (x < g.num_inputs ? o.inputs[x].name : "t" + std::to_string(x));
    return s;
}

}  // namespace tsopt::gen
