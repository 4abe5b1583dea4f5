// Writing one checkpoint file: root attributes (the Header), the six groups, one dataset per
// entry with its xxh3 attribute; then close and fsync (HDF5 never fsyncs). Rank 0 only. The
// layout is documented in file.hpp.
//
// HDF5 builds the file in memory (the core driver) and this code writes its image to disk
// with plain write(2). A disk that is full, an I/O error or a file size limit then fails our
// write, which leaves nothing open: when HDF5's own write fails, it cannot close the file
// (the flush at close fails again) and crashes when the process exits.
//
// Every HDF5 call runs on the calling thread (Debian's HDF5 is not thread-safe). The xxh3
// checksums are pure CPU work on the tree's memory, so for trees of 512 KiB and more a second
// thread computes them while this one writes the data; the attributes are written once both
// are done. That hides the checksum cost (about 10% of a save at disk speed,
// bench/README-checkpoint.md).
#include <thread>
#include <variant>

#include "format.hpp"
#include "hdf5_handle.hpp"
#include "posix_io.hpp"
#include "ringtrain/checkpoint/error.hpp"
#include "ringtrain/checkpoint/file.hpp"
#include "seal.hpp"

namespace ringtrain::checkpoint {

using detail::Attribute;
using detail::Dataset;
using detail::Dataspace;
using detail::Datatype;
using detail::File;
using detail::GroupHandle;
using detail::PropertyList;

std::string hdf5_link_name(std::string_view entry_name) {
  std::string link(entry_name);
  for (char& c : link)
    if (c == '/') c = detail::kLinkSeparator;
  return link;
}

std::string hdf5_path(Group group, std::string_view entry_name) {
  return group_path(group) + "/" + hdf5_link_name(entry_name);
}

namespace {

// xxh3 runs at ~10 GB/s here and a thread costs ~50 µs to start and join: hashing 512 KiB
// inline takes about as long as starting the thread.
constexpr std::uint64_t kHashThreadMinBytes = std::uint64_t{512} << 10;
// Room for HDF5's own structures (object headers, attributes, B-trees) beyond the arrays'
// bytes, so that the in-memory file rarely grows during a save.
constexpr std::size_t kMetadataAllowance = std::size_t{256} << 10;

// A string as a fixed-length HDF5 string; HDF5 cannot have a 0-byte type, so "" is one NUL.
std::string padded(const std::string& text) {
  return text.empty() ? std::string(1, '\0') : text;
}

void write_scalar_attribute(hid_t object, const char* name, hid_t file_type, hid_t memory_type,
                            const void* value) {
  Attribute attribute =
      Attribute::create(object, name, Datatype::predefined(file_type), Dataspace::scalar());
  attribute.write(Datatype::predefined(memory_type), value);
}

void write_string_attribute(hid_t object, const char* name, const std::string& text) {
  const std::string bytes = padded(text);
  const Datatype type = Datatype::fixed_string(bytes.size());
  Attribute attribute = Attribute::create(object, name, type, Dataspace::scalar());
  attribute.write(type, bytes.data());
}

void write_header(const GroupHandle& root, const Header& header) {
  write_string_attribute(root.id(), detail::kFormatAttribute, header.format);
  const std::int32_t version = header.version;
  write_scalar_attribute(root.id(), detail::kVersionAttribute, H5T_STD_I32LE, H5T_NATIVE_INT32,
                         &version);
  write_scalar_attribute(root.id(), detail::kStepAttribute, H5T_STD_U64LE, H5T_NATIVE_UINT64,
                         &header.step);
  write_scalar_attribute(root.id(), detail::kEpochAttribute, H5T_STD_U64LE, H5T_NATIVE_UINT64,
                         &header.epoch);
  const std::int32_t world_size = header.world_size;
  write_scalar_attribute(root.id(), detail::kWorldSizeAttribute, H5T_STD_I32LE, H5T_NATIVE_INT32,
                         &world_size);
  write_string_attribute(root.id(), detail::kConfigAttribute, header.config_json);
}

PropertyList dataset_creation(H5D_layout_t layout) {
  PropertyList creation = PropertyList::create(H5P_DATASET_CREATE);
  creation.set_layout(layout);
  creation.set_fill_time(H5D_FILL_TIME_NEVER);  // every byte is written anyway
  return creation;
}

// The two dataset creation lists a file needs, made once per file (HDF5 property lists cost
// tens of microseconds each to create and close).
struct Layouts {
  PropertyList contiguous = dataset_creation(H5D_CONTIGUOUS);
  PropertyList compact = dataset_creation(H5D_COMPACT);
};

void write_checksum(const Dataset& dataset, std::uint64_t checksum) {
  write_scalar_attribute(dataset.id(), detail::kChecksumAttribute, H5T_STD_U64LE, H5T_NATIVE_UINT64,
                         &checksum);
}

Dataset write_array(GroupHandle& group, const std::string& link, const FloatArray& array,
                    const Layouts& layouts) {
  const Dataspace space =
      array.shape.empty() ? Dataspace::scalar() : Dataspace::simple(array.shape);
  Dataset dataset =
      group.create_dataset(link, Datatype::predefined(H5T_IEEE_F32LE), space, layouts.contiguous);
  // A zero-element dataset has nothing to write (and HDF5 rejects a null buffer).
  if (!array.values.empty())
    dataset.write(Datatype::predefined(H5T_NATIVE_FLOAT), array.values.data());
  return dataset;
}

template <typename T>
Dataset write_scalar(GroupHandle& group, const std::string& link, hid_t file_type,
                     hid_t memory_type, T value, const Layouts& layouts) {
  Dataset dataset = group.create_dataset(link, Datatype::predefined(file_type), Dataspace::scalar(),
                                         layouts.compact);
  dataset.write(Datatype::predefined(memory_type), &value);
  return dataset;
}

Dataset write_string(GroupHandle& group, const std::string& link, const std::string& text,
                     const Layouts& layouts) {
  const std::string bytes = padded(text);
  const Datatype type = Datatype::fixed_string(bytes.size());
  const PropertyList& layout =
      bytes.size() <= detail::kCompactStringMaxBytes ? layouts.compact : layouts.contiguous;
  Dataset dataset = group.create_dataset(link, type, Dataspace::scalar(), layout);
  dataset.write(type, bytes.data());
  return dataset;
}

// Creates the entry's dataset and writes its value; the checksum attribute comes later.
Dataset write_entry(GroupHandle& group, const Entry& entry, const Layouts& layouts) {
  const std::string link = hdf5_link_name(entry.name);
  switch (entry.kind()) {
    case Kind::kFloat32Array:
      return write_array(group, link, std::get<FloatArray>(entry.value), layouts);
    case Kind::kInt64:
      return write_scalar(group, link, H5T_STD_I64LE, H5T_NATIVE_INT64,
                          std::get<std::int64_t>(entry.value), layouts);
    case Kind::kUInt64:
      return write_scalar(group, link, H5T_STD_U64LE, H5T_NATIVE_UINT64,
                          std::get<std::uint64_t>(entry.value), layouts);
    case Kind::kFloat64:
      return write_scalar(group, link, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE,
                          std::get<double>(entry.value), layouts);
    case Kind::kString:
      return write_string(group, link, std::get<std::string>(entry.value), layouts);
  }
  throw CheckpointError(entry_path(entry.group, entry.name) + ": invalid kind");
}

void check_header(const std::filesystem::path& path, const Header& header, const MacKey* key) {
  const bool known_version =
      header.version == kFormatVersion || (header.version == 1 && key == nullptr);
  if (header.format != kFormatName || !known_version)
    throw CheckpointError(path, "refusing to write format '" + header.format + "' version " +
                                    std::to_string(header.version) + "; this build writes '" +
                                    kFormatName + "' version " + std::to_string(kFormatVersion) +
                                    " (version 1, unsealed, only without a key)");
  if (header.world_size < 1)
    throw CheckpointError(path, "world_size " + std::to_string(header.world_size) + " < 1");
  if (header.config_json.find('\0') != std::string::npos ||
      header.config_json.size() > kMaxStringBytes)
    throw CheckpointError(
        path, "config holds a NUL byte or exceeds " + std::to_string(kMaxStringBytes) + " bytes");
}

std::vector<detail::TocEntry> table_of_contents(const std::vector<Entry>& entries,
                                                const std::vector<std::uint64_t>& checksums) {
  std::vector<detail::TocEntry> toc;
  toc.reserve(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    Dims shape;
    if (e.kind() == Kind::kFloat32Array) shape = std::get<FloatArray>(e.value).shape;
    toc.push_back({e.group, e.name, e.kind(), std::move(shape), checksums[i]});
  }
  return toc;
}

}  // namespace

void write_file(const std::filesystem::path& path, const Header& header, const StateTree& tree,
                const MacKey* key) {
  check_header(path, header, key);
  const bool sealed = header.version >= 2;
  const detail::QuietErrors quiet;
  std::string where = "creating the file";
  std::vector<detail::TocEntry> toc;
  std::string_view image;  // the whole file, built in memory by HDF5, written to disk by us
  try {
    const std::size_t userblock = sealed ? detail::kSealBytes : 0;
    File file = File::create_in_memory(path, userblock, tree.payload_bytes() + kMetadataAllowance);
    {
      GroupHandle root = file.root();
      where = "writing the root attributes";
      write_header(root, header);
      // Creation order is tracked so that inspect lists entries in the order they were put.
      PropertyList group_creation = PropertyList::create(H5P_GROUP_CREATE);
      group_creation.set_link_creation_order(H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
      std::vector<GroupHandle> groups;
      for (Group g : kAllGroups) {
        where = "creating group /" + std::string(group_name(g));
        groups.push_back(root.create_group(std::string(group_name(g)), group_creation));
      }
      // checksums[i] belongs to entry i; the hasher only reads the tree (no HDF5 calls) and
      // is joined before the attributes are written (or, on an exception, on unwinding).
      // Below kHashThreadMinBytes hashing takes less time than starting a thread: inline.
      const std::vector<Entry>& entries = tree.entries();
      std::vector<std::uint64_t> checksums(entries.size());
      const auto hash_all = [&entries, &checksums] {
        for (std::size_t i = 0; i < entries.size(); ++i)
          checksums[i] = detail::entry_xxh3(entries[i]);
      };
      std::jthread hasher;
      if (tree.payload_bytes() >= kHashThreadMinBytes)
        hasher = std::jthread(hash_all);
      else
        hash_all();
      const Layouts layouts;
      std::vector<Dataset> datasets;
      datasets.reserve(entries.size());
      for (const Entry& entry : entries) {
        where = "writing " + entry_path(entry.group, entry.name);
        datasets.push_back(
            write_entry(groups[static_cast<std::size_t>(entry.group)], entry, layouts));
      }
      if (hasher.joinable()) hasher.join();
      for (std::size_t i = 0; i < entries.size(); ++i) {
        where = "writing the checksum of " + entry_path(entries[i].group, entries[i].name);
        write_checksum(datasets[i], checksums[i]);
      }
      if (sealed) toc = table_of_contents(entries, checksums);
    }  // every group and dataset is closed here, before the file
    where = "closing the file";
    image = file.close_in_memory();
  } catch (const detail::Hdf5Error& error) {
    throw CheckpointError(path, where + ": " + error.what(), error.stack());
  }
  detail::write_unsynced(path, image);
  if (sealed) {
    const std::size_t count = toc.size();
    detail::write_seal(path, detail::toc_digest(std::move(toc)), count, key);
  }
  detail::fsync_file(path);  // data, seal and metadata durable before the caller renames
}

}  // namespace ringtrain::checkpoint
