// The contained reader (contained.hpp) through its own executable: the child parses, this
// process checks the seal and reads the arrays the child located. What comes back must be
// exactly what read_file, verify_file and describe_file give in this process, and a child
// that refuses or dies must come back as a refusal naming the file.
#include "ringtrain/checkpoint/contained.hpp"

#include <cstdlib>
#include <cstring>

#include "checkpoint_files.hpp"
#include "ringtrain/checkpoint/data_file.hpp"

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
          REQUIRE(std::memcmp(p.values.data(), q.values.data(), p.values.size() * sizeof(float)) ==
                  0);
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

namespace {

// A user's dataset file: /train/x contiguous float32 (600, 20) (mapped by the caller),
// /train/y int64 (600) and /test/x float32 (3000, 1000), 12 MB, chunked and compressed (read
// in the child and streamed in two pieces), /test/y uint8 (3000); `names` leaves out /test/y
// if `complete` is false.
void write_dataset_file(const fs::path& path, bool complete) {
  const Id file = create_file(path, false);
  const auto put = [&](const char* name, hid_t type, std::vector<hsize_t> dims, const void* data,
                       bool chunked) {
    const Id space(H5Screate_simple(int(dims.size()), dims.data(), nullptr), H5Sclose);
    const Id lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
    H5Pset_create_intermediate_group(lcpl, 1);
    const Id dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    if (chunked) {
      std::vector<hsize_t> chunk = dims;
      chunk[0] = std::min<hsize_t>(dims[0], 256);
      H5Pset_chunk(dcpl, int(chunk.size()), chunk.data());
      H5Pset_deflate(dcpl, 1);
    }
    const Id ds(H5Dcreate2(file, name, type, space, lcpl, dcpl, H5P_DEFAULT), H5Dclose);
    REQUIRE(H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
  };
  const std::vector<float> train_x = pattern(600 * 20, 1.0f), test_x = pattern(3000 * 1000, 2.0f);
  std::vector<std::int64_t> train_y(600);
  std::vector<std::uint8_t> test_y(3000);
  for (std::size_t i = 0; i < train_y.size(); ++i) train_y[i] = std::int64_t(i % 7);
  for (std::size_t i = 0; i < test_y.size(); ++i) test_y[i] = std::uint8_t(i % 7);
  put("/train/x", H5T_IEEE_F32LE, {600, 20}, train_x.data(), false);
  put("/train/y", H5T_STD_I64LE, {600}, train_y.data(), true);
  put("/test/x", H5T_IEEE_F32LE, {3000, 1000}, test_x.data(), true);
  if (complete) put("/test/y", H5T_STD_U8LE, {3000}, test_y.data(), false);
}

}  // namespace

TEST_CASE("a user's HDF5 dataset read in the child equals the read in this process",
          "[checkpoint][contained][hostile]") {
  enable_reader();
  TempDir dir;
  const fs::path file = dir / "data.h5";
  write_dataset_file(file, true);
  const std::vector<std::string> names = {"/train/x", "/train/y", "/test/x", "/test/y"};
  for (const bool ahead : {false, true}) {
    INFO((ahead ? "child started ahead" : "child started at the read"));
    if (ahead) prepare_contained_reader();
    const DataFile here = read_data_file(file, names, 0);
    const DataFile child = read_data_file_contained(file, names, 0);
    REQUIRE(child.arrays.size() == 4);
    for (std::size_t i = 0; i < 4; ++i) {
      INFO(names[i]);
      CHECK(child.arrays[i].where == here.arrays[i].where);
      CHECK(child.arrays[i].type == here.arrays[i].type);
      CHECK(child.arrays[i].shape == here.arrays[i].shape);
      CHECK(child.arrays[i].offset == here.arrays[i].offset);
      CHECK(child.arrays[i].bytes == here.arrays[i].bytes);
    }
    CHECK(child.arrays[0].offset.has_value());        // contiguous: mapped by the caller
    CHECK(child.arrays[2].bytes.size() == 12000000);  // chunked: streamed in pieces
  }
  // A refusal in the child is the in-process refusal; a crash there names the file.
  write_dataset_file(dir / "three.h5", false);
  const std::string here = refusal([&] { read_data_file(dir / "three.h5", names, 0); });
  CHECK_THAT(here, Contains("three.h5 /test/y: missing"));
  CHECK(refusal([&] { read_data_file_contained(dir / "three.h5", names, 0); }) == here);
  // Optional names: a missing one is absent in both readers, a present one read as always.
  const std::vector<std::string> optional_names = {"/test/x", "/test/y", "/x", "/train/y"};
  for (const DataFile& read :
       {read_data_file(dir / "three.h5", optional_names, 0, 0b1110),
        read_data_file_contained(dir / "three.h5", optional_names, 0, 0b1110)}) {
    REQUIRE(read.arrays.size() == 4);
    CHECK(read.arrays[0].present);
    CHECK(read.arrays[0].bytes.size() == 12000000);
    CHECK_FALSE(read.arrays[1].present);
    CHECK_FALSE(read.arrays[2].present);
    CHECK(read.arrays[3].present);
    CHECK(read.arrays[3].bytes.size() == 600 * 8);
  }
  CHECK_THAT(refusal([&] { read_data_file_contained(file, names, 1000000); }),
             Contains("data.h5 /test/x") && Contains("--data-memory-limit 1000000 bytes"));
  REQUIRE(::setenv(kReaderCrashVariable, "data.h5", 1) == 0);
  const std::string crash = refusal([&] { read_data_file_contained(file, names, 0); });
  REQUIRE(::unsetenv(kReaderCrashVariable) == 0);
  CHECK_THAT(crash, Contains(file.string() +
                             ": the HDF5 library crashed while reading it (SIGSEGV): refused"));
}

TEST_CASE("a header read in the child says whether the file carries a MAC",
          "[checkpoint][contained][hostile]") {
  enable_reader();
  TempDir dir;
  const MacKey key = MacKey::from_bytes(std::array<unsigned char, MacKey::kBytes>{7});
  write_file(dir / "signed.h5", sample_header(), sample_tree(), &key);
  write_file(dir / "plain.h5", sample_header(), sample_tree());
  CHECK(read_header_contained(dir / "signed.h5").mac_present);
  CHECK(read_header_contained(dir / "signed.h5", &key).mac_present);
  CHECK(read_header(dir / "signed.h5").mac_present);
  CHECK_FALSE(read_header_contained(dir / "plain.h5").mac_present);
  CHECK(read_header_contained(dir / "plain.h5").config_json == sample_header().config_json);
}
