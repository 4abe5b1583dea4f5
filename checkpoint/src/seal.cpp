// Writing and checking the seal (seal.hpp shows its layout). The content digest and the MAC
// are computed in one streaming pass over [512, EOF) with positioned reads: memory stays
// bounded whatever the file's size, and nothing here knows HDF5.
#include "seal.hpp"

#include <sodium.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <span>
#include <tuple>

#include "ringtrain/checkpoint/error.hpp"

namespace ringtrain::checkpoint::detail {
namespace {

constexpr unsigned char kMagic[8] = {0x89, 'R', 'T', 'S', 'E', 'A', 'L', '\n'};
constexpr unsigned char kHdf5Signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
constexpr std::size_t kVersionAt = 8, kFlagsAt = 12, kLengthAt = 16, kContentAt = 24, kTocAt = 40,
                      kCountAt = 56, kMacAt = 64, kReservedAt = 96;
constexpr std::uint32_t kFlagMac = 1;
constexpr std::size_t kBlockBytes = std::size_t{1} << 20;

using Block = std::array<unsigned char, kSealBytes>;

void put_u32(Block& block, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) block[at + i] = static_cast<unsigned char>(v >> (8 * i));
}
void put_u64(Block& block, std::size_t at, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) block[at + i] = static_cast<unsigned char>(v >> (8 * i));
}
std::uint64_t get_le(const Block& block, std::size_t at, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= std::uint64_t{block[at + i]} << (8 * i);
  return v;
}

Digest128 canonical(XXH128_hash_t hash) {
  XXH128_canonical_t bytes;
  XXH128_canonicalFromHash(&bytes, hash);
  Digest128 out;
  std::memcpy(out.data(), bytes.digest, out.size());
  return out;
}

struct Xxh3StateDeleter {
  void operator()(XXH3_state_t* state) const { XXH3_freeState(state); }
};
using Xxh3State = std::unique_ptr<XXH3_state_t, Xxh3StateDeleter>;

Xxh3State new_xxh3_128() {
  Xxh3State state(XXH3_createState());
  if (!state || XXH3_128bits_reset(state.get()) != XXH_OK) throw std::bad_alloc();
  return state;
}

// One pass over [kSealBytes, file_bytes): the content digest and, with a key, the MAC of
// those bytes followed by block[0, kMacAt). The writer passes fill_content so that the
// digest is stored into the block before the MAC covers it; the reader MACs the block as
// stored.
struct Digests {
  Digest128 content{};
  std::array<unsigned char, crypto_generichash_BYTES> mac{};
};

Digests digest_content(const ReadOnlyFile& file, std::uint64_t file_bytes, Block& block,
                       bool fill_content, const MacKey* key) {
  const Xxh3State xxh = new_xxh3_128();
  crypto_generichash_state mac_state;
  if (key != nullptr) {
    ensure_sodium();
    crypto_generichash_init(&mac_state, key->bytes().data(), key->bytes().size(),
                            crypto_generichash_BYTES);
  }
  std::vector<unsigned char> buffer(kBlockBytes);
  for (std::uint64_t at = kSealBytes; at < file_bytes;) {
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(kBlockBytes, file_bytes - at));
    file.read_at(at, std::as_writable_bytes(std::span(buffer.data(), n)));
    XXH3_128bits_update(xxh.get(), buffer.data(), n);
    if (key != nullptr) crypto_generichash_update(&mac_state, buffer.data(), n);
    at += n;
  }
  Digests out;
  out.content = canonical(XXH3_128bits_digest(xxh.get()));
  if (fill_content) std::memcpy(block.data() + kContentAt, out.content.data(), out.content.size());
  if (key != nullptr) {
    crypto_generichash_update(&mac_state, block.data(), kMacAt);
    crypto_generichash_final(&mac_state, out.mac.data(), out.mac.size());
  }
  return out;
}

void append_u64(const Xxh3State& state, std::uint64_t v) {
  unsigned char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(v >> (8 * i));
  XXH3_128bits_update(state.get(), bytes, sizeof bytes);
}

}  // namespace

void ensure_sodium() {
  static const bool ready = sodium_init() >= 0;
  if (!ready) throw CheckpointError("libsodium failed to initialise (sodium_init)");
}

std::string hex(const Digest128& digest) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text;
  for (unsigned char byte : digest) {
    text += kDigits[byte >> 4];
    text += kDigits[byte & 15];
  }
  return text;
}

Digest128 toc_digest(std::vector<TocEntry> entries) {
  std::sort(entries.begin(), entries.end(), [](const TocEntry& a, const TocEntry& b) {
    return std::tie(a.group, a.name) < std::tie(b.group, b.name);
  });
  const Xxh3State state = new_xxh3_128();
  append_u64(state, entries.size());
  for (const TocEntry& e : entries) {
    // group, name length, name, kind, rank, dims..., xxh3: every field length-delimited.
    append_u64(state, static_cast<std::uint64_t>(e.group));
    append_u64(state, e.name.size());
    XXH3_128bits_update(state.get(), e.name.data(), e.name.size());
    append_u64(state, static_cast<std::uint64_t>(e.kind));
    append_u64(state, e.shape.size());
    for (std::size_t d : e.shape) append_u64(state, d);
    append_u64(state, e.xxh3);
  }
  return canonical(XXH3_128bits_digest(state.get()));
}

