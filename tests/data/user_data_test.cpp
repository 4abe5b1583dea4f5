// User datasets (--data): the same data as IDX, .npy and HDF5 (contiguous and mapped,
// chunked and read) load to bitwise the same samples and labels; float32 data are used as
// they are; every defect of a user's file is refused with the file (and dataset) named.
#include "ringtrain/framework/data/user_data.hpp"

#include <hdf5.h>
#include <xxhash.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>

#include "ringtrain/framework/data/idx.hpp"
#include "ringtrain/framework/data/npy.hpp"
#include "user_data_files.hpp"

using Catch::Matchers::Contains;
using ringtrain::data::DataLayout;
using ringtrain::data::Dataset;
using ringtrain::data::DataSplits;
using ringtrain::data::load_data;
using namespace ringtrain::test;

namespace {

// Every sample of `d` through gather_batch (the path a training step takes) and its labels.
std::pair<std::vector<float>, std::vector<std::int32_t>> all_samples(const Dataset& d) {
  std::vector<std::uint64_t> indices(d.size());
  std::iota(indices.begin(), indices.end(), 0);
  std::vector<float> x(d.size() * d.sample_elements());
  std::vector<std::int32_t> y(d.size());
  ringtrain::data::gather_batch(d, indices, x, y);
  return {x, y};
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void require_same(const DataSplits& a, const DataSplits& b) {
  REQUIRE(a.info.sample_shape == b.info.sample_shape);
  REQUIRE(a.info.num_classes == b.info.num_classes);
  for (bool train : {true, false}) {
    const auto [ax, ay] = all_samples(train ? a.train : a.test);
    const auto [bx, by] = all_samples(train ? b.train : b.test);
    REQUIRE(!ax.empty());
    CHECK(same_bits(ax, bx));
    CHECK(ay == by);
  }
}

// Features that differ by sample and position, some negative, none integral.
std::vector<float> features(std::size_t n, std::size_t f) {
  std::vector<float> v(n * f);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(float(i) * 0.37f) * 3.5f;
  return v;
}

// A .npy folder of float32 features (n, 5) and int32 labels < 4, with `edit` applied to the
// files' bytes before they are written (name, bytes).
template <typename Edit>
std::filesystem::path float_npy_dir(const TempDir& tmp, Edit&& edit) {
  const auto dir = tmp / "npy";
  std::filesystem::create_directories(dir);
  for (const char* split : {"train", "test"}) {
    const std::uint64_t n = std::string(split) == "train" ? 6 : 4;
    std::vector<std::int32_t> y(n);
    for (std::size_t i = 0; i < n; ++i) y[i] = std::int32_t(i % 4);
    Bytes x_file = npy_bytes("<f4", {n, 5}, le_bytes(features(n, 5)));
    Bytes y_file = npy_bytes("<i4", {n}, le_bytes(y));
    edit(std::string(split) + "_x.npy", x_file);
    edit(std::string(split) + "_y.npy", y_file);
    write_plain(dir / (std::string(split) + "_x.npy"), x_file);
    write_plain(dir / (std::string(split) + "_y.npy"), y_file);
  }
  return dir;
}

// The same small data as idx/, npy/, contiguous.h5 and chunked.h5 in `tmp`.
void write_four_layouts(const TempDir& tmp, const SmallData& data) {
  data.write_idx_dir(tmp / "idx");
  data.write_npy_dir(tmp / "npy");
  write_h5(tmp / "contiguous.h5", data.h5_arrays(false));
  write_h5(tmp / "chunked.h5", data.h5_arrays(true));
}

std::filesystem::path float_npy_dir(const TempDir& tmp) {
  return float_npy_dir(tmp, [](const std::string&, Bytes&) {});
}

}  // namespace

TEST_CASE("the same data as IDX, .npy and HDF5 give bitwise the same samples and labels",
          "[data][user]") {
  TempDir tmp;
  const SmallData data;
  write_four_layouts(tmp, data);

  const DataSplits idx = load_data(tmp / "idx");
  CHECK(idx.info.layout == DataLayout::kIdx);
  CHECK(idx.info.sample_shape == ringtrain::Shape{1, 28, 28});
  CHECK(idx.info.num_classes == 10);
  REQUIRE(idx.train.size() == data.n_train);
  REQUIRE(idx.test.size() == data.n_test);

  const DataSplits npy = load_data(tmp / "npy");
  CHECK(npy.info.layout == DataLayout::kNpy);
  CHECK(npy.train.mapped.file != nullptr);  // .npy data are mapped after the header
  CHECK(npy.info.arrays[0].mapped);
  require_same(idx, npy);

  const DataSplits contiguous = load_data(tmp / "contiguous.h5");
  CHECK(contiguous.info.layout == DataLayout::kHdf5);
  CHECK(contiguous.train.mapped.file != nullptr);  // mapped where H5Dget_offset says
  require_same(idx, contiguous);

  const DataSplits chunked = load_data(tmp / "chunked.h5");
  CHECK(chunked.train.mapped.file == nullptr);  // compressed: read into memory
  CHECK_FALSE(chunked.info.arrays[0].mapped);
  require_same(idx, chunked);

  // Mapped and in-memory reading of the same file agree.
  const DataSplits npy_in_memory = load_data(tmp / "npy", {.map = false});
  CHECK(npy_in_memory.train.mapped.file == nullptr);
  require_same(npy, npy_in_memory);
}

TEST_CASE("float32 samples are used as they are, in any sample shape", "[data][user]") {
  TempDir tmp;
  const DataSplits npy = load_data(float_npy_dir(tmp));
  CHECK(npy.info.sample_shape == ringtrain::Shape{5});
  CHECK(npy.info.num_classes == 4);
  CHECK(same_bits(all_samples(npy.train).first, features(6, 5)));
  CHECK(same_bits(all_samples(npy.test).first, features(4, 5)));

  // As HDF5 with (n, 1, 5) samples, a classes attribute that says more, chunked test split.
  std::vector<std::int32_t> y_train = {0, 1, 2, 3, 0, 1}, y_test = {3, 2, 1, 0};
  write_h5(tmp / "f.h5",
           {{"/train/x", H5T_IEEE_F32LE, {6, 1, 5}, le_bytes(features(6, 5))},
            {"/train/y", H5T_STD_I32LE, {6}, le_bytes(y_train)},
            {"/test/x", H5T_IEEE_F32LE, {4, 1, 5}, le_bytes(features(4, 5)), true},
            {"/test/y", H5T_STD_I32LE, {4}, le_bytes(y_test), true}},
           7);
  const DataSplits h5 = load_data(tmp / "f.h5");
  CHECK(h5.info.sample_shape == ringtrain::Shape{1, 5});
  CHECK(h5.info.num_classes == 7);
  CHECK(same_bits(all_samples(h5.train).first, features(6, 5)));
  CHECK(same_bits(all_samples(h5.test).first, features(4, 5)));
  CHECK(all_samples(h5.test).second == y_test);
}

TEST_CASE(".npy headers: the variants NumPy writes parse, the rest is refused", "[data][user]") {
  const std::filesystem::path file = "h.npy";
  const auto parse = [&](const Bytes& b) { return ringtrain::data::parse_npy_header(b, file); };
  const auto header = parse(npy_bytes("<i8", {3}, {}));
  CHECK(header.dtype == ringtrain::data::DType::kInt64);
  CHECK(header.shape == std::vector<std::uint64_t>{3});
  CHECK(header.data_offset == npy_bytes("<i8", {3}, {}).size());
  CHECK(header.data_offset % 64 == 0);
  const Bytes v2 = npy_bytes("<f4", {2, 3}, {}, {.major = 2});
  CHECK(parse(v2).data_offset == v2.size());
  // keys in another order, double quotes, no trailing comma, a scalar shape
  CHECK(parse(npy_header("{\"shape\": (4, 2), \"fortran_order\": False, \"descr\": \"|u1\"}", 1))
            .shape == std::vector<std::uint64_t>{4, 2});
  CHECK(
      parse(npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': ()}", 1)).shape.empty());

  const std::vector<std::pair<Bytes, const char*>> bad = {
      {Bytes{'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0, 0}, "not a .npy file"},
      {npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", 3), "version 3.0"},
      {npy_header("{'descr': '<f4', 'fortran_order': False}", 1), "lacks"},
      {npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", 1),
       "unknown or repeated"},
      {npy_header("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", 1),
       "unknown or repeated"},
      {npy_header("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,)}", 1), "True or False"},
      {npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", 1), "dimension"},
      {npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", 1),
       "larger than 2^63"},
      {npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1)}", 1),
       "more than 8 dimensions"},
      {npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x", 1), "followed only"},
      {npy_header("{'descr': '<f\\4', 'fortran_order': False, 'shape': (1,)}", 1), "escapes"},
      {npy_bytes("<c8", {1}, {}), "unsupported dtype"},
      {npy_bytes(">f4", {1}, {}), "big-endian"},
      {npy_bytes("<f4", {1}, {}, {.fortran = true}), "Fortran order"},
  };
  for (const auto& [bytes, text] : bad) {
    INFO(text);
    CHECK_THAT(data_error_message([&] { parse(bytes); }), Contains("h.npy") && Contains(text));
  }
  // A header length beyond the bytes held, and beyond the bound.
  Bytes cut = npy_bytes("<f4", {1}, {});
  cut.resize(40);
  CHECK_THAT(data_error_message([&] { parse(cut); }), Contains("truncated"));
  Bytes huge = {0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 0xff, 0xff, 0xff, 0x7f};
  CHECK_THAT(data_error_message([&] { parse(huge); }), Contains("longer than"));
  for (std::size_t n = 0; n < cut.size(); ++n)  // every prefix is refused, none crashes
    CHECK_THROWS_AS(parse(Bytes(cut.begin(), cut.begin() + long(n))), ringtrain::DataError);
}

TEST_CASE("defects of a .npy dataset are refused, naming the file", "[data][user]") {
  struct Case {
    const char* file;  // the file `edit` changes, and the message names
    const char* text;
    std::function<void(Bytes&)> edit;
  };
  const auto replace_header = [](const std::string& dict) {
    return [dict](Bytes& b) {
      const Bytes body(b.begin() + long(npy_data_offset(b)), b.end());
      b = npy_header(dict, 1);
      b.insert(b.end(), body.begin(), body.end());
    };
  };
  const auto set_float = [](std::size_t index, float v) {
    return [index, v](Bytes& b) { std::memcpy(b.data() + npy_data_offset(b) + 4 * index, &v, 4); };
  };
  const std::vector<Case> cases = {
      {"train_y.npy", "lengths differ",
       [](Bytes& b) {
         b = npy_bytes("<i4", {5}, Bytes(b.begin() + long(npy_data_offset(b)), b.end() - 4));
       }},
      {"test_y.npy", "label -1 at index 2",
       [](Bytes& b) { std::memset(b.data() + npy_data_offset(b) + 8, 0xff, 4); }},
      {"train_x.npy", "nan at sample 1, element 2",
       set_float(7, std::numeric_limits<float>::quiet_NaN())},
      {"test_x.npy", "inf at sample 3, element 4",
       set_float(19, std::numeric_limits<float>::infinity())},
      {"train_x.npy", "unsupported dtype",
       replace_header("{'descr': '<c8', 'fortran_order': False, 'shape': (6, 5), }")},
      {"train_x.npy", "big-endian",
       replace_header("{'descr': '>f4', 'fortran_order': False, 'shape': (6, 5), }")},
      {"test_x.npy", "truncated .npy data", [](Bytes& b) { b.pop_back(); }},
      {"test_x.npy", "trailing byte", [](Bytes& b) { b.push_back(0); }},
      {"test_x.npy", "truncated .npy data",
       replace_header(
           "{'descr': '<f4', 'fortran_order': False, 'shape': (4000000000, 1000000000), }")},
      {"test_x.npy", "larger than",
       replace_header(
           "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }")},
      {"train_x.npy", "Fortran order",
       replace_header("{'descr': '<f4', 'fortran_order': True, 'shape': (6, 5), }")},
      {"train_x.npy", "wrong rank",
       replace_header("{'descr': '<f4', 'fortran_order': False, 'shape': (30,), }")},
      {"train_y.npy", "wrong rank",
       replace_header("{'descr': '<i4', 'fortran_order': False, 'shape': (6, 1), }")},
      {"test_y.npy", "holds float regression targets (1 per sample) but",
       replace_header("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }")},
      {"test_x.npy", "differ from the train samples",
       replace_header("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 5, 1), }")},
  };
  for (const Case& c : cases) {
    INFO(c.file << ": " << c.text);
    TempDir tmp;
    const auto dir = float_npy_dir(tmp, [&](const std::string& name, Bytes& b) {
      if (name == c.file) c.edit(b);
    });
    const std::string message = data_error_message([&] { load_data(dir); });
    CHECK_THAT(message, Contains((dir / c.file).string() + ":") && Contains(c.text));
  }
  TempDir tmp;
  const auto dir = float_npy_dir(tmp);
  std::filesystem::remove(dir / "test_y.npy");
  CHECK_THAT(data_error_message([&] { load_data(dir); }),
             Contains((dir / "test_y.npy").string()) && Contains("not found"));
}

TEST_CASE("defects of an HDF5 dataset are refused, naming the file and dataset", "[data][user]") {
  const SmallData data;
  struct Case {
    const char* text;
    std::function<void(std::vector<H5Array>&)> edit;
    std::optional<std::int64_t> classes;
  };
  const std::vector<Case> cases = {
      {"/train/y: 12 labels but",
       [](auto& a) {
         a[1].shape = {12};
         a[1].body.pop_back();
       },
       {}},
      {"/train/y: label 5 at index 5 is out of range: expected 0..4", [](auto&) {}, 5},
      {"/test/x: unsupported dtype (float of 16 bytes",
       [](auto& a) {
         a[2] = {"/test/x", H5T_NATIVE_LDOUBLE, {7, 4}, Bytes(7 * 4 * 16)};
       },
       {}},
      {"/test/x: big-endian",
       [](auto& a) {
         a[2] = {"/test/x", H5T_IEEE_F32BE, {7, 4}, Bytes(7 * 4 * 4)};
       },
       {}},
      {"/train/y: labels (y) of shape (13, 1) have the wrong rank",
       [](auto& a) {
         a[1].shape = {13, 1};
       },
       {}},
      {"/test/y: missing", [](auto& a) { a.pop_back(); }, {}},
      {"attribute classes: 100000 classes is more than", [](auto&) {}, 100000},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    TempDir tmp;
    std::vector<H5Array> arrays = data.h5_arrays(false);
    c.edit(arrays);
    write_h5(tmp / "d.h5", arrays, c.classes);
    CHECK_THAT(data_error_message([&] { load_data(tmp / "d.h5"); }),
               Contains((tmp / "d.h5").string()) && Contains(c.text));
  }
}

TEST_CASE("HDF5 files that are truncated, not HDF5, or link elsewhere are refused",
          "[data][user]") {
  const SmallData data;
  TempDir tmp;
  const auto file = tmp / "d.h5";
  write_h5(file, data.h5_arrays(false));
  const auto size = std::filesystem::file_size(file);
  std::filesystem::resize_file(file, size - 100);  // the last dataset's bytes run past the end
  CHECK_THAT(data_error_message([&] { load_data(file); }),
             Contains(file.string()) && Contains("truncated"));

  // The same cut with the superblock's end-of-file address moved to match, so HDF5 opens the
  // file: our own check finds the data of /test/y running past the end.
  write_h5(file, data.h5_arrays(false));
  const hid_t written = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t test_y = H5Dopen2(written, "/test/y", H5P_DEFAULT);
  const std::uint64_t test_y_end = H5Dget_offset(test_y) + 8 * data.n_test;
  H5Dclose(test_y);
  H5Fclose(written);
  REQUIRE(test_y_end == std::filesystem::file_size(file));  // its bytes end the file
  const std::uint64_t cut_size = test_y_end - 8;
  std::filesystem::resize_file(file, cut_size);
  Bytes bytes = read_all(file);
  REQUIRE(bytes.at(8) == 0);  // superblock version 0: end-of-file address at byte 40
  std::memcpy(bytes.data() + 40, &cut_size, 8);
  write_plain(file, bytes);
  CHECK_THAT(data_error_message([&] { load_data(file); }),
             Contains(file.string() + " /test/y") && Contains("past the end of the file"));

  write_plain(file, Bytes{'n', 'o', 't', ' ', 'h', 'd', 'f', '5', '!'});
  CHECK_THAT(data_error_message([&] { load_data(file); }),
             Contains(file.string()) && Contains("not an HDF5 file"));

  // /test/y as a soft link to /train/y: refused, though it would resolve.
  std::vector<H5Array> three = data.h5_arrays(false);
  three.pop_back();
  write_h5(file, three);
  const hid_t h5 = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  REQUIRE(h5 >= 0);
  REQUIRE(H5Lcreate_soft("/train/y", h5, "/test/y", H5P_DEFAULT, H5P_DEFAULT) >= 0);
  H5Fclose(h5);
  CHECK_THAT(data_error_message([&] { load_data(file); }),
             Contains(file.string() + " /test/y") && Contains("soft or external link"));
}

TEST_CASE(
    "the data's digest: XXH3 of each array's stored bytes, from any layout, and a changed value "
    "changes it",
    "[data][user]") {
  TempDir tmp;
  const SmallData data;
  write_four_layouts(tmp, data);
  const DataSplits idx = load_data(tmp / "idx");
  const DataSplits npy = load_data(tmp / "npy");
  const DataSplits contiguous = load_data(tmp / "contiguous.h5");
  const DataSplits chunked = load_data(tmp / "chunked.h5");
  // Oracle: XXH3-64 of the bytes as written, at once.
  const auto xxh3 = [](const Bytes& b) { return XXH3_64bits(b.data(), b.size()); };
  for (const DataSplits* d : {&idx, &npy, &contiguous, &chunked}) {
    REQUIRE(d->info.arrays.size() == 4);
    CHECK(d->info.arrays[0].xxh3 == xxh3(data.x(true)));  // uint8 pixels in every layout
    CHECK(d->info.arrays[2].xxh3 == xxh3(data.x(false)));
    CHECK(d->info.digest.size() == 16);
  }
  CHECK(idx.info.arrays[1].xxh3 == xxh3(data.y(true)));  // IDX labels: uint8
  CHECK(npy.info.arrays[3].xxh3 == xxh3(le_bytes(data.y64(false))));
  // The same arrays (dtype, shape, bytes) in another file or storage: the same digest.
  CHECK(contiguous.info.digest == chunked.info.digest);
  // Labels stored as another dtype are other data.
  CHECK(npy.info.digest != contiguous.info.digest);
  CHECK(load_data(tmp / "npy", {.digest = false}).info.digest.empty());

  // float32 x over many scan blocks (not a whole number of them) digests as at once, and one
  // changed value changes its array's xxh3 and the digest, not the others' xxh3.
  const std::size_t n = 9001, f = 5;  // 180020 bytes of x
  const auto write_float_dir = [&](const std::filesystem::path& dir, float last) {
    std::filesystem::create_directories(dir);
    std::vector<float> x = features(n, f);
    x.back() = last;
    const std::vector<std::int32_t> y(n, 1);
    for (const char* split : {"train", "test"}) {
      write_plain(
          dir / (std::string(split) + "_x.npy"),
          npy_bytes("<f4", {n, f}, le_bytes(std::string(split) == "test" ? x : features(n, f))));
      write_plain(dir / (std::string(split) + "_y.npy"), npy_bytes("<i4", {n}, le_bytes(y)));
    }
    return le_bytes(x);
  };
  const Bytes test_x = write_float_dir(tmp / "a", 0.5f);
  write_float_dir(tmp / "b", 0.25f);
  const DataSplits a = load_data(tmp / "a"), b = load_data(tmp / "b");
  CHECK(a.info.arrays[2].xxh3 == xxh3(test_x));
  CHECK(a.info.arrays[0].xxh3 == xxh3(le_bytes(features(n, f))));
  CHECK(a.info.arrays[2].xxh3 != b.info.arrays[2].xxh3);
  for (std::size_t i : {0, 1, 3}) CHECK(a.info.arrays[i].xxh3 == b.info.arrays[i].xxh3);
  CHECK(a.info.digest != b.info.digest);
}

TEST_CASE("a memory limit: mapped samples do not count, data read into memory over it are refused",
          "[data][user]") {
  TempDir tmp;
  const SmallData data;
  write_four_layouts(tmp, data);
  // In memory: (13 + 7) samples x 784 floats x 4 + 20 labels x 4 = 62800 bytes; each stored
  // uint8 dataset (at most 13 x 784 = 10192 bytes) is below the limit, the floats are not.
  const ringtrain::data::LoadOptions limited{.memory_limit_bytes = 20000};
  const DataSplits contiguous = load_data(tmp / "contiguous.h5", limited);
  CHECK(contiguous.train.mapped.file != nullptr);
  CHECK(contiguous.test.mapped.file != nullptr);
  require_same(contiguous, load_data(tmp / "chunked.h5"));
  CHECK_THAT(data_error_message([&] { load_data(tmp / "chunked.h5", limited); }),
             Contains("chunked.h5: the data would hold 62800 bytes in memory") &&
                 Contains("more than --data-memory-limit 20000 bytes"));
  // IDX: the train images alone (13 x 784 floats, 40768 bytes) are over 20000: refused from
  // the header, before inflating; under 50000 each file fits and the four together do not.
  CHECK_THAT(data_error_message([&] { load_data(tmp / "idx", limited); }),
             Contains("train-images-idx3-ubyte.gz: the header says 13 images") &&
                 Contains("refused before inflating"));
  CHECK_THAT(data_error_message([&] { load_data(tmp / "idx", {.memory_limit_bytes = 50000}); }),
             Contains("62800 bytes") && Contains("IDX files are compressed"));
  // A chunked dataset larger than the limit is refused before it is read.
  CHECK_THAT(
      data_error_message([&] { load_data(tmp / "chunked.h5", {.memory_limit_bytes = 5000}); }),
      Contains("chunked.h5 /train/x") && Contains("--data-memory-limit 5000 bytes"));
}

TEST_CASE("npy_int64_vector writes a .npy file that the reader takes back", "[data][user]") {
  for (std::size_t n : {0, 1, 7, 100000}) {
    std::vector<std::int64_t> values(n);
    for (std::size_t i = 0; i < n; ++i) values[i] = std::int64_t(i * 2654435761u) - std::int64_t(n);
    const std::string text = ringtrain::data::npy_int64_vector(values);
    const Bytes bytes(text.begin(), text.end());
    const auto header = ringtrain::data::parse_npy_header(bytes, "p.npy");
    CHECK(header.dtype == ringtrain::data::DType::kInt64);
    CHECK(header.shape == std::vector<std::uint64_t>{n});
    CHECK(header.data_offset % 64 == 0);  // NumPy's alignment
    REQUIRE(bytes.size() == header.data_offset + 8 * n);
    CHECK(Bytes(bytes.begin() + std::ptrdiff_t(header.data_offset), bytes.end()) ==
          le_bytes(values));
  }
}

namespace {

// Targets that differ by sample and target, some negative: y[i, t] = cos(0.7 i + t) * 2.
std::vector<float> targets(std::size_t n, std::size_t k) {
  std::vector<float> v(n * k);
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = std::cos(0.7f * float(i / k) + float(i % k)) * 2;
  return v;
}

// float_npy_dir with float32 targets of `shape` (n first) in place of both splits' labels.
std::filesystem::path target_npy_dir(const TempDir& tmp, std::vector<std::uint64_t> shape,
                                     std::function<void(const std::string&, Bytes&)> edit = {}) {
  return float_npy_dir(tmp, [&](const std::string& name, Bytes& b) {
    if (name.ends_with("_y.npy")) {
      shape[0] = name == "train_y.npy" ? 6 : 4;
      std::size_t per_sample = 1;
      for (std::size_t d = 1; d < shape.size(); ++d) per_sample *= std::size_t(shape[d]);
      b = npy_bytes("<f4", shape, le_bytes(targets(shape[0], per_sample)));
    }
    if (edit) edit(name, b);
  });
}

}  // namespace

TEST_CASE("float32 targets (n) and (n, k) are regression data, in .npy and HDF5 alike",
          "[data][user][regression]") {
  TempDir tmp;
  const DataSplits npy = load_data(target_npy_dir(tmp, {0, 3}));
  CHECK(npy.info.regression());
  CHECK(npy.info.num_targets == 3);
  CHECK(npy.info.num_classes == 0);
  CHECK(npy.info.outputs() == 3);
  REQUIRE(npy.train.size() == 6);
  REQUIRE(npy.test.size() == 4);
  CHECK(npy.train.targets == targets(6, 3));
  CHECK(npy.test.targets == targets(4, 3));
  CHECK(npy.train.labels.empty());
  // The step's gather: samples 4 and 1, in that order, their rows of targets.
  const std::vector<std::uint64_t> ids = {4, 1};
  std::vector<float> x(2 * 5), t(2 * 3);
  ringtrain::data::gather_batch(npy.train, ids, x, {}, t);
  const std::vector<float> all = targets(6, 3);
  CHECK(t == std::vector<float>{all[12], all[13], all[14], all[3], all[4], all[5]});

  TempDir tmp1;
  const DataSplits one = load_data(target_npy_dir(tmp1, {0}));
  CHECK(one.info.num_targets == 1);
  CHECK(one.test.targets == targets(4, 1));

  // The same arrays in HDF5, contiguous and chunked: the same targets and the same digest.
  for (bool chunked : {false, true}) {
    TempDir h5dir;
    std::vector<H5Array> arrays;
    for (const auto& [split, n] : {std::pair{"train", 6}, std::pair{"test", 4}}) {
      const std::uint64_t rows = std::uint64_t(n);
      arrays.push_back({std::string("/") + split + "/x",
                        H5T_IEEE_F32LE,
                        {rows, 5},
                        le_bytes(features(rows, 5)),
                        chunked});
      arrays.push_back({std::string("/") + split + "/y",
                        H5T_IEEE_F32LE,
                        {rows, 3},
                        le_bytes(targets(rows, 3)),
                        chunked});
    }
    write_h5(h5dir / "d.h5", arrays);
    const DataSplits h5 = load_data(h5dir / "d.h5");
    CHECK(h5.info.num_targets == 3);
    CHECK(h5.train.targets == npy.train.targets);
    CHECK(h5.test.targets == npy.test.targets);
    CHECK(h5.info.digest == npy.info.digest);
  }
}

TEST_CASE("defects of float targets are refused, naming the file", "[data][user][regression]") {
  const auto set_target = [](std::size_t index, float value) {
    return [index, value](const std::string& name, Bytes& b) {
      if (name == "test_y.npy") std::memcpy(b.data() + npy_data_offset(b) + 4 * index, &value, 4);
    };
  };
  struct Case {
    const char* file;
    const char* text;
    std::vector<std::uint64_t> shape;
    std::function<void(const std::string&, Bytes&)> edit;
  };
  const std::vector<Case> cases = {
      {"test_y.npy",
       "nan at sample 2, target 1: y must be finite",
       {0, 2},
       set_target(5, std::numeric_limits<float>::quiet_NaN())},
      {"test_y.npy",
       "-inf at sample 3, target 0: y must be finite",
       {0},
       set_target(3, -std::numeric_limits<float>::infinity())},
      {"train_y.npy", "float targets (y) of shape (6, 2, 1) have the wrong rank", {0, 2, 1}, {}},
      {"test_y.npy",
       "holds float regression targets (1 per sample) but",
       {0, 2},
       [](const std::string& name, Bytes& b) {
         if (name == "test_y.npy") b = npy_bytes("<f4", {4}, le_bytes(targets(4, 1)));
       }},
      {"test_y.npy",
       "holds integer class labels but",
       {0, 2},
       [](const std::string& name, Bytes& b) {
         if (name == "test_y.npy")
           b = npy_bytes("<i4", {4}, le_bytes(std::vector<std::int32_t>(4)));
       }},
      {"test_y.npy",
       "truncated .npy data",
       {0, 2},
       [](const std::string& name, Bytes& b) {
         if (name == "test_y.npy") b.pop_back();
       }},
  };
  for (const Case& c : cases) {
    INFO(c.file << ": " << c.text);
    TempDir tmp;
    const auto dir = target_npy_dir(tmp, c.shape, c.edit);
    const std::string message = data_error_message([&] { load_data(dir); });
    CHECK_THAT(message, Contains((dir / c.file).string() + ":") && Contains(c.text));
  }
}

TEST_CASE("npy_float32_array writes a .npy file that the reader takes back", "[data][user]") {
  for (const std::vector<std::uint64_t>& shape :
       {std::vector<std::uint64_t>{0}, {1}, {7}, {5, 3}, {1000, 1}}) {
    const std::size_t items = std::size_t(shape[0]) * (shape.size() == 2 ? shape[1] : 1);
    const std::vector<float> values = features(items, 1);
    const std::string text = ringtrain::data::npy_float32_array(values, shape);
    const Bytes bytes(text.begin(), text.end());
    const auto header = ringtrain::data::parse_npy_header(bytes, "p.npy");
    CHECK(header.dtype == ringtrain::data::DType::kFloat32);
    CHECK(header.shape == shape);
    CHECK(header.data_offset % 64 == 0);  // NumPy's alignment
    REQUIRE(bytes.size() == header.data_offset + 4 * items);
    CHECK(Bytes(bytes.begin() + std::ptrdiff_t(header.data_offset), bytes.end()) ==
          le_bytes(values));
  }
}

namespace {

// An HDF5 file whose /train/x is chunked (chunks of 4 rows) and compressed over `rows` rows
// of 784 bytes, of which only the first `written_rows` were written (0: none).
void write_partly_written(const std::filesystem::path& path, hsize_t rows, hsize_t written_rows) {
  const SmallData data;
  std::vector<H5Array> arrays = data.h5_arrays(false);
  arrays.erase(arrays.begin());
  write_h5(path, arrays);
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  REQUIRE(file >= 0);
  const hsize_t dims[4] = {rows, 1, 28, 28}, chunk[4] = {4, 1, 28, 28};
  const hid_t space = H5Screate_simple(4, dims, nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 4, chunk);
  H5Pset_deflate(dcpl, 4);
  const hid_t ds =
      H5Dcreate2(file, "/train/x", H5T_STD_U8LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  REQUIRE(ds >= 0);
  if (written_rows > 0) {
    const hsize_t start[4] = {0, 0, 0, 0}, count[4] = {written_rows, 1, 28, 28};
    const hid_t memory = H5Screate_simple(4, count, nullptr);
    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
    const Bytes body = image_body(static_cast<std::uint32_t>(written_rows), 28, 28);
    REQUIRE(H5Dwrite(ds, H5T_NATIVE_UINT8, memory, space, H5P_DEFAULT, body.data()) >= 0);
    H5Sclose(memory);
  }
  H5Dclose(ds);
  H5Pclose(dcpl);
  H5Sclose(space);
  H5Fclose(file);
}

}  // namespace

TEST_CASE("size before memory: HDF5 storage never written is refused before anything is read",
          "[data][user][hostile]") {
  TempDir tmp;
  // 2^25 rows declared, nothing written: a few kilobytes that would be 26 GB of fill zeros.
  write_partly_written(tmp / "empty.h5", hsize_t{1} << 25, 0);
  CHECK_THAT(data_error_message([&] { load_data(tmp / "empty.h5"); }),
             Contains("empty.h5 /train/x") && Contains("never (fully) written"));
  // 13 rows declared, the first 4 (one chunk) written: the other chunks would be fill zeros.
  write_partly_written(tmp / "part.h5", 13, 4);
  CHECK_THAT(data_error_message([&] { load_data(tmp / "part.h5"); }),
             Contains("part.h5 /train/x: 1 of its 4 chunks are allocated"));
  // All 13 written: it loads.
  write_partly_written(tmp / "whole.h5", 13, 13);
  CHECK(load_data(tmp / "whole.h5").train.size() == 13);
}

TEST_CASE("size before memory: a gzip'd IDX header is checked before a byte is inflated",
          "[data][idx][hostile]") {
  TempDir tmp;
  // A header that announces 2^31 - 1 images, followed by 20 real ones: about 16 KB of gzip.
  write_gzip(tmp / "images.gz", idx_bytes(0x803, {0x7fffffffu, 28, 28}, image_body(20, 28, 28)));
  CHECK_THAT(
      data_error_message([&] { ringtrain::data::read_idx_images(tmp / "images.gz", 28, 28); }),
      Contains("images.gz: the header says 2147483647 images of 784 bytes") &&
          Contains("inflates to at most") && Contains("refused before inflating"));
  // 200 images that the file does hold, but not as floats within a limit of 100 KB.
  write_gzip(tmp / "two-hundred.gz", idx_bytes(0x803, {200, 28, 28}, image_body(200, 28, 28)));
  CHECK_THAT(data_error_message(
                 [&] { ringtrain::data::read_idx_images(tmp / "two-hundred.gz", 28, 28, 100000); }),
             Contains("627200 bytes as floats") && Contains("--data-memory-limit 100000"));
  CHECK(ringtrain::data::read_idx_images(tmp / "two-hundred.gz", 28, 28, 1000000).count == 200);
}

TEST_CASE("bytes from a file reach messages escaped and cut", "[data][npy][hostile]") {
  TempDir tmp;
  // A descr that would clear the screen and set the window title, with a NUL in the middle.
  const std::string descr =
      std::string("\x1b[2J\x1b]0;owned\x07", 14) + std::string(1, '\0') + "<f4";
  write_plain(tmp / "x.npy", npy_bytes(descr, {2, 2}, Bytes(16, 0)));
  const std::string message = data_error_message([&] { ringtrain::data::read_npy(tmp / "x.npy"); });
  CHECK_THAT(message, Contains("descr '\\x1b[2J\\x1b]0;owned\\x07\\x00<f4'"));
  CHECK(std::none_of(message.begin(), message.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x20; }));
  // A key of 5000 bytes is shown cut, with its length.
  const std::string key(5000, 'k');
  write_plain(tmp / "k.npy", npy_header("{'" + key + "': 1, }", 1));
  CHECK_THAT(data_error_message([&] { ringtrain::data::read_npy(tmp / "k.npy"); }),
             Contains("... (5000 bytes)"));
}

TEST_CASE("a mapped data file that shrinks: the read is refused naming the file, no SIGBUS",
          "[data][user][hostile]") {
  TempDir tmp;
  const std::uint64_t n = 4096;  // 4096 x 64 floats = 1 MiB: many pages past the cut
  write_plain(tmp / "x.npy", npy_bytes("<f4", {n, 64}, le_bytes(std::vector<float>(n * 64, 0.5f))));
  write_plain(tmp / "y.npy", npy_bytes("<i8", {n}, le_bytes(std::vector<std::int64_t>(n, 1))));
  const ringtrain::data::StoredArray x = ringtrain::data::read_npy(tmp / "x.npy");
  const ringtrain::data::StoredArray y = ringtrain::data::read_npy(tmp / "y.npy");
  const Dataset d = ringtrain::data::make_dataset(x, y, 2);
  REQUIRE(d.mapped.file != nullptr);
  CHECK_FALSE(d.mapped.file->shrank());
  std::filesystem::resize_file(tmp / "x.npy", 4096);  // someone truncates it mid-run
  CHECK(d.mapped.file->shrank());
  std::vector<std::uint64_t> last = {n - 1};
  std::vector<float> out(64);
  std::vector<std::int32_t> label(1);
  CHECK_THAT(data_error_message([&] { ringtrain::data::gather_batch(d, last, out, label); }),
             Contains("x.npy: the file shrank to 4096 bytes while the run had it mapped"));
  // A sample still inside the file is read as before.
  std::vector<std::uint64_t> first = {0};
  ringtrain::data::gather_batch(d, first, out, label);
  CHECK(out[0] == 0.5f);
}
