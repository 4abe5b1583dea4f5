// IDX reader (see idx.hpp for the format). Reads header first, checks it, and only then reads
// the body in chunks, so a lying header cannot make us allocate more than the file holds.
//
// Vocabulary: "kind" is what the file holds ("images" or "labels"); "sample bytes" is the
// size of one item of the body (rows * cols for images, 1 for labels).
#include "ringtrain/framework/data/idx.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <system_error>

#include "ringtrain/framework/error.hpp"

namespace ringtrain::data {
namespace fs = std::filesystem;

namespace {

constexpr std::size_t kChunkBytes = std::size_t{1} << 20;  // one gzread call at most

[[noreturn]] void fail(const fs::path& file, const std::string& problem) {
  throw DataError(fmt::format("{}: {}", file.string(), problem));
}

bool ends_with_gz(const fs::path& file) {
  return file.extension() == ".gz";
}

// zlib reads plain files transparently, so a ".gz" file that is not gzip would be accepted
// silently; the name promises gzip, so we insist on the magic bytes 1f 8b.
void check_gzip_magic(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(file, fmt::format("cannot open: {}", std::strerror(errno)));
  std::array<unsigned char, 2> magic{};
  in.read(reinterpret_cast<char*>(magic.data()), 2);
  const auto got = static_cast<std::size_t>(in.gcount());
  if (got < 2)
    fail(file,
         fmt::format("not gzip: the name ends in .gz but the file holds only {} byte(s)", got));
  if (magic[0] != 0x1f || magic[1] != 0x8b)
    fail(file, fmt::format("not gzip: the name ends in .gz but the file starts with {:02x} {:02x},"
                           " not the gzip magic 1f 8b (decompress it to a name without .gz, or"
                           " re-download it)",
                           magic[0], magic[1]));
}

// Owns one zlib gzFile (gzip or plain); closes it in the destructor.
class GzReader {
 public:
  explicit GzReader(const fs::path& file) : file_(file) {
    std::error_code ec;
    if (!fs::exists(file, ec)) fail(file, "file not found");
    if (fs::is_directory(file, ec)) fail(file, "is a directory, expected an IDX file");
    if (ends_with_gz(file)) check_gzip_magic(file);
    stored_bytes_ = fs::file_size(file, ec);
    if (ec) fail(file, fmt::format("cannot read its size: {}", ec.message()));
    compressed_ = ends_with_gz(file);
    errno = 0;
    gz_.reset(gzopen(file.c_str(), "rb"));
    if (!gz_) fail(file, fmt::format("cannot open: {}", std::strerror(errno)));
    gzbuffer(gz_.get(), 1u << 17);
  }

  // Fills `out` from the decompressed stream; returns the bytes read, fewer than out.size()
  // only at the end of the data. Throws DataError on a damaged gzip stream.
  std::size_t read(std::span<std::uint8_t> out) {
    std::size_t done = 0;
    while (done < out.size()) {
      const auto want = static_cast<unsigned>(std::min(out.size() - done, kChunkBytes));
      const int got = gzread(gz_.get(), out.data() + done, want);
      if (got <= 0) break;
      done += static_cast<std::size_t>(got);
    }
    if (done < out.size()) check_stream(done);
    total_bytes_ += done;
    return done;
  }

  // Decompressed bytes delivered so far.
  std::uint64_t total_bytes() const { return total_bytes_; }
  // A gzip file: the most bytes it can inflate to (kMaxGzipRatio times its size). A plain
  // file needs no such bound: reading it stops at its end.
  bool compressed() const { return compressed_; }
  std::uint64_t most_bytes() const { return stored_bytes_ * kMaxGzipRatio; }
  std::uint64_t stored_bytes() const { return stored_bytes_; }

 private:
  // After a short read: Z_OK means a clean end of data; anything else is a damaged stream
  // (Z_BUF_ERROR: the gzip stream stops in the middle, Z_DATA_ERROR: corrupt deflate data).
  void check_stream(std::size_t just_read) {
    int errnum = Z_OK;
    const char* message = gzerror(gz_.get(), &errnum);
    if (errnum == Z_OK) return;
    std::string reason = message ? message : "unknown error";
    const std::string prefix = file_.string() + ": ";  // zlib puts the path in front
    if (reason.starts_with(prefix)) reason.erase(0, prefix.size());
    fail(file_, fmt::format("corrupt or truncated gzip data after {} decompressed bytes (zlib: {});"
                            " re-download or reinstall the file",
                            total_bytes_ + just_read, reason));
  }

