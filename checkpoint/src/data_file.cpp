// Users' HDF5 datasets (data_file.hpp), the part that runs libhdf5: in a contained reader
// child, or in-process where containment is off (unit tests, fuzzing). Each array is checked
// whole before any array's data is read; then the arrays that are not mapped are read in
// pieces of rows (a hyperslab per piece), so no buffer larger than a piece is needed here.
//
// Vocabulary: "contiguous" is HDF5's layout where a dataset's bytes lie in one run at an
// offset of the file (mappable); "chunked" and "compact" layouts are read with H5Dread.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "data_file_reader.hpp"
#include "ringtrain/checkpoint/error.hpp"

namespace ringtrain::checkpoint {
namespace fs = std::filesystem;

std::size_t data_item_bytes(DataType type) {
  switch (type) {
    case DataType::kBool:
    case DataType::kInt8:
    case DataType::kUint8:
      return 1;
    case DataType::kInt16:
    case DataType::kUint16:
    case DataType::kFloat16:
      return 2;
    case DataType::kInt64:
    case DataType::kUint64:
    case DataType::kFloat64:
      return 8;
    default:
      return 4;
  }
}

namespace detail {
namespace {

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
  throw CheckpointError(where + ": " + problem);
}

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string text = "(";
  for (std::size_t d = 0; d < shape.size(); ++d)
    text += (d > 0 ? ", " : "") + std::to_string(shape[d]);
  return text + ")";
}

// Items of `shape` times `item_bytes`, or a refusal when the product overflows or exceeds
// `limit_bytes` (`why` names the limit).
std::uint64_t checked_bytes(const std::vector<std::uint64_t>& shape, std::size_t item_bytes,
                            std::uint64_t limit_bytes, const std::string& where,
                            const std::string& why) {
  std::uint64_t bytes = item_bytes;
  for (std::uint64_t d : shape) {
    if (d != 0 && bytes > limit_bytes / d)
      fail(where, "shape " + shape_text(shape) + " of " + std::to_string(item_bytes) +
                      "-byte items is larger than " + why);
    bytes *= d;
  }
  if (bytes > limit_bytes)
    fail(where, "shape " + shape_text(shape) + " of " + std::to_string(item_bytes) +
                    "-byte items needs " + std::to_string(bytes) + " bytes, more than " + why);
  return bytes;
}

// True if every prefix of `name` ("/train", "/train/x") is a link of the file (of any kind:
// require_hard_links refuses the others).
bool link_exists(hid_t file, const std::string& name) {
  for (std::size_t slash = name.find('/', 1);; slash = name.find('/', slash + 1)) {
    if (H5Lexists(file, name.substr(0, slash).c_str(), H5P_DEFAULT) <= 0) return false;
    if (slash == std::string::npos) return true;
  }
}

// Every prefix of `name` ("/train", "/train/x") must be a hard link: soft and external links
// could lead outside the file.
void require_hard_links(hid_t file, const std::string& name, const std::string& where) {
  for (std::size_t slash = name.find('/', 1);; slash = name.find('/', slash + 1)) {
    const std::string prefix = name.substr(0, slash);
    if (H5Lexists(file, prefix.c_str(), H5P_DEFAULT) <= 0)
      fail(where, "missing: the file has no " + prefix +
                      " (a dataset file needs /train/x, /train/y, /test/x and /test/y)");
    H5L_info_t info{};
    if (H5Lget_info(file, prefix.c_str(), &info, H5P_DEFAULT) < 0 || info.type != H5L_TYPE_HARD)
      fail(where, prefix + " is a soft or external link; only objects inside the file are read");
    if (slash == std::string::npos) return;
  }
}

// IEEE binary16 as NumPy and h5py store it: sign bit 15, exponent bits 10-14 (bias 15),
// mantissa bits 0-9, implied leading one, all 16 bits used.
bool is_ieee_half(hid_t type) {
  std::size_t sign = 0, exponent = 0, exponent_bits = 0, mantissa = 0, mantissa_bits = 0;
  return H5Tget_size(type) == 2 && H5Tget_precision(type) == 16 && H5Tget_offset(type) == 0 &&
         H5Tget_fields(type, &sign, &exponent, &exponent_bits, &mantissa, &mantissa_bits) >= 0 &&
         sign == 15 && exponent == 10 && exponent_bits == 5 && mantissa == 0 &&
         mantissa_bits == 10 && H5Tget_ebias(type) == 15 && H5Tget_norm(type) == H5T_NORM_IMPLIED;
}

// NumPy's bool as h5py stores it: an enum over int8 of two members, 0 and 1.
bool is_h5py_bool(hid_t type) {
  const DataHandle base(H5Tget_super(type), H5Tclose);
  if (!base.ok() || H5Tequal(base.get(), H5T_STD_I8LE) <= 0 || H5Tget_nmembers(type) != 2)
    return false;
  std::int8_t values[2] = {-1, -1};
  for (unsigned m = 0; m < 2; ++m)
    if (H5Tget_member_value(type, m, &values[m]) < 0) return false;
  return std::min(values[0], values[1]) == 0 && std::max(values[0], values[1]) == 1;
}

// The type of a dataset's file type: exactly one of HDF5's standard little-endian integers or
// IEEE floats (H5Tequal: no other precision, offset or padding, whose raw bytes would read as
// other values), IEEE binary16, or h5py's bool; a refusal for anything else.
DataType type_of(hid_t type, const std::string& where) {
  const H5T_class_t type_class = H5Tget_class(type);
  const std::size_t size = H5Tget_size(type);
  const bool integer = type_class == H5T_INTEGER, floating = type_class == H5T_FLOAT;
  if (type_class == H5T_ENUM && is_h5py_bool(type)) return DataType::kBool;
  if ((integer || floating) && size > 1 && H5Tget_order(type) != H5T_ORDER_LE)
    fail(where,
         "big-endian data are not supported; store the dataset little-endian ('<f4', "
         "'<i8', ...)");
  const std::pair<hid_t, DataType> standard[] = {
      {H5T_STD_I8LE, DataType::kInt8},      {H5T_STD_U8LE, DataType::kUint8},
      {H5T_STD_I16LE, DataType::kInt16},    {H5T_STD_U16LE, DataType::kUint16},
      {H5T_STD_I32LE, DataType::kInt32},    {H5T_STD_U32LE, DataType::kUint32},
      {H5T_STD_I64LE, DataType::kInt64},    {H5T_STD_U64LE, DataType::kUint64},
      {H5T_IEEE_F32LE, DataType::kFloat32}, {H5T_IEEE_F64LE, DataType::kFloat64},
  };
  for (const auto& [known, data_type] : standard)
    if (H5Tequal(type, known) > 0) return data_type;
  if (floating && is_ieee_half(type)) return DataType::kFloat16;
  fail(where, std::string("unsupported dtype (") +
                  (floating  ? "float"
                   : integer ? "integer"
                             : "non-numeric type") +
                  " of " + std::to_string(size) +
                  " bytes, not a standard layout): x must be a float or integer array, y "
                  "integer or bool labels or float targets");
}

std::vector<std::uint64_t> shape_of(hid_t dataset, const std::string& where) {
  const DataHandle space(H5Dget_space(dataset), H5Sclose);
  if (!space.ok() || H5Sget_simple_extent_type(space.get()) != H5S_SIMPLE)
    fail(where, "not a simple (array) dataspace");
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 1 || rank > kMaxDataRank)
    fail(where, "rank " + std::to_string(rank) + " is not supported (1 to " +
                    std::to_string(kMaxDataRank) + ")");
  std::array<hsize_t, kMaxDataRank> dims{};
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return std::vector<std::uint64_t>(dims.begin(), dims.begin() + rank);
}

