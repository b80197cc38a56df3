// The MPI ranks of tsopt-gen-mpi as a gen::process_team (docs/generator.md,
// "On MPI"). The main thread makes the exchanges; the verification's worker
// threads draw candidates from a counter, one at a time under the driver's
// lock and never beside an exchange: MPI_THREAD_SERIALIZED.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <limits>
#include <memory>
#include <thread>
#include <string>
#include <string_view>
#include <vector>

#include "gen.hpp"

namespace tsopt::gen {

class mpi_team final : public process_team {
public:
    // MPI_Init_thread; the destructor finalizes.
    mpi_team(int* argc, char*** argv) {
        int provided = 0;
        MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
        if (provided < MPI_THREAD_SERIALIZED) {
            finalize();
            throw error("MPI provides thread level " + std::to_string(provided) +
                        ", tsopt-gen-mpi needs MPI_THREAD_SERIALIZED (worker threads draw work, one at a time)");
        }
        // Errors come back as codes, named in a tsopt::error, instead of aborting inside MPI.
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
        MPI_Comm_size(MPI_COMM_WORLD, &size_);
    }
    mpi_team(const mpi_team&) = delete;
    mpi_team& operator=(const mpi_team&) = delete;
    ~mpi_team() override { finalize(); }

    int rank() const override { return rank_; }
    int size() const override { return size_; }

    std::vector<std::string> all_gather(const std::string& mine) override {
        const auto procs = static_cast<std::size_t>(size_), me = static_cast<std::size_t>(rank_);
        std::uint64_t n = mine.size();
        std::vector<std::uint64_t> sizes(procs);
        MPI_Request req;
        check(MPI_Iallgather(&n, 1, MPI_UINT64_T, sizes.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD, &req), "MPI_Iallgather");
        wait(req, "MPI_Iallgather");
        std::uint64_t total = 0;
        for (auto k : sizes) total += k;
        // Large (the pairs gathered at N=5, past MPI's int counts there):
        // point to point, each process's bytes received into their own
        // string, where one buffer for all of them, then cut into copies,
        // held the team's bytes twice. Every rank sees the same sizes, so
        // every rank takes the same branch. (Test hook, tests/generator/
        // mpi_test.sh: TSOPT_GEN_TEST_GATHER_POINT_TO_POINT takes it for
        // every gather.)
        static const bool always = std::getenv("TSOPT_GEN_TEST_GATHER_POINT_TO_POINT") != nullptr;
        if (always || total > (64ull << 20)) {
            std::vector<std::string> from(procs);
            for (std::size_t q = 0; q < procs; ++q)
                if (q != me) from[q].resize(sizes[q]);
            point_to_point(std::vector<std::string_view>(procs, mine), from);
            from[me] = mine;
            return from;
        }
        std::vector<int> counts(procs), offsets(procs);
        for (std::size_t q = 0, at = 0; q < procs; at += sizes[q], ++q) {
            counts[q] = static_cast<int>(sizes[q]);
            offsets[q] = static_cast<int>(at);
        }
        std::string all(static_cast<std::size_t>(total), '\0');
        check(MPI_Iallgatherv(mine.data(), static_cast<int>(n), MPI_CHAR, all.data(), counts.data(), offsets.data(), MPI_CHAR,
                              MPI_COMM_WORLD, &req),
              "MPI_Iallgatherv");
        wait(req, "MPI_Iallgatherv");
        std::vector<std::string> out;
        for (std::size_t q = 0; q < procs; ++q)
            out.push_back(all.substr(static_cast<std::size_t>(offsets[q]), static_cast<std::size_t>(counts[q])));
        return out;
    }

    std::vector<std::string> all_to_all(std::vector<std::string> to_each) override {
        const auto procs = static_cast<std::size_t>(size_), me = static_cast<std::size_t>(rank_);
        if (to_each.size() != procs)
            throw error("tsopt-gen-mpi: all_to_all given " + std::to_string(to_each.size()) + " messages for " + std::to_string(procs) + " ranks");
        std::vector<std::uint64_t> send_n(procs), recv_n(procs);
        for (std::size_t q = 0; q < procs; ++q) send_n[q] = to_each[q].size();
        MPI_Request req;
        check(MPI_Ialltoall(send_n.data(), 1, MPI_UINT64_T, recv_n.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD, &req), "MPI_Ialltoall");
        wait(req, "MPI_Ialltoall");
        std::vector<std::string> from(procs);
        for (std::size_t q = 0; q < procs; ++q)
            if (q != me) from[q].resize(recv_n[q]);
        point_to_point(std::vector<std::string_view>(to_each.begin(), to_each.end()), from);
        from[me] = std::move(to_each[me]);
        return from;
    }

