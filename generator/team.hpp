// The processes one tsopt-gen run is spread over, and the bytes they
// exchange (tsopt-gen-mpi: its MPI ranks, mpi/mpi_team.hpp; docs/generator.md,
// "On MPI").
#pragma once

#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tsopt/core/error.hpp"

namespace tsopt::gen {

// The processes walk different subtrees of the enumeration, drawn from a
// shared counter as each finishes the last; each graph goes
// to the process that owns its fingerprint's range (all_to_all), which
// pairs, confirms and prunes its buckets; the surviving pairs are gathered
// to every process. The processes draw the verification's candidates from
// a shared counter too (by position only a reused solver's queries, whose
// verdicts depend on the queries before them), and each step's outcomes
// are exchanged, so that every process holds the same state after each
// step (the rule base included) and the outcomes are those of one process
// alone. Process 0 writes the files.
class process_team {
public:
    virtual ~process_team() = default;
    virtual int rank() const = 0;
    virtual int size() const = 0;
    // Collective: every process's bytes, in rank order, on every process.
    virtual std::vector<std::string> all_gather(const std::string& mine) = 0;
    // Collective: `to_each[q]` goes to process q; returns what each process
    // sent this one, in rank order.
    virtual std::vector<std::string> all_to_all(std::vector<std::string> to_each) = 0;
    // Collective: a counter every process draws work from, first come first
    // served (the enumeration's subtrees), starting at 0. Destroyed
    // collectively too.
    class counter {
    public:
        virtual ~counter() = default;
        // The value before adding n (from one thread of a process at a time).
        virtual std::uint64_t fetch_add(std::uint64_t n) = 0;
    };
    virtual std::unique_ptr<counter> make_counter() = 0;
};
// An error every process of the team raised at the same step (a failure one
// of them reported in an exchange): no process waits for the others.
struct team_error : error {
    using error::error;
};

// The bytes of one exchange (the same executable on every rank, as mpirun
// starts it: same layout).
struct byte_writer {
    std::string out;
    template <class T>
    void pod(const T& v) {
        out.append(reinterpret_cast<const char*>(&v), sizeof v);
    }
    void text(const std::string& t) {
        pod<std::uint64_t>(t.size());
        out += t;
    }
    // A process's failure, "" for none: the first field of every exchange.
    void failure(const std::exception_ptr& f) {
        std::string why;
        if (f) try {
                std::rethrow_exception(f);
            } catch (const std::exception& e) {
                why = e.what();
            } catch (...) {
                why = "an exception that is not a std::exception";
            }
        text(why);
    }
};
struct byte_reader {
    std::string_view in;
    template <class T>
    T pod() {
        if (in.size() < sizeof(T)) throw error("the bytes end early (truncated)");
        T v;
        std::memcpy(&v, in.data(), sizeof v);
        in.remove_prefix(sizeof v);
        return v;
    }
    std::string text() {
        auto n = pod<std::uint64_t>();
        if (in.size() < n) throw error("the bytes end early (truncated text)");
        std::string t(in.substr(0, n));
        in.remove_prefix(n);
        return t;
    }
    // Reads byte_writer::failure into `first` unless it holds one already.
    void failure(std::size_t process, std::string& first) {
        if (auto why = text(); !why.empty() && first.empty()) first = "process " + std::to_string(process) + ": " + why;
    }
};

// The process that owns a fingerprint within fingerprint partition
// `partition` of `partitions` (options::partitions): the partition's range
// cut into `procs` equal ranges, in fingerprint order, so that the
// processes' buckets in rank order are the buckets in fingerprint order.
inline unsigned owner_of(std::uint64_t fp, unsigned partition, unsigned partitions, unsigned procs) {
    return static_cast<unsigned>(((fp >> 32) * (static_cast<std::uint64_t>(partitions) * procs)) >> 32) - partition * procs;
}

// This process's share of positions [b, e) of a list: those equal to its
// rank modulo the team's size (all of them without a team).
inline std::size_t first_of_share(std::size_t b, std::size_t rank, std::size_t procs) {
    return b + (rank + procs - b % procs) % procs;
}

}  // namespace tsopt::gen
