// The checks every reader of a checkpoint file shares (read_file, read_header, verify_file,
// describe_file), in the order they run:
//
//   1. the path is a non-empty regular file; with plain reads: it starts with the seal,
//      which checks (seal.hpp: length, content digest, MAC if a key is given), or with the
//      HDF5 signature (an unsealed version-1 file; refused when a key is given)
//   2. HDF5 opens it; superblock version >= 2 (the checksummed formats we write)
//   3. root attribute `format` == "ringtrain-checkpoint", then `version` (2 if sealed, 1 if
//      not), then the rest of the Header, and no other root attribute
//   4. the root holds exactly the six groups, each a hard link to a group held once
//   5. per dataset (examine): hard link, held once, a dataset, object header v2, only the
//      xxh3 attribute, contiguous or compact, no filters, no external storage; its dtype,
//      dataspace and stored checksum are collected — the caller compares them with what it
//      expects, then check_storage() compares the stored size with the shape and the file
//      size, all before any data is allocated or read.
//   6. (after every entry) check_toc: the table of contents found equals the sealed one.
//
// Every rejection throws CheckpointError(path, "<object>: <reason>"). HDF5 failures surface
// as detail::Hdf5Error; CheckedFile keeps the caller's `where` text up to date (the object
// being worked on) so the public function can turn them into hdf5_failure(path, where, e).
// Private to the checkpoint module.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "hdf5_handle.hpp"
#include "ringtrain/checkpoint/error.hpp"
#include "ringtrain/checkpoint/file.hpp"
#include "ringtrain/files/escape.hpp"
#include "seal.hpp"

namespace ringtrain::checkpoint::detail {

// What examine() learned about one dataset, before reading any of its data.
struct DatasetFacts {
  std::string path;  // "/model/layers.0.linear/weight", for messages
  Dataset dataset;
  Datatype type;
  std::optional<Kind> kind;  // the kind this dtype encodes, nullopt if none
  std::string dtype_text;    // "float64 LE", "fixed-length string of 12 bytes"
  H5D_layout_t layout = H5D_LAYOUT_ERROR;
  bool scalar_space = false;
  Dims shape;  // empty for a scalar dataspace
  std::uint64_t stored_xxh3 = 0;
};

class CheckedFile {
 public:
  // Steps 1-3. Throws CheckpointError, or Hdf5Error with `where` naming the object;
  // `where` must outlive this object.
  // `key` (may be null) is only used during construction.
  CheckedFile(const std::filesystem::path& path, std::string& where, const MacKey* key);

  const std::filesystem::path& path() const { return path_; }
  const Header& header() const { return header_; }
  std::uint64_t file_bytes() const { return file_bytes_; }
  // The checked seal; nullopt for a version-1 file.
  const std::optional<Seal>& seal() const { return seal_; }

  // Step 6: rejects unless `found` (every entry of the file) matches the seal's table of
  // contents. Does nothing for a version-1 file.
  void check_toc(const std::vector<TocEntry>& found) const;

  // Step 4; then group(g) is open.
  void check_root();
  const GroupHandle& group(Group g) const { return groups_[static_cast<std::size_t>(g)]; }

  // Step 5 for the entry `entry_name` of group `g`.
  DatasetFacts examine(Group g, const std::string& entry_name);
  // Rejects unless the dataset stores exactly the bytes that `kind` and facts.shape need
  // (and, if contiguous, they lie inside the file). Returns that byte count.
  std::uint64_t check_storage(const DatasetFacts& facts, Kind kind) const;

  // Rejects unless `actual` equals the stored xxh3 ("checksum mismatch").
  void check_checksum(const DatasetFacts& facts, std::uint64_t actual) const;

  [[noreturn]] void reject(const std::string& reason) const;

 private:
  void read_header();

  std::filesystem::path path_;
  std::uint64_t file_bytes_ = 0;
  std::optional<Seal> seal_;
  std::string& where_;
  File file_;
  GroupHandle root_;
  std::array<GroupHandle, kAllGroups.size()> groups_;
  Header header_;
};

// "float32 LE", "uint64 BE", "fixed-length string of 5 bytes", "compound", ...
std::string describe_type(const Datatype& type);
// How a kind is stored: "float32 LE", "int64 LE", "uint64 LE", "float64 LE",
// "fixed-length string".
std::string stored_type_name(Kind kind);
// "a soft link", "an external link", "a user-defined link".
std::string describe_link(H5L_type_t type);
// Reads the value of a dataset that was examined, compared and size-checked as `kind`,
// verifies its checksum and puts it into `tree` as (group, name). Allocates from facts.shape:
// call it only after those checks.
void read_value(const CheckedFile& file, const DatasetFacts& facts, Kind kind, Group group,
                const std::string& name, StateTree& tree);
// Where the bytes of a contiguously stored float32 array lie in the file (float32
// little-endian, the host's order), and the xxh3 the file stores for them.
struct ArrayExtent {
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
  std::uint64_t xxh3 = 0;
};

// read_file, except that with `extents` every contiguously stored, non-empty float32 array
// passes all of its checks but is not read: (*extents)[i] (i: its index in `expected`) says
// where its bytes lie, and the tree leaves it out. The caller reads those bytes and checks
// them against the xxh3. Other entries, and every entry without `extents`, are read.
StateTree read_file_locating(const std::filesystem::path& path, const Expected& expected,
                             Header* header_out, const MacKey* key,
                             std::vector<std::optional<ArrayExtent>>* extents);
// A string from an HDF5 fixed-length string buffer: trailing NUL padding removed.
std::string strip_padding(std::string text);
// CheckpointError(path, "<where>: HDF5 refused it (<call> failed)") with the HDF5 stack.
CheckpointError hdf5_failure(const std::filesystem::path& path, const std::string& where,
                             const Hdf5Error& error);

}  // namespace ringtrain::checkpoint::detail
