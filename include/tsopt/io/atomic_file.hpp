#pragma once
// Writing a file so that, whatever happens during the write (a kill, a full
// disk, `ulimit -f`, a power cut), the destination holds either its old
// content or the complete new one, never a prefix.
//
//   tsopt::io::write_file_atomically("out/model.onnx", bytes);   // throws tsopt::error
//   (atomic_file_writer, below: the same for a text written piece by piece)
//
// The bytes go to a fresh temporary file in the destination's own directory
// (so that the final rename(2) stays on one file system and is atomic), are
// flushed to the device with fsync(2), and the temporary is renamed over the
// destination; the directory is then synced so the rename itself survives a
// crash. On any failure the temporary is removed and the destination is left
// untouched. A destination that is a symbolic link keeps the link: its target
// is replaced. An existing destination's permission bits are kept. A kill -9
// during a write leaves its temporary (`.NAME.tmp.PID.N`) behind; the next
// write of the same destination removes those whose process is gone.
//
// Every file tsopt writes goes through here: exported models, reports, DOT
// and SVG pictures, measurement caches, generated rule tables.
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tsopt/core/error.hpp"

namespace tsopt::io {

namespace detail {

// Closes a descriptor on scope exit unless released; removes the temporary
// unless the rename succeeded.
struct temp_file {
    int fd = -1;
    std::filesystem::path path;
    bool keep = false;
    ~temp_file() {
        if (fd >= 0) ::close(fd);
        if (!keep && !path.empty()) ::unlink(path.c_str());
    }
};

inline std::string errno_text(int e) { return std::error_code(e, std::generic_category()).message(); }

// Removes the temporaries `.NAME.tmp.PID.N` of `name` in `dir` whose writer
// process no longer exists (killed mid-write). Best effort: a live or
// unknown writer's file, or any error, leaves things as they are.
inline void remove_stale_temporaries(const std::filesystem::path& dir, const std::string& name) {
    const std::string prefix = "." + name + ".tmp.";
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string f = it->path().filename().string();
        if (!f.starts_with(prefix)) continue;
        const std::string rest = f.substr(prefix.size());
        const auto dot = rest.find('.');
        if (dot == 0 || dot == std::string::npos || rest.find_first_not_of("0123456789") != dot) continue;
        const long pid = std::strtol(rest.substr(0, dot).c_str(), nullptr, 10);
        if (pid <= 0 || pid == ::getpid()) continue;
        if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) ::unlink(it->path().c_str());
    }
}

}  // namespace detail

// The same guarantees for a text made piece by piece and too large to hold
// twice (tsopt-gen's listings of a million candidates): the pieces go to the
// temporary as they come (buffered), and only commit() replaces the
// destination. Destroyed uncommitted (an exception while producing), the
// writer removes its temporary and leaves the destination as it was.
//
//   tsopt::io::atomic_file_writer w("out/listing.txt");
//   for (const auto& line : lines) w.write(line);
//   w.commit();
class atomic_file_writer {
public:
    explicit atomic_file_writer(const std::filesystem::path& destination) : shown_(destination.string()) {
        namespace fs = std::filesystem;
        std::error_code ec;
        dest_ = destination;
        // Replace a link's target, not the link.
        if (fs::is_symlink(dest_, ec)) {
            fs::path target = fs::weakly_canonical(dest_, ec);
            if (!ec) dest_ = target;
        }
        if (dest_.filename().empty()) throw error("cannot write '" + shown_ + "': not a file name");
        if (fs::is_directory(dest_, ec)) throw error("cannot write '" + shown_ + "': it is a directory");
        // A device or FIFO is not replaced by a file (renaming over /dev/null
        // would remove the device).
        if (fs::exists(dest_, ec) && !fs::is_regular_file(dest_, ec))
            throw error("cannot write '" + shown_ + "': it exists and is not a regular file");
        dir_ = dest_.has_parent_path() ? dest_.parent_path() : fs::path(".");

        detail::remove_stale_temporaries(dir_, dest_.filename().string());
        // A name no other writer (another thread, process or tsopt run) uses.
        static std::atomic<unsigned> counter{0};
        for (int attempt = 0; tmp_.fd < 0; ++attempt) {
            tmp_.path = dir_ / ("." + dest_.filename().string() + ".tmp." + std::to_string(::getpid()) + "." +
                                std::to_string(counter.fetch_add(1)));
            tmp_.fd = ::open(tmp_.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
            if (tmp_.fd < 0 && (errno != EEXIST || attempt > 100)) {
                int e = errno;
                tmp_.path.clear();
                throw error("cannot write '" + shown_ + "': cannot create a file in '" + dir_.string() +
                            "': " + detail::errno_text(e));
            }
        }
        struct stat old {};
        if (::stat(dest_.c_str(), &old) == 0 && S_ISREG(old.st_mode)) ::fchmod(tmp_.fd, old.st_mode & 07777);
    }
    atomic_file_writer(const atomic_file_writer&) = delete;
    atomic_file_writer& operator=(const atomic_file_writer&) = delete;

    // Small pieces are gathered into one buffer; a large one goes straight
    // to the file (after what the buffer holds).
    void write(std::string_view bytes) {
        if (committed_) throw error("writing '" + shown_ + "' after it was committed");
        if (buffer_.size() + bytes.size() <= buffer_limit) {
            buffer_.append(bytes);
            return;
        }
        flush();
        if (bytes.size() >= buffer_limit) put(bytes);
        else buffer_.append(bytes);
    }

    // What was written, flushed to the device (fsync), then renamed over the
    // destination, the directory synced so the rename survives a crash.
    void commit() {
        if (committed_) return;
        flush();
        std::string().swap(buffer_);
        if (::fsync(tmp_.fd) != 0) {
            int e = errno;
            throw error("writing '" + shown_ + "' failed: fsync: " + detail::errno_text(e));
        }
        int fd = tmp_.fd;
        tmp_.fd = -1;
        if (::close(fd) != 0) {
            int e = errno;
            throw error("writing '" + shown_ + "' failed: close: " + detail::errno_text(e));
        }
        if (::rename(tmp_.path.c_str(), dest_.c_str()) != 0) {
            int e = errno;
            throw error("cannot write '" + shown_ + "': rename: " + detail::errno_text(e));
        }
        tmp_.keep = true;
        committed_ = true;
        // A file system that cannot sync directories (EINVAL) has nothing more to do.
        if (int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
            ::fsync(dfd);
            ::close(dfd);
        }
    }

private:
    static constexpr std::size_t buffer_limit = std::size_t{1} << 20;

    void flush() {
        put(buffer_);
        buffer_.clear();
    }
    void put(std::string_view bytes) {
        for (std::size_t done = 0; done < bytes.size();) {
            ssize_t n = ::write(tmp_.fd, bytes.data() + done, bytes.size() - done);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                int e = n < 0 ? errno : EIO;
                throw error("writing '" + shown_ + "' failed after " + std::to_string(written_ + done) + " bytes: " +
                            detail::errno_text(e) + " (the previous content, if any, is untouched)");
            }
            done += static_cast<std::size_t>(n);
        }
        written_ += bytes.size();
    }

    std::string shown_;
    std::filesystem::path dest_, dir_;
    detail::temp_file tmp_;
    std::string buffer_;
    std::size_t written_ = 0;
    bool committed_ = false;
};

inline void write_file_atomically(const std::filesystem::path& destination, std::string_view bytes) {
    atomic_file_writer w(destination);
    w.write(bytes);
    w.commit();
}

}  // namespace tsopt::io
