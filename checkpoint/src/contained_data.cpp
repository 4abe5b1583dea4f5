// A user's HDF5 dataset through the contained reader (data_file.hpp): both sides of the
// Operation::kData exchange.
//
// Request (after request_head): the number of names, each name, the memory limit, the mask
// of optional names.
// Reply: kOk; classes (flag, value); per array kAbsent (an optional name the file does not
// hold), or its type, rank, dims and either kExtent and the offset of its bytes in the file,
// or kStreamed; then, for each streamed array in order,
// records kPiece (length <= kDataPieceBytes, bytes) until kEnd, or kStreamRefused and the
// reason if the child could not read it. The parent allocates a streamed array from the
// shape it checked itself (bounded by the memory limit) and fills it piece by piece from the
// pipe: no reply is held whole anywhere.
#include "contained_data.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "data_file_reader.hpp"
#include "posix_io.hpp"
#include "reader_process.hpp"
#include "ringtrain/checkpoint/contained.hpp"
#include "ringtrain/checkpoint/data_file.hpp"
#include "ringtrain/checkpoint/error.hpp"

namespace ringtrain::checkpoint {
namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t kStreamed = 2;
constexpr std::uint64_t kAbsent = 0;  // in place of a type
constexpr std::uint64_t kEnd = 0, kPiece = 1, kStreamRefused = 3;
constexpr std::uint64_t kMaxNames = 16, kMaxDataNameBytes = 4096;

// The reply as it arrives from the child's pipe, read in exact amounts; a reply that ends
// early is the child's death (reported as such) or a malformed reply.
class ReplyStream {
 public:
  ReplyStream(detail::ReaderChild& child, fs::path file) : child_(child), file_(std::move(file)) {}

  void read_exact(void* out, std::size_t bytes) {
    auto* to = static_cast<char*>(out);
    while (bytes > 0) {
      if (begin_ == end_) refill();
      const std::size_t n = std::min(bytes, end_ - begin_);
      std::memcpy(to, buffer_.data() + begin_, n);
      begin_ += n, to += n, bytes -= n;
    }
  }
  std::uint64_t u64() {
    std::uint64_t v = 0;
    read_exact(&v, sizeof v);
    return v;
  }
  std::string text(std::uint64_t limit) {
    const std::uint64_t n = u64();
    if (n > limit) bad("a text longer than " + std::to_string(limit) + " bytes");
    std::string s(static_cast<std::size_t>(n), '\0');
    read_exact(s.data(), s.size());
    return s;
  }
  // The reply must end here; then the child is reaped.
  void finish() {
    if (begin_ != end_ || child_.read_some(buffer_.data(), buffer_.size()) != 0)
      bad("bytes after the last array");
    child_.finish();
  }
  [[noreturn]] void bad(const std::string& what) const {
    throw CheckpointError(file_,
                          "the contained reader sent a malformed reply (" + what + "): refused");
  }

 private:
  void refill() {
    begin_ = 0;
    end_ = child_.read_some(buffer_.data(), buffer_.size());
    if (end_ > 0) return;
    child_.finish();  // throws if the child died by a signal or a limit
    bad("it ends early");
  }
  detail::ReaderChild& child_;
  fs::path file_;
  std::vector<char> buffer_ = std::vector<char>(std::size_t{1} << 16);
  std::size_t begin_ = 0, end_ = 0;
};

// One array's description, checked as untrusted: a known type, rank 1..8, its bytes within
// `limit` (streamed) or inside the file (mapped).
DataArray read_description(ReplyStream& in, const fs::path& file, const std::string& name,
                           std::uint64_t file_bytes, std::uint64_t limit, bool optional) {
  DataArray array;
  array.where = file.string() + " " + name;
  const std::uint64_t type = in.u64();
  if (type == kAbsent && optional) {
    array.present = false;
    return array;
  }
  if (type < 1 || type > kDataTypeCount) in.bad("an unknown type for " + name);
  array.type = static_cast<DataType>(type);
  const std::uint64_t rank = in.u64();
  if (rank < 1 || rank > kMaxDataRank) in.bad("a rank of " + std::to_string(rank));
  std::uint64_t bytes = data_item_bytes(array.type);
  for (std::uint64_t d = 0; d < rank; ++d) {
    array.shape.push_back(in.u64());
    if (array.shape.back() != 0 && bytes > UINT64_MAX / array.shape.back())
      in.bad("a shape that overflows for " + name);
    bytes *= array.shape.back();
  }
  const std::uint64_t tag = in.u64();
  if (tag == detail::kExtent) {
    array.offset = in.u64();
    if (*array.offset > file_bytes || bytes > file_bytes - *array.offset)
      in.bad("a location beyond the file for " + name);
  } else if (tag != kStreamed || bytes > limit) {
    in.bad("an unknown tag or an array beyond the memory limit for " + name);
  }
  return array;
}

// A streamed array's bytes, piece by piece, into a buffer sized by its checked shape.
void read_pieces(ReplyStream& in, DataArray& array) {
  std::uint64_t bytes = data_item_bytes(array.type);
  for (std::uint64_t d : array.shape) bytes *= d;
  array.bytes.resize(static_cast<std::size_t>(bytes));
  std::uint64_t done = 0;
  for (;;) {
    const std::uint64_t tag = in.u64();
    if (tag == kEnd) break;
    if (tag == kStreamRefused) throw CheckpointError(in.text(kMaxStringBytes));
    const std::uint64_t n = in.u64();
    if (tag != kPiece || n > kDataPieceBytes || n > bytes - done)
      in.bad("a piece of " + array.where + " beyond its size");
    in.read_exact(array.bytes.data() + done, static_cast<std::size_t>(n));
    done += n;
  }
  if (done != bytes) in.bad(array.where + " ends early");
}

}  // namespace

