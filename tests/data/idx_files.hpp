// Test helpers: build IDX files byte by byte (independently of the reader under test) and
// write them, gzip-compressed or plain, into a fresh temporary directory.
//
//   idx_bytes(0x00000803, {2, 3, 4}, body)  ->  00 00 08 03 | 00 00 00 02 | ... | body
#pragma once

#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ringtrain/framework/data/dataset.hpp"
#include "ringtrain/framework/error.hpp"

namespace ringtrain::test {

using Bytes = std::vector<std::uint8_t>;

inline void append_big_endian(Bytes& out, std::uint32_t v) {
  out.push_back(static_cast<std::uint8_t>(v >> 24));
  out.push_back(static_cast<std::uint8_t>(v >> 16));
  out.push_back(static_cast<std::uint8_t>(v >> 8));
  out.push_back(static_cast<std::uint8_t>(v));
}

inline Bytes idx_bytes(std::uint32_t magic, const std::vector<std::uint32_t>& sizes,
                       const Bytes& body) {
  Bytes out;
  append_big_endian(out, magic);
  for (std::uint32_t s : sizes) append_big_endian(out, s);
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

// Body of n images of rows x cols whose pixel (i, y, x) is a value that differs by image and
// position, so a misplaced image or pixel shows.
inline Bytes image_body(std::uint32_t n, std::uint32_t rows, std::uint32_t cols) {
  Bytes body;
  for (std::uint32_t i = 0; i < n; ++i)
    for (std::uint32_t p = 0; p < rows * cols; ++p)
      body.push_back(static_cast<std::uint8_t>((i * 37 + p * 11 + 5) % 256));
  return body;
}

inline void write_plain(const std::filesystem::path& file, const Bytes& bytes) {
  std::ofstream out(file, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

inline void write_gzip(const std::filesystem::path& file, const Bytes& bytes) {
  gzFile gz = gzopen(file.c_str(), "wb");
  REQUIRE(gz != nullptr);
  const int written =
      bytes.empty() ? 0 : gzwrite(gz, bytes.data(), static_cast<unsigned>(bytes.size()));
  REQUIRE(gzclose(gz) == Z_OK);
  REQUIRE(written == static_cast<int>(bytes.size()));
}

// gzip if the name ends in .gz, plain otherwise.
inline void write_idx(const std::filesystem::path& file, const Bytes& bytes) {
  if (file.extension() == ".gz")
    write_gzip(file, bytes);
  else
    write_plain(file, bytes);
}

inline Bytes read_all(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A directory under the system temp dir, unique per test, removed with its contents.
class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "ringtrain-data-XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// The message of the DataError that f() throws; fails the test if f() returns normally.
// Any other exception type escapes and fails the test as well.
template <class F>
std::string data_error_message(F&& f) {
  try {
    f();
  } catch (const DataError& e) {
    return e.what();
  }
  FAIL("expected a DataError, but nothing was thrown");
  return {};
}

// Every sample of `dataset` as the model sees it (floats), in order, through gather_batch.
inline std::vector<float> all_sample_values(const ringtrain::data::Dataset& dataset) {
  std::vector<std::uint64_t> indices(dataset.size());
  for (std::size_t i = 0; i < indices.size(); ++i) indices[i] = i;
  std::vector<float> values(dataset.size() * dataset.sample_elements());
  std::vector<std::int32_t> labels(dataset.size());
  ringtrain::data::gather_batch(dataset, indices, values, labels);
  return values;
}

}  // namespace ringtrain::test
