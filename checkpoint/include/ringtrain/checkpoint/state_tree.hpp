// The neutral state tree: everything a checkpoint holds, as named entries under six fixed
// groups, in a form that knows nothing of layers or optimizers. Components of
// framework/ describe their state here; this module only stores and verifies it.
//
//   group       what lives there (examples)                     kind
//   /model      "layers.0.linear/weight"  (1024, 784)           float32 array
//   /optimizer  "layers.0.linear/weight/exp_avg", "step"        float32 array, uint64
//   /schedule   "step"                                          uint64
//   /data       "seed", "epoch", "position"                     uint64
//   /rng        "dropout/counter"                               uint64
//   /progress   "global_step", "loss_sum"                       uint64, float64
//
// Vocabulary. A *group* is one of the six above. An entry *name* is a stable hierarchical
// path inside its group: '/'-separated segments of [A-Za-z0-9_.+:-], no empty segment, no
// "." or ".." segment, at most kMaxNameBytes. An entry's *kind* is a float32 array of rank
// 0..4, an int64, a uint64, a float64 or a string (any bytes except NUL). Entries keep the
// order in which they were put; a name appears once per group.
//
// Expected is the schema a reader checks a file against: (group, name, kind, shape) per
// entry. Expected::of(tree) is the usual way to make one: the trainer describes its current
// state and demands a file of exactly that layout.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace ringtrain::checkpoint {

enum class Group { kModel, kOptimizer, kSchedule, kData, kRng, kProgress };
inline constexpr std::array<Group, 6> kAllGroups = {Group::kModel,    Group::kOptimizer,
                                                    Group::kSchedule, Group::kData,
                                                    Group::kRng,      Group::kProgress};

// "model", "optimizer", ... (without the leading '/').
std::string_view group_name(Group group);
// "/model", "/optimizer", ...
std::string group_path(Group group);
// Inverse of group_name; nullopt for any other text.
std::optional<Group> parse_group(std::string_view name);

// The order matches the alternatives of Value below.
enum class Kind { kFloat32Array, kInt64, kUInt64, kFloat64, kString };
// "float32 array", "int64", "uint64", "float64", "string".
std::string_view kind_name(Kind kind);

using Dims = std::vector<std::size_t>;  // outermost first, like ringtrain::Shape
inline constexpr std::size_t kMaxRank = 4;
inline constexpr std::size_t kMaxNameBytes = 1024;
inline constexpr std::size_t kMaxStringBytes = std::size_t{64} << 20;

// "(1024, 784)"; "()" for rank 0.
std::string to_string(const Dims& dims);
// Product of the dims (1 for rank 0); nullopt if it overflows std::size_t.
std::optional<std::size_t> checked_num_elements(const Dims& dims);
// "/model/layers.0.linear/weight": how messages and h5 users name an entry.
std::string entry_path(Group group, std::string_view name);
// Throws CheckpointError (no file) unless `name` is a valid entry name (see above).
void check_entry_name(std::string_view name);

struct FloatArray {
  Dims shape;                 // rank 0..kMaxRank
  std::vector<float> values;  // row-major, checked_num_elements(shape) elements
};
using Value = std::variant<FloatArray, std::int64_t, std::uint64_t, double, std::string>;

struct Entry {
  Group group;
  std::string name;
  Value value;
  Kind kind() const { return static_cast<Kind>(value.index()); }
};

class StateTree {
 public:
  // Each put_* throws CheckpointError (no file) if the name is invalid or already used in
  // that group; put_array also if the rank exceeds kMaxRank or values.size() is not the
  // product of shape; put_string if the text holds a NUL byte or exceeds kMaxStringBytes.
  void put_array(Group group, std::string_view name, Dims shape, std::span<const float> values);
  // Takes the vector without copying (the reader and large trees use this one).
  void put_array(Group group, std::string_view name, Dims shape, std::vector<float>&& values);
  // Keeps the storage of `old`'s float arrays for the put_array(span) calls that follow, in
  // their order: a tree captured again into the same layout copies without allocating (and
  // without faulting in fresh pages). Call it on an empty tree.
  void reuse_storage(StateTree&& old);
  void put_i64(Group group, std::string_view name, std::int64_t value);
  void put_u64(Group group, std::string_view name, std::uint64_t value);
  void put_f64(Group group, std::string_view name, double value);
  void put_string(Group group, std::string_view name, std::string value);

  // Getters throw CheckpointError naming the entry path if it is missing or of another kind
  // (or, for array() with a shape, of another shape). Returned references and spans borrow
  // from the tree and stay valid until the tree is modified or destroyed.
  std::span<const float> array(Group group, std::string_view name, const Dims& shape) const;
  const FloatArray& array(Group group, std::string_view name) const;
  std::int64_t i64(Group group, std::string_view name) const;
  std::uint64_t u64(Group group, std::string_view name) const;
  double f64(Group group, std::string_view name) const;
  const std::string& string(Group group, std::string_view name) const;

  // nullptr if absent.
  const Entry* find(Group group, std::string_view name) const;
  // In insertion order.
  const std::vector<Entry>& entries() const { return entries_; }
  std::size_t size() const { return entries_.size(); }
  // Bytes of data the entries hold: 4 per float, 8 per scalar, the string lengths.
  std::uint64_t payload_bytes() const;

 private:
  void put(Group group, std::string_view name, Value value);
  const Entry& get(Group group, std::string_view name, Kind kind) const;

  std::vector<Entry> entries_;
  std::vector<std::vector<float>> spare_;  // reuse_storage's vectors, taken from the back
  // Per group: name -> index into entries_.
  std::array<std::map<std::string, std::size_t, std::less<>>, kAllGroups.size()> index_;
};

struct ExpectedEntry {
  Group group;
  std::string name;
  Kind kind;
  Dims shape;  // arrays only; empty for scalars and strings
};

class Expected {
 public:
  // Every entry of `tree` with its kind and (for arrays) shape, in the tree's order.
  static Expected of(const StateTree& tree);

  // Throw CheckpointError (no file) on an invalid name, a duplicate, rank > kMaxRank, or
  // add(kFloat32Array) (use add_array for arrays: they need a shape).
  void add_array(Group group, std::string_view name, Dims shape);
  void add(Group group, std::string_view name, Kind kind);

  const std::vector<ExpectedEntry>& entries() const { return entries_; }
  // nullptr if not expected.
  const ExpectedEntry* find(Group group, std::string_view name) const;

 private:
  std::vector<ExpectedEntry> entries_;
  std::array<std::map<std::string, std::size_t, std::less<>>, kAllGroups.size()> index_;
};

}  // namespace ringtrain::checkpoint
