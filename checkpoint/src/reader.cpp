// The shared checks of every checkpoint reader (reader.hpp lists them in order). The file is
// untrusted: nothing is followed, allocated or read before its description was checked.
#include "reader.hpp"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>

#include "format.hpp"
#include "posix_io.hpp"

namespace ringtrain::checkpoint::detail {
namespace {

std::string object_type_name(H5O_type_t type) {
  switch (type) {
    case H5O_TYPE_GROUP:
      return "a group";
    case H5O_TYPE_DATASET:
      return "a dataset";
    case H5O_TYPE_NAMED_DATATYPE:
      return "a named datatype";
    default:
      return "an object of unknown type";
  }
}

// The attribute `name` of `object`, checked to be a scalar of exactly `file_type`, or a
// rejection naming what it is instead.
Attribute open_scalar_attribute(const CheckedFile& file, hid_t object, const std::string& owner,
                                const char* name, hid_t file_type, const char* type_text) {
  if (!Attribute::exists(object, name)) file.reject(owner + ": missing attribute '" + name + "'");
  Attribute attribute = Attribute::open(object, name);
  const Datatype type = attribute.type();
  if (!type.equals(Datatype::predefined(file_type)))
    file.reject(owner + ": attribute '" + name + "' is " + describe_type(type) + ", expected " +
                type_text);
  if (attribute.space().extent_type() != H5S_SCALAR)
    file.reject(owner + ": attribute '" + name + "' is not a scalar");
  return attribute;
}

template <typename T>
T read_scalar_attribute(const CheckedFile& file, hid_t object, const std::string& owner,
                        const char* name, hid_t file_type, hid_t memory_type,
                        const char* type_text) {
  const Attribute attribute =
      open_scalar_attribute(file, object, owner, name, file_type, type_text);
  T value{};
  attribute.read(Datatype::predefined(memory_type), &value);
  return value;
}

std::string read_string_attribute(const CheckedFile& file, hid_t object, const char* name,
                                  std::size_t max_bytes) {
  if (!Attribute::exists(object, name))
    file.reject(std::string("missing root attribute '") + name + "'");
  const Attribute attribute = Attribute::open(object, name);
  const Datatype type = attribute.type();
  if (type.type_class() != H5T_STRING || type.is_variable_string())
    file.reject(std::string("root attribute '") + name + "' is " + describe_type(type) +
                ", expected a fixed-length string");
  if (type.size() > max_bytes)
    file.reject(std::string("root attribute '") + name + "' is a string of " +
                std::to_string(type.size()) + " bytes, more than the limit " +
                std::to_string(max_bytes));
  if (attribute.space().extent_type() != H5S_SCALAR)
    file.reject(std::string("root attribute '") + name + "' is not a scalar");
  std::string text(type.size(), '\0');
  attribute.read(type, text.data());
  return strip_padding(std::move(text));
}

}  // namespace

std::string describe_type(const Datatype& type) {
  const std::string order = type.type_class() == H5T_INTEGER || type.type_class() == H5T_FLOAT
                                ? (type.order() == H5T_ORDER_LE   ? " LE"
                                   : type.order() == H5T_ORDER_BE ? " BE"
                                                                  : "")
                                : "";
  const std::string bits = std::to_string(type.size() * 8);
  switch (type.type_class()) {
    case H5T_INTEGER:
      return (type.sign() == H5T_SGN_NONE ? "uint" : "int") + bits + order;
    case H5T_FLOAT:
      return "float" + bits + order;
    case H5T_STRING:
      return type.is_variable_string()
                 ? "variable-length string"
                 : "fixed-length string of " + std::to_string(type.size()) + " bytes";
    case H5T_COMPOUND:
      return "compound";
    case H5T_ARRAY:
      return "array type";
    case H5T_VLEN:
      return "variable-length sequence";
    case H5T_ENUM:
      return "enum";
    case H5T_REFERENCE:
      return "reference";
    case H5T_OPAQUE:
      return "opaque";
    case H5T_BITFIELD:
      return "bitfield";
    case H5T_TIME:
      return "time";
    default:
      return "unknown type";
  }
}

std::string stored_type_name(Kind kind) {
  switch (kind) {
    case Kind::kFloat32Array:
      return "float32 LE";
    case Kind::kInt64:
      return "int64 LE";
    case Kind::kUInt64:
      return "uint64 LE";
    case Kind::kFloat64:
      return "float64 LE";
    case Kind::kString:
      return "fixed-length string";
  }
  return "?";
}

std::string describe_link(H5L_type_t type) {
  switch (type) {
    case H5L_TYPE_HARD:
      return "a hard link";
    case H5L_TYPE_SOFT:
      return "a soft link";
    case H5L_TYPE_EXTERNAL:
      return "an external link";
    default:
      return "a user-defined link";
  }
}

std::string strip_padding(std::string text) {
  const std::size_t end = text.find_last_not_of('\0');
  text.resize(end == std::string::npos ? 0 : end + 1);
  return text;
}

CheckpointError hdf5_failure(const std::filesystem::path& path, const std::string& where,
                             const Hdf5Error& error) {
  return CheckpointError(path, where + ": HDF5 refused it (" + error.what() + ")", error.stack());
}

// ---- CheckedFile -------------------------------------------------------------------------

void CheckedFile::reject(const std::string& reason) const {
  throw CheckpointError(path_, reason);
}

CheckedFile::CheckedFile(const std::filesystem::path& path, std::string& where, const MacKey* key)
    : path_(path), where_(where) {
  where_ = "opening the file";
  std::error_code error;
  const auto status = std::filesystem::status(path_, error);
  if (!std::filesystem::exists(status)) reject("does not exist");
  if (error) reject("cannot stat: " + error.message());
  if (!std::filesystem::is_regular_file(status)) reject("not a regular file");
  {
    // Plain reads only: nothing of HDF5 runs on a file whose seal does not check.
    const ReadOnlyFile raw(path_);
    file_bytes_ = raw.size();
    if (starts_with_seal(raw, path_))
      seal_ = check_seal(raw, path_, key, seal_scope());
    else
      refuse_unsealed_with_key(path_, key);
  }
  try {
    file_ = File::open_read_only(path_);
  } catch (const Hdf5Error& e) {
    throw CheckpointError(path_, "HDF5 cannot open it (corrupt or truncated file)", e.stack());
  }
  where_ = "the superblock";
  const unsigned superblock = file_.superblock_version();
  if (superblock < kMinSuperblockVersion)
    reject("superblock version " + std::to_string(superblock) + " (unchecksummed HDF5 format); " +
           "ringtrain writes version " + std::to_string(kMinSuperblockVersion));
  where_ = "the root group";
  root_ = file_.root();
  read_header();
}

void CheckedFile::read_header() {
  where_ = "the root attributes";
  const hid_t root = root_.id();
  // Format name first, then version: nothing else means anything before those two match.
  if (!Attribute::exists(root, kFormatAttribute))
    reject("no 'format' root attribute: not a ringtrain checkpoint");
  header_.format = read_string_attribute(*this, root, kFormatAttribute, kMaxFormatNameBytes);
  if (header_.format != kFormatName)
    reject("format '" + files::escaped(header_.format) + "', expected '" + kFormatName +
           "': not a ringtrain checkpoint");
  header_.version = read_scalar_attribute<std::int32_t>(
      *this, root, "root", kVersionAttribute, H5T_STD_I32LE, H5T_NATIVE_INT32, "int32 LE");
  if (header_.version < kOldestReadableVersion || header_.version > kFormatVersion)
    reject("format version " + std::to_string(header_.version) + "; this build reads versions " +
           std::to_string(kOldestReadableVersion) + " to " + std::to_string(kFormatVersion));
  if (header_.version >= 2 && !seal_)
    reject("format version " + std::to_string(header_.version) +
           " but no seal at byte 0 (user block missing): refused");
  if (header_.version < 2 && seal_)
    reject("format version " + std::to_string(header_.version) + " inside a seal: refused");
  header_.step = read_scalar_attribute<std::uint64_t>(
      *this, root, "root", kStepAttribute, H5T_STD_U64LE, H5T_NATIVE_UINT64, "uint64 LE");
  header_.epoch = read_scalar_attribute<std::uint64_t>(
      *this, root, "root", kEpochAttribute, H5T_STD_U64LE, H5T_NATIVE_UINT64, "uint64 LE");
  header_.world_size = read_scalar_attribute<std::int32_t>(
      *this, root, "root", kWorldSizeAttribute, H5T_STD_I32LE, H5T_NATIVE_INT32, "int32 LE");
  if (header_.world_size < 1)
    reject("root attribute 'world_size' is " + std::to_string(header_.world_size) + " (< 1)");
  header_.config_json = read_string_attribute(*this, root, kConfigAttribute, kMaxStringBytes);
  header_.mac_present = seal_ && seal_->has_mac;
  const ObjectInfo info = root_.info();
  if (info.header_version < kMinObjectHeaderVersion)
    reject("root object header version " + std::to_string(info.header_version) +
           "; ringtrain writes version " + std::to_string(kMinObjectHeaderVersion));
  if (info.num_attrs != kRootAttributeCount)
    reject("the root has " + std::to_string(info.num_attrs) + " attributes, expected " +
           std::to_string(kRootAttributeCount));
}

void CheckedFile::check_toc(const std::vector<TocEntry>& found) const {
#ifndef RINGTRAIN_FUZZING  // the fuzz build does not seal its mutated inputs
  if (!seal_) return;
  if (found.size() != seal_->entry_count || toc_digest(found) != seal_->toc)
    reject("table of contents differs from the seal (" + std::to_string(found.size()) +
           " entries in the file, " + std::to_string(seal_->entry_count) +
           " sealed): an entry was deleted, added, renamed or changed");
#else
  (void)found;
#endif
}

void CheckedFile::check_root() {
  where_ = "the root group";
  bool truncated = false;
  const auto links = root_.links(H5_INDEX_NAME, kAllGroups.size() + 1, &truncated);
  for (const LinkInfo& link : links) {
    if (!parse_group(link.name))
      reject("unexpected object '/" + files::escaped(link.name) +
             "' at the root (only /model /optimizer /schedule /data /rng /progress)");
    if (link.type != H5L_TYPE_HARD)
      reject("/" + link.name + " is " + describe_link(link.type) + "; links are refused");
  }
  for (Group g : kAllGroups) {
    const std::string name(group_name(g));
    where_ = "/" + name;
    if (!root_.link_exists(name)) reject("missing group /" + name);
    const ObjectInfo info = root_.object_info(name);
    if (info.type != H5O_TYPE_GROUP)
      reject("/" + name + " is " + object_type_name(info.type) + ", expected a group");
    if (info.ref_count != 1)
      reject("/" + name + " has " + std::to_string(info.ref_count) +
             " hard links (an object held under several names); refused");
    if (info.header_version < kMinObjectHeaderVersion)
      reject("/" + name + ": object header version " + std::to_string(info.header_version) +
             "; ringtrain writes version " + std::to_string(kMinObjectHeaderVersion));
    if (info.num_attrs != 0)
      reject("/" + name + " has " + std::to_string(info.num_attrs) + " attributes, expected none");
    groups_[static_cast<std::size_t>(g)] = root_.open_group(name);
  }
}

DatasetFacts CheckedFile::examine(Group g, const std::string& entry_name) {
  DatasetFacts facts;
  facts.path = entry_path(g, entry_name);
  where_ = facts.path;
  const std::string& p = facts.path;
  const GroupHandle& parent = group(g);
  const std::string link = hdf5_link_name(entry_name);

  const H5L_type_t link_type = parent.link_type(link);
  if (link_type != H5L_TYPE_HARD)
    reject(p + ": is " + describe_link(link_type) + "; links are refused");
  const ObjectInfo info = parent.object_info(link);
  if (info.type != H5O_TYPE_DATASET)
    reject(p + ": is " + object_type_name(info.type) + ", expected a dataset");
  if (info.ref_count != 1)
    reject(p + ": has " + std::to_string(info.ref_count) +
           " hard links (the same data under several names); refused");
  if (info.header_version < kMinObjectHeaderVersion)
    reject(p + ": object header version " + std::to_string(info.header_version) +
           "; ringtrain writes version " + std::to_string(kMinObjectHeaderVersion));
  if (info.num_attrs == 0) reject(p + ": missing xxh3 checksum attribute");
  if (info.num_attrs != 1)
    reject(p + ": has " + std::to_string(info.num_attrs) + " attributes, expected only 'xxh3'");

  facts.dataset = parent.open_dataset(link);
  const PropertyList creation = facts.dataset.creation_plist();
  if (const int files = creation.external_count(); files > 0)
    reject(p + ": data in " + std::to_string(files) +
           " external file(s); external storage is refused");
  facts.layout = creation.layout();
  if (facts.layout != H5D_CONTIGUOUS && facts.layout != H5D_COMPACT)
    reject(p + ": " +
           (facts.layout == H5D_CHUNKED   ? std::string("chunked")
            : facts.layout == H5D_VIRTUAL ? std::string("virtual")
                                          : std::string("unknown")) +
           " layout; ringtrain writes contiguous or compact datasets");
  if (const int filters = creation.filter_count(); filters > 0)
    reject(p + ": " + std::to_string(filters) + " filter(s) (compression); filters are refused");

  facts.type = facts.dataset.type();
  facts.dtype_text = describe_type(facts.type);
  if (facts.type.equals(Datatype::predefined(H5T_IEEE_F32LE)))
    facts.kind = Kind::kFloat32Array;
  else if (facts.type.equals(Datatype::predefined(H5T_STD_I64LE)))
    facts.kind = Kind::kInt64;
  else if (facts.type.equals(Datatype::predefined(H5T_STD_U64LE)))
    facts.kind = Kind::kUInt64;
  else if (facts.type.equals(Datatype::predefined(H5T_IEEE_F64LE)))
    facts.kind = Kind::kFloat64;
  else if (facts.type.type_class() == H5T_STRING && !facts.type.is_variable_string())
    facts.kind = Kind::kString;

  const Dataspace space = facts.dataset.space();
  const H5S_class_t space_class = space.extent_type();
  if (space_class != H5S_SCALAR && space_class != H5S_SIMPLE)
    reject(p + ": null dataspace (no data)");
  facts.scalar_space = space_class == H5S_SCALAR;
  if (!facts.scalar_space)
    for (hsize_t d : space.dims()) facts.shape.push_back(static_cast<std::size_t>(d));

  facts.stored_xxh3 = read_scalar_attribute<std::uint64_t>(
      *this, facts.dataset.id(), p, kChecksumAttribute, H5T_STD_U64LE, H5T_NATIVE_UINT64,
      "uint64 LE (the xxh3 checksum)");
  return facts;
}

void CheckedFile::check_checksum(const DatasetFacts& facts, std::uint64_t actual) const {
  if (actual == facts.stored_xxh3) return;
  char text[96];
  std::snprintf(text, sizeof text, "xxh3 of the data is %016llx, the attribute says %016llx",
                static_cast<unsigned long long>(actual),
                static_cast<unsigned long long>(facts.stored_xxh3));
  reject(facts.path + ": checksum mismatch (" + text + "): corrupt data");
}

std::uint64_t CheckedFile::check_storage(const DatasetFacts& facts, Kind kind) const {
  const std::string& p = facts.path;
  const auto elements = checked_num_elements(facts.shape);
  const std::uint64_t element_bytes = kind == Kind::kString         ? facts.type.size()
                                      : kind == Kind::kFloat32Array ? 4
                                                                    : 8;
  if (kind == Kind::kString && element_bytes > kMaxStringBytes)
    reject(p + ": string of " + std::to_string(element_bytes) + " bytes exceeds the limit " +
           std::to_string(kMaxStringBytes));
  if (!elements || *elements > UINT64_MAX / element_bytes)
    reject(p + ": shape " + to_string(facts.shape) + " overflows the byte count");
  const std::uint64_t bytes = *elements * element_bytes;
  if (bytes == 0) return 0;
  const std::uint64_t stored = facts.dataset.storage_size();
  if (stored != bytes)
    reject(p + ": stores " + std::to_string(stored) + " bytes, its shape " +
           to_string(facts.shape) + " and dtype need " + std::to_string(bytes));
  if (facts.layout == H5D_CONTIGUOUS) {
    const haddr_t offset = facts.dataset.offset();
    if (offset == HADDR_UNDEF) reject(p + ": no data allocated");
    if (offset > file_bytes_ || bytes > file_bytes_ - offset)
      reject(p + ": data at bytes [" + std::to_string(offset) + ", " +
             std::to_string(offset + bytes) + ") lies beyond the end of the file (" +
             std::to_string(file_bytes_) + " bytes): truncated");
  }
  return bytes;
}

}  // namespace ringtrain::checkpoint::detail
