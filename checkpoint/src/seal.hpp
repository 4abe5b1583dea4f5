// The seal of a version-2 checkpoint file: a 512-byte HDF5 user block at the start of the
// file, which HDF5 skips (its superblock starts at byte 512). Rank 0 writes it after HDF5
// has closed the file and before the fsync; every reader checks it with plain POSIX reads
// before libhdf5 opens the file, so a file whose bytes changed is refused before HDF5
// parses any of them.
//
//   offset  bytes  field (integers little-endian)
//        0      8  magic "\x89RTSEAL\n"
//        8      4  seal version (2, the format version that introduced it)
//       12      4  flags: bit 0 = a keyed MAC is present
//       16      8  file length in bytes (seal included)
//       24     16  content digest: XXH3-128 of bytes [512, EOF) (canonical byte order)
//       40     16  TOC digest: XXH3-128 of the table of contents (below)
//       56      8  number of entries in the table of contents
//       64     32  MAC: keyed BLAKE2b-256 of bytes [512, EOF) then [0, 64); zeros if none
//       96    416  zeros
//
// Table of contents: every entry's group, name, kind (the dtype), shape and stored xxh3,
// sorted by (group, name) so that the writer's insertion order and the reader's listing
// order give the same bytes. After HDF5 opened the file, the reader compares the TOC it
// finds with this digest: an entry deleted, added or renamed is refused even when someone
// recomputed the (public, unkeyed) content digest. Only the MAC resists a forger.
// Private to the checkpoint module.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "posix_io.hpp"
#include "ringtrain/checkpoint/key.hpp"
#include "ringtrain/checkpoint/state_tree.hpp"

namespace ringtrain::checkpoint::detail {

inline constexpr std::uint64_t kSealBytes = 512;
inline constexpr int kSealVersion = 2;

using Digest128 = std::array<unsigned char, 16>;

struct TocEntry {
  Group group;
  std::string name;
  Kind kind;
  Dims shape;  // arrays; empty otherwise
  std::uint64_t xxh3;
};

// The canonical digest of a table of contents (sorted inside; the order given is irrelevant).
Digest128 toc_digest(std::vector<TocEntry> entries);

// What a checked seal holds.
struct Seal {
  std::uint64_t file_bytes = 0;
  Digest128 content{};
  Digest128 toc{};
  std::uint64_t entry_count = 0;
  bool has_mac = false;
};

// Writes the seal into the first kSealBytes of `path` (created by HDF5 with that user
// block, closed): reads [512, EOF) back to digest it (and MAC it if `key`). Does not fsync.
// Throws CheckpointError.
void write_seal(const std::filesystem::path& path, const Digest128& toc, std::uint64_t entry_count,
                const MacKey* key);

// The first bytes of the file say which format it is: the seal magic (version 2) or the
// HDF5 signature (version 1, no seal). Anything else is refused.
bool starts_with_seal(const ReadOnlyFile& file, const std::filesystem::path& path);

// How much of the seal check_seal checks. kBlockOnly skips the pass over the content (its
// digest and MAC): only for a contained reader child, whose parent checks the content.
enum class SealScope { kWhole, kBlockOnly };

// Checks the seal with plain reads: magic, version, flags, reserved bytes, length against
// the file's size, then (one pass over [512, EOF)) the MAC if `key` is given and the
// content digest, and the HDF5 signature at byte 512. Throws CheckpointError naming the
// file: "not signed with this key (...)", "content digest mismatch ...", ...
Seal check_seal(const ReadOnlyFile& file, const std::filesystem::path& path, const MacKey* key,
                SealScope scope = SealScope::kWhole);

// In a contained reader child only (contained.cpp): from now on every reader in this process
// checks the seal's block but not the content, which the parent checks while the child runs.
void leave_content_to_parent();
SealScope seal_scope();

// Rejects a file without a seal when a key is given ("not signed with this key").
void refuse_unsealed_with_key(const std::filesystem::path& path, const MacKey* key);

// "1f0e..." (32 hex digits), for messages.
std::string hex(const Digest128& digest);

// sodium_init() once per process; throws CheckpointError if libsodium cannot start.
void ensure_sodium();

}  // namespace ringtrain::checkpoint::detail
