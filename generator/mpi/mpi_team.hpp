// The MPI ranks of tsopt-gen-mpi as a gen::process_team (docs/generator.md,
// "On MPI"). Only the calling (main) thread talks to MPI: the verification's
// worker threads compute between exchanges, so MPI_THREAD_FUNNELED suffices.
#pragma once

#include <mpi.h>

#include <chrono>
#include <limits>
#include <thread>
#include <string>
#include <vector>

#include "gen.hpp"

namespace tsopt::gen {

class mpi_team final : public process_team {
public:
    // MPI_Init_thread; the destructor finalizes.
    mpi_team(int* argc, char*** argv) {
        int provided = 0;
        MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
        if (provided < MPI_THREAD_FUNNELED) {
            finalize();
            throw error("MPI provides thread level " + std::to_string(provided) +
                        ", tsopt-gen-mpi needs MPI_THREAD_FUNNELED (worker threads beside MPI calls on the main thread)");
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
        if (mine.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
            throw error("tsopt-gen-mpi: an exchange of " + std::to_string(mine.size()) + " bytes is over MPI's int count");
        int n = static_cast<int>(mine.size());
        std::vector<int> counts(static_cast<std::size_t>(size_)), offsets(static_cast<std::size_t>(size_));
        MPI_Request req;
        check(MPI_Iallgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD, &req), "MPI_Iallgather");
        wait(req, "MPI_Iallgather");
        long long total = 0;
        for (int q = 0; q < size_; ++q) {
            offsets[static_cast<std::size_t>(q)] = static_cast<int>(total);
            total += counts[static_cast<std::size_t>(q)];
        }
        if (total > std::numeric_limits<int>::max())
            throw error("tsopt-gen-mpi: an exchange of " + std::to_string(total) + " bytes in all is over MPI's int count");
        std::string all(static_cast<std::size_t>(total), '\0');
        check(MPI_Iallgatherv(mine.data(), n, MPI_CHAR, all.data(), counts.data(), offsets.data(), MPI_CHAR, MPI_COMM_WORLD,
                             &req),
              "MPI_Iallgatherv");
        wait(req, "MPI_Iallgatherv");
        std::vector<std::string> out;
        for (int q = 0; q < size_; ++q)
            out.push_back(all.substr(static_cast<std::size_t>(offsets[static_cast<std::size_t>(q)]),
                                     static_cast<std::size_t>(counts[static_cast<std::size_t>(q)])));
        return out;
    }

    // Ends every rank: for an error only this rank knows of, where the others
    // would wait in the next exchange forever.
    [[noreturn]] void abort_all(int code) { MPI_Abort(MPI_COMM_WORLD, code); std::abort(); }

private:
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
