// Loading the MAC key: the file's type and mode are checked before its bytes are read (a
// key that others may read is no secret), then 32 raw bytes or 64 hex digits are accepted.
#include "ringtrain/checkpoint/key.hpp"

#include <sodium.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "posix_io.hpp"
#include "ringtrain/checkpoint/error.hpp"
#include "seal.hpp"

namespace ringtrain::checkpoint {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void check_mode(const std::filesystem::path& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0)
    throw CheckpointError(path, "cannot read the checkpoint key file (does it exist?)");
  if (!S_ISREG(info.st_mode)) throw CheckpointError(path, "checkpoint key: not a regular file");
  if ((info.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(info.st_mode & 07777));
    throw CheckpointError(path, std::string("checkpoint key file has mode ") + mode +
                                    ": group or others may read it; refused (chmod 600 it)");
  }
}

}  // namespace

MacKey MacKey::from_bytes(std::span<const unsigned char, kBytes> bytes) {
  MacKey key;
  std::copy(bytes.begin(), bytes.end(), key.bytes_.begin());
  return key;
}

MacKey MacKey::load(const std::filesystem::path& path) {
  check_mode(path);
  std::string text = detail::read_small_file(path, 2 * kBytes + 2);
  MacKey key;
  if (text.size() == kBytes) {
    std::copy(text.begin(), text.end(), key.bytes_.begin());
  } else {
    if (!text.empty() && text.back() == '\n') text.pop_back();
    bool ok = text.size() == 2 * kBytes;
    for (std::size_t i = 0; ok && i < kBytes; ++i) {
      const int high = hex_value(text[2 * i]), low = hex_value(text[2 * i + 1]);
      ok = high >= 0 && low >= 0;
      key.bytes_[i] = static_cast<unsigned char>(high * 16 + low);
    }
    if (!ok)
      throw CheckpointError(path, "checkpoint key must be 32 raw bytes or 64 hex digits (" +
                                      std::to_string(text.size()) + " bytes found)");
  }
  sodium_memzero(text.data(), text.size());
  return key;
}

std::optional<std::filesystem::path> key_file_in_use(const std::filesystem::path& flag) {
  if (!flag.empty()) return flag;
  const char* file = std::getenv(kKeyFileVariable);
  if (file == nullptr || *file == '\0') return std::nullopt;
  return std::filesystem::path(file);
}

std::optional<MacKey> MacKey::from_environment() {
  return from_flag_or_environment({});
}

std::optional<MacKey> MacKey::from_flag_or_environment(const std::filesystem::path& flag) {
  const auto file = key_file_in_use(flag);
  if (!file) return std::nullopt;
  return load(*file);
}

MacKey::~MacKey() {
  sodium_memzero(bytes_.data(), bytes_.size());
}

}  // namespace ringtrain::checkpoint
