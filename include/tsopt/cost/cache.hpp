#pragma once
// Per-operator cost cache. An operator's cost depends only on what a kernel
// sees: the operator kind, its parameters, its input shapes and layouts and
// its output layout. `op_key` is exactly that, hashed; `op_cache` maps keys to
// costs (milliseconds, or any value type) and can be saved to / loaded from a
// line-oriented text file so measurements survive between runs.
//
//   cost::op_key k = cost::op_key::of(g, node);      // what the node runs
//   double ms = cache.get_or(k, [&] { return backend.measure(g, node); });
//   cache.save(std::ofstream("costs.txt"));           // "<key>\t<value>" lines
//
// The text form of a key (`op_key::str`, parsed back by `op_key::parse`) is
//   conv2d|p=1,1,1,0,1,1,0,0|in=[1,3,8,8]:0;[8,3,3,3]:0|out=0
// (operator name, the eight parameter slots, each input's shape and layout
// number, the output layout number). Opaque operators appear as
// `opaque:Type@domain#<hex hash of type, domain and attributes>`.
#include <charconv>
#include <cstdint>
#include <functional>
#include <istream>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "tsopt/core/graph.hpp"

namespace tsopt::cost {

struct op_key {
    node_kind kind = node_kind::op;
    spec::op_kind op{};
    spec::op_params params{};
    std::vector<shape> in_shapes;
    std::vector<spec::layout> in_layouts;  // the producers' out_layout, one per input
    spec::layout out_layout = spec::layout::row_major;
    std::string opaque_type;               // opaque operators: "Type@domain"
    std::uint64_t opaque_id = 0;           // opaque operators: hash of type, domain, attributes

    friend bool operator==(const op_key&, const op_key&) = default;

    // The key of node `i` of `g`. Throws tsopt::error for inputs and weights,
    // which run nothing and have no cost to cache.
    static op_key of(const graph& g, std::size_t i) {
        if (i >= g.size()) throw error("op_key::of: node " + std::to_string(i) + " out of range (graph has " +
                                       std::to_string(g.size()) + " nodes)");
        const node& n = g.nodes[i];
        if (n.kind == node_kind::input || n.kind == node_kind::weight)
            throw error("op_key::of: " + n.describe() + " is not an operator");
        op_key k;
        k.kind = n.kind;
        k.out_layout = n.out_layout;
        if (n.kind == node_kind::op) {
            k.op = n.op;
            k.params = n.params;
        } else {
            const opaque_op* o = n.opaque.get();
            k.opaque_type = o ? o->type + "@" + o->domain : std::string("opaque@");
            k.opaque_id = opaque_hash(o);
        }
        for (value v : n.inputs) {
            k.in_shapes.push_back(g.shape_of(v));
            k.in_layouts.push_back(g.at(v).out_layout);
        }
        return k;
    }

    std::uint64_t hash() const {
        std::uint64_t h = hash_head(kind, op, params);
        for (const shape& s : in_shapes) h = hash_shape(h, s);
        for (auto l : in_layouts) h = hashing::combine(h, static_cast<std::uint64_t>(l));
        return hash_tail(h, out_layout, opaque_id);
    }
    // of(g, i).hash() without building the key (no allocation): what a cost
    // model looks up once per operator of every graph a search prices.
    static std::uint64_t hash_of(const graph& g, std::size_t i) {
        const node& n = g.nodes[i];
        const bool op = n.kind == node_kind::op;
        std::uint64_t h = hash_head(n.kind, op ? n.op : spec::op_kind{}, op ? n.params : spec::op_params{});
        for (value v : n.inputs) h = hash_shape(h, g.shape_of(v));
        for (value v : n.inputs) h = hashing::combine(h, static_cast<std::uint64_t>(g.at(v).out_layout));
        return hash_tail(h, n.out_layout, op ? 0 : opaque_hash(n.opaque.get()));
    }

