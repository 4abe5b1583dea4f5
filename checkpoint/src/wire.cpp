// Encoding and checked decoding of headers, entries, schemas and verify results for the
// contained reader (wire.hpp). Every decoded length is bounded before it is used.
#include "wire.hpp"

#include <variant>

namespace ringtrain::checkpoint::detail {
namespace {

constexpr std::uint64_t kMaxEntries = std::uint64_t{1} << 20;

void put_dims(Wire& wire, const Dims& dims) {
  wire.u64(dims.size());
  for (std::size_t d : dims) wire.u64(d);
}

Dims get_dims(WireReader& in) {
  const std::uint64_t rank = in.u64();
  if (rank > kMaxRank) in.bad("rank " + std::to_string(rank));
  Dims dims(rank);
  for (auto& d : dims) d = in.u64();
  return dims;
}

Group get_group(WireReader& in) {
  const std::uint64_t g = in.u64();
  if (g >= kAllGroups.size()) in.bad("group " + std::to_string(g));
  return static_cast<Group>(g);
}

Kind get_kind(WireReader& in) {
  const std::uint64_t k = in.u64();
  if (k > static_cast<std::uint64_t>(Kind::kString)) in.bad("kind " + std::to_string(k));
  return static_cast<Kind>(k);
}

}  // namespace

void put_header(Wire& wire, const Header& header) {
  wire.text(header.format);
  wire.i64(header.version);
  wire.u64(header.step);
  wire.u64(header.epoch);
  wire.i64(header.world_size);
  wire.text(header.config_json);
}

Header get_header(WireReader& in) {
  Header header;
  header.format = in.text(kMaxNameBytes);
  header.version = static_cast<int>(in.i64());
  header.step = in.u64();
  header.epoch = in.u64();
  header.world_size = static_cast<int>(in.i64());
  header.config_json = in.text(kMaxStringBytes);
  return header;
}

void put_entry(Wire& wire, const Entry& entry) {
  wire.u64(static_cast<std::uint64_t>(entry.group));
  wire.text(entry.name);
  wire.u64(static_cast<std::uint64_t>(entry.kind()));
  switch (entry.kind()) {
    case Kind::kFloat32Array: {
      const auto& array = std::get<FloatArray>(entry.value);
      put_dims(wire, array.shape);
      wire.raw(array.values.data(), array.values.size() * sizeof(float));
      return;
    }
    case Kind::kInt64:
      return wire.i64(std::get<std::int64_t>(entry.value));
    case Kind::kUInt64:
      return wire.u64(std::get<std::uint64_t>(entry.value));
    case Kind::kFloat64:
      return wire.f64(std::get<double>(entry.value));
    case Kind::kString:
      return wire.text(std::get<std::string>(entry.value));
  }
}

void get_entry(WireReader& in, const ExpectedEntry& expected, StateTree& tree) {
  const Group group = get_group(in);
  const std::string name = in.text(kMaxNameBytes);
  const Kind kind = get_kind(in);
  if (group != expected.group || name != expected.name || kind != expected.kind)
    in.bad("an entry other than " + entry_path(expected.group, expected.name));
  switch (kind) {
    case Kind::kFloat32Array: {
      const Dims shape = get_dims(in);
      if (shape != expected.shape) in.bad(entry_path(group, name) + " of another shape");
      std::vector<float> values(*checked_num_elements(shape));  // the expected shape: bounded
      in.raw(values.data(), values.size() * sizeof(float));
      return tree.put_array(group, name, shape, std::move(values));
    }
    case Kind::kInt64:
      return tree.put_i64(group, name, in.i64());
    case Kind::kUInt64:
      return tree.put_u64(group, name, in.u64());
    case Kind::kFloat64:
      return tree.put_f64(group, name, in.f64());
    case Kind::kString:
      return tree.put_string(group, name, in.text(kMaxStringBytes));
  }
}

void put_schema(Wire& wire, const Expected& expected) {
  wire.u64(expected.entries().size());
  for (const ExpectedEntry& e : expected.entries()) {
    wire.u64(static_cast<std::uint64_t>(e.group));
    wire.text(e.name);
    wire.u64(static_cast<std::uint64_t>(e.kind));
    put_dims(wire, e.shape);
  }
}

Expected get_schema(WireReader& in) {
  Expected expected;
  const std::uint64_t count = in.length(kMaxEntries);
  for (std::uint64_t i = 0; i < count; ++i) {
    const Group group = get_group(in);
    const std::string name = in.text(kMaxNameBytes);
    const Kind kind = get_kind(in);
    Dims shape = get_dims(in);
    if (kind == Kind::kFloat32Array)
      expected.add_array(group, name, std::move(shape));
    else
      expected.add(group, name, kind);
  }
  return expected;
}

void put_verify(Wire& wire, const VerifyResult& result) {
  put_header(wire, result.header);
  wire.u64(result.entries.size());
  for (const EntryInfo& e : result.entries) {
    wire.u64(static_cast<std::uint64_t>(e.group));
    wire.text(e.name);
    wire.u64(static_cast<std::uint64_t>(e.kind));
    put_dims(wire, e.shape);
    wire.u64(e.bytes);
    wire.u64(e.xxh3);
    wire.text(e.value);
  }
  wire.u64(result.payload_bytes);
  wire.u64(result.file_bytes);
  wire.u64((result.sealed ? 1 : 0) | (result.mac_present ? 2 : 0) | (result.mac_checked ? 4 : 0));
}

VerifyResult get_verify(WireReader& in) {
  VerifyResult result;
  result.header = get_header(in);
  const std::uint64_t count = in.length(kMaxEntries);
  for (std::uint64_t i = 0; i < count; ++i) {
    EntryInfo e;
    e.group = get_group(in);
    e.name = in.text(kMaxNameBytes);
    e.kind = get_kind(in);
    e.shape = get_dims(in);
    e.bytes = in.u64();
    e.xxh3 = in.u64();
    e.value = in.text(kMaxStringBytes);
    result.entries.push_back(std::move(e));
  }
  result.payload_bytes = in.u64();
  result.file_bytes = in.u64();
  const std::uint64_t flags = in.u64();
  result.sealed = (flags & 1) != 0;
  result.mac_present = (flags & 2) != 0;
  result.mac_checked = (flags & 4) != 0;
  return result;
}

}  // namespace ringtrain::checkpoint::detail
