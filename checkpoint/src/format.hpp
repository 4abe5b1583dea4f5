// The constants of the checkpoint file format (file.hpp describes it) shared by the writer
// and the reader, and the checksum of an entry's value. Private to the checkpoint module.
#pragma once

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "ringtrain/checkpoint/state_tree.hpp"

namespace ringtrain::checkpoint::detail {

// The checksum is over little-endian bytes; on a little-endian host those are the bytes in
// memory. A big-endian port would byte-swap here and in the reader.
static_assert(std::endian::native == std::endian::little, "checksums assume a little-endian host");

inline constexpr const char* kChecksumAttribute = "xxh3";
// Root attributes, in the order they are written.
inline constexpr const char* kFormatAttribute = "format";
inline constexpr const char* kVersionAttribute = "version";
inline constexpr const char* kStepAttribute = "step";
inline constexpr const char* kEpochAttribute = "epoch";
inline constexpr const char* kWorldSizeAttribute = "world_size";
inline constexpr const char* kConfigAttribute = "config";
inline constexpr std::uint64_t kRootAttributeCount = 6;

// '/' in an entry name becomes this in the HDF5 link name.
inline constexpr char kLinkSeparator = '|';
// Strings up to this size are stored compact (inside the object header), larger ones
// contiguous. Compact data is limited to 64 KiB by the format.
inline constexpr std::size_t kCompactStringMaxBytes = std::size_t{32} << 10;
// The format name attribute is short; anything longer is not ours.
inline constexpr std::size_t kMaxFormatNameBytes = 256;

// We write superblock v2 and object header v2 (HDF5 1.8 formats, checksummed metadata);
// older, unchecksummed formats are refused by the reader.
inline constexpr unsigned kMinSuperblockVersion = 2;
inline constexpr unsigned kMinObjectHeaderVersion = 2;
// verify_file lists at most this many objects per group.
inline constexpr std::size_t kMaxEntriesPerGroup = std::size_t{1} << 20;

inline std::uint64_t xxh3(const void* data, std::size_t bytes) {
  return XXH3_64bits(data, bytes);
}

template <typename T>
std::uint64_t xxh3_of_scalar(T value) {
  static_assert(sizeof(T) == 8);
  unsigned char bytes[8];
  std::memcpy(bytes, &value, 8);
  return xxh3(bytes, 8);
}

// XXH3_64bits of the value's little-endian bytes (a string's bytes, without padding).
inline std::uint64_t entry_xxh3(const Entry& entry) {
  switch (entry.kind()) {
    case Kind::kFloat32Array: {
      const auto& values = std::get<FloatArray>(entry.value).values;
      return xxh3(values.data(), values.size() * sizeof(float));
    }
    case Kind::kInt64:
      return xxh3_of_scalar(std::get<std::int64_t>(entry.value));
    case Kind::kUInt64:
      return xxh3_of_scalar(std::get<std::uint64_t>(entry.value));
    case Kind::kFloat64:
      return xxh3_of_scalar(std::get<double>(entry.value));
    case Kind::kString: {
      const auto& text = std::get<std::string>(entry.value);
      return xxh3(text.data(), text.size());
    }
  }
  return 0;
}

// Every float32 array of a checkpoint holds finite values: the parameters, optimizer state and
// BatchNorm statistics of a run that skips every step whose gradient is not finite. A NaN or
// an infinity in a file is a forgery or damage the checksums did not catch (without a key
// anyone can recompute them), and a resumed or evaluated model would carry it on.
// The index of the first NaN or +-inf in `values`, or values.size() if there is none.
inline std::size_t first_nonfinite(std::span<const float> values) {
  constexpr std::uint32_t kExponent = 0x7f800000u;  // all ones: inf or NaN
  constexpr std::size_t kBlock = 4096;
  for (std::size_t begin = 0; begin < values.size(); begin += kBlock) {
    const std::span<const float> block =
        values.subspan(begin, std::min(kBlock, values.size() - begin));
    bool bad = false;  // a branch-free pass that vectorises; the index is looked for only then
    for (const float v : block) bad |= (std::bit_cast<std::uint32_t>(v) & kExponent) == kExponent;
    if (!bad) continue;
    for (std::size_t i = 0; i < block.size(); ++i)
      if ((std::bit_cast<std::uint32_t>(block[i]) & kExponent) == kExponent) return begin + i;
  }
  return values.size();
}

// "<where>: element 17 is nan: a checkpoint holds finite values only: refused"
inline std::string nonfinite_reason(const std::string& where, std::size_t index, float value) {
  const char* what = value != value ? "nan" : value > 0 ? "inf" : "-inf";
  return where + ": element " + std::to_string(index) + " is " + what +
         ": a checkpoint holds finite values only: refused";
}

}  // namespace ringtrain::checkpoint::detail
