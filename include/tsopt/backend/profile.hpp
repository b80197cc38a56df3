#pragma once
// Where a graph's end-to-end time goes on a measured backend: per-step
// times of its plan (Backend::profile) summed per operator kind and step,
// largest first. Used by `tsopt bench --profile` and the examples' --profile.
#include <algorithm>
#include <iomanip>
#include <map>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "tsopt/core/graph.hpp"

namespace tsopt::backend {

// Per-step times of g's plan (Backend::profile) summed per operator kind and
// step, largest first: where the end-to-end time goes. With `each_step`,
// also every step in execution order with its node's name and shapes (as
// ONNX Runtime's per-node profile lists them), to set layer against layer.
template <class Backend>
void print_profile(std::ostream& os, Backend& be, const graph& g, std::span<const tensor<float>> in, int reps,
                   const std::string& title, bool each_step = false) {
    if constexpr (requires { be.profile(g, in, reps); }) {
        auto steps = be.profile(g, in, reps);
        struct row { double ms = 0; int count = 0; };
        std::map<std::string, row> by;
        double total = 0;
        for (auto& st : steps) {
            std::string k = st.node >= 0 ? std::string(g.nodes[static_cast<std::size_t>(st.node)].type_name()) : "?";
            k += st.conversion ? " / conversion " + st.what : " / " + st.what;
            if constexpr (requires { st.impl; })
                if (!st.impl.empty()) k += " [" + st.impl + "]";
            by[k].ms += st.ms;
            ++by[k].count;
            total += st.ms;
        }
        std::vector<std::pair<std::string, row>> rows(by.begin(), by.end());
        std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.second.ms > b.second.ms; });
        os << "\nprofile of " << title << ": " << steps.size() << " steps, " << std::fixed << std::setprecision(3) << total
           << " ms summed (minimum per step over " << reps << " runs)\n";
        for (auto& [k, r] : rows)
            os << "  " << std::left << std::setw(60) << k << std::right << std::setw(6) << r.count << std::setw(12)
               << r.ms << " ms" << std::setw(7) << std::setprecision(1) << 100 * r.ms / std::max(total, 1e-12) << " %"
               << std::setprecision(3) << "\n";
        if (!each_step) return;
        os << "\nsteps of " << title << " in execution order (ms, node, input shapes -> output shape, step)\n";
        for (std::size_t s = 0; s < steps.size(); ++s) {
            const auto& st = steps[s];
            os << std::setw(5) << s << std::setw(10) << st.ms << "  ";
            if (st.node >= 0) {
                const node& n = g.nodes[static_cast<std::size_t>(st.node)];
                os << n.name << " ";
                for (std::size_t k = 0; k < n.inputs.size(); ++k) os << (k ? "," : "") << g.shape_of(n.inputs[k]).str();
                os << " -> " << (n.shapes.empty() ? shape{} : n.shapes[0]).str() << "  ";
            }
            os << (st.conversion ? "conversion " : "") << st.what;
            if constexpr (requires { st.impl; })
                if (!st.impl.empty()) os << " [" << st.impl << "]";
            os << "\n";
        }
    } else {
        os << "\nprofile: the " << Backend::name << " backend has no per-step profile\n";
    }
}

}  // namespace tsopt::backend