void write_seal(const std::filesystem::path& path, const Digest128& toc, std::uint64_t entry_count,
                const MacKey* key) {
  Block block{};
  std::memcpy(block.data(), kMagic, sizeof kMagic);
  put_u32(block, kVersionAt, kSealVersion);
  put_u32(block, kFlagsAt, key != nullptr ? kFlagMac : 0);
  std::uint64_t file_bytes = 0;
  {
    const ReadOnlyFile file(path);
    file_bytes = file.size();
    if (file_bytes < kSealBytes)
      throw CheckpointError(path, "cannot seal: the file is shorter than its user block");
    put_u64(block, kLengthAt, file_bytes);
    std::memcpy(block.data() + kTocAt, toc.data(), toc.size());
    put_u64(block, kCountAt, entry_count);
    const Digests digests = digest_content(file, file_bytes, block, true, key);
    if (key != nullptr) std::memcpy(block.data() + kMacAt, digests.mac.data(), digests.mac.size());
  }
  write_at(path, 0, std::as_bytes(std::span(block)));
}

bool starts_with_seal(const ReadOnlyFile& file, const std::filesystem::path& path) {
  const std::uint64_t file_bytes = file.size();
  if (file_bytes == 0) throw CheckpointError(path, "empty file (0 bytes)");
  unsigned char head[8] = {};
  if (file_bytes < sizeof head)
    throw CheckpointError(path, "not an HDF5 file (only " + std::to_string(file_bytes) + " bytes)");
  file.read_at(0, std::as_writable_bytes(std::span(head)));
  if (std::memcmp(head, kMagic, sizeof head) == 0) return true;
  if (std::memcmp(head, kHdf5Signature, sizeof head) == 0) return false;
  // A version-2 file whose user block was erased still has HDF5's signature at 512.
  if (file_bytes >= kSealBytes + sizeof head) {
    file.read_at(kSealBytes, std::as_writable_bytes(std::span(head)));
    if (std::memcmp(head, kHdf5Signature, sizeof head) == 0)
      throw CheckpointError(path, "user block holds no seal (missing or overwritten): refused");
  }
  throw CheckpointError(path, "not an HDF5 file (no HDF5 signature at byte 0)");
}

namespace {
SealScope& process_seal_scope() {
  static SealScope scope = SealScope::kWhole;
  return scope;
}
}  // namespace

void leave_content_to_parent() {
  process_seal_scope() = SealScope::kBlockOnly;
}

SealScope seal_scope() {
  return process_seal_scope();
}

Seal check_seal(const ReadOnlyFile& file, const std::filesystem::path& path, const MacKey* key,
                SealScope scope) {
  const std::uint64_t file_bytes = file.size();
  if (file_bytes < kSealBytes + 8)
    throw CheckpointError(path, "seal: the file has " + std::to_string(file_bytes) +
                                    " bytes, less than its seal and an HDF5 signature: truncated");
  Block block{};
  file.read_at(0, std::as_writable_bytes(std::span(block)));
  const auto version = static_cast<std::uint32_t>(get_le(block, kVersionAt, 4));
  if (version != kSealVersion)
    throw CheckpointError(path, "seal version " + std::to_string(version) +
                                    "; this build reads version " + std::to_string(kSealVersion));
  const auto flags = static_cast<std::uint32_t>(get_le(block, kFlagsAt, 4));
  if (key != nullptr && (flags & kFlagMac) == 0)
    throw CheckpointError(path, "not signed with this key (the file carries no MAC): refused");
  // Without a MAC its 32 bytes are reserved too: every byte of the block has one meaning.
  const std::size_t reserved_from = (flags & kFlagMac) != 0 ? kReservedAt : kMacAt;
  if ((flags & ~kFlagMac) != 0 ||
      std::any_of(block.begin() + reserved_from, block.end(), [](unsigned char b) { return b; }))
    throw CheckpointError(path, "seal: unknown flags or non-zero reserved bytes: refused");
  Seal seal;
  seal.file_bytes = get_le(block, kLengthAt, 8);
  seal.has_mac = (flags & kFlagMac) != 0;
  seal.entry_count = get_le(block, kCountAt, 8);
  std::memcpy(seal.content.data(), block.data() + kContentAt, seal.content.size());
  std::memcpy(seal.toc.data(), block.data() + kTocAt, seal.toc.size());
#ifndef RINGTRAIN_FUZZING  // the fuzz build lets mutated files through to the HDF5 reader
  if (seal.file_bytes != file_bytes)
    throw CheckpointError(path, "file length " + std::to_string(seal.file_bytes) +
                                    " in the seal, the file has " + std::to_string(file_bytes) +
                                    " bytes (truncated or extended)");
  if (scope == SealScope::kWhole) {
    const Digests digests = digest_content(file, file_bytes, block, false, key);
    if (key != nullptr && crypto_verify_32(digests.mac.data(), block.data() + kMacAt) != 0)
      throw CheckpointError(path, "not signed with this key (MAC mismatch): refused");
    if (digests.content != seal.content)
      throw CheckpointError(path, "content digest " + hex(digests.content) +
                                      " differs from the seal's " + hex(seal.content) +
                                      ": the bytes after the seal were changed");
  }
#endif
  unsigned char signature[8] = {};
  file.read_at(kSealBytes, std::as_writable_bytes(std::span(signature)));
  if (std::memcmp(signature, kHdf5Signature, sizeof signature) != 0)
    throw CheckpointError(path, "no HDF5 signature after the seal (byte 512)");
  return seal;
}

void refuse_unsealed_with_key(const std::filesystem::path& path, const MacKey* key) {
  if (key != nullptr)
    throw CheckpointError(path, "not signed with this key (format version 1, no seal): refused");
}

}  // namespace ringtrain::checkpoint::detail
