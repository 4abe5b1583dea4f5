// Test helpers for the checkpoint module: a temporary directory, a sample state tree with
// every kind, and a small raw-HDF5 toolkit for crafting files the module must refuse. The
// crafting code calls the HDF5 C API directly (not the module under test) and opens files
// with the same 1.8 object formats the writer uses, so that each crafted file differs from
// a valid one in exactly the intended way.
#pragma once

#include <hdf5.h>
#include <stdlib.h>
#include <xxhash.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "ringtrain/checkpoint/error.hpp"
#include "ringtrain/checkpoint/file.hpp"
#include "ringtrain/checkpoint/state_tree.hpp"

namespace ringtrain::checkpoint::test {

namespace fs = std::filesystem;

// A directory under the system temp dir, unique per test, removed with its contents.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "ringtrain-ckpt-XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

// Values that differ by entry and position, so a misplaced element shows.
inline std::vector<float> pattern(std::size_t n, float salt) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = salt + 0.25f * static_cast<float>(i) - 1.5f;
  return v;
}

// Every kind, several groups, names with '/' and '.', rank 0..4 and an empty array.
inline StateTree sample_tree() {
  StateTree tree;
  tree.put_array(Group::kModel, "layers.0.linear/weight", {3, 4}, pattern(12, 1.0f));
  tree.put_array(Group::kModel, "layers.0.linear/bias", {3}, pattern(3, 2.0f));
  tree.put_array(Group::kModel, "layers.2.linear/weight", {2, 3}, pattern(6, 3.0f));
  tree.put_array(Group::kModel, "layers.4.conv/weight", {2, 2, 2, 2}, pattern(16, 4.0f));
  tree.put_array(Group::kModel, "layers.5.scale", {}, pattern(1, 5.0f));
  tree.put_array(Group::kModel, "layers.6.empty", {0, 3}, std::vector<float>{});
  tree.put_array(Group::kOptimizer, "layers.0.linear/weight/momentum", {3, 4}, pattern(12, 6.0f));
  tree.put_u64(Group::kOptimizer, "step", 200);
  tree.put_u64(Group::kSchedule, "step", 200);
  tree.put_u64(Group::kData, "seed", 42);
  tree.put_i64(Group::kData, "position", -7);
  tree.put_string(Group::kRng, "state", "philox:0123456789abcdef");
  tree.put_string(Group::kRng, "empty", "");
  tree.put_f64(Group::kProgress, "loss_sum", 0.1 + 0.2);
  tree.put_u64(Group::kProgress, "global_step", 200);
  return tree;
}

inline Header sample_header() {
  Header header;
  header.step = 200;
  header.epoch = 3;
  header.world_size = 2;
  header.config_json = R"({"model":"mlp","global_batch":128})";
  return header;
}

// ---- bytes of a file ---------------------------------------------------------------------

using Bytes = std::vector<char>;

