#pragma once
// Progress of long work on stderr: the CLI's steps (measuring operators,
// searching, timing graphs), tsopt-gen's phases, the examples. One of three
// modes:
//  - terminal (stderr is a TTY): a bar rewritten in place, and a ticker
//    against the search budget;
//  - log (a pipe, a file, CI): plain lines, one when a step starts, at each
//    quarter of a bar and when it ends, so a log shows where time went
//    without carriage returns or escape codes;
//  - quiet (--quiet): nothing.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace tsopt::io {

class progress {
public:
    enum class mode { terminal, log, quiet };

    // `tag` starts every line written to a log ("tsopt: ...").
    explicit progress(bool quiet = false, std::string tag = "tsopt")
        : mode_(quiet ? mode::quiet : isatty(STDERR_FILENO) == 1 ? mode::terminal : mode::log), tag_(std::move(tag)) {}
    progress(const progress&) = delete;
    progress& operator=(const progress&) = delete;
    ~progress() { stop_ticker(); }

    mode current() const { return mode_; }

    // "label [#########...........] 12/40 detail" on a terminal; in a log,
    // the start, each quarter and the end (a changing `detail`, such as a
    // running count, does not make a line of its own).
    void bar(const std::string& label, std::size_t done, std::size_t total, const std::string& detail = {}) {
        if (mode_ == mode::quiet || total == 0) return;
        const std::string tail = detail.empty() ? "" : " " + detail;
        if (mode_ == mode::log) {
            const std::size_t quarter = done >= total ? 4 : done * 4 / total;
            if (label == bar_label_ && quarter == bar_quarter_) return;
            bar_label_ = label;
            bar_quarter_ = quarter;
            print_line(label + ": " + std::to_string(done) + "/" + std::to_string(total) + tail);
            return;
        }
        constexpr std::size_t width = 30;
        std::size_t fill = done >= total ? width : done * width / total;
        line(label + " [" + std::string(fill, '#') + std::string(width - fill, '.') + "] " + std::to_string(done) + "/" +
             std::to_string(total) + tail);
    }
    // A status line: rewritten in place on a terminal, a line of its own in a log.
    void line(const std::string& s) {
        if (mode_ == mode::quiet) return;
        if (mode_ == mode::log) return print_line(s);
        std::lock_guard lk(out_);
        std::fprintf(stderr, "\r\033[K%s", s.c_str());
        std::fflush(stderr);
    }
    // A line that stays, in both modes (a phase's result): on a terminal
    // it replaces the status line.
    void note(const std::string& s) {
        if (mode_ == mode::quiet) return;
        if (mode_ == mode::log) return print_line(s);
        std::lock_guard lk(out_);
        std::fprintf(stderr, "\r\033[K%s: %s\n", tag_.c_str(), s.c_str());
        std::fflush(stderr);
    }
    void clear() {
        if (mode_ != mode::terminal) return;
        std::lock_guard lk(out_);
        std::fprintf(stderr, "\r\033[K");
        std::fflush(stderr);
    }

    // A bar that fills with elapsed time against `budget_s`, redrawn twice a
    // second on a thread until stop_ticker(); in a log, a line at the start
    // and one at the end with the time taken.
    void start_ticker(std::string label, double budget_s) {
        if (mode_ == mode::quiet || ticker_.joinable() || ticking_) return;
        char buf[64];
        std::snprintf(buf, sizeof buf, " (budget %.1f s)", budget_s);
        if (mode_ == mode::log) {
            ticking_ = true;
            tick_label_ = label;
            tick_start_ = std::chrono::steady_clock::now();
            print_line(label + buf);
            return;
        }
        stop_ = false;
        ticker_ = std::thread([this, label = std::move(label), budget_s] {
            const auto t0 = std::chrono::steady_clock::now();
            std::unique_lock lk(m_);
            while (!stop_) {
                double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                auto ds = static_cast<std::size_t>(s * 10), db = static_cast<std::size_t>(budget_s * 10);
                char text[64];
                std::snprintf(text, sizeof text, " %.1f s of %.1f s", s, budget_s);
                constexpr std::size_t width = 30;
                std::size_t fill = db == 0 || ds >= db ? width : ds * width / db;
                line(label + " [" + std::string(fill, '#') + std::string(width - fill, '.') + "]" + text);
                cv_.wait_for(lk, std::chrono::milliseconds(500), [&] { return stop_.load(); });
            }
        });
    }
    void stop_ticker() {
        if (ticking_) {
            ticking_ = false;
            char buf[64];
            std::snprintf(buf, sizeof buf, ": done after %.1f s",
                          std::chrono::duration<double>(std::chrono::steady_clock::now() - tick_start_).count());
            print_line(tick_label_ + buf);
        }
        if (!ticker_.joinable()) return;
        {
            std::lock_guard lk(m_);
            stop_ = true;
        }
        cv_.notify_all();
        ticker_.join();
        clear();
    }

private:
    void print_line(const std::string& s) {
        if (s == last_line_) return;
        last_line_ = s;
        std::lock_guard lk(out_);
        std::fprintf(stderr, "%s: %s\n", tag_.c_str(), s.c_str());
        std::fflush(stderr);
    }

    mode mode_;
    std::string tag_;
    std::mutex out_, m_;
    std::condition_variable cv_;
    std::atomic<bool> stop_{false};
    std::thread ticker_;
    // log mode
    std::string bar_label_, last_line_, tick_label_;
    std::size_t bar_quarter_ = 0;
    bool ticking_ = false;
    std::chrono::steady_clock::time_point tick_start_;
};

}  // namespace tsopt::io
