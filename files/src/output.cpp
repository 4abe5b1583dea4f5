// Outputs written safely (output.hpp): the destination checked, a temporary of our own beside
// it, every write checked, then an atomic rename.
#include "ringtrain/files/output.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <utility>

#include "ringtrain/files/error.hpp"
#include "ringtrain/files/input.hpp"

namespace ringtrain::files {
namespace fs = std::filesystem;

void check_output(const fs::path& destination, std::span<const fs::path> inputs) {
  struct stat target {};
  // stat follows a symbolic link: what matters is the file a rename would hide or a write
  // would reach. A dangling link is "nothing there" (the rename replaces the link).
  if (::stat(destination.c_str(), &target) != 0) {
    if (errno == ENOENT) return;
    throw FileError(destination, "cannot examine: " + errno_text(errno));
  }
  if (!S_ISREG(target.st_mode))
    throw FileError(destination, "exists and is " + kind_of_mode(target.st_mode) +
                                     ", not a regular file: refused");
  for (const fs::path& input : inputs) {
    struct stat source {};
    if (::stat(input.c_str(), &source) == 0 && source.st_dev == target.st_dev &&
        source.st_ino == target.st_ino)
      throw FileError(destination, "is the same file as the input " + input.string() +
                                       " of this command: refused (write the output elsewhere)");
  }
}

NewFile::NewFile(const fs::path& path) : path_(path) {
  const std::string there = kind_at(path);
  if (there == "a regular file") {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
      throw FileError(path, "cannot remove a leftover file: " + errno_text(errno));
  } else if (!there.empty()) {
    throw FileError(path, "exists and is " + there + ", not a regular file: refused");
  }
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) throw FileError(path, "cannot create: " + errno_text(errno));
}

NewFile::~NewFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!keep_ && !path_.empty()) ::unlink(path_.c_str());
}

NewFile::NewFile(NewFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)), keep_(other.keep_) {
  other.path_.clear();
}

void NewFile::write(std::string_view bytes) {
  for (std::size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw FileError(path_, "write failed: " + errno_text(errno));
    done += static_cast<std::size_t>(n);
  }
}

void NewFile::sync() {
  if (::fsync(fd_) != 0) throw FileError(path_, "fsync failed: " + errno_text(errno));
}

void NewFile::close() {
  const int fd = std::exchange(fd_, -1);
  if (fd >= 0 && ::close(fd) != 0) throw FileError(path_, "close failed: " + errno_text(errno));
}

void NewFile::keep() {
  keep_ = true;
}

void sync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw FileError(dir, "cannot open the directory: " + errno_text(errno));
  const int synced = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (synced != 0) throw FileError(dir, "fsync of the directory failed: " + errno_text(error));
}

void rename_into_place(const fs::path& from, const fs::path& to, bool sync) {
  check_output(to);
  if (::rename(from.c_str(), to.c_str()) != 0)
    throw FileError(from, "rename to " + to.string() + " failed: " + errno_text(errno));
  if (sync) sync_directory(to.has_parent_path() ? to.parent_path() : fs::path("."));
}

void write_file_atomically(const fs::path& destination, std::string_view bytes,
                           const WriteOptions& options) {
  check_output(destination, options.inputs);
  NewFile temp(destination.string() + ".tmp");
  temp.write(bytes);
  if (options.sync) temp.sync();
  temp.close();
  rename_into_place(temp.path(), destination, options.sync);
  temp.keep();  // renamed: nothing left to remove
}

}  // namespace ringtrain::files
