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
    std::vector<std::string> extra;
    std::string filter, op_name, rule_set;
    bool count_only = false;
    options o("rules");
    o.positionals(extra).text("--filter", filter).text("--op", op_name).text("--rules", rule_set).flag("--count", count_only);
    o.parse(argc, argv, first);
    if (!extra.empty()) throw usage_error("unexpected argument '" + extra[0] + "'");
    std::optional<spec::op_kind> op;
    if (o.given("--op")) {
        op = spec::find_op(op_name);
        if (!op) {
            std::string names;
            for (const auto* d : spec::operators) names += (names.empty() ? "" : " ") + std::string(d->name);
            throw usage_error("--op: no operator named '" + op_name + "'; operators: " + names);
        }
    }
    chosen_rules rules(rule_set);
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
        if (!count_only) std::cout << r.name << "\n    " << r.text << "\n    provenance: " << r.provenance << "\n";
    }
    if (count_only) std::cout << count << "\n";
    else
        std::cout << count << " of " << rules.rules().size() << " rules (" << rules.text() << ")\n";
    return exit_code::ok;
}

}  // namespace tsopt::cli
