// The one error type of the files module: a file that cannot be read or written safely,
// named with the reason, e.g.
//
//   "out.npy: exists and is a character device, not a regular file: refused"
//   "run/manifest.json.tmp: write failed: No space left on device (ENOSPC)"
//
// The modules above turn it into their own error type where they need to (checkpoint:
// CheckpointError); elsewhere it reaches main() as any std::exception.
#pragma once

#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

namespace ringtrain::files {

class FileError : public std::runtime_error {
 public:
  // what() = "<path>: <reason>".
  FileError(const std::filesystem::path& path, const std::string& reason);

  const std::filesystem::path& path() const noexcept { return details_->path; }
  const std::string& reason() const noexcept { return details_->reason; }

 private:
  struct Details {
    std::filesystem::path path;
    std::string reason;
  };
  std::shared_ptr<const Details> details_;  // shared: copying an exception never throws
};

// "No space left on device (ENOSPC)": strerror with the errno's name, for messages.
std::string errno_text(int error);

}  // namespace ringtrain::files
