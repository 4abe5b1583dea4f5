// The HDF5 C API, wrapped once (HighFive style): one move-only RAII handle per kind of HDF5
// object, one method per C call. Every wrapper checks the call's result; a failure throws
// Hdf5Error with the call's name and the HDF5 error stack, which the public functions turn
// into a CheckpointError naming the file and the object. Destructors close and never throw.
//
// All of it runs on one thread (Debian's HDF5 1.10.8 is not built thread-safe).
// Private to the checkpoint module: not installed, not seen by users.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ringtrain/checkpoint/state_tree.hpp"

namespace ringtrain::checkpoint::detail {

// what() = "H5Dread failed"; stack() = the HDF5 error stack, outermost frame first.
class Hdf5Error : public std::runtime_error {
 public:
  Hdf5Error(const std::string& call, std::string stack)
      : std::runtime_error(call + " failed"), stack_(std::move(stack)) {}
  const std::string& stack() const noexcept { return stack_; }

 private:
  std::string stack_;
};

// While alive, HDF5 prints no error stacks to stderr (the wrappers capture them instead);
// the previous setting comes back on destruction. Every public entry point holds one.
// Creates, fills and closes a small file in memory (core driver, no backing store) with the
// parts a checkpoint has: a user block, a group, a dataset with an attribute. A fresh
// process then finds the library initialised and its first real H5Fopen fast. Best effort:
// failures are ignored.
void warm_up_library();

class QuietErrors {
 public:
  QuietErrors();
  ~QuietErrors();
  QuietErrors(const QuietErrors&) = delete;
  QuietErrors& operator=(const QuietErrors&) = delete;

 private:
  H5E_auto2_t saved_function_ = nullptr;
  void* saved_data_ = nullptr;
};

// Owner of one hid_t. Move-only; the destructor closes and ignores failures.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer closer) noexcept : id_(id), closer_(closer) {}
  Handle(Handle&& other) noexcept;
  Handle& operator=(Handle&& other) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle();

  hid_t id() const noexcept { return id_; }
  // Closes now and throws Hdf5Error if that fails (a file's close flushes: it can fail).
  void close(const char* call);

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;  // nullptr: borrowed (a predefined type), never closed
};

struct ObjectInfo {
  H5O_type_t type = H5O_TYPE_UNKNOWN;
  unsigned ref_count = 0;  // hard links to the object
  std::uint64_t num_attrs = 0;
  unsigned header_version = 0;  // object header format version (2 for what we write)
};

struct LinkInfo {
  std::string name;
  H5L_type_t type = H5L_TYPE_ERROR;
};

class Datatype : public Handle {
 public:
  using Handle::Handle;
  // A predefined type (H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, ...): borrowed, never closed.
  static Datatype predefined(hid_t id) { return Datatype(id, nullptr); }
  // Fixed-length string of `size` bytes (>= 1), null-padded, UTF-8.
  static Datatype fixed_string(std::size_t size);

  H5T_class_t type_class() const;            // H5Tget_class
  std::size_t size() const;                  // H5Tget_size
  H5T_order_t order() const;                 // H5Tget_order
  H5T_sign_t sign() const;                   // H5Tget_sign (integers)
  bool is_variable_string() const;           // H5Tis_variable_str
  bool equals(const Datatype& other) const;  // H5Tequal
};

class Dataspace : public Handle {
 public:
  using Handle::Handle;
  static Dataspace scalar();                  // H5Screate(H5S_SCALAR)
  static Dataspace simple(const Dims& dims);  // H5Screate_simple, max = dims

  H5S_class_t extent_type() const;  // H5Sget_simple_extent_type
  // H5Sget_simple_extent_ndims + _dims; empty for a scalar space.
  std::vector<hsize_t> dims() const;
};

class PropertyList : public Handle {
 public:
  using Handle::Handle;
  static PropertyList create(hid_t property_class);  // H5Pcreate

  // File access.
  void set_libver_bounds(H5F_libver_t low, H5F_libver_t high);  // H5Pset_libver_bounds
  void set_fclose_degree(H5F_close_degree_t degree);            // H5Pset_fclose_degree
  // File creation.
  void set_userblock(hsize_t bytes);  // H5Pset_userblock (0 or a power of 2 >= 512)
  // Group creation.
  void set_link_creation_order(unsigned flags);  // H5Pset_link_creation_order
  unsigned link_creation_order() const;          // H5Pget_link_creation_order
  // Dataset creation.
  void set_layout(H5D_layout_t layout);      // H5Pset_layout
  void set_fill_time(H5D_fill_time_t when);  // H5Pset_fill_time
  H5D_layout_t layout() const;               // H5Pget_layout
  int filter_count() const;                  // H5Pget_nfilters
  int external_count() const;                // H5Pget_external_count
};

