// Rules over parameter variables (docs/generator.md, "Rules over parameter
// variables"): the enumeration instantiates every parameter (stride 1,
// stride 2, ...), so a rule proven at each value is emitted once per value
// and matches no other. Where a rule uses one value of an any_value slot
// throughout, the slot becomes a variable, Z3 proves the rule for every
// value, and that one rule replaces its instances.
#include <algorithm>
#include <map>
#include <set>

#include "gen.hpp"

namespace tsopt::gen {

namespace {
// Each constant in an any_value slot: its slot name and value, and whether
// it is on the source side.
template <class F>
void for_each_any_value_constant(io::listed_rule& r, F&& f) {
    for (auto* side : {&r.src, &r.dst})
        for (auto& n : *side) {
            const spec::op_decl& d = spec::decl(n.op);
            for (int s = 0; s < d.num_params; ++s) {
                const spec::param_decl& pd = d.params[static_cast<std::size_t>(s)];
                spec::param_term& t = n.params[static_cast<std::size_t>(s)];
                if (pd.any_value && t.k == spec::param_term::kind::constant) f(pd.name, t, side == &r.src);
            }
        }
}
}  // namespace

std::optional<io::listed_rule> generalize_params(const io::listed_rule& rule, std::span<const std::string_view> keep,
                                                 std::string* slots) {
    io::listed_rule r = rule;
    // Per slot name: the values it takes and whether the source reads it.
    struct use {
        std::set<std::int32_t> values;
        bool in_source = false;
    };
    std::map<std::string_view, use> uses;
    for_each_any_value_constant(r, [&](std::string_view name, const spec::param_term& t, bool src) {
        auto& u = uses[name];
        u.values.insert(t.value);
        u.in_source |= src;
    });
    // A slot name with two values relates them (relu(conv act=0) => conv
    // act=1), and one only the target reads would leave a variable unbound:
    // both stay constants. Slots sharing a name (conv's and avgpool's
    // stride_h) share the variable, so a rule tying them keeps tying them.
    std::map<std::string_view, int> var_of;
    int next = r.num_param_vars;
    for (auto& [name, u] : uses)
        if (u.values.size() == 1 && u.in_source && std::find(keep.begin(), keep.end(), name) == keep.end())
            var_of.emplace(name, next++);
    if (var_of.empty()) return std::nullopt;
    for_each_any_value_constant(r, [&](std::string_view name, spec::param_term& t, bool) {
        if (auto it = var_of.find(name); it != var_of.end()) t = spec::pvar(it->second);
    });
    if (slots) {
        slots->clear();
        for (auto& [name, v] : var_of) *slots += (slots->empty() ? "" : ", ") + std::string(name);
    }
    return canonical_rule(io::format_rule_text(r.src, r.src_out, r.dst, r.dst_out));
}

std::span<const std::vector<std::string_view>> generalization_levels() {
    // Axioms fix a dilation (conv-cpool-avgpool, conv-enlarge: 1) more
    // often than a pool window (tied to an iconv's or enlarge's size, which
    // are proven for their domain only), and a window more often than a
    // padding mode: a rule whose generalization fails is tried again with
    // those kept as enumerated, in that order.
    static const std::vector<std::vector<std::string_view>> levels{{},
                                                                   {"dil_h", "dil_w"},
                                                                   {"dil_h", "dil_w", "kh", "kw"},
                                                                   {"dil_h", "dil_w", "pad"},
                                                                   {"dil_h", "dil_w", "pad", "kh", "kw"}};
    return levels;
}

std::vector<generalization_group> generalization_groups(std::span<const emitted_rule> rules,
                                                        std::span<const std::size_t> candidates,
                                                        std::span<const std::string_view> keep) {
    std::vector<generalization_group> groups;
    std::map<std::string, std::size_t> by_text;
    for (std::size_t i : candidates) {
        if (!rules[i].proven) continue;
        std::string slots;
        auto g = generalize_params(rules[i].r, keep, &slots);
        if (!g) continue;
        auto [it, fresh] = by_text.try_emplace(g->text, groups.size());
        if (fresh) groups.push_back({std::move(*g), std::move(slots), {}});
        groups[it->second].members.push_back(i);
    }
    return groups;
}

}  // namespace tsopt::gen
