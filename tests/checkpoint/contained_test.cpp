// The contained reader (contained.hpp) through its own executable: the child parses, this
// process checks the seal and reads the arrays the child located. What comes back must be
// exactly what read_file, verify_file and describe_file give in this process, and a child
// that refuses or dies must come back as a refusal naming the file.
#include <cstdlib>
#include <cstring>

#include "checkpoint_files.hpp"
#include "ringtrain/checkpoint/contained.hpp"

using namespace ringtrain::checkpoint;
using namespace ringtrain::checkpoint::test;
using Catch::Matchers::Contains;

namespace {

// Every test here reads through the reader executable built with this test.
void enable_reader() {
  static const bool enabled = [] {
    enable_contained_reader(RINGTRAIN_TEST_READER);
    return true;
  }();
  REQUIRE(enabled);
  REQUIRE(contained_reader_enabled());
}

// sample_tree() plus arrays large enough to be stored contiguously and located.
StateTree large_tree() {
  StateTree tree = sample_tree();
  tree.put_array(Group::kModel, "layers.8.linear/weight", {300, 250}, pattern(75000, 8.0f));
  tree.put_array(Group::kOptimizer, "layers.8.linear/weight/momentum", {300, 250},
                 pattern(75000, 9.0f));
  return tree;
}

// Same entries in the same order, bit for bit.
void require_same(const StateTree& a, const StateTree& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    const Entry& x = a.entries()[i];
    const Entry& y = b.entries()[i];
    INFO(entry_path(x.group, x.name));
    REQUIRE(x.group == y.group);
    REQUIRE(x.name == y.name);
    REQUIRE(x.kind() == y.kind());
    switch (x.kind()) {
      case Kind::kFloat32Array: {
        const FloatArray& p = std::get<FloatArray>(x.value);
        const FloatArray& q = std::get<FloatArray>(y.value);
        REQUIRE(p.shape == q.shape);
        REQUIRE(p.values.size() == q.values.size());
        if (!p.values.empty())
          REQUIRE(std::memcmp(p.values.data(), q.values.data(),
                              p.values.size() * sizeof(float)) == 0);
        break;
      }
      case Kind::kInt64:
        REQUIRE(std::get<std::int64_t>(x.value) == std::get<std::int64_t>(y.value));
        break;
      case Kind::kUInt64:
        REQUIRE(std::get<std::uint64_t>(x.value) == std::get<std::uint64_t>(y.value));
        break;
      case Kind::kFloat64:
        REQUIRE(std::memcmp(&std::get<double>(x.value), &std::get<double>(y.value),
                            sizeof(double)) == 0);
        break;
      case Kind::kString:
        REQUIRE(std::get<std::string>(x.value) == std::get<std::string>(y.value));
        break;
    }
  }
}

// The reason of the CheckpointError `read` throws; fails the test if it throws none.
template <typename Read>
std::string refusal(Read read) {
  try {
    read();
  } catch (const CheckpointError& e) {
    return e.what();
  }
  FAIL("no CheckpointError");
  return {};
}

// Where `values` lie in `file`: the offset of their bytes (they are stored contiguously).
std::size_t offset_of(const fs::path& file, const std::vector<float>& values) {
  const Bytes bytes = read_bytes(file);
  const auto* needle = reinterpret_cast<const char*>(values.data());
  const auto at = std::search(bytes.begin(), bytes.end(), needle, needle + 256);
  REQUIRE(at != bytes.end());
  return static_cast<std::size_t>(at - bytes.begin());
}

}  // namespace

TEST_CASE("a contained read equals the read in this process, started at the read or ahead",
          "[checkpoint][contained]") {
  enable_reader();
  TempDir dir;
  const StateTree tree = large_tree();
  const Expected expected = Expected::of(tree);
  Header old_header = sample_header();
  old_header.version = 1;
  const fs::path v2 = dir / "v2.h5", v1 = dir / "v1.h5";
  write_file(v2, sample_header(), tree);
  write_file(v1, old_header, tree);
  for (const fs::path& file : {v2, v1}) {
    for (const bool ahead : {false, true}) {
      INFO(file.filename().string() << (ahead ? ", child started ahead" : ", started at read"));
      if (ahead) prepare_contained_reader();
      Header here_header, child_header;
      const StateTree here = read_file(file, expected, &here_header);
      const StateTree child = read_file_contained(file, expected, &child_header);
      require_same(here, child);
      require_same(tree, child);
      CHECK(child_header.version == here_header.version);
      CHECK(child_header.step == here_header.step);
      CHECK(child_header.config_json == here_header.config_json);
    }
    const VerifyResult here = verify_file(file), child = verify_file_contained(file);
    CHECK(child.sealed == here.sealed);
    REQUIRE(child.entries.size() == here.entries.size());
    for (std::size_t i = 0; i < here.entries.size(); ++i)
      CHECK(child.entries[i].xxh3 == here.entries[i].xxh3);
    CHECK(describe_file_contained(file) == describe_file(file));
  }
}

TEST_CASE("this process checks the bytes of the arrays the child located",
          "[checkpoint][contained]") {
  enable_reader();
  TempDir dir;
  const StateTree tree = large_tree();
  Header old_header = sample_header();
  old_header.version = 1;  // no seal: only the stored xxh3 guards the array's bytes
  const fs::path file = dir / "v1.h5";
  write_file(file, old_header, tree);
  const auto& weight = tree.array(Group::kModel, "layers.8.linear/weight").values;
  flip_byte(file, offset_of(file, weight) + 4 * 1000 + 1);
  const std::string here = refusal([&] { read_file(file, Expected::of(tree)); });
  const std::string child = refusal([&] { read_file_contained(file, Expected::of(tree)); });
  CHECK_THAT(here, Contains("/model/layers.8.linear/weight: checksum mismatch"));
  CHECK(child == here);
}

TEST_CASE("a refusal or a crash in the child is a refusal naming the file",
          "[checkpoint][contained]") {
  enable_reader();
  TempDir dir;
  const StateTree tree = large_tree();
  const fs::path file = dir / "crash-me.h5";
  write_file(file, sample_header(), tree);

  StateTree more = large_tree();
  more.put_u64(Group::kProgress, "not_in_the_file", 1);
  const std::string here = refusal([&] { read_file(file, Expected::of(more)); });
  const std::string child = refusal([&] { read_file_contained(file, Expected::of(more)); });
  CHECK_THAT(here, Contains("not_in_the_file: missing"));
  CHECK(child == here);

  for (const bool ahead : {false, true}) {
    INFO((ahead ? "child started ahead" : "child started at the read"));
    REQUIRE(::setenv(kReaderCrashVariable, "crash-me.h5", 1) == 0);
    if (ahead) prepare_contained_reader();
    const std::string crash = refusal([&] { read_file_contained(file, Expected::of(tree)); });
    REQUIRE(::unsetenv(kReaderCrashVariable) == 0);
    CHECK_THAT(crash, Contains(file.string()));
    CHECK_THAT(crash, Contains("the HDF5 library crashed while reading it (SIGSEGV): refused"));
  }
  // The next read starts a healthy child again.
  require_same(tree, read_file_contained(file, Expected::of(tree)));
}