    static std::uint64_t opaque_hash(const opaque_op* o) {
        std::uint64_t h = 0x6f70617175650000ull;
        if (o) {
            h = hashing::combine(h, hashing::fnv1a_of(o->type));
            h = hashing::combine(h, hashing::fnv1a_of(o->domain));
            h = hashing::combine(h, hashing::fnv1a_of(o->attributes));
            h = hashing::combine(h, static_cast<std::uint64_t>(o->attribute_count));
        }
        return h;
    }

    std::string str() const {
        std::string s;
        if (kind == node_kind::opaque) {
            char hex[17];
            auto r = std::to_chars(hex, hex + 16, opaque_id, 16);
            s = "opaque:" + opaque_type + "#" + std::string(hex, r.ptr);
        } else {
            s = std::string(spec::name(op));
        }
        s += "|p=";
        for (int i = 0; i < spec::max_params; ++i) s += (i ? "," : "") + std::to_string(params[i]);
        s += "|in=";
        for (std::size_t i = 0; i < in_shapes.size(); ++i)
            s += (i ? ";" : "") + in_shapes[i].str() + ":" + std::to_string(static_cast<int>(in_layouts[i]));
        s += "|out=" + std::to_string(static_cast<int>(out_layout));
        return s;
    }

    // Inverse of str(); throws tsopt::error naming the text on malformed input.
    static op_key parse(std::string_view text) {
        auto fail = [&](const char* why) -> op_key {
            throw error("op_key::parse: " + std::string(why) + " in '" + std::string(text) + "'");
        };
        auto fields = split(text, '|');
        if (fields.size() != 4) return fail("expected 4 '|'-separated fields");
        op_key k;
        std::string_view head = fields[0];
        if (head.starts_with("opaque:")) {
            k.kind = node_kind::opaque;
            auto hash_at = head.rfind('#');
            if (hash_at == std::string_view::npos) return fail("opaque key without '#hash'");
            k.opaque_type = std::string(head.substr(7, hash_at - 7));
            auto hx = head.substr(hash_at + 1);
            if (std::from_chars(hx.data(), hx.data() + hx.size(), k.opaque_id, 16).ec != std::errc{})
                return fail("bad opaque hash");
        } else {
            auto op = spec::find_op(head);
            if (!op) return fail("unknown operator");
            k.op = *op;
        }
        if (!fields[1].starts_with("p=")) return fail("missing 'p='");
        auto ps = split(fields[1].substr(2), ',');
        if (ps.size() != spec::max_params) return fail("expected 8 parameters");
        for (int i = 0; i < spec::max_params; ++i)
            if (!number(ps[static_cast<std::size_t>(i)], k.params[i])) return fail("bad parameter");
        if (!fields[2].starts_with("in=")) return fail("missing 'in='");
        if (fields[2].size() > 3) {
            for (std::string_view item : split(fields[2].substr(3), ';')) {
                auto colon = item.rfind(':');
                if (colon == std::string_view::npos || item.size() < 2 || item[0] != '[' || item[colon - 1] != ']')
                    return fail("bad input '[shape]:layout'");
                shape s;
                auto dims = item.substr(1, colon - 2);
                if (!dims.empty())
                    for (auto d : split(dims, ',')) {
                        std::int64_t x = 0;
                        if (!number(d, x) || s.rank >= max_rank) return fail("bad shape");
                        s.push_back(x);
                    }
                int l = 0;
                if (!number(item.substr(colon + 1), l)) return fail("bad layout");
                k.in_shapes.push_back(s);
                k.in_layouts.push_back(static_cast<spec::layout>(l));
            }
        }
        if (!fields[3].starts_with("out=")) return fail("missing 'out='");
        int l = 0;
        if (!number(fields[3].substr(4), l)) return fail("bad output layout");
        k.out_layout = static_cast<spec::layout>(l);
        return k;
    }

private:
    static std::vector<std::string_view> split(std::string_view s, char sep) {
        std::vector<std::string_view> r;
        std::size_t start = 0;
        for (std::size_t i = 0; i <= s.size(); ++i)
            if (i == s.size() || s[i] == sep) {
                r.push_back(s.substr(start, i - start));
                start = i + 1;
            }
        return r;
    }
    template <class T>
    static bool number(std::string_view s, T& out) {
        return !s.empty() && std::from_chars(s.data(), s.data() + s.size(), out).ec == std::errc{};
    }

private:
    static std::uint64_t hash_head(node_kind kind, spec::op_kind op, const spec::op_params& params) {
        std::uint64_t h = hashing::combine(0x636f73746b6579ull, static_cast<std::uint64_t>(kind));
        h = hashing::combine(h, static_cast<std::uint64_t>(op));
        for (auto p : params.v) h = hashing::combine(h, static_cast<std::uint32_t>(p));
        return h;
    }
    static std::uint64_t hash_shape(std::uint64_t h, const shape& s) {
        h = hashing::combine(h, static_cast<std::uint64_t>(s.rank));
        for (auto d : s) h = hashing::combine(h, static_cast<std::uint64_t>(d));
        return h;
    }
    static std::uint64_t hash_tail(std::uint64_t h, spec::layout out_layout, std::uint64_t opaque_id) {
        h = hashing::combine(h, static_cast<std::uint64_t>(out_layout));
        return hashing::combine(h, opaque_id);
    }
};

struct op_key_hash {
    std::size_t operator()(const op_key& k) const { return static_cast<std::size_t>(k.hash()); }
};

// A map from operator keys to costs with hit/miss counters.
template <class V = double>
class op_cache {
public:
    const V* find(const op_key& k) const {
        auto it = map_.find(k);
        return it == map_.end() ? nullptr : &it->second;
    }
    void insert(const op_key& k, V v) { map_.insert_or_assign(k, std::move(v)); }

