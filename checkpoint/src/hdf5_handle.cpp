// One wrapper per HDF5 C call. Pattern: call, check, on failure throw Hdf5Error with the
// error stack captured right away (the next HDF5 call would clear it).
#include "hdf5_handle.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace ringtrain::checkpoint::detail {
namespace {

herr_t append_frame(unsigned /*n*/, const H5E_error2_t* error, void* out) {
  auto& text = *static_cast<std::string*>(out);
  char minor[256] = "";
  if (H5Eget_msg(error->min_num, nullptr, minor, sizeof minor) < 0) minor[0] = '\0';
  text += error->func_name ? error->func_name : "?";
  text += "(): ";
  text += error->desc ? error->desc : "";
  if (minor[0] != '\0') text += std::string(" (") + minor + ")";
  text += '\n';
  return 0;
}

// The current thread's HDF5 error stack as text, outermost call first; then clears it.
std::string take_error_stack() {
  std::string text;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, append_frame, &text);  // API call first
  H5Eclear2(H5E_DEFAULT);
  return text;
}

[[noreturn]] void fail(const char* call) {
  throw Hdf5Error(call, take_error_stack());
}

hid_t check_id(hid_t id, const char* call) {
  if (id < 0) fail(call);
  return id;
}

void check(herr_t status, const char* call) {
  if (status < 0) fail(call);
}

bool check_tri(htri_t value, const char* call) {
  if (value < 0) fail(call);
  return value > 0;
}

ObjectInfo to_object_info(const H5O_info_t& raw) {
  return ObjectInfo{raw.type, raw.rc, static_cast<std::uint64_t>(raw.num_attrs), raw.hdr.version};
}

constexpr unsigned kInfoFields = H5O_INFO_BASIC | H5O_INFO_NUM_ATTRS | H5O_INFO_HDR;

ObjectInfo object_info_of(hid_t object) {
  H5O_info_t raw{};
  check(H5Oget_info2(object, &raw, kInfoFields), "H5Oget_info2");
  return to_object_info(raw);
}

}  // namespace

// ---- QuietErrors, Handle -------------------------------------------------------------------

QuietErrors::QuietErrors() {
  H5Eget_auto2(H5E_DEFAULT, &saved_function_, &saved_data_);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

QuietErrors::~QuietErrors() {
  H5Eset_auto2(H5E_DEFAULT, saved_function_, saved_data_);
}

Handle::Handle(Handle&& other) noexcept
    : id_(std::exchange(other.id_, H5I_INVALID_HID)), closer_(other.closer_) {}

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    if (id_ >= 0 && closer_ != nullptr) closer_(id_);
    id_ = std::exchange(other.id_, H5I_INVALID_HID);
    closer_ = other.closer_;
  }
  return *this;
}

Handle::~Handle() {
  if (id_ >= 0 && closer_ != nullptr) closer_(id_);  // a failure here is ignored: never throw
}

void Handle::close(const char* call) {
  const hid_t id = std::exchange(id_, H5I_INVALID_HID);
  if (id >= 0 && closer_ != nullptr) check(closer_(id), call);
}

// ---- Datatype ------------------------------------------------------------------------------

Datatype Datatype::fixed_string(std::size_t size) {
  Datatype type(check_id(H5Tcopy(H5T_C_S1), "H5Tcopy"), H5Tclose);
  check(H5Tset_size(type.id(), size), "H5Tset_size");
  check(H5Tset_strpad(type.id(), H5T_STR_NULLPAD), "H5Tset_strpad");
  check(H5Tset_cset(type.id(), H5T_CSET_UTF8), "H5Tset_cset");
  return type;
}

H5T_class_t Datatype::type_class() const {
  const H5T_class_t value = H5Tget_class(id());
  if (value == H5T_NO_CLASS) fail("H5Tget_class");
  return value;
}

std::size_t Datatype::size() const {
  const std::size_t value = H5Tget_size(id());
  if (value == 0) fail("H5Tget_size");
  return value;
}

H5T_order_t Datatype::order() const {
  const H5T_order_t value = H5Tget_order(id());
  if (value == H5T_ORDER_ERROR) fail("H5Tget_order");
  return value;
}

