// The neutral state tree and its schema (Expected): validation of names, kinds and shapes at
// the moment an entry is put, so that everything the writer sees is already well formed.
#include "ringtrain/checkpoint/state_tree.hpp"

#include <utility>

#include "ringtrain/checkpoint/error.hpp"

namespace ringtrain::checkpoint {
namespace {

constexpr std::array<std::string_view, kAllGroups.size()> kGroupNames = {
    "model", "optimizer", "schedule", "data", "rng", "progress"};

std::size_t group_index(Group group) {
  const auto index = static_cast<std::size_t>(group);
  if (index >= kAllGroups.size())
    throw CheckpointError("invalid group value " + std::to_string(index));
  return index;
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '+' || c == ':' || c == '-';
}

void check_shape(Group group, std::string_view name, const Dims& shape) {
  if (shape.size() > kMaxRank)
    throw CheckpointError(entry_path(group, name) + ": rank " + std::to_string(shape.size()) +
                          " exceeds the maximum " + std::to_string(kMaxRank));
  if (!checked_num_elements(shape))
    throw CheckpointError(entry_path(group, name) + ": shape " + to_string(shape) +
                          " overflows the element count");
}

}  // namespace

std::string_view group_name(Group group) {
  return kGroupNames[group_index(group)];
}

std::string group_path(Group group) {
  std::string path = "/";
  path += group_name(group);
  return path;
}

std::optional<Group> parse_group(std::string_view name) {
  for (std::size_t i = 0; i < kAllGroups.size(); ++i)
    if (kGroupNames[i] == name) return kAllGroups[i];
  return std::nullopt;
}

std::string_view kind_name(Kind kind) {
  switch (kind) {
    case Kind::kFloat32Array:
      return "float32 array";
    case Kind::kInt64:
      return "int64";
    case Kind::kUInt64:
      return "uint64";
    case Kind::kFloat64:
      return "float64";
    case Kind::kString:
      return "string";
  }
  return "invalid kind";
}

std::string to_string(const Dims& dims) {
  std::string text = "(";
  for (std::size_t i = 0; i < dims.size(); ++i)
    text += (i == 0 ? "" : ", ") + std::to_string(dims[i]);
  return text + ")";
}

std::optional<std::size_t> checked_num_elements(const Dims& dims) {
  std::size_t n = 1;
  for (std::size_t d : dims) {
    if (d != 0 && n > SIZE_MAX / d) return std::nullopt;
    n *= d;
  }
  return n;
}

std::string entry_path(Group group, std::string_view name) {
  std::string path = "/";
  path += group_name(group);
  path += '/';
  path += name;
  return path;
}

void check_entry_name(std::string_view name) {
  const auto fail = [&](const std::string& why) {
    throw CheckpointError("invalid entry name '" + std::string(name.substr(0, 80)) + "': " + why);
  };
  if (name.empty()) fail("empty");
  if (name.size() > kMaxNameBytes) fail("longer than " + std::to_string(kMaxNameBytes) + " bytes");
  std::size_t segment_start = 0;
  for (std::size_t i = 0; i <= name.size(); ++i) {
    if (i < name.size() && name[i] != '/') {
      if (!is_name_char(name[i]))
        fail("character '" + std::string(1, name[i]) + "' (allowed: A-Z a-z 0-9 _ . + : - /)");
      continue;
    }
    const std::string_view segment = name.substr(segment_start, i - segment_start);
    if (segment.empty()) fail("empty path segment");
    if (segment == "." || segment == "..") fail("segment '" + std::string(segment) + "'");
    segment_start = i + 1;
  }
}

// ---- StateTree ----------------------------------------------------------------------------

void StateTree::put(Group group, std::string_view name, Value value) {
  check_entry_name(name);
  auto& index = index_[group_index(group)];
  if (index.find(name) != index.end())
    throw CheckpointError(entry_path(group, name) + ": put twice");
  index.emplace(std::string(name), entries_.size());
  entries_.push_back(Entry{group, std::string(name), std::move(value)});
}

void StateTree::put_array(Group group, std::string_view name, Dims shape,
                          std::span<const float> values) {
  std::vector<float> storage;
  if (!spare_.empty()) {
    storage = std::move(spare_.back());
    spare_.pop_back();
  }
  storage.assign(values.begin(), values.end());
  put_array(group, name, std::move(shape), std::move(storage));
}

void StateTree::reuse_storage(StateTree&& old) {
  spare_.clear();
  for (auto it = old.entries_.rbegin(); it != old.entries_.rend(); ++it)
    if (auto* array = std::get_if<FloatArray>(&it->value)) spare_.push_back(std::move(array->values));
  old = StateTree();
}

void StateTree::put_array(Group group, std::string_view name, Dims shape,
                          std::vector<float>&& values) {
  check_shape(group, name, shape);
  if (*checked_num_elements(shape) != values.size())
    throw CheckpointError(entry_path(group, name) + ": shape " + to_string(shape) + " holds " +
                          std::to_string(*checked_num_elements(shape)) + " elements but " +
                          std::to_string(values.size()) + " values were given");
  put(group, name, FloatArray{std::move(shape), std::move(values)});
}

void StateTree::put_i64(Group group, std::string_view name, std::int64_t value) {
  put(group, name, value);
}

void StateTree::put_u64(Group group, std::string_view name, std::uint64_t value) {
  put(group, name, value);
}

void StateTree::put_f64(Group group, std::string_view name, double value) {
  put(group, name, value);
}

void StateTree::put_string(Group group, std::string_view name, std::string value) {
  if (value.find('\0') != std::string::npos)
    throw CheckpointError(entry_path(group, name) + ": string holds a NUL byte");
  if (value.size() > kMaxStringBytes)
    throw CheckpointError(entry_path(group, name) + ": string of " + std::to_string(value.size()) +
                          " bytes exceeds the maximum " + std::to_string(kMaxStringBytes));
  put(group, name, std::move(value));
}

const Entry* StateTree::find(Group group, std::string_view name) const {
  const auto& index = index_[group_index(group)];
  const auto it = index.find(name);
  return it == index.end() ? nullptr : &entries_[it->second];
}

const Entry& StateTree::get(Group group, std::string_view name, Kind kind) const {
  const Entry* entry = find(group, name);
  if (entry == nullptr) throw CheckpointError(entry_path(group, name) + ": missing");
  if (entry->kind() != kind)
    throw CheckpointError(entry_path(group, name) + ": is a " +
                          std::string(kind_name(entry->kind())) + ", expected a " +
                          std::string(kind_name(kind)));
  return *entry;
}

const FloatArray& StateTree::array(Group group, std::string_view name) const {
  return std::get<FloatArray>(get(group, name, Kind::kFloat32Array).value);
}

std::span<const float> StateTree::array(Group group, std::string_view name,
                                        const Dims& shape) const {
  const FloatArray& found = array(group, name);
  if (found.shape != shape)
    throw CheckpointError(entry_path(group, name) + ": shape " + to_string(found.shape) +
                          ", expected " + to_string(shape));
  return found.values;
}

std::int64_t StateTree::i64(Group group, std::string_view name) const {
  return std::get<std::int64_t>(get(group, name, Kind::kInt64).value);
}

std::uint64_t StateTree::u64(Group group, std::string_view name) const {
  return std::get<std::uint64_t>(get(group, name, Kind::kUInt64).value);
}

double StateTree::f64(Group group, std::string_view name) const {
  return std::get<double>(get(group, name, Kind::kFloat64).value);
}

const std::string& StateTree::string(Group group, std::string_view name) const {
  return std::get<std::string>(get(group, name, Kind::kString).value);
}

std::uint64_t StateTree::payload_bytes() const {
  std::uint64_t bytes = 0;
  for (const Entry& entry : entries_) {
    if (const auto* array = std::get_if<FloatArray>(&entry.value))
      bytes += array->values.size() * sizeof(float);
    else if (const auto* text = std::get_if<std::string>(&entry.value))
      bytes += text->size();
    else
      bytes += 8;
  }
  return bytes;
}

// ---- Expected -----------------------------------------------------------------------------

Expected Expected::of(const StateTree& tree) {
  Expected expected;
  for (const Entry& entry : tree.entries()) {
    if (const auto* array = std::get_if<FloatArray>(&entry.value))
      expected.add_array(entry.group, entry.name, array->shape);
    else
      expected.add(entry.group, entry.name, entry.kind());
  }
  return expected;
}

void Expected::add_array(Group group, std::string_view name, Dims shape) {
  check_entry_name(name);
  check_shape(group, name, shape);
  auto& index = index_[group_index(group)];
  if (index.find(name) != index.end())
    throw CheckpointError(entry_path(group, name) + ": expected twice");
  index.emplace(std::string(name), entries_.size());
  entries_.push_back(
      ExpectedEntry{group, std::string(name), Kind::kFloat32Array, std::move(shape)});
}

void Expected::add(Group group, std::string_view name, Kind kind) {
  if (kind == Kind::kFloat32Array)
    throw CheckpointError(entry_path(group, name) + ": arrays are expected with add_array");
  check_entry_name(name);
  auto& index = index_[group_index(group)];
  if (index.find(name) != index.end())
    throw CheckpointError(entry_path(group, name) + ": expected twice");
  index.emplace(std::string(name), entries_.size());
  entries_.push_back(ExpectedEntry{group, std::string(name), kind, {}});
}

const ExpectedEntry* Expected::find(Group group, std::string_view name) const {
  const auto& index = index_[group_index(group)];
  const auto it = index.find(name);
  return it == index.end() ? nullptr : &entries_[it->second];
}

}  // namespace ringtrain::checkpoint
