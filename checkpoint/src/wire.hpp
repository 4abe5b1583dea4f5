// The byte format between the parent and a contained reader child (contained.hpp): little
// length-prefixed records, written with Wire and read back with WireReader, which checks
// every length against what is left and against the limits the reader was given, so that a
// reply from a child gone wrong is refused, never trusted. Private to the checkpoint module.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "ringtrain/checkpoint/error.hpp"
#include "ringtrain/checkpoint/file.hpp"
#include "ringtrain/checkpoint/state_tree.hpp"

namespace ringtrain::checkpoint::detail {

// A request: kProtocol, the operation, the file, the key (flag, then its bytes), the limits
// (CPU seconds, address-space bytes), then for kRead the expected schema.
// A reply: kOk then the result, or kRefused then the reason and the HDF5 stack.
// kData: a user's HDF5 dataset file (data_file.hpp; contained_data.cpp has its reply).
// kHeader: read_header (the root attributes only).
enum class Operation : std::uint64_t {
  kRead = 1,
  kVerify = 2,
  kDescribe = 3,
  kData = 4,
  kHeader = 5
};
// The first word of a request: a reader executable of another build refuses it.
inline constexpr std::uint64_t kProtocol = 0x5254524541440003;  // "RTREAD" 3
inline constexpr std::uint64_t kOk = 0, kRefused = 1;
// Before each entry of a read's result: its value follows (put_entry), or where it lies in
// the file (offset, bytes, stored xxh3).
inline constexpr std::uint64_t kValue = 0, kExtent = 1;

class Wire {
 public:
  void u64(std::uint64_t v) { raw(&v, sizeof v); }
  void i64(std::int64_t v) { raw(&v, sizeof v); }
  void f64(double v) { raw(&v, sizeof v); }
  void text(std::string_view s) {
    u64(s.size());
    raw(s.data(), s.size());
  }
  void raw(const void* data, std::size_t bytes) {
    if (bytes == 0) return;  // an empty array: `data` may be null
    bytes_.append(static_cast<const char*>(data), bytes);
  }
  void reserve(std::size_t bytes) { bytes_.reserve(bytes); }
  std::string& bytes() { return bytes_; }

 private:
  std::string bytes_;
};

class WireReader {
 public:
  WireReader(std::string_view bytes, std::filesystem::path file)
      : bytes_(bytes), file_(std::move(file)) {}
  std::uint64_t u64() { return pod<std::uint64_t>(); }
  std::int64_t i64() { return pod<std::int64_t>(); }
  double f64() { return pod<double>(); }
  // A length, refused if above `limit` or above what is left.
  std::uint64_t length(std::uint64_t limit) {
    const std::uint64_t n = u64();
    if (n > limit || n > bytes_.size()) bad("a length beyond the message");
    return n;
  }
  std::string text(std::uint64_t limit) {
    const std::uint64_t n = length(limit);
    std::string s(bytes_.substr(0, n));
    bytes_.remove_prefix(n);
    return s;
  }
  void raw(void* out, std::size_t bytes) {
    if (bytes > bytes_.size()) bad("the message ends early");
    if (bytes == 0) return;  // an empty array: `out` may be null
    std::memcpy(out, bytes_.data(), bytes);
    bytes_.remove_prefix(bytes);
  }
  bool done() const { return bytes_.empty(); }
  [[noreturn]] void bad(const std::string& what) const {
    throw CheckpointError(file_,
                          "the contained reader sent a malformed reply (" + what + "): refused");
  }

 private:
  template <typename T>
  T pod() {
    T v{};
    raw(&v, sizeof v);
    return v;
  }
  std::string_view bytes_;
  std::filesystem::path file_;
};

void put_header(Wire& wire, const Header& header);
Header get_header(WireReader& in);
void put_entry(Wire& wire, const Entry& entry);
// One entry, checked against `expected` (same group, name, kind, shape) and put into `tree`.
void get_entry(WireReader& in, const ExpectedEntry& expected, StateTree& tree);
void put_schema(Wire& wire, const Expected& expected);
Expected get_schema(WireReader& in);
void put_verify(Wire& wire, const VerifyResult& result);
VerifyResult get_verify(WireReader& in);

}  // namespace ringtrain::checkpoint::detail
