#pragma once
// The compiled plans a backend keeps for execute(), shared by dnnl and cudnn:
// keyed by plan_key, least recently used dropped beyond a limit.
//
//   if (Plan* p = plans_.find(key)) return *p;
//   return plans_.insert(key, compile(g), opt_.max_plans);
#include <cstddef>
#include <cstdint>
#include <list>
#include <utility>

#include "tsopt/core/graph.hpp"

namespace tsopt::backend {

// `seed` mixed with every node's shapes: with seed = g.structural_hash()
// (which names weights by their address; a plan holds them, so an address is
// not reused meanwhile) it tells apart graphs a plan cannot be shared by.
inline std::uint64_t plan_key(const graph& g, std::uint64_t seed) {
    std::uint64_t key = seed;
    for (const node& n : g.nodes)
        for (const shape& s : n.shapes)
            for (int d = -1; d < s.rank; ++d) key = hashing::combine(key, static_cast<std::uint64_t>(d < 0 ? s.rank : s[d]));
    return key;
}

// Plans owned through Ptr (a std::shared_ptr or std::unique_ptr), most
// recently used first.
template <class Ptr>
class plan_cache {
public:
    using plan_type = typename Ptr::element_type;

    // The plan under key, now the most recently used; nullptr when none.
    plan_type* find(std::uint64_t key) {
        for (auto it = plans_.begin(); it != plans_.end(); ++it)
            if (it->first == key) {
                plans_.splice(plans_.begin(), plans_, it);
                return plans_.front().second.get();
            }
        return nullptr;
    }
    // Stores p under key as the most recently used, dropping the least
    // recently used beyond `max` plans.
    plan_type& insert(std::uint64_t key, Ptr p, std::size_t max) {
        plans_.emplace_front(key, std::move(p));
        plan_type& r = *plans_.front().second;
        if (plans_.size() > max) plans_.pop_back();
        return r;
    }

    // Drops every plan (and the weights each holds in its own layout).
    void clear() { plans_.clear(); }

private:
    std::list<std::pair<std::uint64_t, Ptr>> plans_;
};

}  // namespace tsopt::backend
