// .npy reader: NumPy's array file, format 1.0 and 2.0, strictly validated.
//
// Sits before training starts: a folder of train_x.npy, train_y.npy, test_x.npy, test_y.npy is
// a user dataset (user_data.hpp); each file becomes one StoredArray, mapped where its data lie.
//
// A .npy file is a header followed by the raw array:
//   magic    6 bytes  93 'N' 'U' 'M' 'P' 'Y'
//   version  2 bytes  major (1 or 2), minor (0)
//   length   2 bytes (1.0) or 4 bytes (2.0), little-endian: bytes of the dict that follows
//   dict     ASCII Python literal, padded with spaces, ending in '\n', e.g.
//            {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 784), }
//   data     items x item size bytes, nothing after them
// Accepted: NumPy's little-endian numeric descrs: '|b1' (bool), '|i1' '|u1' (int8, uint8),
// '<i2' '<u2' '<i4' '<u4' '<i8' '<u8', '<f2' '<f4' '<f8' (float16, float32, float64);
// fortran_order False. Every defect throws DataError naming the file and what was found.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "ringtrain/framework/data/stored_array.hpp"

namespace ringtrain::data {

inline constexpr std::size_t kNpyMaxHeaderBytes = 65536;  // the dict; NumPy writes < 200
inline constexpr std::size_t kNpyMaxDims = 8;

struct NpyHeader {
  DType dtype = DType::kFloat32;
  std::vector<std::uint64_t> shape;
  std::size_t data_offset = 0;  // bytes before the data: magic, version, length, dict
};

// Parses the header at the start of `bytes` (the file's first bytes, or all of them).
// Throws DataError naming `file`: bad magic or version, a dict that is truncated, longer than
// kNpyMaxHeaderBytes, not a dict of exactly descr / fortran_order / shape, an unsupported or
// big-endian descr, Fortran order, more than kNpyMaxDims dimensions, a dimension > 2^63.
NpyHeader parse_npy_header(std::span<const std::uint8_t> bytes, const std::filesystem::path& file);

// Maps `file` and returns its array, mapped after the header. Throws DataError as
// parse_npy_header, and when the data are shorter (truncated) or longer than the shape says.
StoredArray read_npy(const std::filesystem::path& file);

// The bytes of a format 1.0 .npy file holding `values` as a 1-d int64 array ('<i8', shape
// (n,)), its header padded to a multiple of 64 bytes as NumPy writes it.
std::string npy_int64_vector(std::span<const std::int64_t> values);

// The same for float32 values ('<f4') of `shape` (its items must be values.size()), e.g. a
// regression model's outputs (n) or (n, k).
std::string npy_float32_array(std::span<const float> values,
                              const std::vector<std::uint64_t>& shape);

}  // namespace ringtrain::data
