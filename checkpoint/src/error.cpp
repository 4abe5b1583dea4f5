// CheckpointError: "<file>: <reason> [HDF5: <innermost HDF5 description>]".
#include "ringtrain/checkpoint/error.hpp"

namespace ringtrain::checkpoint {
namespace {

// The last non-empty line of the stack: HDF5 lists the API call first and the root cause last.
std::string innermost(const std::string& stack) {
  std::size_t end = stack.size();
  while (end > 0 && stack[end - 1] == '\n') --end;
  if (end == 0) return {};
  const std::size_t newline = stack.rfind('\n', end - 1);
  const std::size_t begin = newline == std::string::npos ? 0 : newline + 1;
  return stack.substr(begin, end - begin);
}

std::string compose(const std::filesystem::path& file, const std::string& reason,
                    const std::string& hdf5_stack) {
  std::string text = file.empty() ? reason : file.string() + ": " + reason;
  if (!hdf5_stack.empty()) text += " [HDF5: " + innermost(hdf5_stack) + "]";
  return text;
}

}  // namespace

CheckpointError::CheckpointError(const std::filesystem::path& file, const std::string& reason,
                                 const std::string& hdf5_stack)
    : std::runtime_error(compose(file, reason, hdf5_stack)),
      details_(std::make_shared<const Details>(Details{file, reason, hdf5_stack})) {}

CheckpointError::CheckpointError(const std::string& reason)
    : CheckpointError(std::filesystem::path{}, reason) {}

}  // namespace ringtrain::checkpoint
