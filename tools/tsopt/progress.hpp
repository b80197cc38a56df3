#pragma once
// Progress on a terminal: a bar rewritten in place on stderr while operators
// are measured or graphs are timed, and a ticker against the search budget.
// Silent when stderr is not a terminal (pipes, CI logs, tests).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

namespace tsopt::cli {

class progress {
public:
    progress() : tty_(isatty(STDERR_FILENO) == 1) {}
    progress(const progress&) = delete;
    progress& operator=(const progress&) = delete;
    ~progress() { stop_ticker(); }

    bool enabled() const { return tty_; }

    // "label [#########...........]  12/40"
    void bar(const std::string& label, std::size_t done, std::size_t total) {
        if (!tty_ || total == 0) return;
        constexpr std::size_t width = 30;
        std::size_t fill = done >= total ? width : done * width / total;
        std::string s = label + " [" + std::string(fill, '#') + std::string(width - fill, '.') + "] " +
                        std::to_string(done) + "/" + std::to_string(total);
        line(s);
    }
    void line(const std::string& s) {
        if (!tty_) return;
        std::lock_guard lk(out_);
        std::fprintf(stderr, "\r\033[K%s", s.c_str());
        std::fflush(stderr);
    }
    void clear() {
        if (!tty_) return;
        std::lock_guard lk(out_);
        std::fprintf(stderr, "\r\033[K");
        std::fflush(stderr);
    }

    // A bar that fills with elapsed time against `budget_s`, redrawn twice a
    // second on a thread until stop_ticker().
    void start_ticker(std::string label, double budget_s) {
        if (!tty_ || ticker_.joinable()) return;
        stop_ = false;
        ticker_ = std::thread([this, label = std::move(label), budget_s] {
            const auto t0 = std::chrono::steady_clock::now();
            std::unique_lock lk(m_);
            while (!stop_) {
                double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                auto ds = static_cast<std::size_t>(s * 10), db = static_cast<std::size_t>(budget_s * 10);
                char buf[64];
                std::snprintf(buf, sizeof buf, " %.1f s of %.1f s", s, budget_s);
                if (!tty_) break;
                {
                    constexpr std::size_t width = 30;
                    std::size_t fill = db == 0 || ds >= db ? width : ds * width / db;
                    line(label + " [" + std::string(fill, '#') + std::string(width - fill, '.') + "]" + buf);
                }
                cv_.wait_for(lk, std::chrono::milliseconds(500), [&] { return stop_.load(); });
            }
        });
    }
    void stop_ticker() {
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
    bool tty_;
    std::mutex out_, m_;
    std::condition_variable cv_;
    std::atomic<bool> stop_{false};
    std::thread ticker_;
};

}  // namespace tsopt::cli