// Refuses a dataset whose storage is not all there: HDF5 would return fill values for what
// was declared but never written. Contiguous: allocated or not. Chunked: every chunk of
// the extent allocated (HDF5's space status says "partly" for any compressed dataset, so
// the chunks are counted). Compact data live in the object header.
void check_allocated(hid_t dataset, hid_t create, H5D_layout_t layout, const std::string& where) {
  const std::string why =
      ": the dataset was declared but never (fully) written, so HDF5 would return fill values "
      "instead of data";
  if (layout == H5D_CONTIGUOUS) {
    H5D_space_status_t status = H5D_SPACE_STATUS_ERROR;
    if (H5Dget_space_status(dataset, &status) < 0 || status != H5D_SPACE_STATUS_ALLOCATED)
      fail(where, "its storage is not allocated" + why);
  }
  if (layout != H5D_CHUNKED) return;
  const DataHandle space(H5Dget_space(dataset), H5Sclose);
  std::array<hsize_t, kMaxDataRank> dims{}, chunk{};
  const int rank = space.ok() ? H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) : -1;
  if (rank < 1 || rank > kMaxDataRank || H5Pget_chunk(create, rank, chunk.data()) != rank)
    fail(where, "cannot read its chunk layout");
  std::uint64_t total = 1;
  for (int d = 0; d < rank; ++d) {
    if (chunk[d] == 0) fail(where, "a chunk dimension of 0");
    const std::uint64_t per_dim = (dims[d] + chunk[d] - 1) / chunk[d];
    total = per_dim != 0 && total > UINT64_MAX / per_dim ? UINT64_MAX : total * per_dim;
  }
  hsize_t allocated = 0;
  if (H5Dget_num_chunks(dataset, space.get(), &allocated) < 0 || allocated != total)
    fail(where, std::to_string(allocated) + " of its " + std::to_string(total) +
                    " chunks are allocated" + why);
}

