// Checkpoint files: every kind round trips bit for bit; the layout on disk is the documented
// one (datasets named with '|', contiguous float32 LE, xxh3 = XXH3_64bits of the bytes);
// h5dump reads the file; verify_file and describe_file see the same entries.
#include "ringtrain/checkpoint/file.hpp"

#include <catch2/catch.hpp>
#include <cstdlib>

#include "checkpoint_files.hpp"

using Catch::Matchers::Contains;
using namespace ringtrain::checkpoint;
using namespace ringtrain::checkpoint::test;

namespace {

bool same_entries(const StateTree& a, const StateTree& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const Entry& x = a.entries()[i];
    const Entry& y = b.entries()[i];
    if (x.group != y.group || x.name != y.name || x.kind() != y.kind()) return false;
    if (const auto* fx = std::get_if<FloatArray>(&x.value)) {
      const auto& fy = std::get<FloatArray>(y.value);
      if (fx->shape != fy.shape || fx->values.size() != fy.values.size()) return false;
      if (!fx->values.empty() &&
          std::memcmp(fx->values.data(), fy.values.data(), fx->values.size() * 4) != 0)
        return false;
    } else if (x.kind() == Kind::kString) {
      if (std::get<std::string>(x.value) != std::get<std::string>(y.value)) return false;
    } else if (x.kind() == Kind::kFloat64) {
      if (std::get<double>(x.value) != std::get<double>(y.value)) return false;
    } else if (x.kind() == Kind::kInt64) {
      if (std::get<std::int64_t>(x.value) != std::get<std::int64_t>(y.value)) return false;
    } else if (std::get<std::uint64_t>(x.value) != std::get<std::uint64_t>(y.value)) {
      return false;
    }
  }
  return true;
}

}  // namespace

TEST_CASE("a tree with every kind round trips exactly", "[checkpoint][file]") {
  TempDir dir;
  const auto file = dir / "step-00000200.h5";
  const StateTree tree = sample_tree();
  const Header header = sample_header();
  write_file(file, header, tree);

  Header read_back;
  const StateTree loaded = read_file(file, Expected::of(tree), &read_back);
  CHECK(same_entries(tree, loaded));
  CHECK(read_back.format == kFormatName);
  CHECK(read_back.version == kFormatVersion);
  CHECK(read_back.step == 200);
  CHECK(read_back.epoch == 3);
  CHECK(read_back.world_size == 2);
  CHECK(read_back.config_json == header.config_json);

  const Header only_header = read_header(file);
  CHECK(only_header.step == 200);
  CHECK(only_header.config_json == header.config_json);
}

