// tsopt._tsopt: the compiled half of the Python package (python/tsopt/).
//   run(args) -> (exit code, stdout, stderr): the `tsopt` command line
//     (tools/tsopt/dispatch.cpp) in this process, its output captured, so
//     tsopt.optimize does exactly what `tsopt optimize` does (search,
//     on-board choice, verification, atomic writes, report);
//   rules(set) -> [(name, text, provenance)]: the built-in rule sets;
//   version: TSOPT_VERSION_STRING.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdio>
#include <fcntl.h>
#include <iostream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unistd.h>
#include <vector>

#include "../tools/tsopt/commands.hpp"
#include "tsopt/rules/built_in.hpp"
#include "tsopt/version.hpp"

namespace nb = nanobind;

namespace {

// Sends file descriptor `fd` (1 or 2) to a temporary file while alive;
// text() flushes both C and C++ streams and reads what was written. The
// command writes with std::cout/std::cerr (and oneDNN may write with
// printf), which Python's sys.stdout never sees, so capture is at the
// descriptor.
class captured_fd {
public:
    explicit captured_fd(int fd) : fd_(fd) {
        std::fflush(nullptr);
        tmp_ = std::tmpfile();
        if (!tmp_) throw std::runtime_error("tsopt: cannot create a temporary file to capture output");
        saved_ = ::dup(fd_);
        if (saved_ < 0 || ::dup2(::fileno(tmp_), fd_) < 0) {
            std::fclose(tmp_);
            throw std::runtime_error("tsopt: cannot redirect output");
        }
    }
    captured_fd(const captured_fd&) = delete;
    captured_fd& operator=(const captured_fd&) = delete;
    ~captured_fd() {
        restore();
        std::fclose(tmp_);
    }

    std::string text() {
        std::cout.flush();
        std::cerr.flush();
        std::fflush(nullptr);
        restore();
        std::string s;
        std::rewind(tmp_);
        char buf[4096];
        for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, tmp_)) > 0;) s.append(buf, n);
        return s;
    }

private:
    void restore() {
        if (saved_ < 0) return;
        std::fflush(nullptr);
        ::dup2(saved_, fd_);
        ::close(saved_);
        saved_ = -1;
    }
    int fd_;
    int saved_ = -1;
    std::FILE* tmp_ = nullptr;  // removed by the system once closed
};

std::tuple<int, std::string, std::string> run(std::vector<std::string> args) {
    args.insert(args.begin(), "tsopt");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int code = 0;
    std::string out, err;
    {
        nb::gil_scoped_release no_gil;  // the search takes seconds; other Python threads run
        captured_fd cout_capture(1), cerr_capture(2);
        code = tsopt::cli::run_command_line(static_cast<int>(args.size()), argv.data());
        err = cerr_capture.text();
        out = cout_capture.text();
    }
    return {code, out, err};
}

std::vector<std::tuple<std::string, std::string, std::string>> rules(const std::string& set) {
    tsopt::rules::built_in_rules chosen(tsopt::rules::parse_built_in_set(set));
    std::vector<std::tuple<std::string, std::string, std::string>> r;
    for (const auto& rule : chosen.rules())
        r.emplace_back(std::string(rule.name), std::string(rule.text), std::string(rule.provenance));
    return r;
}

}  // namespace

NB_MODULE(_tsopt, m) {
    m.doc() = "tsopt's compiled core; use the functions of the tsopt package";
    m.def("run", &run, nb::arg("args"),
          "Runs the tsopt command line (without the program name) in this process; returns (exit code, stdout, stderr).");
    m.def("rules", &rules, nb::arg("set") = "generated",
          "The built-in rule set 'generated', 'axioms' or 'all' as (name, text, provenance) tuples.");
    m.attr("version") = TSOPT_VERSION_STRING;
}
