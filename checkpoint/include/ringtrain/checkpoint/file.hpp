// One checkpoint file: a StateTree and a Header in HDF5. Rank 0 writes and reads
// it with the serial HDF5 library, on one thread; nothing here is collective.
//
// Layout, as h5dump shows it:
//
//   bytes [0, 512)            the seal (version 2): magic, length, XXH3-128 of the bytes
//                             after it, digest of the table of contents, optional keyed MAC
//                             (an HDF5 user block: HDF5 and h5dump skip it)
//   /                         attributes: format "ringtrain-checkpoint", version 2 (int32),
//                             step, epoch (uint64), world_size (int32), config (JSON string)
//   /model                    group (likewise /optimizer /schedule /data /rng /progress, all
//                             six always present, possibly empty)
//   /model/layers.0.linear|weight   dataset float32 LE (1024, 784), attribute xxh3 (uint64)
//
// Entry names map to HDF5 one-to-one: each entry is ONE dataset directly in its group, whose
// link name is the entry name with every '/' replaced by '|' (entry names never contain '|').
// So "/model/layers.0.linear/weight" is the dataset "/model/layers.0.linear|weight", and
// h5py reads it as f["model"]["layers.0.linear|weight"].
//
// Datasets: float32 arrays are IEEE F32LE, contiguous, unfiltered; int64/uint64/float64
// scalars are STD_I64LE/STD_U64LE/IEEE_F64LE with a scalar dataspace, compact; strings are
// fixed-length (null-padded, UTF-8) scalars. xxh3 = XXH3_64bits of the value's little-endian
// bytes (a string's bytes, without padding). Files use the HDF5 1.8 object formats, whose
// metadata (superblock v2, object headers v2, heaps, B-trees) carries HDF5's own checksums,
// so a flipped bit anywhere in the file is caught by HDF5 or by xxh3.
//
// Reading treats the file as untrusted input (HDF5 is not hardened against crafted files):
// with plain reads, before HDF5 opens it, a version-2 file's seal is checked (length, the
// digest of every byte after it, the MAC when a key is given: "not signed with this key");
// a file without a seal must start with the HDF5 signature and be version 1 (refused when a
// key is given); then format name and version are checked first;
// only expected paths are opened, and only through hard links held once (no soft, external
// or shared hard links); datasets must be contiguous or compact with no filters and no
// external storage; dtype, rank and shape are compared with the expectation and the stored
// size with the file size BEFORE anything is allocated or read; any missing, extra or
// mistyped object is refused; every checksum is verified. Tests forge object headers with
// valid HDF5 checksums (tests/checkpoint/crafted_test.cpp): these checks, not HDF5's, catch
// overflowing dims and data placed beyond the end of the file.
//
// Known HDF5 1.10.8 defect: an object header that fails HDF5's own checksum leaks one
// internal struct (a defect of HDF5 fixed in 1.14.4), and at exit HDF5 prints "HDF5:
// infinite loop closing library". Harmless (bounded, once per process); the read is refused
// as it should be.
//
// After the entries were read, the table of contents found (every entry's group, name,
// kind, shape and stored xxh3) must match the seal's digest exactly: an entry deleted,
// added or renamed is refused even if someone recomputed the public content digest.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "ringtrain/checkpoint/key.hpp"
#include "ringtrain/checkpoint/state_tree.hpp"
#include "ringtrain/checkpoint/version.hpp"

namespace ringtrain::checkpoint {

// The root attributes.
struct Header {
  std::string format = kFormatName;
  int version = kFormatVersion;
  std::uint64_t step = 0;  // optimizer steps completed
  std::uint64_t epoch = 0;
  int world_size = 1;              // ranks that wrote the state
  std::string config_json = "{}";  // the resolved run configuration
  // Not an attribute: set by the readers from the seal. True if the file carries a keyed MAC
  // (the run that wrote it was signed), whether or not the reader had the key to check it.
  bool mac_present = false;
};

// "layers.0.linear/weight" -> "layers.0.linear|weight" (the dataset's link name).
std::string hdf5_link_name(std::string_view entry_name);
// (kModel, "layers.0.linear/weight") -> "/model/layers.0.linear|weight".
std::string hdf5_path(Group group, std::string_view entry_name);

// Creates (truncating) `path` and writes `header` and every entry of `tree`; closes the file,
// writes the seal (with a MAC if `key`) and fsyncs it before returning. The header must carry
// kFormatName and kFormatVersion (or 1 without a key: an unsealed file as older builds wrote
// it, for tests) and world_size >= 1. Throws CheckpointError naming the file on any failure;
// a failed write may leave a partial file behind (commit.hpp writes to *.partial for that).
void write_file(const std::filesystem::path& path, const Header& header, const StateTree& tree,
                const MacKey* key = nullptr);

// Reads exactly the entries of `expected` and nothing else, after all the checks above.
// Returns a tree in `expected`'s order; fills *header_out if given. Throws CheckpointError
// "<path>: <what>: <reason>" on the first problem found; nothing is returned on failure.
// With `key`, a file without a valid MAC is refused before HDF5 opens it.
StateTree read_file(const std::filesystem::path& path, const Expected& expected,
                    Header* header_out = nullptr, const MacKey* key = nullptr);

// Checks the seal, the signature, format name and version and returns the root attributes.
// Does not look at the groups. Throws CheckpointError.
Header read_header(const std::filesystem::path& path, const MacKey* key = nullptr);

struct EntryInfo {
  Group group;
  std::string name;  // entry name ("layers.0.linear/weight")
  Kind kind;
  Dims shape;           // arrays; empty otherwise
  std::uint64_t bytes;  // payload bytes
  std::uint64_t xxh3;   // the stored checksum
  std::string value;    // scalars: the value as text; strings: the text, cut to 60 bytes
};

struct VerifyResult {
  Header header;
  std::vector<EntryInfo> entries;  // per group in kAllGroups order, then creation order
  std::uint64_t payload_bytes = 0;
  std::uint64_t file_bytes = 0;
  bool sealed = false;       // version 2: seal and table of contents checked
  bool mac_present = false;  // the seal carries a MAC
  bool mac_checked = false;  // ... and it was verified with the reader's key
};

// Structure and checksums without an expectation (`ringtrain inspect --verify`): the same
// rules as read_file, with every dataset's kind taken from its dtype; array data is streamed
// through the checksum in blocks (memory stays bounded whatever the file declares).
// Throws CheckpointError on the first problem.
VerifyResult verify_file(const std::filesystem::path& path, const MacKey* key = nullptr);

// A human-readable summary for `ringtrain inspect`: header, then per group the entries with
// kind, shape, size (and scalar values). Checks the structure like verify_file and verifies
// the small entries (scalars, strings) but does not read array data. Throws CheckpointError.
std::string describe_file(const std::filesystem::path& path, const MacKey* key = nullptr);

}  // namespace ringtrain::checkpoint
