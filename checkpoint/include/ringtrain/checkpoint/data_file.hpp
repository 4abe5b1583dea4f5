// Users' HDF5 datasets (`--data FILE.h5`, `eval --data FILE.h5`): the arrays /train/x,
// /train/y, /test/x, /test/y of one file and its optional root attribute `classes`, parsed like
// a checkpoint from outside the run. libhdf5 is not hardened against crafted files (a public
// proof-of-concept file segfaults Debian's 1.10.8 inside H5Fopen), so with the contained
// reader enabled (contained.hpp) a child process opens the file and checks it; a crash there
// is "<file>: the HDF5 library crashed while reading it (SIGSEGV): refused", not the job's end.
//
// What the child checks, for every array before reading any data: a hard link inside the
// file to a dataset; a dtype that is exactly one of HDF5's standard little-endian integers
// (8 to 64 bits, signed or not), IEEE floats (16, 32 or 64 bits), or the enum h5py writes for
// NumPy's bool (an int8 of FALSE 0 and TRUE 1); a simple dataspace of
// rank 1 to 8; no external storage, not virtual; storage allocated (a dataset declared but
// never written would read as fill values); the shape's bytes within what the storage can
// hold: exactly the stored size and inside the file when unfiltered, at most
// kMaxCompressionRatio times the stored size when filtered (compressed); the bytes of an array
// to be read within the memory limit.
// What it returns: for a contiguous, unfiltered array (in a file without a user block) where
// its bytes lie, so the caller maps them; every other array's bytes, read in the child and
// passed up in pieces of at most kDataPieceBytes (the child's memory stays bounded, whatever
// size the file declares). The parent checks the reply as untrusted: kinds, ranks and sizes,
// offsets inside the file, every byte count.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ringtrain::checkpoint {

// NumPy's numeric dtypes; the values cross the contained reader's pipe.
enum class DataType : std::uint64_t {
  kUint8 = 1,
  kInt32 = 2,
  kInt64 = 3,
  kFloat32 = 4,
  kBool = 5,
  kInt8 = 6,
  kInt16 = 7,
  kUint16 = 8,
  kUint32 = 9,
  kUint64 = 10,
  kFloat16 = 11,
  kFloat64 = 12,
};
inline constexpr std::uint64_t kDataTypeCount = 12;
std::size_t data_item_bytes(DataType type);

// A filtered dataset may declare at most this many times its stored bytes: the deflate
// format's largest ratio (about 1032:1), which no honest gzip'd dataset exceeds.
inline constexpr std::uint64_t kMaxCompressionRatio = 1032;
// Bytes the child reads and sends at a time.
inline constexpr std::uint64_t kDataPieceBytes = std::uint64_t{8} << 20;
inline constexpr int kMaxDataRank = 8;

struct DataArray {
  std::string where;  // "d.h5 /train/x", for messages
  bool present = true;  // false: an optional name the file does not hold (nothing else set)
  DataType type = DataType::kFloat32;
  std::vector<std::uint64_t> shape;  // outermost first, 1 to kMaxDataRank dimensions
  // Contiguous and unfiltered: the file offset of its bytes (the caller maps them), and
  // `bytes` is empty. Otherwise nullopt and `bytes` holds the data (shape's bytes, C order).
  std::optional<std::uint64_t> offset;
  std::vector<std::uint8_t> bytes;
};

struct DataFile {
  std::vector<DataArray> arrays;        // in the order of the names asked for
  std::optional<std::int64_t> classes;  // the root attribute `classes` (>= 1), if present
};

// Reads the datasets `names` ("/train/x", ...) of `file` in this process. memory_limit_bytes:
// the most an array read into memory may hold (0: this machine's memory), named in the
// message as --data-memory-limit when it is not 0. Bit i of `optional` set: names[i] may be
// absent (its DataArray has present = false); a missing name that is not optional is refused.
// Throws CheckpointError whose what() is "<file> <dataset>: <reason>" (or "<file>: <reason>"
// for the file as a whole).
DataFile read_data_file(const std::filesystem::path& file, const std::vector<std::string>& names,
                        std::uint64_t memory_limit_bytes, std::uint64_t optional = 0);

// read_data_file in a contained reader child when the process enabled it (contained.hpp),
// else in this process. Throws CheckpointError as read_data_file, or naming the file when
// the child dies ("the HDF5 library crashed while reading it (SIGSEGV): refused").
DataFile read_data_file_contained(const std::filesystem::path& file,
                                  const std::vector<std::string>& names,
                                  std::uint64_t memory_limit_bytes, std::uint64_t optional = 0);

}  // namespace ringtrain::checkpoint