class Attribute : public Handle {
 public:
  using Handle::Handle;
  // H5Acreate2 / H5Aopen / H5Aexists on the object `object` (a file, group or dataset id).
  static Attribute create(hid_t object, const char* name, const Datatype& type,
                          const Dataspace& space);
  static Attribute open(hid_t object, const char* name);
  static bool exists(hid_t object, const char* name);

  Datatype type() const;                                        // H5Aget_type
  Dataspace space() const;                                      // H5Aget_space
  void read(const Datatype& memory_type, void* buffer) const;   // H5Aread
  void write(const Datatype& memory_type, const void* buffer);  // H5Awrite
};

class Dataset : public Handle {
 public:
  using Handle::Handle;
  Datatype type() const;                // H5Dget_type
  Dataspace space() const;              // H5Dget_space
  PropertyList creation_plist() const;  // H5Dget_create_plist
  ObjectInfo info() const;              // H5Oget_info2
  // H5Dget_offset: byte offset of contiguous raw data in the file, HADDR_UNDEF if none
  // (not allocated, compact, chunked). Never fails.
  haddr_t offset() const;
  hsize_t storage_size() const;  // H5Dget_storage_size (0 if not allocated)
  // Whole-dataset transfer; `buffer` must hold every element in `memory_type`.
  void read(const Datatype& memory_type, void* buffer) const;   // H5Dread
  void write(const Datatype& memory_type, const void* buffer);  // H5Dwrite
};

class GroupHandle : public Handle {
 public:
  using Handle::Handle;
  GroupHandle create_group(const std::string& name, const PropertyList& creation);  // H5Gcreate2
  GroupHandle open_group(const std::string& name) const;                            // H5Gopen2
  Dataset create_dataset(const std::string& name, const Datatype& type,             // H5Dcreate2
                         const Dataspace& space, const PropertyList& creation);
  Dataset open_dataset(const std::string& name) const;  // H5Dopen2

  bool link_exists(const std::string& name) const;      // H5Lexists (name has no '/')
  H5L_type_t link_type(const std::string& name) const;  // H5Lget_info
  std::uint64_t link_count() const;                     // H5Gget_info
  // H5Literate: at most `max_links` links in `order`; the bool says whether more were left.
  std::vector<LinkInfo> links(H5_index_t order, std::size_t max_links, bool* truncated) const;
  ObjectInfo object_info(const std::string& name) const;  // H5Oget_info_by_name2 (follows)
  ObjectInfo info() const;                                // H5Oget_info2
  PropertyList creation_plist() const;                    // H5Gget_create_plist
};

class File : public Handle {
 public:
  using Handle::Handle;
  // H5Fcreate (truncating): HDF5 1.8 object formats (superblock v2, checksummed object
  // headers), and a strong close so close() really releases the file before the fsync.
  // `userblock_bytes` at the start of the file are left to the caller (HDF5 writes zeros
  // there and starts its superblock after them).
  static File create(const std::filesystem::path& path, hsize_t userblock_bytes = 0);
  // The same file built in memory (the core driver, no backing store): HDF5 never touches
  // the disk, so an I/O error cannot leave the library with a file it failed to close.
  // `name` only names it inside HDF5; `expected_bytes` sizes the first allocation. One
  // in-memory file at a time.
  static File create_in_memory(const std::filesystem::path& name, hsize_t userblock_bytes,
                               std::size_t expected_bytes);
  // Closes a file made by create_in_memory and returns its bytes as they belong on disk
  // (the user block's zeros first); valid until the next create_in_memory.
  std::string_view close_in_memory();
  // H5Fopen read-only, default (sec2) driver, strong close.
  static File open_read_only(const std::filesystem::path& path);

  GroupHandle root() const;             // H5Gopen2(file, "/")
  unsigned superblock_version() const;  // H5Fget_info2

 private:
  hsize_t userblock_bytes_ = 0;  // of an in-memory file
};

}  // namespace ringtrain::checkpoint::detail
