// tsopt rules: the rules this binary carries, with their provenance.
#include <iostream>

#include "commands.hpp"
#include "common.hpp"
#include "tsopt/spec/registry.hpp"

namespace tsopt::cli {

const std::string_view rules_help =
    "usage: tsopt rules [--filter SUBSTR] [--op NAME] [--rules generated|axioms|all|FILE] [--count]\n"
    "\n"
    "Lists the rewrite rules built into this binary: name, rule text (source => target) and\n"
    "provenance (the axiom it comes from, validated in Z3, or how the generator found and proved it).\n"
    "\n"
    "options:\n"
    "  --filter SUBSTR    only rules whose name or text contains SUBSTR\n"
    "  --op NAME          only rules whose source or target uses operator NAME (e.g. conv2d)\n"
    "  --rules SET        generated (default): the rules tsopt-gen generated and Z3 proved, which\n"
    "                     tsopt optimize uses; axioms: the axioms read as rules; all: both;\n"
    "                     FILE: a listing written by tsopt-gen --listing, checked as\n"
    "                     tsopt optimize --rules FILE checks it\n"
    "  --count            print the number of matching rules only\n"
    "  -h, --help         this text\n";

int rules_command(int argc, char** argv, int first) {
    args a(argc, argv, first,
           {{"--filter"}, {"--op"}, {"--rules"}, {"--count", false}});
    if (!a.positional().empty()) throw usage_error("unexpected argument '" + a.positional()[0] + "'");
    std::string filter = a.str("--filter");
    std::optional<spec::op_kind> op;
    if (a.has("--op")) {
        op = spec::find_op(a.str("--op"));
        if (!op) {
            std::string names;
            for (const auto* d : spec::operators) names += (names.empty() ? "" : " ") + std::string(d->name);
            throw usage_error("--op: no operator named '" + a.str("--op") + "'; operators: " + names);
        }
    }
    chosen_rules rules(a);
    auto uses = [&](const rewrite::rule& r) {
        for (auto side : {r.src, r.dst})
            for (const auto& n : side)
                if (n.op == *op) return true;
        return false;
    };
    std::size_t count = 0;
    for (const auto& r : rules.rules()) {
        if (!filter.empty() && r.name.find(filter) == std::string_view::npos && r.text.find(filter) == std::string_view::npos)
            continue;
        if (op && !uses(r)) continue;
        ++count;
        if (!a.flag("--count")) std::cout << r.name << "\n    " << r.text << "\n    provenance: " << r.provenance << "\n";
    }
    if (a.flag("--count")) std::cout << count << "\n";
    else
        std::cout << count << " of " << rules.rules().size() << " rules (" << rules.text() << ")\n";
    return exit_code::ok;
}

}  // namespace tsopt::cli