H5T_sign_t Datatype::sign() const {
  const H5T_sign_t value = H5Tget_sign(id());
  if (value == H5T_SGN_ERROR) fail("H5Tget_sign");
  return value;
}

bool Datatype::is_variable_string() const {
  return check_tri(H5Tis_variable_str(id()), "H5Tis_variable_str");
}

bool Datatype::equals(const Datatype& other) const {
  return check_tri(H5Tequal(id(), other.id()), "H5Tequal");
}

// ---- Dataspace -----------------------------------------------------------------------------

Dataspace Dataspace::scalar() {
  return Dataspace(check_id(H5Screate(H5S_SCALAR), "H5Screate"), H5Sclose);
}

Dataspace Dataspace::simple(const Dims& dims) {
  const std::vector<hsize_t> extent(dims.begin(), dims.end());
  return Dataspace(
      check_id(H5Screate_simple(static_cast<int>(extent.size()), extent.data(), extent.data()),
               "H5Screate_simple"),
      H5Sclose);
}

H5S_class_t Dataspace::extent_type() const {
  const H5S_class_t value = H5Sget_simple_extent_type(id());
  if (value == H5S_NO_CLASS) fail("H5Sget_simple_extent_type");
  return value;
}

std::vector<hsize_t> Dataspace::dims() const {
  const int rank = H5Sget_simple_extent_ndims(id());
  if (rank < 0) fail("H5Sget_simple_extent_ndims");
  if (rank > H5S_MAX_RANK) throw Hdf5Error("H5Sget_simple_extent_ndims", "rank out of range\n");
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  if (rank > 0 && H5Sget_simple_extent_dims(id(), dims.data(), nullptr) < 0)
    fail("H5Sget_simple_extent_dims");
  return dims;
}

// ---- PropertyList --------------------------------------------------------------------------

PropertyList PropertyList::create(hid_t property_class) {
  return PropertyList(check_id(H5Pcreate(property_class), "H5Pcreate"), H5Pclose);
}

void PropertyList::set_libver_bounds(H5F_libver_t low, H5F_libver_t high) {
  check(H5Pset_libver_bounds(id(), low, high), "H5Pset_libver_bounds");
}

void PropertyList::set_fclose_degree(H5F_close_degree_t degree) {
  check(H5Pset_fclose_degree(id(), degree), "H5Pset_fclose_degree");
}

void PropertyList::set_link_creation_order(unsigned flags) {
  check(H5Pset_link_creation_order(id(), flags), "H5Pset_link_creation_order");
}

unsigned PropertyList::link_creation_order() const {
  unsigned flags = 0;
  check(H5Pget_link_creation_order(id(), &flags), "H5Pget_link_creation_order");
  return flags;
}

void PropertyList::set_userblock(hsize_t bytes) {
  check(H5Pset_userblock(id(), bytes), "H5Pset_userblock");
}

void PropertyList::set_layout(H5D_layout_t layout) {
  check(H5Pset_layout(id(), layout), "H5Pset_layout");
}

void PropertyList::set_fill_time(H5D_fill_time_t when) {
  check(H5Pset_fill_time(id(), when), "H5Pset_fill_time");
}

H5D_layout_t PropertyList::layout() const {
  const H5D_layout_t value = H5Pget_layout(id());
  if (value == H5D_LAYOUT_ERROR) fail("H5Pget_layout");
  return value;
}

int PropertyList::filter_count() const {
  const int value = H5Pget_nfilters(id());
  if (value < 0) fail("H5Pget_nfilters");
  return value;
}

int PropertyList::external_count() const {
  const int value = H5Pget_external_count(id());
  if (value < 0) fail("H5Pget_external_count");
  return value;
}

// ---- Attribute -----------------------------------------------------------------------------

Attribute Attribute::create(hid_t object, const char* name, const Datatype& type,
                            const Dataspace& space) {
  return Attribute(
      check_id(H5Acreate2(object, name, type.id(), space.id(), H5P_DEFAULT, H5P_DEFAULT),
               "H5Acreate2"),
      H5Aclose);
}