TEST_CASE("special float values, large strings and a large config round trip",
          "[checkpoint][file]") {
  TempDir dir;
  const auto file = dir / "big.h5";
  StateTree tree;
  std::vector<float> special = {0.0f, -0.0f, 1e-45f, -3.4e38f, 3.4028235e38f, -1e-38f};
  tree.put_array(Group::kModel, "special", {special.size()}, special);
  const std::string big(100'000, 'x');  // above the compact limit: stored contiguous
  tree.put_string(Group::kRng, "big", big);
  Header header = sample_header();
  header.config_json = "{\"pad\":\"" + std::string(200'000, 'y') + "\"}";  // dense attribute
  write_file(file, header, tree);

  Header read_back;
  const StateTree loaded = read_file(file, Expected::of(tree), &read_back);
  CHECK(std::memcmp(loaded.array(Group::kModel, "special").values.data(), special.data(),
                    special.size() * 4) == 0);
  CHECK(loaded.string(Group::kRng, "big") == big);
  CHECK(read_back.config_json == header.config_json);
  CHECK(verify_file(file).entries.size() == 2);
}

TEST_CASE("a NaN or an infinity in any array is refused by every reader, with its place",
          "[checkpoint][file]") {
  TempDir dir;
  const auto file = dir / "nan.h5";
  for (const float bad : {NAN, INFINITY, -INFINITY}) {
    StateTree tree = sample_tree();
    std::vector<float> values(5000, 0.25f);
    values[4097] = bad;  // in the second block of the scan
    tree.put_array(Group::kOptimizer, "momentum/w", {50, 100}, values);
    write_file(file, sample_header(), tree);  // a seal computed over the bad value: it verifies
    INFO(bad);
    CHECK_THAT(rejection([&] { read_file(file, Expected::of(tree)); }),
               Contains("/optimizer/momentum/w: element 4097 is") &&
                   Contains("a checkpoint holds finite values only: refused"));
    CHECK_THAT(rejection([&] { verify_file(file); }),
               Contains("/optimizer/momentum/w: element 4097 is"));
  }
}

TEST_CASE("the file has the documented HDF5 layout", "[checkpoint][file]") {
  TempDir dir;
  const auto file = dir / "layout.h5";
  const StateTree tree = sample_tree();
  write_file(file, sample_header(), tree);

  CHECK(hdf5_link_name("layers.0.linear/weight") == "layers.0.linear|weight");
  CHECK(hdf5_path(Group::kModel, "layers.0.linear/weight") == "/model/layers.0.linear|weight");

  Id h5(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  Id weight = open_dataset(h5, "/model/layers.0.linear|weight");
  Id type(H5Dget_type(weight), H5Tclose);
  CHECK(H5Tequal(type, H5T_IEEE_F32LE) > 0);
  Id creation(H5Dget_create_plist(weight), H5Pclose);
  CHECK(H5Pget_layout(creation) == H5D_CONTIGUOUS);
  CHECK(H5Pget_nfilters(creation) == 0);
  // xxh3 is XXH3_64bits of the little-endian float bytes.
  std::uint64_t stored = 0;
  Id attribute(H5Aopen(weight, "xxh3", H5P_DEFAULT), H5Aclose);
  REQUIRE(H5Aread(attribute, H5T_NATIVE_UINT64, &stored) >= 0);
  const auto values = pattern(12, 1.0f);
  CHECK(stored == XXH3_64bits(values.data(), values.size() * 4));
  // Scalars are scalar datasets; strings fixed-length; the superblock is version 2.
  Id step = open_dataset(h5, "/schedule/step");
  Id step_space(H5Dget_space(step), H5Sclose);
  CHECK(H5Sget_simple_extent_type(step_space) == H5S_SCALAR);
  H5F_info2_t info{};
  REQUIRE(H5Fget_info2(h5, &info) >= 0);
  CHECK(info.super.version == 2);
}

TEST_CASE("h5dump reads the file", "[checkpoint][file]") {
  if (std::system("command -v h5dump > /dev/null 2>&1") != 0) {
    WARN("h5dump not installed: skipped");
    return;
  }
  TempDir dir;
  const auto file = dir / "dump.h5";
  write_file(file, sample_header(), sample_tree());
  const auto out = dir / "dump.txt";
  const std::string command = "h5dump -H '" + file.string() + "' > '" + out.string() + "' 2>&1";
  REQUIRE(std::system(command.c_str()) == 0);
  const Bytes text = read_bytes(out);
  const std::string dump(text.begin(), text.end());
  CHECK_THAT(dump, Contains("DATASET \"layers.0.linear|weight\""));
  CHECK_THAT(dump, Contains("H5T_IEEE_F32LE"));
  CHECK_THAT(dump, Contains("ATTRIBUTE \"xxh3\""));
  CHECK_THAT(dump, Contains("ATTRIBUTE \"config\""));
  // The root attributes' values, as h5dump prints them.
  const auto attr = dir / "attr.txt";
  REQUIRE(std::system(("h5dump -a /format '" + file.string() + "' > '" + attr.string() + "' 2>&1")
                          .c_str()) == 0);
  const Bytes attr_text = read_bytes(attr);
  CHECK_THAT(std::string(attr_text.begin(), attr_text.end()), Contains("\"ringtrain-checkpoint\""));
  // Full dump (data too) also succeeds.
  REQUIRE(std::system(("h5dump '" + file.string() + "' > /dev/null 2>&1").c_str()) == 0);
}

TEST_CASE("verify_file and describe_file see every entry", "[checkpoint][file]") {
  TempDir dir;
  const auto file = dir / "step-00000200.h5";
  const StateTree tree = sample_tree();
  write_file(file, sample_header(), tree);

  const VerifyResult result = verify_file(file);
  CHECK(result.header.step == 200);
  REQUIRE(result.entries.size() == tree.size());
  CHECK(result.payload_bytes == tree.payload_bytes());
  // Creation order within each group, groups in kAllGroups order.
  CHECK(result.entries[0].name == "layers.0.linear/weight");
  CHECK(result.entries[0].shape == Dims{3, 4});
  CHECK(result.entries[4].shape == Dims{});

  const std::string text = describe_file(file);
  CHECK_THAT(text, Contains("step 200"));
  CHECK_THAT(text, Contains("layers.0.linear/weight"));
  CHECK_THAT(text, Contains("float32 (3, 4)"));
  CHECK_THAT(text, Contains("uint64 = 200"));
  CHECK_THAT(text, Contains("int64 = -7"));
  CHECK_THAT(text, Contains("\"philox:0123456789abcdef\""));
}

TEST_CASE("write_file refuses a foreign header and reports unwritable paths",
          "[checkpoint][file]") {
  TempDir dir;
  Header header = sample_header();
  header.version = 3;
  CHECK_THAT(rejection([&] { write_file(dir / "a.h5", header, sample_tree()); }),
             Contains("refusing to write"));
  header.version = 1;  // unsealed: only without a key
  const MacKey key = MacKey::from_bytes(std::array<unsigned char, MacKey::kBytes>{});
  CHECK_THAT(rejection([&] { write_file(dir / "a.h5", header, sample_tree(), &key); }),
             Contains("refusing to write"));
  header = sample_header();
  header.world_size = 0;
  CHECK_THAT(rejection([&] { write_file(dir / "a.h5", header, sample_tree()); }),
             Contains("world_size"));
  CHECK_THAT(rejection([&] { write_file(dir / "no" / "such" / "a.h5", sample_header(), {}); }),
             Contains("a.h5: cannot create: No such file or directory"));
}

TEST_CASE("an expectation that asks for less is refused: the file holds extra entries",
          "[checkpoint][file]") {
  TempDir dir;
  const auto file = dir / "x.h5";
  write_file(file, sample_header(), sample_tree());
  Expected fewer;
  fewer.add(Group::kSchedule, "step", Kind::kUInt64);
  CHECK_THAT(rejection([&] { read_file(file, fewer); }), Contains("unexpected object /model/"));
}