DataFile read_data_file_contained(const fs::path& file, const std::vector<std::string>& names,
                                  std::uint64_t memory_limit_bytes, std::uint64_t optional) {
  if (!contained_reader_enabled())
    return read_data_file(file, names, memory_limit_bytes, optional);
  const detail::ReadOnlyFile raw = detail::open_regular(file);
  detail::Wire wire;
  wire.u64(names.size());
  for (const std::string& name : names) wire.text(name);
  wire.u64(memory_limit_bytes);
  wire.u64(optional);
  const auto child = detail::child_for(
      file, detail::request_head(detail::Operation::kData, file, raw, nullptr) + wire.bytes());
  ReplyStream in(*child, file);
  if (in.u64() != detail::kOk) {
    std::string reason = in.text(kMaxStringBytes);
    in.text(kMaxStringBytes);  // the HDF5 stack: the reason says enough for a data file
    throw CheckpointError(reason);
  }
  DataFile result;
  const bool has_classes = in.u64() != 0;
  const auto classes = static_cast<std::int64_t>(in.u64());
  if (has_classes) result.classes = classes;
  const std::uint64_t limit =
      memory_limit_bytes > 0 ? memory_limit_bytes : detail::physical_memory_bytes();
  for (std::size_t i = 0; i < names.size(); ++i)
    result.arrays.push_back(
        read_description(in, file, names[i], raw.size(), limit, (optional >> i & 1) != 0));
  for (DataArray& array : result.arrays)
    if (array.present && !array.offset) read_pieces(in, array);
  in.finish();
  return result;
}

namespace detail {

void serve_data_file(const fs::path& file, WireReader& in, int fd) {
  const std::uint64_t count = in.u64();
  if (count > kMaxNames) in.bad("too many names");
  std::vector<std::string> names;
  for (std::uint64_t i = 0; i < count; ++i) names.push_back(in.text(kMaxDataNameBytes));
  const std::uint64_t limit = in.u64();
  const DataFileReader reader(file, names, limit, in.u64());
  Wire head;
  head.u64(kOk);
  head.u64(reader.classes() ? 1 : 0);
  head.u64(static_cast<std::uint64_t>(reader.classes().value_or(0)));
  for (const DataArray& array : reader.arrays()) {
    if (!array.present) {
      head.u64(kAbsent);
      continue;
    }
    head.u64(static_cast<std::uint64_t>(array.type));
    head.u64(array.shape.size());
    for (std::uint64_t d : array.shape) head.u64(d);
    head.u64(array.offset ? kExtent : kStreamed);
    if (array.offset) head.u64(*array.offset);
  }
  if (!write_to_pipe(fd, head.bytes())) return;  // the parent is gone
  for (std::size_t i = 0; i < reader.arrays().size(); ++i) {
    if (reader.arrays()[i].offset || !reader.arrays()[i].present) continue;
    Wire record;
    try {
      reader.read(i, [&](std::span<const std::uint8_t> piece) {
        record = Wire();
        record.u64(kPiece);
        record.u64(piece.size());
        const std::string_view bytes(reinterpret_cast<const char*>(piece.data()), piece.size());
        if (!write_to_pipe(fd, record.bytes()) || !write_to_pipe(fd, bytes))
          throw CheckpointError("the parent is gone");
      });
      record = Wire();
      record.u64(kEnd);
    } catch (const CheckpointError& e) {
      record = Wire();
      record.u64(kStreamRefused);
      record.text(e.what());
    }
    if (!write_to_pipe(fd, record.bytes())) return;
  }
}

}  // namespace detail
}  // namespace ringtrain::checkpoint