Attribute Attribute::open(hid_t object, const char* name) {
  return Attribute(check_id(H5Aopen(object, name, H5P_DEFAULT), "H5Aopen"), H5Aclose);
}

bool Attribute::exists(hid_t object, const char* name) {
  return check_tri(H5Aexists(object, name), "H5Aexists");
}

Datatype Attribute::type() const {
  return Datatype(check_id(H5Aget_type(id()), "H5Aget_type"), H5Tclose);
}

Dataspace Attribute::space() const {
  return Dataspace(check_id(H5Aget_space(id()), "H5Aget_space"), H5Sclose);
}

void Attribute::read(const Datatype& memory_type, void* buffer) const {
  check(H5Aread(id(), memory_type.id(), buffer), "H5Aread");
}

void Attribute::write(const Datatype& memory_type, const void* buffer) {
  check(H5Awrite(id(), memory_type.id(), buffer), "H5Awrite");
}

// ---- Dataset -------------------------------------------------------------------------------

Datatype Dataset::type() const {
  return Datatype(check_id(H5Dget_type(id()), "H5Dget_type"), H5Tclose);
}

Dataspace Dataset::space() const {
  return Dataspace(check_id(H5Dget_space(id()), "H5Dget_space"), H5Sclose);
}

PropertyList Dataset::creation_plist() const {
  return PropertyList(check_id(H5Dget_create_plist(id()), "H5Dget_create_plist"), H5Pclose);
}

ObjectInfo Dataset::info() const {
  return object_info_of(id());
}

haddr_t Dataset::offset() const {
  const haddr_t value = H5Dget_offset(id());
  if (value == HADDR_UNDEF) H5Eclear2(H5E_DEFAULT);  // "no offset" is an answer, not an error
  return value;
}

hsize_t Dataset::storage_size() const {
  return H5Dget_storage_size(id());
}

void Dataset::read(const Datatype& memory_type, void* buffer) const {
  check(H5Dread(id(), memory_type.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer), "H5Dread");
}

void Dataset::write(const Datatype& memory_type, const void* buffer) {
  check(H5Dwrite(id(), memory_type.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer), "H5Dwrite");
}

// ---- Group ---------------------------------------------------------------------------------

GroupHandle GroupHandle::create_group(const std::string& name, const PropertyList& creation) {
  return GroupHandle(
      check_id(H5Gcreate2(id(), name.c_str(), H5P_DEFAULT, creation.id(), H5P_DEFAULT),
               "H5Gcreate2"),
      H5Gclose);
}

GroupHandle GroupHandle::open_group(const std::string& name) const {
  return GroupHandle(check_id(H5Gopen2(id(), name.c_str(), H5P_DEFAULT), "H5Gopen2"), H5Gclose);
}

Dataset GroupHandle::create_dataset(const std::string& name, const Datatype& type,
                                    const Dataspace& space, const PropertyList& creation) {
  return Dataset(check_id(H5Dcreate2(id(), name.c_str(), type.id(), space.id(), H5P_DEFAULT,
                                     creation.id(), H5P_DEFAULT),
                          "H5Dcreate2"),
                 H5Dclose);
}

Dataset GroupHandle::open_dataset(const std::string& name) const {
  return Dataset(check_id(H5Dopen2(id(), name.c_str(), H5P_DEFAULT), "H5Dopen2"), H5Dclose);
}

bool GroupHandle::link_exists(const std::string& name) const {
  return check_tri(H5Lexists(id(), name.c_str(), H5P_DEFAULT), "H5Lexists");
}

H5L_type_t GroupHandle::link_type(const std::string& name) const {
  H5L_info_t info{};
  check(H5Lget_info(id(), name.c_str(), &info, H5P_DEFAULT), "H5Lget_info");
  return info.type;
}

std::uint64_t GroupHandle::link_count() const {
  H5G_info_t info{};
  check(H5Gget_info(id(), &info), "H5Gget_info");
  return info.nlinks;
}

