// cli::options on CLI11: one CLI::App per subcommand. CLI11 does the
// parsing (spellings, `--name=value`, `--`, positionals); the validators
// below give the value rules and their messages; parse() turns CLI11's
// errors into usage_error naming the option. CLI11 is included here only.
#include <algorithm>
#include <charconv>
#include <cmath>

#include <CLI/CLI.hpp>

#include "cli.hpp"

namespace tsopt::cli {

namespace {

// "1.50000" -> "1.5", as the old messages printed bounds.
std::string trim(double v) {
    std::string s = std::to_string(v);
    while (s.find('.') != std::string::npos && (s.back() == '0' || s.back() == '.')) {
        bool dot = s.back() == '.';
        s.pop_back();
        if (dot) break;
    }
    return s;
}

// The message part after "NAME: " (CLI11's ValidationError adds the name).
std::string integer_problem(const std::string& s, std::int64_t low, std::int64_t high, std::int64_t& v) {
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 10);
    if (ec == std::errc::result_out_of_range)
        return s + " is out of range (" + std::to_string(low) + ".." + std::to_string(high) + ")";
    if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return "expected a decimal integer, got '" + s + "'";
    if (v < low) return "must be at least " + std::to_string(low) + ", got " + s;
    if (v > high) return "must be at most " + std::to_string(high) + ", got " + s;
    return {};
}

// The name messages give an option: "--output" for "-o,--output".
std::string first_long_name(const CLI::Option& o) { return o.get_name(false, false); }

}  // namespace

struct options::impl {
    CLI::App app;
    std::vector<const CLI::Option*> value_options;  // "given twice" applies to these, in declaration order
    explicit impl(std::string_view cmd) : app("tsopt " + std::string(cmd)) {
        app.set_help_flag();  // dispatch.cpp answers --help before parsing
        app.allow_extras();   // unknown options are reported below, by name
        // parse() reports an option given twice by its count; CLI11 itself would keep the last.
        app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    }
    CLI::Option* value_option(CLI::Option* o) {
        value_options.push_back(o);
        return o;
    }
};

options::options(std::string_view command) : impl_(std::make_unique<impl>(command)) {}
options::~options() = default;

options& options::flag(const std::string& names, bool& target) {
    impl_->app.add_flag(names, target)->disable_flag_override();
    return *this;
}

options& options::text(const std::string& names, std::string& target) {
    impl_->value_option(impl_->app.add_option(names, target));
    return *this;
}

options& options::one_of(const std::string& names, std::string& target, std::vector<std::string> allowed) {
    std::string list;
    for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
    impl_->value_option(impl_->app.add_option(names, target))
        ->check(CLI::Validator(
            [allowed = std::move(allowed), list](std::string& v) -> std::string {
                for (const auto& a : allowed)
                    if (a == v) return {};
                return "expected one of " + list + ", got '" + v + "'";
            },
            "CHOICE"));
    return *this;
}

options& options::number(const std::string& names, double& target, double low, bool strict) {
    impl_->value_option(impl_->app.add_option(names, target))
        ->check(CLI::Validator(
            [low, strict](std::string& s) -> std::string {
                double v = 0;
                auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, std::chars_format::general);
                if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v))
                    return "expected a decimal number, got '" + s + "'";
                if (strict ? !(v > low) : !(v >= low))
                    return std::string("must be ") + (strict ? "greater than " : "at least ") + trim(low) + ", got " + s;
                // CLI11 converts the text: give it the value's shortest exact form.
                char buf[64];
                s.assign(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
                return {};
            },
            "NUMBER"));
    return *this;
}

options& options::integer_to(const std::string& names, std::function<void(std::int64_t)> set, std::int64_t low,
                             std::int64_t high) {
    // Converted here, not by CLI11 (whose strtoll reads 010 as octal).
    impl_->value_option(impl_->app.add_option_function<std::string>(
                            names, [set = std::move(set)](const std::string& s) {
                                std::int64_t v = 0;
                                std::from_chars(s.data(), s.data() + s.size(), v, 10);
                                set(v);
                            }))
        ->check(CLI::Validator(
            [low, high](std::string& s) -> std::string {
                std::int64_t v = 0;
                return integer_problem(s, low, high, v);
            },
            "INTEGER"));
    return *this;
}

options& options::positionals(std::vector<std::string>& target) {
    impl_->app.add_option("args", target)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    return *this;
}

void options::parse(int argc, char** argv, int first) {
    // CLI11 reads its arguments from the back of a reversed vector. An empty
    // `--name=` is passed as `--name ""`: CLI11 would take the next
    // argument as its value instead.
    std::vector<std::string> args;
    for (int i = first; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "--") {
            args.insert(args.end(), argv + i, argv + argc);
            break;
        }
        if (a.starts_with("--") && a.find('=') == a.size() - 1) {
            args.emplace_back(a.substr(0, a.size() - 1));
            args.emplace_back();
        } else
            args.emplace_back(a);
    }
    std::reverse(args.begin(), args.end());
    CLI::App& app = impl_->app;
    try {
        app.parse(args);
    } catch (const CLI::ValidationError& e) {
        throw usage_error(e.what());  // "--budget: expected a decimal number, got 'soon'"
    } catch (const CLI::ArgumentMismatch& e) {
        // "NAME: 1 required TEXT missing" or "NAME was given a disallowed flag override".
        const std::string what = e.what();
        std::string name = what.substr(0, what.find_first_of(": "));
        if (what.find("flag override") != std::string::npos)
            throw usage_error((name.starts_with("-") ? name : "--" + name) + " takes no value");
        throw usage_error(name + ": missing value");
    } catch (const CLI::ParseError& e) {
        throw usage_error(e.what());
    }
    // What CLI11 left: unknown options, and the `--` that ended the options.
    for (const std::string& a : app.remaining())
        if (a != "--") throw usage_error("unknown option '" + a + "'");
    for (const CLI::Option* o : impl_->value_options)
        if (o->count() > 1) throw usage_error(first_long_name(*o) + " given twice");
}

bool options::given(const std::string& name) const { return impl_->app.count(name) > 0; }

std::int64_t options::parse_integer(const std::string& name, const std::string& s, std::int64_t low, std::int64_t high) {
    std::int64_t v = 0;
    if (auto problem = integer_problem(s, low, high, v); !problem.empty()) throw usage_error(name + ": " + problem);
    return v;
}

}  // namespace tsopt::cli
