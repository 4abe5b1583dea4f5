// Small files that a careless or hostile hand may have left in place of the expected one
// (a run directory's LATEST, manifest.json, metrics.jsonl, a --config file): a FIFO, a
// directory, a device, a symbolic link to elsewhere, a gigabyte of garbage. A plain open()
// of a FIFO blocks until a writer appears, forever; reading /dev/zero never ends.
//
// read_small_file opens with O_NONBLOCK (a FIFO opens at once) and, unless told otherwise,
// O_NOFOLLOW, then checks with fstat that it is a regular file of at most max_bytes BEFORE
// reading a byte; the read is bounded by max_bytes + 1 in case the file grows meanwhile.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

namespace ringtrain::files {

struct InputRules {
  std::size_t max_bytes = 1 << 20;
  // false: a symbolic link at the path is refused (files a program writes itself, such as
  // LATEST and manifest.json, are never links). true: a link is followed (a --config file the
  // user names may be one); the target must still be a regular file.
  bool follow_symlinks = false;
};

// The whole file. Throws FileError naming the path: missing, not a regular file ("is a
// FIFO"), a symbolic link (unless followed), larger than max_bytes, unreadable.
std::string read_small_file(const std::filesystem::path& path, const InputRules& rules);

// What lies at `path`, without following a symbolic link: "" if nothing, else "a regular
// file", "a directory", "a FIFO", "a socket", "a character device", "a block device",
// "a symbolic link". Throws FileError if lstat fails for another reason than ENOENT.
std::string kind_at(const std::filesystem::path& path);
// The same words for a st_mode that stat or fstat returned.
std::string kind_of_mode(unsigned int st_mode);

}  // namespace ringtrain::files
