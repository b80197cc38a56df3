// io/atomic_file.hpp: the destination holds the old content or the complete
// new one, whatever the write runs into.
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <doctest/doctest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tsopt/io/atomic_file.hpp"

namespace fs = std::filesystem;

namespace {

std::string read_all(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

fs::path fresh_dir(const char* name) {
    auto d = fs::temp_directory_path() / (std::string("tsopt_atomic_") + name + "_" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
}

std::size_t entries(const fs::path& d) {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(d)) ++n;
    return n;
}

// The message of the tsopt::error that `write` throws under a file size
// limit of `limit` bytes (SIGXFSZ ignored, so the write fails with EFBIG
// instead of killing the test); empty when it throws none.
template <class Write>
std::string error_under_file_size_limit(rlim_t limit, Write&& write) {
    auto previous_handler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit saved{};
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved) == 0);
    rlimit small = saved;
    small.rlim_cur = limit;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
    std::string what;
    try {
        write();
    } catch (const tsopt::error& e) {
        what = e.what();
    }
    ::setrlimit(RLIMIT_FSIZE, &saved);
    std::signal(SIGXFSZ, previous_handler);
    return what;
}

}  // namespace

TEST_CASE("atomic file: writes, replaces, keeps permissions and links") {
    auto d = fresh_dir("basic");
    auto f = d / "out.bin";
    tsopt::io::write_file_atomically(f, "first");
    CHECK(read_all(f) == "first");
    ::chmod(f.c_str(), 0640);
    tsopt::io::write_file_atomically(f, std::string(100000, 'x'));
    CHECK(read_all(f) == std::string(100000, 'x'));
    struct stat st {};
    REQUIRE(::stat(f.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0640);
    // A link keeps pointing at its (replaced) target.
    fs::create_symlink(f, d / "link.bin");
    tsopt::io::write_file_atomically(d / "link.bin", "via link");
    CHECK(fs::is_symlink(d / "link.bin"));
    CHECK(read_all(f) == "via link");
    CHECK(entries(d) == 2);  // no temporary left behind
    fs::remove_all(d);
}

TEST_CASE("atomic file: temporaries a killed writer left behind are removed, a live writer's are kept") {
    auto d = fresh_dir("stale");
    // A process that has exited: its pid names no process now (pids are not
    // reused this quickly).
    pid_t dead = ::fork();
    if (dead == 0) ::_exit(0);
    REQUIRE(dead > 0);
    int status = 0;
    ::waitpid(dead, &status, 0);
    const auto stale = d / (".out.bin.tmp." + std::to_string(dead) + ".0");
    const auto live = d / ".out.bin.tmp.1.0";           // pid 1 is alive
    const auto other = d / (".other.bin.tmp." + std::to_string(dead) + ".0");  // another destination's
    for (const auto& p : {stale, live, other}) std::ofstream(p) << "partial";
    tsopt::io::write_file_atomically(d / "out.bin", "new");
    CHECK(read_all(d / "out.bin") == "new");
    CHECK_FALSE(fs::exists(stale));
    CHECK(fs::exists(live));
    CHECK(fs::exists(other));
    fs::remove_all(d);
}

TEST_CASE("atomic file: a write cut short by ulimit -f leaves the old content and no temporary") {
    auto d = fresh_dir("ulimit");
    auto f = d / "model.onnx";
    const std::string old(4096, 'o');
    tsopt::io::write_file_atomically(f, old);

    const std::string what =
        error_under_file_size_limit(8192, [&] { tsopt::io::write_file_atomically(f, std::string(1 << 20, 'n')); });

    CHECK(what.find("model.onnx") != std::string::npos);
    CHECK(what.find("untouched") != std::string::npos);
    CHECK(read_all(f) == old);
    CHECK(entries(d) == 1);
    fs::remove_all(d);
}

TEST_CASE("atomic file: named errors for a missing directory and a directory destination") {
    auto d = fresh_dir("errors");
    CHECK_THROWS_WITH_AS(tsopt::io::write_file_atomically(d / "no" / "x.onnx", "x"),
                         doctest::Contains("cannot create a file"), tsopt::error);
    CHECK_FALSE(fs::exists(d / "no"));  // never created
    CHECK_THROWS_WITH_AS(tsopt::io::write_file_atomically(d, "x"), doctest::Contains("directory"), tsopt::error);
    REQUIRE(::mkfifo((d / "fifo").c_str(), 0600) == 0);
    CHECK_THROWS_WITH_AS(tsopt::io::write_file_atomically(d / "fifo", "x"), doctest::Contains("not a regular file"),
                         tsopt::error);
    CHECK(fs::is_fifo(d / "fifo"));
    fs::remove_all(d);
}

TEST_CASE("atomic file writer: a text written piece by piece, committed or abandoned") {
    auto d = fresh_dir("writer");
    auto f = d / "listing.txt";
    tsopt::io::write_file_atomically(f, "old");
    // Pieces below, across and above the writer's 1 MiB buffer, in order.
    std::string expected;
    {
        tsopt::io::atomic_file_writer w(f);
        for (int i = 0; i < 200000; ++i) {
            std::string line = "line " + std::to_string(i) + "\n";
            w.write(line);
            expected += line;
            if (i == 1000) {
                std::string big(3 << 20, 'b');
                w.write(big);
                expected += big;
            }
        }
        CHECK(read_all(f) == "old");  // nothing replaced before commit()
        w.commit();
        CHECK_THROWS_WITH_AS(w.write("more"), doctest::Contains("after it was committed"), tsopt::error);
    }
    CHECK(read_all(f) == expected);
    CHECK(entries(d) == 1);
    // A producer that fails: the writer is destroyed uncommitted.
    try {
        tsopt::io::atomic_file_writer w(f);
        w.write(std::string(2 << 20, 'x'));
        throw tsopt::error("producer failed");
    } catch (const tsopt::error&) {
    }
    CHECK(read_all(f) == expected);
    CHECK(entries(d) == 1);

    // Cut short by ulimit -f while pieces are still coming.
    const std::string what = error_under_file_size_limit(1 << 20, [&] {
        tsopt::io::atomic_file_writer w(f);
        for (int i = 0; i < 400000; ++i) w.write("0123456789\n");
        w.commit();
    });
    CHECK(what.find("listing.txt") != std::string::npos);
    CHECK(what.find("untouched") != std::string::npos);
    CHECK(read_all(f) == expected);
    CHECK(entries(d) == 1);
    fs::remove_all(d);
}