    // The cached value for k, computing and storing it with f() on a miss.
    template <class F>
    const V& get_or(const op_key& k, F&& f) {
        auto it = map_.find(k);
        if (it != map_.end()) {
            ++hits_;
            return it->second;
        }
        ++misses_;
        return map_.emplace(k, f()).first->second;
    }

    std::size_t size() const { return map_.size(); }
    std::size_t hits() const { return hits_; }
    std::size_t misses() const { return misses_; }
    void clear() { map_.clear(); hits_ = misses_ = 0; }

    // One "<key>\t<value>" line per entry (numeric values only).
    void save(std::ostream& os) const
        requires std::is_arithmetic_v<V>
    {
        os.precision(17);
        for (auto& [k, v] : map_) os << k.str() << '\t' << v << '\n';
    }
    // Adds the entries of a file written by save(); throws tsopt::error with
    // the line number on a malformed line. Returns the number of entries read.
    std::size_t load(std::istream& is)
        requires std::is_arithmetic_v<V>
    {
        std::string line;
        std::size_t n = 0, lineno = 0;
        while (std::getline(is, line)) {
            ++lineno;
            if (line.empty() || line[0] == '#') continue;
            auto tab = line.find('\t');
            if (tab == std::string::npos)
                throw error("op_cache::load: line " + std::to_string(lineno) + " has no tab between key and value");
            V v{};
            std::string_view val = std::string_view(line).substr(tab + 1);
            try {
                if constexpr (std::is_floating_point_v<V>) v = static_cast<V>(std::stod(std::string(val)));
                else v = static_cast<V>(std::stoll(std::string(val)));
            } catch (const std::exception&) {
                throw error("op_cache::load: line " + std::to_string(lineno) + ": bad value '" + std::string(val) + "'");
            }
            try {
                insert(op_key::parse(std::string_view(line).substr(0, tab)), v);
            } catch (const error& e) {
                throw error("op_cache::load: line " + std::to_string(lineno) + ": " + e.what());
            }
            ++n;
        }
        return n;
    }

private:
    std::unordered_map<op_key, V, op_key_hash> map_;
    std::size_t hits_ = 0, misses_ = 0;
};

}  // namespace tsopt::cost
