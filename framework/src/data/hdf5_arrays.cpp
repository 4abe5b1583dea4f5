// HDF5 reader for user datasets (hdf5_arrays.hpp): the checkpoint module parses the file,
// in a contained reader child when the program enabled it (checkpoint/data_file.hpp), and
// this turns its answer into StoredArrays: a contiguous array mapped where the child said its
// bytes lie, every other array's bytes as the child read them.
#include "ringtrain/framework/data/hdf5_arrays.hpp"

#include <fmt/format.h>

#include <array>
#include <fstream>

#include "ringtrain/checkpoint/data_file.hpp"
#include "ringtrain/checkpoint/error.hpp"
#include "ringtrain/framework/error.hpp"

namespace ringtrain::data {
namespace fs = std::filesystem;

namespace {

DType dtype_of(checkpoint::DataType type) {
  using T = checkpoint::DataType;
  switch (type) {
    case T::kBool:
      return DType::kBool;
    case T::kInt8:
      return DType::kInt8;
    case T::kUint8:
      return DType::kUint8;
    case T::kInt16:
      return DType::kInt16;
    case T::kUint16:
      return DType::kUint16;
    case T::kInt32:
      return DType::kInt32;
    case T::kUint32:
      return DType::kUint32;
    case T::kInt64:
      return DType::kInt64;
    case T::kUint64:
      return DType::kUint64;
    case T::kFloat16:
      return DType::kFloat16;
    case T::kFloat64:
      return DType::kFloat64;
    default:
      return DType::kFloat32;
  }
}

}  // namespace

bool is_hdf5_file(const fs::path& file) {
  constexpr std::array<char, 8> kSignature = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};
  std::ifstream in(file, std::ios::binary);
  std::array<char, 8> head{};
  in.read(head.data(), head.size());
  return in.gcount() == 8 && head == kSignature;
}

Hdf5Arrays read_hdf5_arrays(const fs::path& file, const std::vector<std::string>& names,
                            std::uint64_t memory_limit_bytes, std::uint64_t optional) {
  // Mapped first: the file's size the child checks offsets against is the mapping's.
  auto mapping = std::make_shared<const MappedFile>(file);
  if (!is_hdf5_file(file))
    throw DataError(fmt::format(
        "{}: not an HDF5 file (no HDF5 signature at its start); --data takes an HDF5 file, a "
        "folder of .npy files or a folder of IDX files",
        file.string()));
  checkpoint::DataFile parsed;
  try {
    parsed = checkpoint::read_data_file_contained(file, names, memory_limit_bytes, optional);
  } catch (const checkpoint::CheckpointError& e) {
    throw DataError(e.what());
  }
  Hdf5Arrays result;
  result.classes = parsed.classes;
  const std::uint64_t file_bytes = mapping->bytes().size();
  for (checkpoint::DataArray& parsed_array : parsed.arrays) {
    StoredArray array;
    array.where = parsed_array.where;
    result.present.push_back(parsed_array.present);
    if (!parsed_array.present) {
      result.arrays.push_back(std::move(array));
      continue;
    }
    array.dtype = dtype_of(parsed_array.type);
    array.shape = parsed_array.shape;
    if (parsed_array.offset) {
      // The child checked this against the file; the mapping may be shorter if the file
      // shrank in between.
      const std::uint64_t need =
          checked_stored_bytes(array.shape, item_bytes(array.dtype), file_bytes, array.where,
                               fmt::format("the file's {} bytes", file_bytes));
      if (*parsed_array.offset > file_bytes - need)
        throw DataError(
            fmt::format("{}: data at offset {} of {} bytes run past the end of the "
                        "file ({} bytes); the file is truncated",
                        array.where, *parsed_array.offset, need, file_bytes));
      array.mapping = mapping;
      array.offset = static_cast<std::size_t>(*parsed_array.offset);
    } else {
      array.memory = std::move(parsed_array.bytes);
    }
    result.arrays.push_back(std::move(array));
  }
  return result;
}

}  // namespace ringtrain::data
