// read_small_file and kind_at (input.hpp): check what the path is before reading from it.
#include "ringtrain/files/input.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "ringtrain/files/error.hpp"

namespace ringtrain::files {

std::string kind_of_mode(unsigned int mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

namespace {

// Owns one descriptor for the duration of a function.
struct Descriptor {
  int fd;
  ~Descriptor() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string kind_at(const std::filesystem::path& path) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) == 0) return kind_of_mode(info.st_mode);
  if (errno == ENOENT) return "";
  throw FileError(path, "cannot examine: " + errno_text(errno));
}

std::string read_small_file(const std::filesystem::path& path, const InputRules& rules) {
  const int flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | (rules.follow_symlinks ? 0 : O_NOFOLLOW);
  const Descriptor file{::open(path.c_str(), flags)};
  if (file.fd < 0) {
    const int error = errno;
    if (error == ELOOP && !rules.follow_symlinks)
      throw FileError(path, "is a symbolic link, not a regular file: refused");
    throw FileError(path, "cannot open: " + errno_text(error));
  }
  struct stat info {};
  if (::fstat(file.fd, &info) != 0) throw FileError(path, "fstat failed: " + errno_text(errno));
  if (!S_ISREG(info.st_mode))
    throw FileError(path, "is " + kind_of_mode(info.st_mode) + ", not a regular file: refused");
  if (static_cast<std::uint64_t>(info.st_size) > rules.max_bytes)
    throw FileError(path, "holds " + std::to_string(info.st_size) + " bytes, more than the " +
                              std::to_string(rules.max_bytes) + " expected: refused");
  // Sized by what fstat said, grown if the file grows meanwhile, never past max_bytes + 1.
  std::string content(static_cast<std::size_t>(info.st_size) + 1, '\0');
  std::size_t done = 0;
  for (;;) {
    if (done == content.size()) {
      if (done > rules.max_bytes)
        throw FileError(path, "grew beyond " + std::to_string(rules.max_bytes) +
                                  " bytes while it was read: refused");
      content.resize(std::min(rules.max_bytes + 1, 2 * content.size()));
    }
    const ssize_t n = ::read(file.fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw FileError(path, "read failed: " + errno_text(errno));
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  content.resize(done);
  return content;
}

}  // namespace ringtrain::files
