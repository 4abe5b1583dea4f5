// escaped() (escape.hpp): one pass, at most max_bytes input bytes looked at.
#include "ringtrain/files/escape.hpp"

namespace ringtrain::files {

std::string escaped(std::string_view bytes, std::size_t max_bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string shown;
  const std::string_view head = bytes.substr(0, max_bytes);
  shown.reserve(head.size() + 16);
  for (const char c : head) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f && byte != '\\') {
      shown += c;
    } else {
      shown += "\\x";
      shown += kHex[byte >> 4];
      shown += kHex[byte & 0xf];
    }
  }
  if (bytes.size() > max_bytes) shown += "... (" + std::to_string(bytes.size()) + " bytes)";
  return shown;
}

}  // namespace ringtrain::files
