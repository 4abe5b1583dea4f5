// HDF5 reader for user datasets (hdf5_arrays.hpp). Each HDF5 call is made once, through a
// small owning handle; HDF5's own error printing is off while we read, and a failed call
// becomes a DataError that names the file and the dataset.
//
// Vocabulary: "contiguous" is HDF5's layout where a dataset's bytes lie in one run at an
// offset of the file (mappable); "chunked" and "compact" layouts are read with H5Dread.
#include "ringtrain/framework/data/hdf5_arrays.hpp"

#include <fmt/format.h>
#include <hdf5.h>

#include <array>
#include <cstring>
#include <fstream>

#include "ringtrain/framework/error.hpp"

namespace ringtrain::data {
namespace fs = std::filesystem;

namespace {

constexpr int kMaxRank = 8;

// One HDF5 identifier, closed by `close` in the destructor. Move-only.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

// While alive, HDF5 prints no error stacks (our messages say what failed).
class QuietHdf5 {
 public:
  QuietHdf5() {
    H5Eget_auto2(H5E_DEFAULT, &function_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietHdf5() { H5Eset_auto2(H5E_DEFAULT, function_, data_); }
  QuietHdf5(const QuietHdf5&) = delete;
  QuietHdf5& operator=(const QuietHdf5&) = delete;

 private:
  H5E_auto2_t function_ = nullptr;
  void* data_ = nullptr;
};

[[noreturn]] void fail(const std::string& where, const std::string& problem) {
  throw DataError(fmt::format("{}: {}", where, problem));
}

// Every prefix of `name` ("/train", "/train/x") must be a hard link: soft and external links
// could lead outside the file.
void require_hard_links(hid_t file, const std::string& name, const std::string& where) {
  for (std::size_t slash = name.find('/', 1);; slash = name.find('/', slash + 1)) {
    const std::string prefix = name.substr(0, slash);
    if (H5Lexists(file, prefix.c_str(), H5P_DEFAULT) <= 0)
      fail(where, fmt::format("missing: the file has no {} (a dataset file needs /train/x, "
                              "/train/y, /test/x and /test/y)",
                              prefix));
    H5L_info_t info{};
    if (H5Lget_info(file, prefix.c_str(), &info, H5P_DEFAULT) < 0 || info.type != H5L_TYPE_HARD)
      fail(where, fmt::format("{} is a soft or external link; only objects inside the file are "
                              "read",
                              prefix));
    if (slash == std::string::npos) return;
  }
}

// The dtype of a dataset's file type, or DataError for anything but little-endian float32,
// uint8, int32 and int64.
DType dtype_of(hid_t type, const std::string& where) {
  const H5T_class_t type_class = H5Tget_class(type);
  const std::size_t size = H5Tget_size(type);
  const bool integer = type_class == H5T_INTEGER, floating = type_class == H5T_FLOAT;
  if ((integer || floating) && size > 1 && H5Tget_order(type) != H5T_ORDER_LE)
    fail(where,
         "big-endian data are not supported; store the dataset little-endian ('<f4', "
         "'<i8', ...)");
  if (floating && size == 4) return DType::kFloat32;
  if (integer) {
    const bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
    if (size == 1 && !is_signed) return DType::kUint8;
    if (size == 4 && is_signed) return DType::kInt32;
    if (size == 8 && is_signed) return DType::kInt64;
  }
  fail(where, fmt::format("unsupported dtype ({} of {} bytes): x must be float32 or uint8, y "
                          "int64, int32 or uint8 labels or float32 targets",
                          floating  ? "float"
                          : integer ? "integer"
                                    : "non-numeric type",
                          size));
}

std::vector<std::uint64_t> shape_of(hid_t dataset, const std::string& where) {
  const Handle space(H5Dget_space(dataset), H5Sclose);
  if (!space.ok() || H5Sget_simple_extent_type(space.get()) != H5S_SIMPLE)
    fail(where, "not a simple (array) dataspace");
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 1 || rank > kMaxRank)
    fail(where, fmt::format("rank {} is not supported (1 to {})", rank, kMaxRank));
  std::array<hsize_t, kMaxRank> dims{};
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return std::vector<std::uint64_t>(dims.begin(), dims.begin() + rank);
}

hid_t native_type(DType dtype) {
  switch (dtype) {
    case DType::kUint8:
      return H5T_NATIVE_UINT8;
    case DType::kInt32:
      return H5T_NATIVE_INT32;
    case DType::kInt64:
      return H5T_NATIVE_INT64;
    default:
      return H5T_NATIVE_FLOAT;
  }
}

// The dataset's file offset if its bytes can be mapped: contiguous, no filters, no external
// storage, allocated, and no user block (whose offset HDF5 addresses would not count).
std::optional<std::uint64_t> mappable_offset(hid_t file, hid_t dataset, const std::string& where) {
  const Handle create(H5Dget_create_plist(dataset), H5Pclose);
  if (!create.ok()) fail(where, "cannot read the dataset's creation properties");
  if (H5Pget_external_count(create.get()) != 0)
    fail(where, "external storage (data in another file) is not supported");
  const H5D_layout_t layout = H5Pget_layout(create.get());
  if (layout == H5D_VIRTUAL) fail(where, "virtual datasets are not supported");
  const Handle file_create(H5Fget_create_plist(file), H5Pclose);
  hsize_t user_block = 0;
  if (file_create.ok()) H5Pget_userblock(file_create.get(), &user_block);
  if (layout != H5D_CONTIGUOUS || H5Pget_nfilters(create.get()) != 0 || user_block != 0)
    return std::nullopt;
  const haddr_t offset = H5Dget_offset(dataset);
  if (offset == HADDR_UNDEF) return std::nullopt;  // not allocated: fill values, read them
  return std::uint64_t{offset};
}

StoredArray read_one(hid_t file, const std::shared_ptr<const MappedFile>& mapping,
                     const fs::path& path, const std::string& name,
                     std::uint64_t memory_limit_bytes) {
  StoredArray array;
  array.where = fmt::format("{} {}", path.string(), name);
  require_hard_links(file, name, array.where);
  const Handle dataset(H5Oopen(file, name.c_str(), H5P_DEFAULT), H5Oclose);
  if (!dataset.ok() || H5Iget_type(dataset.get()) != H5I_DATASET)
    fail(array.where, "not a dataset");
  const Handle type(H5Dget_type(dataset.get()), H5Tclose);
  if (!type.ok()) fail(array.where, "cannot read the dataset's type");
  array.dtype = dtype_of(type.get(), array.where);
  array.shape = shape_of(dataset.get(), array.where);
  const std::uint64_t file_bytes = mapping->bytes().size();
  if (const auto offset = mappable_offset(file, dataset.get(), array.where)) {
    const std::uint64_t need =
        checked_stored_bytes(array.shape, item_bytes(array.dtype), file_bytes, array.where,
                             fmt::format("the file's {} bytes", file_bytes));
    if (H5Dget_storage_size(dataset.get()) != need)
      fail(array.where, fmt::format("stored size {} bytes differs from the {} bytes of its shape",
                                    H5Dget_storage_size(dataset.get()), need));
    if (*offset > file_bytes - need)
      fail(array.where, fmt::format("data at offset {} of {} bytes run past the end of the file "
                                    "({} bytes); the file is truncated",
                                    *offset, need, file_bytes));
    array.mapping = mapping;
    array.offset = static_cast<std::size_t>(*offset);
    return array;
  }
  const std::uint64_t need = checked_stored_bytes(
      array.shape, item_bytes(array.dtype),
      memory_limit_bytes > 0 ? memory_limit_bytes : memory_bytes(), array.where,
      memory_limit_bytes > 0
          ? fmt::format("--data-memory-limit {} bytes (a chunked or compressed dataset is read "
                        "into memory, not mapped: store it contiguous and unfiltered to map it)",
                        memory_limit_bytes)
          : std::string("this machine's memory (it is read, not mapped)"));
  array.memory.resize(static_cast<std::size_t>(need));
  if (H5Dread(dataset.get(), native_type(array.dtype), H5S_ALL, H5S_ALL, H5P_DEFAULT,
              array.memory.data()) < 0)
    fail(array.where, "cannot read the data (damaged or truncated file, or a filter HDF5 lacks)");
  return array;
}

std::optional<std::int64_t> read_classes(hid_t file, const fs::path& path) {
  if (H5Aexists(file, "classes") <= 0) return std::nullopt;
  const std::string where = path.string() + " attribute classes";
  const Handle attr(H5Aopen(file, "classes", H5P_DEFAULT), H5Aclose);
  if (!attr.ok()) fail(where, "cannot open it");
  const Handle type(H5Aget_type(attr.get()), H5Tclose);
  const Handle space(H5Aget_space(attr.get()), H5Sclose);
  if (!type.ok() || !space.ok() || H5Tget_class(type.get()) != H5T_INTEGER ||
      H5Sget_simple_extent_npoints(space.get()) != 1)
    fail(where, "must be one integer");
  std::int64_t value = 0;
  if (H5Aread(attr.get(), H5T_NATIVE_INT64, &value) < 0) fail(where, "cannot read it");
  if (value < 1) fail(where, fmt::format("{} classes; it must be at least 1", value));
  return value;
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
                            std::uint64_t memory_limit_bytes) {
  auto mapping = std::make_shared<const MappedFile>(file);
  if (!is_hdf5_file(file))
    fail(file.string(),
         "not an HDF5 file (no HDF5 signature at its start); --data takes an "
         "HDF5 file, a folder of .npy files or a folder of IDX files");
  const QuietHdf5 quiet;
  const Handle h5(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!h5.ok()) fail(file.string(), "HDF5 cannot open it (damaged or truncated)");
  Hdf5Arrays result;
  for (const std::string& name : names)
    result.arrays.push_back(read_one(h5.get(), mapping, file, name, memory_limit_bytes));
  result.classes = read_classes(h5.get(), file);
  return result;
}

}  // namespace ringtrain::data