// What the dataset's storage is, from its creation properties and the file's.
struct Storage {
  H5D_layout_t layout = H5D_LAYOUT_ERROR;
  bool filtered = false;
  bool user_block = false;
  std::uint64_t stored_bytes = 0;  // H5Dget_storage_size: what the file holds for it
};

Storage storage_of(hid_t file, hid_t dataset, const std::string& where) {
  const DataHandle create(H5Dget_create_plist(dataset), H5Pclose);
  if (!create.ok()) fail(where, "cannot read the dataset's creation properties");
  if (H5Pget_external_count(create.get()) != 0)
    fail(where, "external storage (data in another file) is not supported");
  Storage s;
  s.layout = H5Pget_layout(create.get());
  if (s.layout == H5D_VIRTUAL) fail(where, "virtual datasets are not supported");
  if (s.layout != H5D_CONTIGUOUS && s.layout != H5D_CHUNKED && s.layout != H5D_COMPACT)
    fail(where, "unknown storage layout");
  s.filtered = H5Pget_nfilters(create.get()) != 0;
  const DataHandle file_create(H5Fget_create_plist(file), H5Pclose);
  hsize_t user_block = 0;
  if (file_create.ok()) H5Pget_userblock(file_create.get(), &user_block);
  s.user_block = user_block != 0;
  check_allocated(dataset, create.get(), s.layout, where);
  s.stored_bytes = H5Dget_storage_size(dataset);
  return s;
}

