// The reading side of data_file.hpp, shared by the in-process reader and the contained
// reader's child: open and check every array first (DataFileReader's constructor), then read
// the ones that are not mapped, piece by piece. Private to the checkpoint module.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "ringtrain/checkpoint/data_file.hpp"

namespace ringtrain::checkpoint::detail {

// Bytes of physical memory of this machine: the bound of what is read, without a limit.
std::uint64_t physical_memory_bytes();

// One HDF5 identifier, closed by `close` in the destructor. Move-only.
class DataHandle {
 public:
  DataHandle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~DataHandle();
  DataHandle(DataHandle&& other) noexcept;
  DataHandle& operator=(DataHandle&&) = delete;
  DataHandle(const DataHandle&) = delete;
  DataHandle& operator=(const DataHandle&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

class DataFileReader {
 public:
  // Opens `file` and checks every array of `names` (data_file.hpp lists the checks; bit i of
  // `optional`: names[i] may be absent); reads no array data. Throws CheckpointError.
  DataFileReader(const std::filesystem::path& file, const std::vector<std::string>& names,
                 std::uint64_t memory_limit_bytes, std::uint64_t optional = 0);

  // The arrays as checked: offset set for the mapped ones, bytes empty for all, present false
  // for the optional ones the file does not hold.
  const std::vector<DataArray>& arrays() const { return arrays_; }
  const std::optional<std::int64_t>& classes() const { return classes_; }

  // The data of array i (offset not set): every byte, in C order, handed to `sink` in pieces
  // of at most kDataPieceBytes (whole rows, or one row if a row is larger). Throws
  // CheckpointError if HDF5 cannot read it.
  void read(std::size_t i, const std::function<void(std::span<const std::uint8_t>)>& sink) const;

 private:
  std::filesystem::path file_;
  DataHandle h5_;
  std::vector<DataHandle> datasets_;  // parallel to arrays_ (invalid for absent arrays)
  // Each dataset's file type, also the memory type it is read as: the bytes come as stored
  // (type_of accepted only little-endian standard layouts), no conversion by HDF5.
  std::vector<DataHandle> types_;
  std::vector<DataArray> arrays_;
  std::optional<std::int64_t> classes_;
};

}  // namespace ringtrain::checkpoint::detail
