// Files replaced whole (atomic_file.hpp).
#include "ringtrain/framework/atomic_file.hpp"

#include "ringtrain/files/output.hpp"

namespace ringtrain {

void write_file_atomically(const std::filesystem::path& path, const std::string& text) {
  files::write_file_atomically(path, text);
}

}  // namespace ringtrain