namespace {

struct LinkCollector {
  std::vector<LinkInfo> links;
  std::size_t max_links = 0;
  bool truncated = false;
};

herr_t collect_link(hid_t /*group*/, const char* name, const H5L_info_t* info, void* data) {
  auto& collector = *static_cast<LinkCollector*>(data);
  if (collector.links.size() == collector.max_links) {
    collector.truncated = true;
    return 1;  // stop early: more links than anyone expects
  }
  try {
    collector.links.push_back(LinkInfo{name, info->type});
  } catch (...) {
    return -1;  // never let an exception cross the C library
  }
  return 0;
}

}  // namespace

std::vector<LinkInfo> GroupHandle::links(H5_index_t order, std::size_t max_links,
                                         bool* truncated) const {
  LinkCollector collector;
  collector.max_links = max_links;
  hsize_t position = 0;
  check(H5Literate(id(), order, H5_ITER_INC, &position, collect_link, &collector), "H5Literate");
  if (truncated != nullptr) *truncated = collector.truncated;
  return std::move(collector.links);
}

ObjectInfo GroupHandle::object_info(const std::string& name) const {
  H5O_info_t raw{};
  check(H5Oget_info_by_name2(id(), name.c_str(), &raw, kInfoFields, H5P_DEFAULT),
        "H5Oget_info_by_name2");
  return to_object_info(raw);
}

ObjectInfo GroupHandle::info() const {
  return object_info_of(id());
}

PropertyList GroupHandle::creation_plist() const {
  return PropertyList(check_id(H5Gget_create_plist(id()), "H5Gget_create_plist"), H5Pclose);
}

// ---- File ----------------------------------------------------------------------------------

namespace {

PropertyList file_access(bool for_writing) {
  PropertyList access = PropertyList::create(H5P_FILE_ACCESS);
  access.set_fclose_degree(H5F_CLOSE_STRONG);
  if (for_writing) access.set_libver_bounds(H5F_LIBVER_V18, H5F_LIBVER_V18);
  return access;
}

}  // namespace

File File::create(const std::filesystem::path& path, hsize_t userblock_bytes) {
  const PropertyList access = file_access(true);
  PropertyList creation = PropertyList::create(H5P_FILE_CREATE);
  if (userblock_bytes > 0) creation.set_userblock(userblock_bytes);
  return File(
      check_id(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, creation.id(), access.id()), "H5Fcreate"),
      H5Fclose);
}

namespace {

// The memory of the in-memory file (the core driver's buffer, through HDF5's file image
// callbacks). It outlives the file: HDF5 "frees" it at close, after its final flush, and the
// bytes are then read back. It is kept from one save to the next, so that a save does not
// fault in fresh pages. HDF5 runs on one thread, and one in-memory file exists at a time.
struct CoreImage {
  void* data = nullptr;
  std::size_t capacity = 0;
};
CoreImage core_image;

void* image_malloc(std::size_t size, H5FD_file_image_op_t, void*) { return std::malloc(size); }
void* image_memcpy(void* to, const void* from, std::size_t size, H5FD_file_image_op_t, void*) {
  return std::memcpy(to, from, size);
}
// The driver's buffer grows through here (it starts as a null pointer).
void* image_realloc(void* ptr, std::size_t size, H5FD_file_image_op_t, void* udata) {
  auto& image = *static_cast<CoreImage*>(udata);
  if (ptr != nullptr && ptr != image.data) return std::realloc(ptr, size);
  if (size > image.capacity) {
    void* grown = std::realloc(image.data, size);
    if (grown == nullptr) return nullptr;
    image.data = grown;
    image.capacity = size;
  }
  return image.data;
}
herr_t image_free(void* ptr, H5FD_file_image_op_t, void* udata) {
  if (ptr != static_cast<CoreImage*>(udata)->data) std::free(ptr);
  return 0;
}
void* udata_copy(void* udata) { return udata; }
herr_t udata_free(void*) { return 0; }

// Superblock version 2: signature (8), version, sizes of offsets and lengths, flags (4), base
// address (8), extension address (8), then the end-of-file address.
constexpr std::size_t kSuperblockEofOffset = 28;

}  // namespace

