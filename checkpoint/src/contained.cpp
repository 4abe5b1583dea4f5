// The contained reader (contained.hpp): the parent spawns a child of the same executable,
// sends it one request over a pipe, reads the reply from another, and turns the child's
// death by a signal or a limit into a refusal of the file. The child runs the ordinary
// readers (file_read.cpp, file_verify.cpp) under setrlimit.
//
// Vocabulary: request = (operation, file, key, expected schema); reply = status, then the
// refusal's reason or the verified result (wire.hpp encodes both).
#include "ringtrain/checkpoint/contained.hpp"

#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "format.hpp"
#include "posix_io.hpp"
#include "reader.hpp"
#include "reader_process.hpp"
#include "seal.hpp"
#include "wire.hpp"

namespace ringtrain::checkpoint {
namespace fs = std::filesystem;

namespace {

using detail::child_for;
using detail::kExtent;
using detail::kValue;
using detail::open_regular;
using detail::open_reply;
using detail::Operation;
using detail::ReaderChild;

// The parent's own plain-read seal check, the whole of it (the child checks only the
// block); nullopt: version 1.
std::optional<detail::Seal> check_seal_here(const detail::ReadOnlyFile& raw, const fs::path& file,
                                            const MacKey* key) {
  if (detail::starts_with_seal(raw, file)) return detail::check_seal(raw, file, key);
  detail::refuse_unsealed_with_key(file, key);
  return std::nullopt;
}

// An array the child located: read here, through the parent's descriptor, and checked
// against the expected shape, the file's size and the stored xxh3 the child reported.
void read_extent(const detail::ReadOnlyFile& raw, const fs::path& file, const ExpectedEntry& e,
                 detail::WireReader& in, StateTree& tree) {
  const std::uint64_t offset = in.u64(), bytes = in.u64(), stored = in.u64();
  const std::string where = entry_path(e.group, e.name);
  if (e.kind != Kind::kFloat32Array) in.bad("a location for " + where + ", not an array");
  const std::uint64_t count = *checked_num_elements(e.shape);  // the expected shape: bounded
  const std::uint64_t file_bytes = raw.size();
  if (bytes != count * sizeof(float) || offset > file_bytes || bytes > file_bytes - offset)
    in.bad("a location for " + where + " of another size or beyond the file");
  std::vector<float> values(count);
  raw.read_at(offset, std::as_writable_bytes(std::span(values)));
  const std::uint64_t actual = detail::xxh3(values.data(), bytes);
  if (actual != stored) {
    char text[96];
    std::snprintf(text, sizeof text, "xxh3 of the data is %016llx, the attribute says %016llx",
                  static_cast<unsigned long long>(actual), static_cast<unsigned long long>(stored));
    throw CheckpointError(file, where + ": checksum mismatch (" + text + "): corrupt data");
  }
  if (const std::size_t bad = detail::first_nonfinite(values); bad < values.size())
    throw CheckpointError(file, detail::nonfinite_reason(where, bad, values[bad]));
  tree.put_array(e.group, e.name, e.shape, std::move(values));
}

// The child's result must belong to the file the parent sealed-checked.
void check_against_seal(const fs::path& file, const std::optional<detail::Seal>& seal,
                        std::vector<detail::TocEntry> toc) {
  if (!seal) return;
  const std::size_t count = toc.size();
  if (count != seal->entry_count || detail::toc_digest(std::move(toc)) != seal->toc)
    throw CheckpointError(file,
                          "the contained reader's result does not match the sealed table "
                          "of contents: refused");
}

}  // namespace

fs::path default_reader_executable() {
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  if (!error) {
    const fs::path reader = self.parent_path() / kReaderExecutable;
    if (::access(reader.c_str(), X_OK) == 0) return reader;
  }
  return "/proc/self/exe";
}

void enable_contained_reader(const fs::path& executable, const ReaderLimits& limits) {
  detail::reader_settings() = detail::ReaderSettings{executable, limits};
}

void disable_contained_reader() {
  detail::standby_child().reset();
  detail::reader_settings().reset();
}

bool contained_reader_enabled() {
  return detail::reader_settings().has_value();
}

void prepare_contained_reader() {
  if (!contained_reader_enabled() || detail::standby_child()) return;
  try {
    detail::standby_child() = std::make_unique<ReaderChild>("(reader started ahead)");
  } catch (const CheckpointError&) {
    // The read itself starts one and reports why it cannot.
  }
}

StateTree read_file_contained(const fs::path& path, const Expected& expected, Header* header_out,
                              const MacKey* key) {
  if (!contained_reader_enabled()) return read_file(path, expected, header_out, key);
  const detail::ReadOnlyFile raw = open_regular(path);
  std::string message = detail::request_head(Operation::kRead, path, raw, key);
  detail::Wire schema;
  detail::put_schema(schema, expected);
  message += schema.bytes();
  const std::unique_ptr<ReaderChild> child = child_for(path, message);
  // While the child parses, this process checks the seal.
  const std::optional<detail::Seal> seal = check_seal_here(raw, path, key);
  const std::string reply = child->reply();
  detail::WireReader in = open_reply(path, reply);
  const Header header = detail::get_header(in);
  StateTree tree;
  std::vector<detail::TocEntry> toc;
  for (const ExpectedEntry& e : expected.entries()) {
    const std::uint64_t tag = in.u64();
    if (tag == kExtent)
      read_extent(raw, path, e, in, tree);
    else if (tag == kValue)
      detail::get_entry(in, e, tree);
    else
      in.bad("an unknown entry tag");
    toc.push_back({e.group, e.name, e.kind, e.shape, detail::entry_xxh3(tree.entries().back())});
  }
  if (!in.done()) in.bad("bytes after the last entry");
  check_against_seal(path, seal, std::move(toc));
  if (header_out != nullptr) {
    *header_out = header;
    header_out->mac_present = seal && seal->has_mac;
  }
  return tree;
}

VerifyResult verify_file_contained(const fs::path& path, const MacKey* key) {
  if (!contained_reader_enabled()) return verify_file(path, key);
  const detail::ReadOnlyFile raw = open_regular(path);
  const auto child = child_for(path, detail::request_head(Operation::kVerify, path, raw, key));
  const std::optional<detail::Seal> seal = check_seal_here(raw, path, key);
  const std::string reply = child->reply();
  detail::WireReader in = open_reply(path, reply);
  VerifyResult result = detail::get_verify(in);
  if (!in.done()) in.bad("bytes after the result");
  std::vector<detail::TocEntry> toc;
  for (const EntryInfo& e : result.entries)
    toc.push_back({e.group, e.name, e.kind, e.shape, e.xxh3});
  check_against_seal(path, seal, std::move(toc));
  return result;
}

std::string describe_file_contained(const fs::path& path, const MacKey* key) {
  if (!contained_reader_enabled()) return describe_file(path, key);
  const detail::ReadOnlyFile raw = open_regular(path);
  const auto child = child_for(path, detail::request_head(Operation::kDescribe, path, raw, key));
  check_seal_here(raw, path, key);
  const std::string reply = child->reply();
  detail::WireReader in = open_reply(path, reply);
  return in.text(kMaxStringBytes);
}

Header read_header_contained(const fs::path& path, const MacKey* key) {
  if (!contained_reader_enabled()) return read_header(path, key);
  const detail::ReadOnlyFile raw = open_regular(path);
  const auto child = child_for(path, detail::request_head(Operation::kHeader, path, raw, key));
  const std::optional<detail::Seal> seal = check_seal_here(raw, path, key);
  const std::string reply = child->reply();
  detail::WireReader in = open_reply(path, reply);
  Header header = detail::get_header(in);
  if (!in.done()) in.bad("bytes after the header");
  header.mac_present = seal && seal->has_mac;
  return header;
}

}  // namespace ringtrain::checkpoint
