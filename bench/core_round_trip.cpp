// How far apart the first two CPUs this process may run on are: the round
// trip of a cache line between a thread pinned to each (a store seen by the
// other thread, answered by a store seen back), in nanoseconds.
//
//   build/bench/core_round_trip [--rounds N]     prints e.g. "core round trip: 55.2 ns"
//
// Why: on this project's 2-vCPU virtual machines the host moves the two vCPUs
// between cores that share a last-level cache and cores that do not
// (AMD EPYC: another CCD), within seconds. The round trip then reads about
// 55 ns or about 330 ns, and a 2-thread inference hands data between the
// threads at every operator: zoo_nasnet_a ran 152 ms and 172 ms a few
// minutes apart with the same file. bench/vs_runtimes.py runs this after each
// 2-thread round so a table shows which state its rows were measured in.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

// The first two CPUs of the process's affinity mask; false with fewer.
bool two_cpus(int& a, int& b) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return false;
    a = b = -1;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (!CPU_ISSET(c, &set)) continue;
        if (a < 0) a = c;
        else {
            b = c;
            return true;
        }
    }
    return false;
}

bool pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

// Median over batches of the mean round trip within a batch: a batch the
// host interrupted (a descheduled vCPU) reads long and is out-voted.
double round_trip_ns(int a, int b, int rounds) {
    alignas(64) std::atomic<int> flag{0};
    constexpr int batches = 9;
    const int per_batch = std::max(1, rounds / batches);
    std::atomic<bool> pinned{true};
    std::thread echo([&] {
        if (!pin(b)) pinned = false;
        for (int i = 0; i < batches * per_batch; ++i) {
            while (flag.load(std::memory_order_acquire) != 2 * i + 1) {
            }
            flag.store(2 * i + 2, std::memory_order_release);
        }
    });
    if (!pin(a)) pinned = false;
    std::vector<double> ns;
    for (int k = 0, i = 0; k < batches; ++k) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int j = 0; j < per_batch; ++j, ++i) {
            flag.store(2 * i + 1, std::memory_order_release);
            while (flag.load(std::memory_order_acquire) != 2 * i + 2) {
            }
        }
        ns.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / per_batch);
    }
    echo.join();
    if (!pinned) return -1;
    std::nth_element(ns.begin(), ns.begin() + batches / 2, ns.end());
    return ns[batches / 2];
}

}  // namespace

int main(int argc, char** argv) {
    int rounds = 90000;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
            rounds = std::atoi(argv[++i]);
            if (rounds < 9 || rounds > 100000000) {
                std::fprintf(stderr, "core_round_trip: --rounds must be within 9..100000000\n");
                return 1;
            }
        } else {
            std::fprintf(stderr, "usage: core_round_trip [--rounds N]\n");
            return 1;
        }
    }
    int a = 0, b = 0;
    if (!two_cpus(a, b)) {
        std::fprintf(stderr, "core_round_trip: this process may run on fewer than two CPUs\n");
        return 2;
    }
    const double ns = round_trip_ns(a, b, rounds);
    if (ns < 0) {
        std::fprintf(stderr, "core_round_trip: could not pin a thread to CPU %d or %d\n", a, b);
        return 2;
    }
    std::printf("core round trip: %.1f ns (CPUs %d and %d)\n", ns, a, b);
    return 0;
}