inline Bytes read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_bytes(const fs::path& file, const Bytes& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

inline void flip_byte(const fs::path& file, std::size_t offset, unsigned char mask = 0x10) {
  Bytes bytes = read_bytes(file);
  REQUIRE(offset < bytes.size());
  bytes[offset] = static_cast<char>(bytes[offset] ^ mask);
  write_bytes(file, bytes);
}

// ---- the seal (format version 2) ----------------------------------------------------------
// Written here from the layout in checkpoint/src/seal.hpp, independently of the module.

inline constexpr std::size_t kSealBytes = 512;

inline bool has_seal(const Bytes& bytes) {
  return bytes.size() >= 8 && std::memcmp(bytes.data(), "\x89RTSEAL\n", 8) == 0;
}

// What someone without the key can do after editing a sealed file: recompute the length and
// the public content digest (XXH3-128 of bytes [512, EOF)), leaving the table-of-contents
// digest and any MAC as they were. Does nothing to a file without a seal.
inline void reseal_content(const fs::path& file) {
  Bytes bytes = read_bytes(file);
  if (!has_seal(bytes) || bytes.size() < kSealBytes) return;
  const std::uint64_t length = bytes.size();
  for (int i = 0; i < 8; ++i) bytes[16 + i] = static_cast<char>((length >> (8 * i)) & 0xff);
  XXH128_canonical_t digest;
  XXH128_canonicalFromHash(&digest,
                           XXH3_128bits(bytes.data() + kSealBytes, bytes.size() - kSealBytes));
  std::memcpy(bytes.data() + 24, digest.digest, sizeof digest.digest);
  write_bytes(file, bytes);
}

// ---- raw HDF5 ----------------------------------------------------------------------------

// One hid_t, closed on destruction; REQUIREs that the id is valid.
class Id {
 public:
  Id(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) { REQUIRE(id_ >= 0); }
  Id(Id&& other) noexcept : id_(std::exchange(other.id_, -1)), close_(other.close_) {}
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;
  ~Id() {
    if (id_ >= 0) close_(id_);
  }
  operator hid_t() const { return id_; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

// Opens a file for modification with the 1.8 object formats (as the writer creates them).
inline Id open_rw(const fs::path& file) {
  Id access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  REQUIRE(H5Pset_libver_bounds(access, H5F_LIBVER_V18, H5F_LIBVER_V18) >= 0);
  REQUIRE(H5Pset_fclose_degree(access, H5F_CLOSE_STRONG) >= 0);
  return Id(H5Fopen(file.c_str(), H5F_ACC_RDWR, access), H5Fclose);
}

inline Id create_file(const fs::path& file, bool new_formats = true) {
  Id access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (new_formats) REQUIRE(H5Pset_libver_bounds(access, H5F_LIBVER_V18, H5F_LIBVER_V18) >= 0);
  return Id(H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, access), H5Fclose);
}

inline Id open_group(hid_t file, const char* path) {
  return Id(H5Gopen2(file, path, H5P_DEFAULT), H5Gclose);
}

inline Id open_dataset(hid_t file, const char* path) {
  return Id(H5Dopen2(file, path, H5P_DEFAULT), H5Dclose);
}

inline void remove_link(hid_t file, const char* path) {
  REQUIRE(H5Ldelete(file, path, H5P_DEFAULT) >= 0);
}

inline void set_u64_attribute(hid_t object, const char* name, std::uint64_t value,
                              hid_t file_type = H5T_STD_U64LE) {
  if (H5Aexists(object, name) > 0) REQUIRE(H5Adelete(object, name) >= 0);
  Id space(H5Screate(H5S_SCALAR), H5Sclose);
  Id attribute(H5Acreate2(object, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  REQUIRE(H5Awrite(attribute, H5T_NATIVE_UINT64, &value) >= 0);
}

inline void set_i32_attribute(hid_t object, const char* name, std::int32_t value) {
  if (H5Aexists(object, name) > 0) REQUIRE(H5Adelete(object, name) >= 0);
  Id space(H5Screate(H5S_SCALAR), H5Sclose);
  Id attribute(H5Acreate2(object, name, H5T_STD_I32LE, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  REQUIRE(H5Awrite(attribute, H5T_NATIVE_INT32, &value) >= 0);
}

inline void set_string_attribute(hid_t object, const char* name, const std::string& text) {
  if (H5Aexists(object, name) > 0) REQUIRE(H5Adelete(object, name) >= 0);
  Id type(H5Tcopy(H5T_C_S1), H5Tclose);
  REQUIRE(H5Tset_size(type, text.empty() ? 1 : text.size()) >= 0);
  Id space(H5Screate(H5S_SCALAR), H5Sclose);
  Id attribute(H5Acreate2(object, name, type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  const std::string padded = text.empty() ? std::string(1, '\0') : text;
  REQUIRE(H5Awrite(attribute, type, padded.data()) >= 0);
}

// A dataset of `file_type` and `dims` (empty: scalar dataspace) holding `bytes` (written
// only if non-empty, as raw bytes of the file type), with an xxh3 attribute over those bytes
// unless `checksum` is false. `creation` may carry layout, filters or external storage.
inline void add_dataset(hid_t parent, const char* name, hid_t file_type,
                        const std::vector<hsize_t>& dims, const Bytes& bytes,
                        hid_t creation = H5P_DEFAULT, bool checksum = true) {
  Id space(dims.empty() ? H5Screate(H5S_SCALAR)
                        : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
           H5Sclose);
  Id dataset(H5Dcreate2(parent, name, file_type, space, H5P_DEFAULT, creation, H5P_DEFAULT),
             H5Dclose);
  if (!bytes.empty())
    REQUIRE(H5Dwrite(dataset, file_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()) >= 0);
  if (checksum) set_u64_attribute(dataset, "xxh3", XXH3_64bits(bytes.data(), bytes.size()));
}

// Byte offset of a contiguous dataset's data in the file.
inline std::size_t data_offset(const fs::path& file, const char* dataset_path) {
  Id h5(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  Id dataset = open_dataset(h5, dataset_path);
  const haddr_t offset = H5Dget_offset(dataset);
  REQUIRE(offset != HADDR_UNDEF);
  return static_cast<std::size_t>(offset);
}

template <typename T>
Bytes as_bytes(const std::vector<T>& values) {
  Bytes bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// The message of the CheckpointError that f() throws; "ACCEPTED" if f() returns normally.
template <class F>
std::string rejection(F&& f) {
  try {
    f();
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "ACCEPTED";
}

}  // namespace ringtrain::checkpoint::test
