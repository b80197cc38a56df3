// examples/options.hpp's parse(): the examples' options on CLI11, with
// validators that give the old messages.
#include <charconv>
#include <cmath>
#include <cstdlib>

#include <CLI/CLI.hpp>

#include "options.hpp"

namespace tsopt::examples {

namespace {

// CLI11 validators of the options' values; CLI11 prefixes the message with
// the option's name. A valid value is rewritten to the form CLI11 converts
// as meant (its own integer conversion reads a leading 0 as octal).
template <class T>
CLI::Validator integer_at_least(T low) {
    return CLI::Validator(
        [low](std::string& s) -> std::string {
            T v{};
            auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
            if (s.empty() || ec != std::errc{} || end != s.data() + s.size()) return "expected an integer, got '" + s + "'";
            if (v < low) return "must be at least " + std::to_string(low) + ", got " + s;
            s = std::to_string(v);
            return {};
        },
        "N");
}

// A finite number for which `ok` holds; `rule` says what it must be.
CLI::Validator number(bool (*ok)(double), std::string rule) {
    return CLI::Validator(
        [ok, rule](std::string& s) -> std::string {
            char* end = nullptr;
            const double v = std::strtod(s.c_str(), &end);
            if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v)) return "expected a number, got '" + s + "'";
            if (!ok(v)) return "must be " + rule + ", got " + s;
            return {};
        },
        "X");
}

}  // namespace

settings parse(std::string_view model, int argc, char** argv) {
    settings s;
    s.model = std::string(model);
    CLI::App app(s.model);
    app.set_help_flag();  // run() prints usage()
    app.allow_extras();   // reported below as unknown options
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->disable_flag_override();  // a later one wins
    const auto positive = integer_at_least(1);
    std::string rules;
    app.add_flag("-h,--help", s.help);
    app.add_flag("--quick", s.quick);
    app.add_flag("--profile", s.profile);
    app.add_option("--batch", s.batch)->check(positive);
    app.add_option("--image", s.image)->check(positive);
    auto* width_div = app.add_option("--width-div", s.width_div)->check(positive);
    auto* depth_div = app.add_option("--depth-div", s.depth_div)->check(positive);
    auto* length = app.add_option("--length", s.length)->check(positive);
    auto* reps = app.add_option("--reps", s.reps)->check(positive);
    app.add_option("--top-k", s.top_k)->check(positive);
    app.add_option("--partition", s.partition)->check(positive);
    app.add_option("--seed", s.seed)->check(integer_at_least<std::uint64_t>(0));
    auto* budget = app.add_option("--budget", s.budget)
                       ->check(number([](double v) { return v > 0; }, "a positive number of seconds"));
    app.add_option("--alpha", s.alpha)->check(number([](double v) { return v >= 1; }, "at least 1 (1 is greedy)"));
    app.add_option("--tolerance", s.tolerance)->check(number([](double v) { return v > 0; }, "positive"));
    app.add_option("--backend", s.backend)->check(CLI::Validator(
        [](std::string& v) -> std::string { return v == "cpu" || v == "cuda" ? "" : "expected cpu or cuda, got '" + v + "'"; },
        "cpu|cuda"));
    auto* rules_opt = app.add_option("--rules", rules)->check(CLI::Validator(
        [](std::string& v) -> std::string {
            try {
                rules::parse_built_in_set(v);
                return {};
            } catch (const error& e) {
                std::string what = e.what();  // "--rules: expected ...": CLI11 adds the name
                return what.starts_with("--rules: ") ? what.substr(9) : what;
            }
        },
        "SET"));
    try {
        app.parse(argc, argv);
    } catch (const CLI::ArgumentMismatch& e) {  // "--batch: 1 required N missing", or a flag given a value
        const std::string what = e.what();
        const std::string name = what.substr(0, what.find_first_of(": "));
        if (what.find("flag override") != std::string::npos)
            throw usage_error((name.starts_with("-") ? name : "--" + name) + " takes no value");
        throw usage_error(name + ": missing value");
    } catch (const CLI::ParseError& e) {
        throw usage_error(e.what());
    }
    if (auto rest = app.remaining(); !rest.empty()) throw usage_error("unknown option '" + rest.front() + "' (see --help)");
    if (*rules_opt) s.rules = rules::parse_built_in_set(rules);
    // --quick's sizes where the option is not given.
    if (!*width_div) s.width_div = s.quick ? 8 : 1;
    if (!*depth_div) s.depth_div = s.quick ? 4 : 1;
    if (!*length) s.length = s.quick ? 4 : 0;
    if (!*budget) s.budget = s.quick ? 2 : 30;
    if (!*reps) s.reps = s.quick ? 5 : 20;
    return s;
}

}  // namespace tsopt::examples