// Checks that the file can hold the `need` bytes of the shape; sets array.offset for a
// contiguous, unfiltered dataset (mapped by the caller).
void check_size(const Storage& s, hid_t dataset, std::uint64_t need, std::uint64_t file_bytes,
                DataArray& array) {
  const std::string& where = array.where;
  if (s.stored_bytes > file_bytes)
    fail(where, "stored size " + std::to_string(s.stored_bytes) +
                    " bytes is more than the file's " + std::to_string(file_bytes) +
                    " bytes; the file is truncated");
  if (s.filtered) {
    if (need / kMaxCompressionRatio > s.stored_bytes)
      fail(where, std::to_string(need) + " bytes declared in " + std::to_string(s.stored_bytes) +
                      " stored bytes, more than the " + std::to_string(kMaxCompressionRatio) +
                      ":1 a compressed dataset can hold: refused before reading");
    return;
  }
  // Unfiltered: contiguous and compact store exactly the shape's bytes; chunks may cover
  // more (partial chunks at the edges) but never less.
  const bool exact = s.layout != H5D_CHUNKED;
  if (exact ? s.stored_bytes != need : s.stored_bytes < need)
    fail(where, "stored size " + std::to_string(s.stored_bytes) + " bytes differs from the " +
                    std::to_string(need) + " bytes of its shape");
  if (s.layout != H5D_CONTIGUOUS || s.user_block) return;
  const haddr_t offset = H5Dget_offset(dataset);
  if (offset == HADDR_UNDEF) fail(where, "its storage is not allocated");
  if (offset > file_bytes - need)
    fail(where, "data at offset " + std::to_string(offset) + " of " + std::to_string(need) +
                    " bytes run past the end of the file (" + std::to_string(file_bytes) +
                    " bytes); the file is truncated");
  array.offset = std::uint64_t{offset};
}

std::optional<std::int64_t> read_classes(hid_t file, const fs::path& path) {
  if (H5Aexists(file, "classes") <= 0) return std::nullopt;
  const std::string where = path.string() + " attribute classes";
  const DataHandle attr(H5Aopen(file, "classes", H5P_DEFAULT), H5Aclose);
  if (!attr.ok()) fail(where, "cannot open it");
  const DataHandle type(H5Aget_type(attr.get()), H5Tclose);
  const DataHandle space(H5Aget_space(attr.get()), H5Sclose);
  if (!type.ok() || !space.ok() || H5Tget_class(type.get()) != H5T_INTEGER ||
      H5Sget_simple_extent_npoints(space.get()) != 1)
    fail(where, "must be one integer");
  std::int64_t value = 0;
  if (H5Aread(attr.get(), H5T_NATIVE_INT64, &value) < 0) fail(where, "cannot read it");
  if (value < 1) fail(where, std::to_string(value) + " classes; it must be at least 1");
  return value;
}

std::uint64_t size_of_file(const fs::path& file) {
  std::error_code error;
  const std::uintmax_t bytes = fs::file_size(file, error);
  if (error) fail(file.string(), "cannot read its size: " + error.message());
  return bytes;
}

// H5Fopen without HDF5's error printing; a refusal if HDF5 cannot open the file.
hid_t open_file(const fs::path& file) {
  const QuietHdf5 quiet;
  const hid_t id = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (id < 0) fail(file.string(), "HDF5 cannot open it (damaged or truncated)");
  return id;
}

}  // namespace

std::uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? std::uint64_t(pages) * std::uint64_t(page) : UINT64_MAX;
}

DataHandle::~DataHandle() {
  if (id_ >= 0) close_(id_);
}

DataHandle::DataHandle(DataHandle&& other) noexcept
    : id_(std::exchange(other.id_, -1)), close_(other.close_) {}

