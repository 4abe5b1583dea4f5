// FileError and errno_text (error.hpp).
#include "ringtrain/files/error.hpp"

#include <cstring>

namespace ringtrain::files {

FileError::FileError(const std::filesystem::path& path, const std::string& reason)
    : std::runtime_error(path.string() + ": " + reason),
      details_(std::make_shared<const Details>(Details{path, reason})) {}

std::string errno_text(int error) {
  const char* name = strerrordesc_np(error);
  const char* abbrev = strerrorname_np(error);
  std::string text = name != nullptr ? name : "error " + std::to_string(error);
  if (abbrev != nullptr) text += std::string(" (") + abbrev + ")";
  return text;
}

}  // namespace ringtrain::files
