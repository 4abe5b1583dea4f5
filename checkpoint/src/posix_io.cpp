// fsync, small synced files and positioned reads, with errno turned into CheckpointError.
#include "posix_io.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "ringtrain/checkpoint/error.hpp"
#include "ringtrain/files/error.hpp"
#include "ringtrain/files/input.hpp"
#include "ringtrain/files/output.hpp"

namespace ringtrain::checkpoint::detail {
namespace {

[[noreturn]] void fail_errno(const std::filesystem::path& path, const std::string& what) {
  const int error = errno;
  throw CheckpointError(path, what + ": " + std::strerror(error));
}

// Owns one descriptor for the duration of a function.
class Descriptor {
 public:
  Descriptor(const std::filesystem::path& path, int flags, mode_t mode = 0)
      : fd_(::open(path.c_str(), flags | O_CLOEXEC, mode)) {
    if (fd_ < 0) fail_errno(path, "cannot open");
  }
  ~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  int fd() const { return fd_; }
  // close() reports deferred write errors on some file systems: check it when writing.
  void close(const std::filesystem::path& path) {
    const int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) fail_errno(path, "close failed");
  }

 private:
  int fd_;
};

}  // namespace

void fsync_file(const std::filesystem::path& path) {
  Descriptor file(path, O_RDONLY);
  if (::fsync(file.fd()) != 0) fail_errno(path, "fsync failed");
  file.close(path);
}

void fsync_directory(const std::filesystem::path& dir) {
  Descriptor directory(dir, O_RDONLY | O_DIRECTORY);
  if (::fsync(directory.fd()) != 0) fail_errno(dir, "fsync of the directory failed");
}

namespace {

// Created new (O_EXCL: a FIFO or a link by that name is refused, a leftover regular file
// replaced), written whole, optionally fsynced, closed with its result checked.
void write_whole(const std::filesystem::path& path, std::string_view content, bool sync) {
  try {
    files::NewFile file(path);
    file.write(content);
    if (sync) file.sync();
    file.close();
    file.keep();
  } catch (const files::FileError& error) {
    throw CheckpointError(error.path(), error.reason());
  }
}

}  // namespace

void write_synced(const std::filesystem::path& path, std::string_view content) {
  write_whole(path, content, true);
}

void write_unsynced(const std::filesystem::path& path, std::string_view content) {
  write_whole(path, content, false);
}

void write_at(const std::filesystem::path& path, std::uint64_t offset,
              std::span<const std::byte> bytes) {
  Descriptor file(path, O_WRONLY);
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pwrite(file.fd(), bytes.data() + done, bytes.size() - done,
                               static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_errno(path, "write failed");
    done += static_cast<std::size_t>(n);
  }
  file.close(path);
}

std::string read_small_file(const std::filesystem::path& path, std::size_t max_bytes) {
  try {
    return files::read_small_file(path, {.max_bytes = max_bytes, .follow_symlinks = true});
  } catch (const files::FileError& error) {
    throw CheckpointError(error.path(), error.reason());
  }
}

ReadOnlyFile::ReadOnlyFile(const std::filesystem::path& path)
    : path_(path), fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
  if (fd_ < 0) fail_errno(path, "cannot open");
}

ReadOnlyFile::~ReadOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

ReadOnlyFile::ReadOnlyFile(ReadOnlyFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}

std::uint64_t ReadOnlyFile::size() const {
  struct stat info {};
  if (::fstat(fd_, &info) != 0) fail_errno(path_, "fstat failed");
  return static_cast<std::uint64_t>(info.st_size);
}

void ReadOnlyFile::read_at(std::uint64_t offset, std::span<std::byte> out) const {
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n =
        ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_errno(path_, "read failed");
    if (n == 0)
      throw CheckpointError(path_, "file ends at byte " + std::to_string(offset + done) +
                                       ", data extends to byte " +
                                       std::to_string(offset + out.size()) + " (truncated?)");
    done += static_cast<std::size_t>(n);
  }
}

bool write_to_pipe(int fd, std::string_view bytes) {
  sigset_t pipe_signal, previous;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, &previous);
  bool ok = true;
  for (std::size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ok = false;
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  if (!ok) {
    const timespec zero{0, 0};
    sigtimedwait(&pipe_signal, nullptr, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return ok;
}

}  // namespace ringtrain::checkpoint::detail