File File::create_in_memory(const std::filesystem::path& name, hsize_t userblock_bytes,
                            std::size_t expected_bytes) {
  const PropertyList access = file_access(true);
  constexpr std::size_t kMinIncrement = std::size_t{1} << 20;
  check(H5Pset_fapl_core(access.id(), std::max(expected_bytes, kMinIncrement), false),
        "H5Pset_fapl_core");
  H5FD_file_image_callbacks_t callbacks = {image_malloc, image_memcpy, image_realloc, image_free,
                                           udata_copy,   udata_free,   &core_image};
  check(H5Pset_file_image_callbacks(access.id(), &callbacks), "H5Pset_file_image_callbacks");
  PropertyList creation = PropertyList::create(H5P_FILE_CREATE);
  if (userblock_bytes > 0) creation.set_userblock(userblock_bytes);
  File file(check_id(H5Fcreate(name.c_str(), H5F_ACC_TRUNC, creation.id(), access.id()),
                     "H5Fcreate"),
            H5Fclose);
  file.userblock_bytes_ = userblock_bytes;
  return file;
}

std::string_view File::close_in_memory() {
  close("H5Fclose");
  // The file ends where its superblock says (the buffer is larger: it grows in increments).
  const auto* bytes = static_cast<const unsigned char*>(core_image.data);
  constexpr unsigned char kSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  const std::size_t superblock = userblock_bytes_;
  if (bytes == nullptr || core_image.capacity < superblock + kSuperblockEofOffset + 8 ||
      std::memcmp(bytes + superblock, kSignature, sizeof kSignature) != 0 ||
      bytes[superblock + 8] != 2)
    throw Hdf5Error("H5Fclose (no version-2 superblock in the in-memory file)", "");
  std::uint64_t end = 0;
  std::memcpy(&end, bytes + superblock + kSuperblockEofOffset, sizeof end);
  if (end < superblock || end > core_image.capacity)
    throw Hdf5Error("H5Fclose (the in-memory file's end lies outside its memory)", "");
  return {reinterpret_cast<const char*>(bytes), static_cast<std::size_t>(end)};
}

File File::open_read_only(const std::filesystem::path& path) {
  const PropertyList access = file_access(false);
  return File(check_id(H5Fopen(path.c_str(), H5F_ACC_RDONLY, access.id()), "H5Fopen"), H5Fclose);
}

GroupHandle File::root() const {
  return GroupHandle(check_id(H5Gopen2(id(), "/", H5P_DEFAULT), "H5Gopen2"), H5Gclose);
}

unsigned File::superblock_version() const {
  H5F_info2_t info{};
  check(H5Fget_info2(id(), &info), "H5Fget_info2");
  return info.super.version;
}

void warm_up_library() {
  const QuietErrors quiet;
  const hid_t access = H5Pcreate(H5P_FILE_ACCESS);
  const hid_t creation = H5Pcreate(H5P_FILE_CREATE);
  H5Pset_fapl_core(access, std::size_t{1} << 16, 0);
  H5Pset_libver_bounds(access, H5F_LIBVER_V18, H5F_LIBVER_V18);
  H5Pset_userblock(creation, 512);
  const hid_t file = H5Fcreate("ringtrain-warm-up", H5F_ACC_TRUNC, creation, access);
  const hid_t group = H5Gcreate2(file, "g", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  const hsize_t count = 4;
  const hid_t space = H5Screate_simple(1, &count, nullptr);
  const hid_t scalar = H5Screate(H5S_SCALAR);
  const hid_t dataset =
      H5Dcreate2(group, "d", H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  const float values[4] = {};
  H5Dwrite(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values);
  const hid_t attribute =
      H5Acreate2(dataset, "a", H5T_STD_U64LE, scalar, H5P_DEFAULT, H5P_DEFAULT);
  const std::uint64_t zero = 0;
  H5Awrite(attribute, H5T_NATIVE_UINT64, &zero);
  H5Aclose(attribute);
  H5Dclose(dataset);
  H5Sclose(scalar);
  H5Sclose(space);
  H5Gclose(group);
  H5Fclose(file);
  H5Pclose(creation);
  H5Pclose(access);
}

}  // namespace ringtrain::checkpoint::detail
