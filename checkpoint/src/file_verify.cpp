// verify_file and describe_file: the whole file checked without an expectation. Each
// dataset's kind comes from its dtype; arrays are streamed through XXH3 straight from the
// file in 8 MiB blocks (their contiguous bytes are the little-endian floats), so memory
// stays bounded whatever size the file declares.
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <span>

#include "format.hpp"
#include "posix_io.hpp"
#include "reader.hpp"

namespace ringtrain::checkpoint {

using detail::CheckedFile;
using detail::DatasetFacts;

namespace {

constexpr std::uint64_t kBlockBytes = std::uint64_t{8} << 20;

struct StateDeleter {
  void operator()(XXH3_state_t* state) const { XXH3_freeState(state); }
};

void verify_array(const CheckedFile& file, const DatasetFacts& facts, std::uint64_t bytes) {
  if (facts.layout != H5D_CONTIGUOUS || bytes == 0) {
    // Compact data lives in the object header: at most 64 KiB.
    StateTree scratch;
    detail::read_value(file, facts, Kind::kFloat32Array, Group::kModel, "scratch", scratch);
    return;
  }
  const std::unique_ptr<XXH3_state_t, StateDeleter> state(XXH3_createState());
  if (!state || XXH3_64bits_reset(state.get()) != XXH_OK) throw std::bad_alloc();
  const detail::ReadOnlyFile raw(file.path());
  const std::uint64_t offset = facts.dataset.offset();
  // bytes is the shape's float count times 4 (check_storage): blocks hold whole floats.
  std::vector<float> block(static_cast<std::size_t>(std::min(bytes, kBlockBytes) / sizeof(float)));
  std::uint64_t first_bad = bytes;  // byte offset of the first value that is not finite
  float bad_value = 0.0f;
  for (std::uint64_t done = 0; done < bytes;) {
    const auto n = static_cast<std::size_t>(
        std::min<std::uint64_t>(block.size() * sizeof(float), bytes - done));
    const std::span<float> values(block.data(), n / sizeof(float));
    raw.read_at(offset + done, std::as_writable_bytes(values));
    XXH3_64bits_update(state.get(), block.data(), n);
    if (const std::size_t bad = detail::first_nonfinite(values);
        bad < values.size() && first_bad == bytes)
      first_bad = done + bad * sizeof(float), bad_value = values[bad];
    done += n;
  }
  file.check_checksum(facts, XXH3_64bits_digest(state.get()));
  if (first_bad < bytes)
    file.reject(detail::nonfinite_reason(facts.path, first_bad / sizeof(float), bad_value));
}

std::string value_text(const Entry& entry) {
  switch (entry.kind()) {
    case Kind::kInt64:
      return std::to_string(std::get<std::int64_t>(entry.value));
    case Kind::kUInt64:
      return std::to_string(std::get<std::uint64_t>(entry.value));
    case Kind::kFloat64: {
      char text[32];
      std::snprintf(text, sizeof text, "%.17g", std::get<double>(entry.value));
      return text;
    }
    case Kind::kString:
      return '"' + files::escaped(std::get<std::string>(entry.value)) + '"';
    case Kind::kFloat32Array:
      break;
  }
  return {};
}

// Steps 1-5 of reader.hpp over every object of the file; array checksums if asked.
VerifyResult scan(const std::filesystem::path& path, bool verify_arrays, const MacKey* key) {
  const detail::QuietErrors quiet;
  std::string where;
  try {
    CheckedFile file(path, where, key);
    file.check_root();
    VerifyResult result;
    result.header = file.header();
    result.file_bytes = file.file_bytes();
    result.sealed = file.seal().has_value();
    result.mac_present = result.sealed && file.seal()->has_mac;
    result.mac_checked = result.mac_present && key != nullptr;
    std::vector<detail::TocEntry> toc;
    for (Group g : kAllGroups) {
      const detail::GroupHandle& group = file.group(g);
      const std::string here = group_path(g);
      where = here;
      const std::uint64_t held = group.link_count();
      if (held > detail::kMaxEntriesPerGroup)
        file.reject(here + " holds " + std::to_string(held) + " objects, more than the limit " +
                    std::to_string(detail::kMaxEntriesPerGroup));
      const bool by_creation =
          (group.creation_plist().link_creation_order() & H5P_CRT_ORDER_TRACKED) != 0;
      const auto links = group.links(by_creation ? H5_INDEX_CRT_ORDER : H5_INDEX_NAME,
                                     detail::kMaxEntriesPerGroup, nullptr);
      for (const detail::LinkInfo& link : links) {
        where = here + "/" + files::escaped(link.name);
        std::string name = link.name;
        std::replace(name.begin(), name.end(), detail::kLinkSeparator, '/');
        try {
          check_entry_name(name);
        } catch (const CheckpointError& error) {
          file.reject(where + ": not a ringtrain entry (" + error.reason() + ")");
        }
        const DatasetFacts facts = file.examine(g, name);
        if (!facts.kind)
          file.reject(facts.path + ": dtype " + facts.dtype_text + " is not one ringtrain writes");
        const Kind kind = *facts.kind;
        if (kind == Kind::kFloat32Array && facts.shape.size() > kMaxRank)
          file.reject(facts.path + ": rank " + std::to_string(facts.shape.size()) +
                      " exceeds the maximum " + std::to_string(kMaxRank));
        if (kind != Kind::kFloat32Array && !facts.scalar_space)
          file.reject(facts.path + ": shape " + to_string(facts.shape) + " in file, a " +
                      std::string(kind_name(kind)) + " must be a scalar");
        const std::uint64_t bytes = file.check_storage(facts, kind);
        EntryInfo info{g, name, kind, facts.shape, bytes, facts.stored_xxh3, {}};
        if (kind == Kind::kFloat32Array) {
          if (verify_arrays) verify_array(file, facts, bytes);
        } else {
          StateTree scratch;  // scalars and strings are small: read and verify them always
          detail::read_value(file, facts, kind, g, name, scratch);
          info.value = value_text(scratch.entries().front());
          if (kind == Kind::kString)  // the text, not its padding
            info.bytes = std::get<std::string>(scratch.entries().front().value).size();
        }
        toc.push_back({g, name, kind, facts.shape, facts.stored_xxh3});
        result.payload_bytes += info.bytes;
        result.entries.push_back(std::move(info));
      }
    }
    file.check_toc(toc);
    return result;
  } catch (const detail::Hdf5Error& error) {
    throw detail::hdf5_failure(path, where, error);
  }
}

std::string human_bytes(std::uint64_t bytes) {
  char text[32];
  if (bytes < 1024)
    std::snprintf(text, sizeof text, "%llu B", static_cast<unsigned long long>(bytes));
  else if (bytes < (1u << 20))
    std::snprintf(text, sizeof text, "%.1f KiB", static_cast<double>(bytes) / 1024.0);
  else
    std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

}  // namespace

VerifyResult verify_file(const std::filesystem::path& path, const MacKey* key) {
  return scan(path, true, key);
}

std::string describe_file(const std::filesystem::path& path, const MacKey* key) {
  const VerifyResult result = scan(path, false, key);
  const Header& h = result.header;
  std::string out = path.string() + ": " + h.format + " version " + std::to_string(h.version) +
                    ", step " + std::to_string(h.step) + ", epoch " + std::to_string(h.epoch) +
                    ", world size " + std::to_string(h.world_size) + "\n";
  out += "  " + std::to_string(result.entries.size()) + " entries, " +
         human_bytes(result.payload_bytes) + " of data in a file of " +
         human_bytes(result.file_bytes) + "\n";
  out += std::string("  ") +
         (result.sealed ? (result.mac_checked   ? "sealed, MAC verified with the key"
                           : result.mac_present ? "sealed, signed (MAC not checked: no key given)"
                                                : "sealed, not signed")
                        : "format version 1: no seal (whole-file digest and table of contents "
                          "not checked)") +
         "\n";
  out += "  config (" + std::to_string(h.config_json.size()) +
         " bytes): " + files::escaped(h.config_json) + "\n";
  std::size_t width = 0;
  for (const EntryInfo& e : result.entries) width = std::max(width, e.name.size());
  for (Group g : kAllGroups) {
    std::size_t count = 0;
    std::uint64_t bytes = 0;
    for (const EntryInfo& e : result.entries)
      if (e.group == g) ++count, bytes += e.bytes;
    out += group_path(g) + ": " + std::to_string(count) + (count == 1 ? " entry, " : " entries, ") +
           human_bytes(bytes) + "\n";
    for (const EntryInfo& e : result.entries) {
      if (e.group != g) continue;
      std::string line = "  " + e.name + std::string(width - e.name.size() + 2, ' ');
      if (e.kind == Kind::kFloat32Array)
        line += "float32 " + to_string(e.shape) + "  " + human_bytes(e.bytes);
      else
        line += std::string(kind_name(e.kind)) + " = " + e.value;
      out += line + "\n";
    }
  }
  return out;
}

}  // namespace ringtrain::checkpoint
