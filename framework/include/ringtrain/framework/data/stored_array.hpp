// StoredArray: one array of a user's dataset (x or y of a split) as it lies in its file,
// before it becomes samples and labels (user_data.hpp).
//
// Sits before training starts: the .npy reader (npy.hpp) and the HDF5 reader (hdf5_arrays.hpp)
// each describe an array (dtype, shape) and hand out its bytes, either mapped where they lie in
// the file (MappedFile) or read into memory. The bytes are little-endian and C-ordered: the
// readers refuse anything else, so everything after them reads one layout.
//
// Vocabulary: "item" is one element (4 bytes of float32, 1 byte of uint8); "stored bytes" is
// items x item size. The dtypes are NumPy's numeric ones: what training reads from each
// (floats, int32 labels) is convert.hpp's business.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace ringtrain::data {

enum class DType {
  kBool,  // one byte, 0 or 1 (NumPy's bool)
  kInt8,
  kUint8,
  kInt16,
  kUint16,
  kInt32,
  kUint32,
  kInt64,
  kUint64,
  kFloat16,  // IEEE binary16
  kFloat32,
  kFloat64,
};

// NumPy's names: "bool", "int8", "uint8", ..., "float16", "float32", "float64"
const char* to_string(DType dtype);
std::size_t item_bytes(DType dtype);
bool is_floating(DType dtype);  // float16, float32, float64

// A whole file mapped read-only. Move-only; unmaps in the destructor.
// A mapped file that shrinks under its mapping (truncated by someone while a run trains on
// it) makes every read of a page past its new end raise SIGBUS: the reads that copy out of a
// mapping run under read_mapped(), and the trainer asks shrank() at every epoch boundary.
class MappedFile {
 public:
  // Throws DataError naming the file if it cannot be opened or mapped. An empty file maps to
  // an empty span.
  explicit MappedFile(const std::filesystem::path& file);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::uint8_t> bytes() const { return {data_, size_}; }
  const std::filesystem::path& path() const { return path_; }
  // True if the file is now shorter than the mapping (fstat of the descriptor it keeps).
  bool shrank() const;
  // "<file>: the file shrank to N bytes while mapped (M when loaded): refused; ..."
  std::string shrank_message() const;

 private:
  std::filesystem::path path_;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
  int fd_ = -1;  // kept open: shrank() asks the file itself, whatever its name is now
};

// Runs `read`, which copies out of mapped files and holds nothing that needs a destructor,
// so that a SIGBUS it raises (a mapped file shrank) ends `read` early and returns false
// instead of killing the process. Any thread; nests nothing. A SIGBUS outside read_mapped
// goes to the handler that was installed before (by default: the process dies).
bool read_mapped(const std::function<void()>& read);

struct StoredArray {
  std::string where;  // names it in messages: "d/train_x.npy" or "d.h5 /train/x"
  DType dtype = DType::kFloat32;
  std::vector<std::uint64_t> shape;  // outermost first; shape[0] is the sample count
  // The stored bytes: either inside `mapping` (mapped where they lie) or in `memory`.
  std::shared_ptr<const MappedFile> mapping;
  std::size_t offset = 0;  // of the first byte inside the mapping
  std::vector<std::uint8_t> memory;

  bool mapped() const { return mapping != nullptr; }
  std::uint64_t items() const;
  std::span<const std::uint8_t> bytes() const;
};

// Bytes of physical memory of this machine (the bound for what is read, not mapped).
std::uint64_t memory_bytes();

// Items of `shape` times `item_size`, or DataError naming `where` when the product overflows
// 64 bits or exceeds `limit_bytes` (`why` says which limit: "the file holds 1200 bytes").
std::uint64_t checked_stored_bytes(const std::vector<std::uint64_t>& shape, std::size_t item_size,
                                   std::uint64_t limit_bytes, const std::string& where,
                                   const std::string& why);

}  // namespace ringtrain::data
