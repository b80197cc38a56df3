// Validates spec::all_axioms by symbolic execution and reports redundant
// axioms. Exit status 1 when an axiom fails validation.
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "axiom_check.hpp"
#include "tsopt/spec/axioms.hpp"

int main(int argc, char** argv) {
    using namespace tsopt;
    gen::check_options opt;
    unsigned redundancy_ms = 0;
    bool validate = true;
    std::vector<std::string> only;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&] { return i + 1 < argc ? argv[++i] : (std::fprintf(stderr, "%s needs a value\n", a.c_str()), std::exit(2), ""); };
        if (a == "--extent") opt.max_extent = std::atoi(next());
        else if (a == "--samples") opt.samples = std::atoi(next());
        else if (a == "--exhaustive") opt.exhaustive = true;
        else if (a == "--max-instances") opt.max_instances = std::atol(next());
        else if (a == "--full-semantics") opt.typing = tsopt::spec::full_semantics;
        else if (a == "--redundancy") redundancy_ms = unsigned(std::atoi(next()));
        else if (a == "--no-validate") validate = false;
        else if (a == "--help") {
            std::puts("verify_axioms [--extent N] [--samples K | --exhaustive [--max-instances M]] [--full-semantics]\n"
                      "              [--redundancy TIMEOUT_MS] [--no-validate] [axiom-name...]");
            return 0;
        } else only.push_back(a);
    }
    std::vector<spec::axiom> axioms;
    for (const auto& a : spec::all_axioms)
        if (only.empty() || std::find(only.begin(), only.end(), std::string(a.name)) != only.end()) axioms.push_back(a);
    int bad = 0;
    if (validate) {
        double total = 0;
        for (const auto& a : axioms) {
            // Axioms about grouped convolutions have no instance in TASO's model.
            gen::check_options o = opt;
            if (spec::outside_taso_model(a.name)) o.typing = spec::full_semantics;
            auto r = gen::check_axiom(a, o);
            total += r.seconds;
            std::printf("%-28s %-6s combos %4ld instances %6ld rejected %8ld %7.2fs %s\n", r.name.c_str(),
                        r.ok ? "ok" : "FAILED", r.param_combinations, r.instances, r.shape_rejected, r.seconds,
                        r.failure.c_str());
            std::fflush(stdout);
            bad += !r.ok;
        }
        std::printf("validated %zu axioms, %d failed, %.1fs\n", axioms.size(), bad, total);
    }
    if (redundancy_ms) {
        // Redundancy is judged against the whole set, whatever the filter.
        std::vector<spec::axiom> all(spec::all_axioms.begin(), spec::all_axioms.end());
        int n = 0;
        gen::find_redundant(all, redundancy_ms, [&](const gen::redundancy_report& r) {
            std::printf("%-28s %-9s %7.2fs %s\n", r.name.c_str(), gen::to_string(r.result.v), r.result.seconds,
                        r.result.detail.c_str());
            std::fflush(stdout);
            n += r.result.v == gen::verdict::proven;
        });
        std::printf("%d redundant axioms\n", n);
    }
    return bad ? 1 : 0;
}
