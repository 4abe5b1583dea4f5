// Test helpers: user datasets written independently of the readers under test. .npy files are
// built byte by byte; HDF5 files through the HDF5 C API, with the bytes given in the file's
// own type (so a big-endian or float64 dataset can be written as such).
//
//   npy_bytes("<f4", {2, 3}, body)  ->  \x93NUMPY 01 00 | len | {'descr': '<f4', ... } | body
//   SmallData: the same samples and labels as an IDX folder, a .npy folder and HDF5 files.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "idx_files.hpp"

namespace ringtrain::test {

struct NpyOptions {
  int major = 1;
  bool fortran = false;
};

inline std::string npy_shape_text(const std::vector<std::uint64_t>& shape) {
  std::string text = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

// The header NumPy writes: the dict, padded with spaces so data start at a multiple of 64.
inline Bytes npy_header(const std::string& dict, int major) {
  const std::size_t prefix = major == 1 ? 10 : 12;
  std::string text = dict;
  while ((prefix + text.size() + 1) % 64 != 0) text += ' ';
  text += '\n';
  Bytes out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<std::uint8_t>(major), 0};
  for (std::size_t i = 0; i < prefix - 8; ++i)
    out.push_back(static_cast<std::uint8_t>(text.size() >> (8 * i)));
  out.insert(out.end(), text.begin(), text.end());
  return out;
}

// Where the data of a format-1.0 file start: 10 bytes + the dict's length.
inline std::size_t npy_data_offset(const Bytes& file) {
  return 10 + (std::size_t{file.at(8)} | std::size_t{file.at(9)} << 8);
}

inline Bytes npy_bytes(const std::string& descr, const std::vector<std::uint64_t>& shape,
                       const Bytes& body, NpyOptions options = {}) {
  const std::string dict = "{'descr': '" + descr +
                           "', 'fortran_order': " + (options.fortran ? "True" : "False") +
                           ", 'shape': " + npy_shape_text(shape) + ", }";
  Bytes out = npy_header(dict, options.major);
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

// Little-endian bytes of typed values (float32, int32, int64).
template <typename T>
Bytes le_bytes(const std::vector<T>& values) {
  Bytes out(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// One dataset of an HDF5 file written by write_h5.
struct H5Array {
  std::string name;  // "/train/x"
  hid_t type;        // file type, e.g. H5T_STD_U8LE, H5T_IEEE_F32BE; `body` is in this type
  std::vector<std::uint64_t> shape;
  Bytes body;
  bool chunked = false;  // chunked and gzip-compressed instead of contiguous
};

inline void h5_check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("writing the test's HDF5 file: " + what + " failed");
}

inline void write_h5_array(hid_t file, const H5Array& a) {
  std::vector<hsize_t> dims(a.shape.begin(), a.shape.end());
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (a.chunked) {
    std::vector<hsize_t> chunk = dims;
    chunk[0] = std::min<hsize_t>(chunk[0], 4);
    H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data());
    H5Pset_deflate(dcpl, 4);
  }
  const hid_t ds = H5Dcreate2(file, a.name.c_str(), a.type, space, lcpl, dcpl, H5P_DEFAULT);
  h5_check(ds >= 0, "H5Dcreate2 " + a.name);
  h5_check(H5Dwrite(ds, a.type, H5S_ALL, H5S_ALL, H5P_DEFAULT, a.body.data()) >= 0,
           "H5Dwrite " + a.name);
  H5Dclose(ds);
  H5Pclose(dcpl);
  H5Pclose(lcpl);
  H5Sclose(space);
}

inline void write_h5(const std::filesystem::path& path, const std::vector<H5Array>& arrays,
                     std::optional<std::int64_t> classes = std::nullopt) {
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  h5_check(file >= 0, "H5Fcreate");
  for (const H5Array& a : arrays) write_h5_array(file, a);
  if (classes) {
    const hid_t space = H5Screate(H5S_SCALAR);
    const hid_t attr = H5Acreate2(file, "classes", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    h5_check(attr >= 0 && H5Awrite(attr, H5T_NATIVE_INT64, &*classes) >= 0, "classes");
    H5Aclose(attr);
    H5Sclose(space);
  }
  H5Fclose(file);
}

// Fashion-MNIST-like data small enough for a test: 28x28 uint8 images whose pixels differ by
// image and position, labels 0..9 in a pattern that differs between the splits.
struct SmallData {
  std::uint32_t n_train = 13, n_test = 7;

  Bytes x(bool train) const { return image_body(train ? n_train : n_test, 28, 28); }
  Bytes y(bool train) const {
    Bytes labels;
    for (std::uint32_t i = 0; i < (train ? n_train : n_test); ++i)
      labels.push_back(static_cast<std::uint8_t>(train ? i % 10 : (i * 7 + 2) % 10));
    return labels;
  }
  std::vector<std::int64_t> y64(bool train) const {
    const Bytes b = y(train);
    return std::vector<std::int64_t>(b.begin(), b.end());
  }
  std::uint64_t n(bool train) const { return train ? n_train : n_test; }

  void write_idx_dir(const std::filesystem::path& dir) const {
    std::filesystem::create_directories(dir);
    write_idx(dir / "train-images-idx3-ubyte.gz", idx_bytes(0x803, {n_train, 28, 28}, x(true)));
    write_idx(dir / "train-labels-idx1-ubyte.gz", idx_bytes(0x801, {n_train}, y(true)));
    write_idx(dir / "t10k-images-idx3-ubyte.gz", idx_bytes(0x803, {n_test, 28, 28}, x(false)));
    write_idx(dir / "t10k-labels-idx1-ubyte.gz", idx_bytes(0x801, {n_test}, y(false)));
  }

  // x as (n, 1, 28, 28) uint8, y as int64.
  void write_npy_dir(const std::filesystem::path& dir) const {
    std::filesystem::create_directories(dir);
    for (bool train : {true, false}) {
      const std::string split = train ? "train" : "test";
      write_plain(dir / (split + "_x.npy"), npy_bytes("|u1", {n(train), 1, 28, 28}, x(train)));
      write_plain(dir / (split + "_y.npy"), npy_bytes("<i8", {n(train)}, le_bytes(y64(train))));
    }
  }

  // x as (n, 1, 28, 28) uint8, y as uint8 (train) and int64 (test).
  std::vector<H5Array> h5_arrays(bool chunked) const {
    return {{"/train/x", H5T_STD_U8LE, {n_train, 1, 28, 28}, x(true), chunked},
            {"/train/y", H5T_STD_U8LE, {n_train}, y(true), chunked},
            {"/test/x", H5T_STD_U8LE, {n_test, 1, 28, 28}, x(false), chunked},
            {"/test/y", H5T_STD_I64LE, {n_test}, le_bytes(y64(false)), chunked}};
  }
};

}  // namespace ringtrain::test