    // An MPI window of one 64-bit integer on rank 0, added to atomically
    // (MPI_Fetch_and_op) under a passive-target lock held for its lifetime.
    class mpi_counter final : public counter {
    public:
        mpi_counter() {
            int rank = 0;
            MPI_Comm_rank(MPI_COMM_WORLD, &rank);
            const MPI_Aint bytes = rank == 0 ? sizeof(std::uint64_t) : 0;
            check(MPI_Win_allocate(bytes, sizeof(std::uint64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &base_, &win_), "MPI_Win_allocate");
            if (rank == 0) *static_cast<std::uint64_t*>(base_) = 0;
            barrier();  // rank 0's zero is written before anyone adds
            check(MPI_Win_lock_all(0, win_), "MPI_Win_lock_all");
        }
        mpi_counter(const mpi_counter&) = delete;
        mpi_counter& operator=(const mpi_counter&) = delete;
        ~mpi_counter() override {
            // Unwinding after an error only this rank saw: the others are not
            // here to meet, and the job ends with MPI_Abort (main.cpp).
            if (std::uncaught_exceptions() > unwinding_) return;
            MPI_Win_unlock_all(win_);
            // MPI_Win_free synchronizes and spins: meet first, sleeping between polls.
            try {
                barrier();
            } catch (const error&) {
            }
            MPI_Win_free(&win_);
        }
        std::uint64_t fetch_add(std::uint64_t n) override {
            std::uint64_t before = 0;
            check(MPI_Fetch_and_op(&n, &before, MPI_UINT64_T, 0, 0, MPI_SUM, win_), "MPI_Fetch_and_op");
            check(MPI_Win_flush(0, win_), "MPI_Win_flush");
            return before;
        }

    private:
        static void barrier() {
            MPI_Request req;
            check(MPI_Ibarrier(MPI_COMM_WORLD, &req), "MPI_Ibarrier");
            wait(req, "MPI_Ibarrier");
        }
        void* base_ = nullptr;
        MPI_Win win_ = MPI_WIN_NULL;
        int unwinding_ = std::uncaught_exceptions();
    };
    std::unique_ptr<counter> make_counter() override { return std::make_unique<mpi_counter>(); }

    // Ends every rank: for an error only this rank knows of, where the others
    // would wait in the next exchange forever.
    [[noreturn]] void abort_all(int code) { MPI_Abort(MPI_COMM_WORLD, code); std::abort(); }

private:
    // to_each[q] to process q and from process q into from[q], already
    // sized (the sizes exchanged before), for every other process; every
    // message in pieces within MPI's int count, all posted at once (a
    // piece's tag is its index: pieces between two ranks arrive in order anyway).
    void point_to_point(const std::vector<std::string_view>& to_each, std::vector<std::string>& from) {
        const auto procs = static_cast<std::size_t>(size_), me = static_cast<std::size_t>(rank_);
        constexpr std::uint64_t piece = 1ull << 30;
        std::vector<MPI_Request> reqs;
        auto post = [&](std::size_t q, bool receive) {
            if (q == me) return;
            const std::uint64_t n = receive ? from[q].size() : to_each[q].size();
            for (std::uint64_t off = 0, k = 0; off < n; off += piece, ++k) {
                const int len = static_cast<int>(std::min(piece, n - off)), tag = static_cast<int>(k % 30000);
                reqs.emplace_back();
                if (receive)
                    check(MPI_Irecv(from[q].data() + off, len, MPI_CHAR, static_cast<int>(q), tag, MPI_COMM_WORLD, &reqs.back()), "MPI_Irecv");
                else
                    check(MPI_Isend(to_each[q].data() + off, len, MPI_CHAR, static_cast<int>(q), tag, MPI_COMM_WORLD, &reqs.back()),
                          "MPI_Isend");
            }
        };
        for (std::size_t q = 0; q < procs; ++q) post(q, true);
        for (std::size_t q = 0; q < procs; ++q) post(q, false);
        for (auto& r : reqs) wait(r, "the point-to-point exchange");
    }
    // A blocking collective spins on its core, which the other ranks need
    // where ranks outnumber cores (mpirun --oversubscribe: the tests, and 4
    // ranks on this 2-core machine in bench/generator_mpi_scaling.sh).
    // Polls, then sleeps between polls.
    static void wait(MPI_Request& req, const char* what) {
        auto t0 = std::chrono::steady_clock::now();
        for (int done = 0;;) {
            check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), what);
            if (done) return;
            if (std::chrono::steady_clock::now() - t0 > std::chrono::microseconds(50))
                std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    }
    static void check(int rc, const char* what) {
        if (rc == MPI_SUCCESS) return;
        char text[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, text, &len);
        throw error(std::string("tsopt-gen-mpi: ") + what + " failed: " + std::string(text, static_cast<std::size_t>(len)));
    }
    void finalize() {
        int done = 0;
        MPI_Finalized(&done);
        if (!done) MPI_Finalize();
    }
    int rank_ = 0, size_ = 1;
};

}  // namespace tsopt::gen
