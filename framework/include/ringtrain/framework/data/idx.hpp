// IDX reader: the file format of MNIST and Fashion-MNIST, strictly validated.
//
// Sits before training starts: the dataset loader (data/dataset.hpp) reads one images file
// and one labels file per split with these functions, then converts bytes to floats.
//
// An IDX file is a big-endian header followed by a row-major body of unsigned bytes:
//   magic    4 bytes  00 00 08 D   (08 = unsigned byte, D = number of dimensions)
//   sizes    D x 4 bytes            images: count, rows, cols   labels: count
//   body     count x rows x cols bytes (images) or count bytes (labels), nothing after it
// Files may be gzip-compressed (name ending in ".gz", checked for the gzip magic 1f 8b) or
// plain. Every defect throws DataError naming the file, the problem and the values found.
// Size before memory: before a byte of the body is inflated, the header's count must fit in
// what the file can hold (a plain file: its size; gzip: kMaxGzipRatio times its size) and
// the body, as the floats a run makes of it, in the caller's memory limit; the body is then
// inflated in pieces of 1 MiB.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <vector>

namespace ringtrain::data {

inline constexpr std::uint32_t kIdxImagesMagic = 0x00000803;  // unsigned bytes, 3 dims
inline constexpr std::uint32_t kIdxLabelsMagic = 0x00000801;  // unsigned bytes, 1 dim
// The most bytes a gzip (deflate) stream inflates to per compressed byte: about 1032.
inline constexpr std::uint64_t kMaxGzipRatio = 1032;

// pixels: (count, rows, cols) row-major, one byte per pixel as stored in the file.
struct IdxImages {
  std::size_t count = 0;
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::vector<std::uint8_t> pixels;
};

// Reads an images file whose images must be expected_rows x expected_cols pixels.
// memory_limit_bytes: the most the images may take as floats (4 bytes a pixel; 0: no limit
// here), named in the message as --data-memory-limit.
// Throws DataError: cannot open, not gzip, bad magic, wrong dimension count, zero images,
// wrong image size, a count the file cannot hold or over the memory limit, truncated header
// or body, corrupt gzip data, trailing bytes.
// Throws UsageError if expected_rows or expected_cols is 0.
IdxImages read_idx_images(const std::filesystem::path& file, std::size_t expected_rows,
                          std::size_t expected_cols, std::uint64_t memory_limit_bytes = 0);

// Reads a labels file; returns (count) class indices, each checked to be < num_classes.
// Throws DataError as read_idx_images, and for a label >= num_classes; UsageError if
// num_classes is 0.
std::vector<std::uint8_t> read_idx_labels(const std::filesystem::path& file,
                                          std::size_t num_classes);

}  // namespace ringtrain::data
