// read_file: exactly the entries a caller expects, from an untrusted file. For each entry:
// examine (links, layout, filters, dtype, dataspace), compare kind and shape with the
// expectation, check the stored size against the file, then allocate from the EXPECTED
// shape, read, and verify the xxh3 checksum. read_header: steps 1-3 of reader.hpp only.
#include <variant>

#include "format.hpp"
#include "reader.hpp"

namespace ringtrain::checkpoint {

using detail::CheckedFile;
using detail::DatasetFacts;
using detail::Datatype;

namespace {

// Rejects unless the file's dtype and dataspace are those of `expected`.
void compare(const CheckedFile& file, const DatasetFacts& facts, const ExpectedEntry& expected) {
  const std::string& p = facts.path;
  if (facts.kind != expected.kind)
    file.reject(p + ": dtype " + facts.dtype_text + " in file, expected " +
                detail::stored_type_name(expected.kind) + " (" +
                std::string(kind_name(expected.kind)) + ")");
  if (expected.kind != Kind::kFloat32Array) {
    if (!facts.scalar_space)
      file.reject(p + ": shape " + to_string(facts.shape) + " in file, expected a scalar");
    return;
  }
  if (facts.shape.size() != expected.shape.size())
    file.reject(p + ": rank " + std::to_string(facts.shape.size()) + ", shape " +
                to_string(facts.shape) + " in file, expected rank " +
                std::to_string(expected.shape.size()) + ", shape " + to_string(expected.shape));
  if (facts.shape != expected.shape)
    file.reject(p + ": shape " + to_string(facts.shape) + " in file, expected " +
                to_string(expected.shape));
}

template <typename T>
T read_scalar(const CheckedFile& file, const DatasetFacts& facts, hid_t memory_type) {
  T value{};
  facts.dataset.read(Datatype::predefined(memory_type), &value);
  file.check_checksum(facts, detail::xxh3_of_scalar(value));
  return value;
}

// Structure first: every expected link present, nothing else in any group.
void check_links(const CheckedFile& file, const Expected& expected, std::string& where) {
  for (Group g : kAllGroups) {
    const detail::GroupHandle& group = file.group(g);
    where = group_path(g);
    std::size_t wanted = 0;
    for (const ExpectedEntry& entry : expected.entries()) {
      if (entry.group != g) continue;
      ++wanted;
      if (!group.link_exists(hdf5_link_name(entry.name))) {
        const std::uint64_t held = group.link_count();
        file.reject(entry_path(g, entry.name) + ": missing" +
                    (held == 0 ? std::string{}
                               : " (" + where + " holds " + std::to_string(held) +
                                     " objects; a checkpoint of another model?)"));
      }
    }
    const std::uint64_t held = group.link_count();
    if (held > wanted) {
      // wanted + 1 links include at least one that is not expected.
      for (const detail::LinkInfo& link : group.links(H5_INDEX_NAME, wanted + 1, nullptr)) {
        std::string name = link.name;
        for (char& c : name)
          if (c == detail::kLinkSeparator) c = '/';
        if (expected.find(g, name) == nullptr || hdf5_link_name(name) != link.name)
          file.reject("unexpected object " + where + "/" + files::escaped(link.name) + " (" +
                      where + " holds " + std::to_string(held) + " objects, " +
                      std::to_string(wanted) + " expected)");
      }
    }
  }
}

}  // namespace

namespace detail {

void read_value(const CheckedFile& file, const DatasetFacts& facts, Kind kind, Group group,
                const std::string& name, StateTree& tree) {
  switch (kind) {
    case Kind::kFloat32Array: {
      std::vector<float> values(*checked_num_elements(facts.shape));
      if (!values.empty())
        facts.dataset.read(Datatype::predefined(H5T_NATIVE_FLOAT), values.data());
      file.check_checksum(facts, xxh3(values.data(), values.size() * sizeof(float)));
      if (const std::size_t bad = first_nonfinite(values); bad < values.size())
        file.reject(nonfinite_reason(facts.path, bad, values[bad]));
      tree.put_array(group, name, facts.shape, std::move(values));
      return;
    }
    case Kind::kInt64:
      return tree.put_i64(group, name, read_scalar<std::int64_t>(file, facts, H5T_NATIVE_INT64));
    case Kind::kUInt64:
      return tree.put_u64(group, name, read_scalar<std::uint64_t>(file, facts, H5T_NATIVE_UINT64));
    case Kind::kFloat64:
      return tree.put_f64(group, name, read_scalar<double>(file, facts, H5T_NATIVE_DOUBLE));
    case Kind::kString: {
      std::string text(facts.type.size(), '\0');
      facts.dataset.read(facts.type, text.data());
      text = strip_padding(std::move(text));
      file.check_checksum(facts, xxh3(text.data(), text.size()));
      return tree.put_string(group, name, std::move(text));
    }
  }
}

}  // namespace detail

namespace detail {

StateTree read_file_locating(const std::filesystem::path& path, const Expected& expected,
                             Header* header_out, const MacKey* key,
                             std::vector<std::optional<ArrayExtent>>* extents) {
  const detail::QuietErrors quiet;
  std::string where;
  try {
    CheckedFile file(path, where, key);
    file.check_root();
    check_links(file, expected, where);

    // Then each entry: describe, compare, size-check, read (or locate), verify.
    StateTree tree;
    std::vector<detail::TocEntry> toc;
    if (extents != nullptr) extents->assign(expected.entries().size(), std::nullopt);
    for (std::size_t i = 0; i < expected.entries().size(); ++i) {
      const ExpectedEntry& entry = expected.entries()[i];
      const DatasetFacts facts = file.examine(entry.group, entry.name);
      compare(file, facts, entry);
      const std::uint64_t bytes = file.check_storage(facts, entry.kind);
      if (extents != nullptr && entry.kind == Kind::kFloat32Array &&
          facts.layout == H5D_CONTIGUOUS && bytes > 0)
        (*extents)[i] = ArrayExtent{facts.dataset.offset(), bytes, facts.stored_xxh3};
      else
        detail::read_value(file, facts, entry.kind, entry.group, entry.name, tree);
      toc.push_back({entry.group, entry.name, entry.kind, facts.shape, facts.stored_xxh3});
    }
    // The structure check above left exactly the expected entries: this is the whole TOC.
    file.check_toc(toc);
    if (header_out != nullptr) *header_out = file.header();
    return tree;
  } catch (const detail::Hdf5Error& error) {
    throw detail::hdf5_failure(path, where, error);
  }
}

}  // namespace detail

StateTree read_file(const std::filesystem::path& path, const Expected& expected, Header* header_out,
                    const MacKey* key) {
  return detail::read_file_locating(path, expected, header_out, key, nullptr);
}

Header read_header(const std::filesystem::path& path, const MacKey* key) {
  const detail::QuietErrors quiet;
  std::string where;
  try {
    const CheckedFile file(path, where, key);
    return file.header();
  } catch (const detail::Hdf5Error& error) {
    throw detail::hdf5_failure(path, where, error);
  }
}

}  // namespace ringtrain::checkpoint
