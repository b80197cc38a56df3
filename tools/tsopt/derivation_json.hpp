#pragma once
// A derivation (search/derivation.hpp) as JSON, both ways: `tsopt optimize
// --report` writes the written graph's under "rewrites"; `tsopt replay`
// reads it back. The shape is in docs/schema/report.schema.json.
#include <string>

#include "common.hpp"
#include "tsopt/search/derivation.hpp"

namespace tsopt::cli {

inline json step_json(const search::rewrite_step& s) {
    return {{"rule", s.rule},
            {"where", s.where},
            {"variant", s.variant},
            {"cost_before", json_number(s.cost_before)},
            {"cost_after", json_number(s.cost_after)},
            {"swapped", s.swapped}};
}

inline json derivation_json(const search::derivation& d) {
    json stages = json::array();
    for (const auto& st : d.stages) {
        json j = {{"kind", std::string(search::to_string(st.k))}};
        if (st.k == search::derivation_stage::kind::pet) {
            j["family"] = st.pet_family;
            if (st.pet_index) {
                j["index"] = *st.pet_index;
                j["hash"] = hashing::hex(st.pet_hash, 16);
            }
        } else if (st.k == search::derivation_stage::kind::parts) {
            json parts = json::array();
            for (const auto& p : st.parts) {
                json steps = json::array();
                for (const auto& s : p.steps) steps.push_back(step_json(s));
                parts.push_back({{"operators", p.operators}, {"steps", steps}});
            }
            j["parts"] = parts;
        } else {
            json steps = json::array();
            for (const auto& s : st.steps) steps.push_back(step_json(s));
            j["steps"] = steps;
        }
        stages.push_back(j);
    }
    json preprocessing = json::array();
    for (const auto& s : d.preprocessing) preprocessing.push_back(step_json(s));
    return {{"preprocessed", d.preprocessed},
            {"preprocessing", preprocessing},
            {"layouts", d.layouts},
            {"fold_weights", d.fold_weights},
            {"stages", stages},
            {"nhwc_undone", d.nhwc_undone},
            {"count", d.steps().size()}};
}

namespace detail {

// j[key] as T; a missing key or a value of another type is an error naming `where`.
template <class T>
T field(const json& j, const char* key, const std::string& where) {
    if (!j.is_object() || !j.contains(key)) throw input_error(where + ": missing \"" + key + "\"");
    try {
        return j.at(key).get<T>();
    } catch (const json::exception&) {
        throw input_error(where + ": \"" + key + "\" has the wrong type");
    }
}

inline std::vector<search::rewrite_step> steps_from_json(const json& j, const std::string& where) {
    if (!j.is_array()) throw input_error(where + ": \"steps\" is not an array");
    std::vector<search::rewrite_step> out;
    for (std::size_t i = 0; i < j.size(); ++i) {
        const std::string at = where + ", step " + std::to_string(i + 1);
        search::rewrite_step s;
        s.rule = field<std::string>(j[i], "rule", at);
        s.where = field<std::vector<std::string>>(j[i], "where", at);
        s.variant = field<std::size_t>(j[i], "variant", at);
        // Reports written before commutative matching have none: no operands exchanged.
        if (j[i].is_object() && j[i].contains("swapped")) s.swapped = field<std::uint32_t>(j[i], "swapped", at);
        out.push_back(std::move(s));
    }
    return out;
}

}  // namespace detail

// The derivation under a report's "rewrites"; costs are left 0 (replay fills them).
inline search::derivation derivation_from_json(const json& j, const std::string& where) {
    using detail::field;
    search::derivation d;
    d.preprocessed = field<bool>(j, "preprocessed", where);
    d.layouts = field<bool>(j, "layouts", where);
    d.fold_weights = field<bool>(j, "fold_weights", where);
    d.nhwc_undone = field<bool>(j, "nhwc_undone", where);
    // Listed preprocessing is checked by replay against what preprocessing does.
    if (j.contains("preprocessing")) d.preprocessing = detail::steps_from_json(j["preprocessing"], where + ", \"preprocessing\"");
    const json stages = field<json>(j, "stages", where);
    if (!stages.is_array()) throw input_error(where + ": \"stages\" is not an array");
    for (std::size_t i = 0; i < stages.size(); ++i) {
        const std::string at = where + ", stage " + std::to_string(i + 1);
        const auto kind = field<std::string>(stages[i], "kind", at);
        search::derivation_stage st;
        using K = search::derivation_stage::kind;
        if (kind == search::to_string(K::leaf_merges) || kind == search::to_string(K::search)) {
            st.k = kind == search::to_string(K::search) ? K::search : K::leaf_merges;
            st.steps = detail::steps_from_json(field<json>(stages[i], "steps", at), at);
        } else if (kind == search::to_string(K::parts)) {
            st.k = K::parts;
            const json parts = field<json>(stages[i], "parts", at);
            if (!parts.is_array()) throw input_error(at + ": \"parts\" is not an array");
            for (std::size_t p = 0; p < parts.size(); ++p) {
                const std::string pat = at + ", part " + std::to_string(p + 1);
                search::derivation_part dp;
                dp.operators = field<std::vector<std::string>>(parts[p], "operators", pat);
                dp.steps = detail::steps_from_json(field<json>(parts[p], "steps", pat), pat);
                st.parts.push_back(std::move(dp));
            }
        } else if (kind == search::to_string(K::pet)) {
            st.k = K::pet;
            st.pet_family = field<std::string>(stages[i], "family", at);
            // index and hash: absent in reports from before PET stages were
            // replayable (replay then says so).
            if (stages[i].contains("index")) {
                st.pet_index = field<std::size_t>(stages[i], "index", at);
                const auto hex = field<std::string>(stages[i], "hash", at);
                std::size_t used = 0;
                try {
                    st.pet_hash = std::stoull(hex, &used, 16);
                } catch (const std::exception&) {
                    used = 0;
                }
                if (hex.size() != 16 || used != hex.size()) throw input_error(at + ": \"hash\" is not 16 hex digits: \"" + hex + "\"");
            }
        } else
            throw input_error(at + ": unknown kind \"" + kind + "\"");
        d.stages.push_back(std::move(st));
    }
    return d;
}

}  // namespace tsopt::cli