  struct GzClose {
    void operator()(gzFile gz) const { gzclose(gz); }
  };
  fs::path file_;
  std::unique_ptr<gzFile_s, GzClose> gz_;
  std::uint64_t total_bytes_ = 0;
  std::uint64_t stored_bytes_ = 0;  // the file's size on disk
  bool compressed_ = false;
};

std::uint32_t big_endian_u32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

// Reads and checks magic and sizes. Returns the D sizes, outermost (the count) first.
//   e.g. an images header 00 00 08 03 | 00 00 ea 60 | 00 00 00 1c | 00 00 00 1c
//        -> magic 0x00000803, sizes {60000, 28, 28}
std::vector<std::uint64_t> read_header(GzReader& in, const fs::path& file,
                                       std::uint32_t expected_magic, const char* kind) {
  const std::size_t num_dims = expected_magic & 0xffu;
  std::array<std::uint8_t, 4> magic_bytes{};
  const std::size_t got_magic = in.read(magic_bytes);
  if (got_magic < 4)
    fail(file, fmt::format("truncated header: the file holds {} byte(s), the magic number "
                           "alone needs 4 (the file is damaged or empty)",
                           got_magic));
  const std::uint32_t magic = big_endian_u32(magic_bytes.data());
  if ((magic & 0xffffff00u) != (expected_magic & 0xffffff00u))
    fail(file, fmt::format("bad magic 0x{:08x}, expected 0x{:08x} (IDX {}: unsigned bytes, {} "
                           "dimension(s)); is this an IDX file?",
                           magic, expected_magic, kind, num_dims));
  if (magic != expected_magic)
    fail(file, fmt::format("wrong dimension count: magic 0x{:08x} says {} dimension(s), IDX {} "
                           "have {} (0x{:08x}); are the images and labels files swapped?",
                           magic, magic & 0xffu, kind, num_dims, expected_magic));

  std::vector<std::uint8_t> size_bytes(4 * num_dims);
  const std::size_t got_sizes = in.read(size_bytes);
  if (got_sizes < size_bytes.size())
    fail(file, fmt::format("truncated header: {} byte(s), a header with {} dimension(s) needs {}",
                           4 + got_sizes, num_dims, 4 + size_bytes.size()));
  std::vector<std::uint64_t> sizes(num_dims);
  for (std::size_t d = 0; d < num_dims; ++d) sizes[d] = big_endian_u32(&size_bytes[4 * d]);
  if (sizes[0] == 0) fail(file, fmt::format("empty: the header says 0 {}", kind));
  return sizes;
}

// Reads exactly count * sample_bytes body bytes and checks that nothing follows them.
std::vector<std::uint8_t> read_body(GzReader& in, const fs::path& file, std::uint64_t count,
                                    std::uint64_t sample_bytes, const char* kind) {
  if (count > UINT64_MAX / sample_bytes)
    fail(file, fmt::format("header sizes overflow: {} {} of {} bytes", count, kind, sample_bytes));
  const std::uint64_t body_bytes = count * sample_bytes;
  // Before a byte of the body is inflated: can the file hold what the header announces?
  if (in.compressed() && body_bytes > in.most_bytes())
    fail(file, fmt::format("the header says {} {} of {} bytes ({} bytes), but a gzip file of {} "
                           "bytes inflates to at most {} bytes (deflate's ratio is at most "
                           "{}:1): the header lies; refused before inflating",
                           count, kind, sample_bytes, body_bytes, in.stored_bytes(),
                           in.most_bytes(), kMaxGzipRatio));
  std::vector<std::uint8_t> body;
  body.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(body_bytes, 64u << 20)));
  while (body.size() < body_bytes) {
    const std::size_t old = body.size();
    const auto want =
        static_cast<std::size_t>(std::min<std::uint64_t>(body_bytes - old, kChunkBytes));
    body.resize(old + want);
    const std::size_t got = in.read(std::span(body).subspan(old, want));
    if (got < want) {
      const std::uint64_t held = old + got;
      body.clear();
      if (sample_bytes == 1)
        fail(file,
             fmt::format("truncated body: header says {} {}, file holds {}", count, kind, held));
      fail(file,
           fmt::format("truncated body: header says {} {} of {} bytes, file holds {} "
                       "({} complete, {} byte(s) of the next)",
                       count, kind, sample_bytes, held, held / sample_bytes, held % sample_bytes));
    }
  }
  std::array<std::uint8_t, 4096> probe{};
  std::uint64_t trailing = 0;
  for (std::size_t got = in.read(probe); got > 0; got = in.read(probe)) trailing += got;
  if (trailing > 0)
    fail(file, fmt::format("trailing garbage: {} byte(s) after the {} {} the header announces",
                           trailing, count, kind));
  return body;
}

}  // namespace

IdxImages read_idx_images(const fs::path& file, std::size_t expected_rows,
                          std::size_t expected_cols, std::uint64_t memory_limit_bytes) {
  if (expected_rows == 0 || expected_cols == 0)
    throw UsageError(fmt::format("read_idx_images: expected image size {}x{} must be positive",
                                 expected_rows, expected_cols));
  GzReader in(file);
  const std::vector<std::uint64_t> sizes = read_header(in, file, kIdxImagesMagic, "images");
  const std::uint64_t count = sizes[0], rows = sizes[1], cols = sizes[2];
  if (rows != expected_rows || cols != expected_cols)
    fail(file, fmt::format("wrong image size: header says {}x{} pixels (rows x cols), expected "
                           "{}x{}",
                           rows, cols, expected_rows, expected_cols));
  // The images as floats (4 bytes a pixel) within the memory limit, before inflating them.
  if (memory_limit_bytes > 0 && count > memory_limit_bytes / 4 / (rows * cols))
    fail(file, fmt::format("the header says {} images of {}x{} pixels, {} bytes as floats in "
                           "memory, more than --data-memory-limit {} bytes: refused before "
                           "inflating them",
                           count, rows, cols, count * rows * cols * 4, memory_limit_bytes));
  IdxImages images;
  images.pixels = read_body(in, file, count, rows * cols, "images");
  images.count = static_cast<std::size_t>(count);
  images.rows = expected_rows;
  images.cols = expected_cols;
  return images;
}

std::vector<std::uint8_t> read_idx_labels(const fs::path& file, std::size_t num_classes) {
  if (num_classes == 0) throw UsageError("read_idx_labels: num_classes must be positive");
  GzReader in(file);
  const std::vector<std::uint64_t> sizes = read_header(in, file, kIdxLabelsMagic, "labels");
  std::vector<std::uint8_t> labels = read_body(in, file, sizes[0], 1, "labels");
  for (std::size_t i = 0; i < labels.size(); ++i)
    if (labels[i] >= num_classes)
      fail(file, fmt::format("label {} at index {} is out of range: expected 0..{} ({} classes)",
                             labels[i], i, num_classes - 1, num_classes));
  return labels;
}

}  // namespace ringtrain::data
