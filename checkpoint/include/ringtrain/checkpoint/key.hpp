// The secret key of the keyed checkpoint MAC (`--checkpoint-key FILE`). With a
// key, every file a run writes carries a BLAKE2b MAC (libsodium crypto_generichash, 32-byte
// key, 32-byte tag) over its seal and all its bytes, and a reader given the key refuses any
// file without a valid MAC before HDF5 parses a byte of it: "not signed with this key".
//
// A key file holds exactly 32 bytes, raw or as 64 hexadecimal digits (one trailing newline
// allowed), e.g. `head -c 32 /dev/urandom > ck.key && chmod 600 ck.key`. Like ssh with a
// private key, a key file that group or others may read is refused.
#pragma once

#include <array>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <span>

namespace ringtrain::checkpoint {

// The environment variable that names a key file when no flag does.
inline constexpr const char* kKeyFileVariable = "RINGTRAIN_CHECKPOINT_KEY_FILE";

// The key file a run uses: `flag` if not empty, else $RINGTRAIN_CHECKPOINT_KEY_FILE if set
// and not empty, else nullopt (checkpoints are not signed). Does not read the file.
std::optional<std::filesystem::path> key_file_in_use(const std::filesystem::path& flag);

class MacKey {
 public:
  static constexpr std::size_t kBytes = 32;

  // Reads and checks a key file (regular file, mode without group/other bits, 32 bytes raw
  // or 64 hex digits). Throws CheckpointError naming the file and the reason.
  static MacKey load(const std::filesystem::path& path);
  // load() of the file that $RINGTRAIN_CHECKPOINT_KEY_FILE names; nullopt if it is unset or
  // empty. Throws like load().
  static std::optional<MacKey> from_environment();
  // load(key_file_in_use(flag)) if there is one (the CLI's order of precedence).
  static std::optional<MacKey> from_flag_or_environment(const std::filesystem::path& flag);
  static MacKey from_bytes(std::span<const unsigned char, kBytes> bytes);

  MacKey(const MacKey& other) = default;
  MacKey& operator=(const MacKey& other) = default;
  ~MacKey();  // wipes the key bytes

  std::span<const unsigned char, kBytes> bytes() const { return bytes_; }

 private:
  MacKey() = default;
  std::array<unsigned char, kBytes> bytes_{};
};

}  // namespace ringtrain::checkpoint