DataFileReader::DataFileReader(const fs::path& file, const std::vector<std::string>& names,
                               std::uint64_t memory_limit_bytes, std::uint64_t optional)
    : file_(file), h5_(open_file(file), H5Fclose) {
  const QuietHdf5 quiet;
  const std::uint64_t file_bytes = size_of_file(file);
  const std::uint64_t limit = memory_limit_bytes > 0 ? memory_limit_bytes : physical_memory_bytes();
  const std::string why =
      memory_limit_bytes > 0
          ? "--data-memory-limit " + std::to_string(memory_limit_bytes) +
                " bytes (a chunked or compressed dataset is read into memory, not mapped: store "
                "it contiguous and unfiltered to map it)"
          : std::string("this machine's memory (it is read, not mapped)");
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string& name = names[i];
    DataArray array;
    array.where = file.string() + " " + name;
    if ((optional >> i & 1) != 0 && !link_exists(h5_.get(), name)) {
      array.present = false;
      arrays_.push_back(std::move(array));
      datasets_.emplace_back(-1, H5Oclose);
      types_.emplace_back(-1, H5Tclose);
      continue;
    }
    require_hard_links(h5_.get(), name, array.where);
    DataHandle dataset(H5Oopen(h5_.get(), name.c_str(), H5P_DEFAULT), H5Oclose);
    if (!dataset.ok() || H5Iget_type(dataset.get()) != H5I_DATASET)
      fail(array.where, "not a dataset");
    DataHandle type(H5Dget_type(dataset.get()), H5Tclose);
    if (!type.ok()) fail(array.where, "cannot read the dataset's type");
    array.type = type_of(type.get(), array.where);
    array.shape = shape_of(dataset.get(), array.where);
    const Storage storage = storage_of(h5_.get(), dataset.get(), array.where);
    const bool mappable =
        storage.layout == H5D_CONTIGUOUS && !storage.filtered && !storage.user_block;
    const std::uint64_t need = checked_bytes(
        array.shape, data_item_bytes(array.type), mappable ? file_bytes : limit, array.where,
        mappable ? "the file's " + std::to_string(file_bytes) + " bytes" : why);
    check_size(storage, dataset.get(), need, file_bytes, array);
    arrays_.push_back(std::move(array));
    datasets_.push_back(std::move(dataset));
    types_.push_back(std::move(type));
  }
  classes_ = read_classes(h5_.get(), file);
}

void DataFileReader::read(std::size_t i,
                          const std::function<void(std::span<const std::uint8_t>)>& sink) const {
  const QuietHdf5 quiet;
  const DataArray& array = arrays_.at(i);
  const hid_t dataset = datasets_.at(i).get();
  const std::vector<std::uint64_t>& shape = array.shape;
  std::uint64_t row_bytes = data_item_bytes(array.type);  // checked: the whole fits in 64 bits
  for (std::size_t d = 1; d < shape.size(); ++d) row_bytes *= shape[d];
  const std::uint64_t rows_per_piece = std::max<std::uint64_t>(1, kDataPieceBytes / row_bytes);
  std::vector<std::uint8_t> piece;
  const DataHandle file_space(H5Dget_space(dataset), H5Sclose);
  for (std::uint64_t first = 0; first < shape[0]; first += rows_per_piece) {
    const std::uint64_t rows = std::min(rows_per_piece, shape[0] - first);
    std::vector<hsize_t> start(shape.size(), 0), count(shape.begin(), shape.end());
    start[0] = first;
    count[0] = rows;
    piece.resize(static_cast<std::size_t>(rows * row_bytes));
    const DataHandle memory_space(
        H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr), H5Sclose);
    if (!file_space.ok() || !memory_space.ok() ||
        H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(),
                            nullptr) < 0 ||
        H5Dread(dataset, types_.at(i).get(), memory_space.get(), file_space.get(), H5P_DEFAULT,
                piece.data()) < 0)
      fail(array.where, "cannot read the data (damaged or truncated file, or a filter HDF5 lacks)");
    sink(piece);
  }
}

}  // namespace detail

DataFile read_data_file(const fs::path& file, const std::vector<std::string>& names,
                        std::uint64_t memory_limit_bytes, std::uint64_t optional) {
  const detail::DataFileReader reader(file, names, memory_limit_bytes, optional);
  DataFile result;
  result.arrays = reader.arrays();
  result.classes = reader.classes();
  for (std::size_t i = 0; i < result.arrays.size(); ++i) {
    DataArray& array = result.arrays[i];
    if (array.offset || !array.present) continue;
    reader.read(i, [&array](std::span<const std::uint8_t> piece) {
      array.bytes.insert(array.bytes.end(), piece.begin(), piece.end());
    });
  }
  return result;
}

}  // namespace ringtrain::checkpoint
