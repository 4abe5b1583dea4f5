// NumPy's dtypes in a user's dataset (convert.hpp), in .npy and HDF5 alike: x of float64 (each
// value rounded to float32 as a C++ cast rounds it), float16 (exact), integers and bool (their
// values); labels of every integer width and bool; float64 and float16 regression targets.
// Converted samples are held in memory and count against the memory limit; the conversion of
// each array is recorded. Values float32 cannot hold, and bool bytes other than 0 and 1, are
// refused naming the file and the position.
#include <hdf5.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <numeric>

#include "ringtrain/framework/data/convert.hpp"
#include "ringtrain/framework/data/user_data.hpp"
#include "user_data_files.hpp"

using Catch::Matchers::Contains;
using ringtrain::data::DataSplits;
using ringtrain::data::DType;
using ringtrain::data::load_data;
using namespace ringtrain::test;

namespace {

constexpr std::uint64_t kTrain = 6, kTest = 4, kFeatures = 5;

// One array in the dtype under test: its .npy descr, its HDF5 file type and its bytes.
struct Typed {
  std::string descr;
  hid_t h5_type;
  Bytes bytes;
};

template <typename T>
Typed typed(const std::string& descr, hid_t h5_type, const std::vector<T>& values) {
  return {descr, h5_type, le_bytes(values)};
}

// Doubles that differ by sample and position, none a float32 (so rounding shows).
std::vector<double> doubles(std::uint64_t n) {
  std::vector<double> v(n * kFeatures);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(double(i) * 0.37) * 3.5 + 1e-9;
  return v;
}

std::vector<float> as_floats(const std::vector<double>& v) {
  return std::vector<float>(v.begin(), v.end());
}

std::vector<std::int64_t> labels(std::uint64_t n, std::int64_t classes) {
  std::vector<std::int64_t> y(n);
  for (std::size_t i = 0; i < n; ++i) y[i] = std::int64_t((i * 7 + 1) % std::size_t(classes));
  return y;
}

template <typename T>
std::vector<T> converted(const std::vector<std::int64_t>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// The four arrays as a .npy folder and as an HDF5 file (contiguous, or chunked and
// compressed, so both the mapped and the streamed paths of the contained reader convert).
struct Layouts {
  std::filesystem::path npy, h5, chunked;
};

Layouts write_layouts(const TempDir& tmp, const std::string& name, const Typed& x_train,
                      const Typed& y_train, const Typed& x_test, const Typed& y_test,
                      std::vector<std::uint64_t> y_shape_tail = {}) {
  const auto x_shape = [](std::uint64_t n) { return std::vector<std::uint64_t>{n, kFeatures}; };
  const auto y_shape = [&](std::uint64_t n) {
    std::vector<std::uint64_t> shape = {n};
    shape.insert(shape.end(), y_shape_tail.begin(), y_shape_tail.end());
    return shape;
  };
  const Layouts out{tmp / (name + "_npy"), tmp / (name + ".h5"), tmp / (name + "_chunked.h5")};
  std::filesystem::create_directories(out.npy);
  write_plain(out.npy / "train_x.npy", npy_bytes(x_train.descr, x_shape(kTrain), x_train.bytes));
  write_plain(out.npy / "train_y.npy", npy_bytes(y_train.descr, y_shape(kTrain), y_train.bytes));
  write_plain(out.npy / "test_x.npy", npy_bytes(x_test.descr, x_shape(kTest), x_test.bytes));
  write_plain(out.npy / "test_y.npy", npy_bytes(y_test.descr, y_shape(kTest), y_test.bytes));
  for (bool chunked : {false, true})
    write_h5(chunked ? out.chunked : out.h5,
             {{"/train/x", x_train.h5_type, x_shape(kTrain), x_train.bytes, chunked},
              {"/train/y", y_train.h5_type, y_shape(kTrain), y_train.bytes, chunked},
              {"/test/x", x_test.h5_type, x_shape(kTest), x_test.bytes, chunked},
              {"/test/y", y_test.h5_type, y_shape(kTest), y_test.bytes, chunked}});
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// h5py's float16: IEEE binary16 built from float32 as h5py builds it.
hid_t h5_float16() {
  static const hid_t type = [] {
    const hid_t t = H5Tcopy(H5T_IEEE_F32LE);
    H5Tset_fields(t, 15, 10, 5, 0, 10);
    H5Tset_size(t, 2);
    H5Tset_ebias(t, 15);
    return t;
  }();
  return type;
}

// h5py's bool: an enum over int8 with FALSE = 0 and TRUE = 1.
hid_t h5_bool() {
  static const hid_t type = [] {
    const hid_t t = H5Tenum_create(H5T_STD_I8LE);
    const std::int8_t no = 0, yes = 1;
    H5Tenum_insert(t, "FALSE", &no);
    H5Tenum_insert(t, "TRUE", &yes);
    return t;
  }();
  return type;
}

Typed int64_labels(std::uint64_t n) {
  return typed("<i8", H5T_STD_I64LE, labels(n, 3));
}

}  // namespace

TEST_CASE("float64 samples: rounded to float32 as a cast rounds, held in memory, recorded",
          "[data][user][dtypes]") {
  TempDir tmp;
  const auto layouts =
      write_layouts(tmp, "f8", typed("<f8", H5T_IEEE_F64LE, doubles(kTrain)), int64_labels(kTrain),
                    typed("<f8", H5T_IEEE_F64LE, doubles(kTest)), int64_labels(kTest));
  for (const auto& path : {layouts.npy, layouts.h5, layouts.chunked}) {
    INFO(path);
    const DataSplits d = load_data(path);
    CHECK(same_bits(all_sample_values(d.train), as_floats(doubles(kTrain))));
    CHECK(same_bits(all_sample_values(d.test), as_floats(doubles(kTest))));
    CHECK_FALSE(d.train.mapped.present());
    CHECK(d.info.arrays[0].dtype == DType::kFloat64);
    CHECK_FALSE(d.info.arrays[0].mapped);
    CHECK(d.info.arrays[0].conversion == "float64 rounded to float32 (to nearest)");
    CHECK(d.info.arrays[1].conversion == "int64 to int32 class labels");
  }
  // Converted samples count against the limit: 10 samples x 5 floats + 10 labels, 240 bytes.
  // The same values as float32 stay mapped: their labels alone (40 bytes) count.
  const auto f4 = write_layouts(
      tmp, "f4", typed("<f4", H5T_IEEE_F32LE, as_floats(doubles(kTrain))), int64_labels(kTrain),
      typed("<f4", H5T_IEEE_F32LE, as_floats(doubles(kTest))), int64_labels(kTest));
  CHECK(load_data(f4.npy, {.memory_limit_bytes = 100}).train.mapped.present());
  CHECK(load_data(f4.npy).info.arrays[0].conversion.empty());
  CHECK_THAT(data_error_message([&] { load_data(layouts.npy, {.memory_limit_bytes = 100}); }),
             Contains("the data would hold 240 bytes in memory"));
}

TEST_CASE("float16 and integer samples: their values, exactly", "[data][user][dtypes]") {
  TempDir tmp;
  // float16 bits: 1, 65504 (the largest), -2, the smallest subnormal 2^-24, 1/3 rounded
  const std::vector<std::uint16_t> half = {0x3c00, 0x7bff, 0xc000, 0x0001, 0x3555};
  const std::vector<float> half_values = {1.0f, 65504.0f, -2.0f, std::ldexp(1.0f, -24),
                                          0.333251953125f};
  std::vector<std::uint16_t> train_bits, test_bits;
  std::vector<float> train_values, test_values;
  for (std::size_t i = 0; i < kTrain * kFeatures; ++i) {
    train_bits.push_back(half[i % 5]);
    train_values.push_back(half_values[i % 5]);
    if (i < kTest * kFeatures) {
      test_bits.push_back(half[(i + 2) % 5]);
      test_values.push_back(half_values[(i + 2) % 5]);
    }
  }
  const auto f2 =
      write_layouts(tmp, "f2", typed("<f2", h5_float16(), train_bits), int64_labels(kTrain),
                    typed("<f2", h5_float16(), test_bits), int64_labels(kTest));
  for (const auto& path : {f2.npy, f2.h5, f2.chunked}) {
    INFO(path);
    const DataSplits d = load_data(path);
    CHECK(same_bits(all_sample_values(d.train), train_values));
    CHECK(same_bits(all_sample_values(d.test), test_values));
    CHECK(d.info.arrays[2].conversion == "float16 to float32 (exact)");
  }
  // Integers of each width: their values (not divided as uint8 pixels are).
  std::vector<std::int64_t> ints(kTrain * kFeatures);
  for (std::size_t i = 0; i < ints.size(); ++i) ints[i] = std::int64_t(i * 7 % 23) - 11;
  const std::vector<std::int64_t> test_ints(ints.begin(), ints.begin() + kTest * kFeatures);
  const std::vector<float> want(ints.begin(), ints.end()),
      test_want(want.begin(), want.begin() + kTest * kFeatures);
  const auto i2 = write_layouts(
      tmp, "i2", typed("<i2", H5T_STD_I16LE, converted<std::int16_t>(ints)), int64_labels(kTrain),
      typed("<i2", H5T_STD_I16LE, converted<std::int16_t>(test_ints)), int64_labels(kTest));
  const auto i1 = write_layouts(
      tmp, "i1", typed("|i1", H5T_STD_I8LE, converted<std::int8_t>(ints)), int64_labels(kTrain),
      typed("|i1", H5T_STD_I8LE, converted<std::int8_t>(test_ints)), int64_labels(kTest));
  for (const auto& path : {i2.npy, i2.h5, i1.npy, i1.chunked}) {
    INFO(path);
    const DataSplits d = load_data(path);
    CHECK(same_bits(all_sample_values(d.train), want));
    CHECK(same_bits(all_sample_values(d.test), test_want));
    CHECK_THAT(d.info.arrays[0].conversion, Contains("values to float32 (exact)"));
  }
}

TEST_CASE("labels of every integer width and bool, the same classes", "[data][user][dtypes]") {
  TempDir tmp;
  const Typed x_train = typed("<f4", H5T_IEEE_F32LE, as_floats(doubles(kTrain)));
  const Typed x_test = typed("<f4", H5T_IEEE_F32LE, as_floats(doubles(kTest)));
  const auto y_train = labels(kTrain, 3), y_test = labels(kTest, 3);
  const std::vector<std::pair<Typed, Typed>> widths = {
      {typed("|i1", H5T_STD_I8LE, converted<std::int8_t>(y_train)),
       typed("|i1", H5T_STD_I8LE, converted<std::int8_t>(y_test))},
      {typed("|u1", H5T_STD_U8LE, converted<std::uint8_t>(y_train)),
       typed("|u1", H5T_STD_U8LE, converted<std::uint8_t>(y_test))},
      {typed("<i2", H5T_STD_I16LE, converted<std::int16_t>(y_train)),
       typed("<i2", H5T_STD_I16LE, converted<std::int16_t>(y_test))},
      {typed("<u2", H5T_STD_U16LE, converted<std::uint16_t>(y_train)),
       typed("<u2", H5T_STD_U16LE, converted<std::uint16_t>(y_test))},
      {typed("<u4", H5T_STD_U32LE, converted<std::uint32_t>(y_train)),
       typed("<u4", H5T_STD_U32LE, converted<std::uint32_t>(y_test))},
      {typed("<u8", H5T_STD_U64LE, converted<std::uint64_t>(y_train)),
       typed("<u8", H5T_STD_U64LE, converted<std::uint64_t>(y_test))},
  };
  const std::vector<std::int32_t> want_train(y_train.begin(), y_train.end()),
      want_test(y_test.begin(), y_test.end());
  int index = 0;
  for (const auto& [train, test] : widths) {
    const auto l = write_layouts(tmp, std::string("y").append(std::to_string(index++)), x_train,
                                 train, x_test, test);
    for (const auto& path : {l.npy, l.h5, l.chunked}) {
      INFO(path);
      const DataSplits d = load_data(path);
      CHECK(d.info.num_classes == 3);
      CHECK(d.train.labels == want_train);
      CHECK(d.test.labels == want_test);
    }
  }
  // bool: two classes, false 0 and true 1; as h5py stores NumPy's bool in HDF5.
  const std::vector<std::uint8_t> b_train = {1, 0, 0, 1, 1, 0}, b_test = {0, 1, 1, 0};
  const auto b = write_layouts(tmp, "b", x_train, typed("|b1", h5_bool(), b_train), x_test,
                               typed("|b1", h5_bool(), b_test));
  for (const auto& path : {b.npy, b.h5, b.chunked}) {
    INFO(path);
    const DataSplits d = load_data(path);
    CHECK(d.info.num_classes == 2);
    CHECK(d.train.labels == std::vector<std::int32_t>(b_train.begin(), b_train.end()));
    CHECK(d.info.arrays[1].conversion == "bool to int32 class labels (false 0, true 1)");
  }
}

TEST_CASE("float64 and float16 targets are regression data, rounded as samples are",
          "[data][user][dtypes][regression]") {
  TempDir tmp;
  const Typed x_train = typed("<f4", H5T_IEEE_F32LE, as_floats(doubles(kTrain)));
  const Typed x_test = typed("<f4", H5T_IEEE_F32LE, as_floats(doubles(kTest)));
  // y (n, 5): the same doubles, so the rounding of each is known
  const auto l = write_layouts(tmp, "t8", x_train, typed("<f8", H5T_IEEE_F64LE, doubles(kTrain)),
                               x_test, typed("<f8", H5T_IEEE_F64LE, doubles(kTest)), {kFeatures});
  for (const auto& path : {l.npy, l.h5, l.chunked}) {
    INFO(path);
    const DataSplits d = load_data(path);
    CHECK(d.info.num_targets == kFeatures);
    CHECK(same_bits(d.train.targets, as_floats(doubles(kTrain))));
    CHECK(same_bits(d.test.targets, as_floats(doubles(kTest))));
    CHECK(d.info.arrays[3].conversion == "float64 rounded to float32 (to nearest)");
  }
  const std::vector<std::uint16_t> twos(kTrain, 0x4000), halves(kTest, 0x3800);  // 2, 0.5
  const auto h = write_layouts(tmp, "t2", x_train, typed("<f2", h5_float16(), twos), x_test,
                               typed("<f2", h5_float16(), halves));
  const DataSplits d = load_data(h.h5);
  CHECK(d.info.num_targets == 1);
  CHECK(d.train.targets == std::vector<float>(kTrain, 2.0f));
  CHECK(d.test.targets == std::vector<float>(kTest, 0.5f));
}

TEST_CASE("values float32 cannot hold and bool bytes other than 0 and 1 are refused",
          "[data][user][dtypes]") {
  TempDir tmp;
  std::vector<double> huge = doubles(kTrain), nan = doubles(kTrain);
  huge[7] = 1e39;  // sample 1, element 2
  nan[12] = std::nan("");
  std::vector<std::uint16_t> inf_half(kTest * kFeatures, 0x3c00);
  inf_half[19] = 0x7c00;  // sample 3, element 4
  const std::vector<std::uint8_t> bad_bool = {1, 0, 2, 1, 1, 0};
  const std::vector<std::uint64_t> huge_label = {0, 1, 2, 0, 1, ~std::uint64_t{0}};
  const Typed x_test = typed("<f4", H5T_IEEE_F32LE, as_floats(doubles(kTest)));
  struct Case {
    std::string name, array, text;  // array: "train/x", named by the message
    Typed x_train, y_train, x_test;
  };
  const Typed good_x = typed("<f8", H5T_IEEE_F64LE, doubles(kTrain));
  const std::vector<Case> cases = {
      {"huge", "train/x", "1e+39 at sample 1, element 2: x is beyond float32's range",
       typed("<f8", H5T_IEEE_F64LE, huge), int64_labels(kTrain), x_test},
      {"nan", "train/x", "nan at sample 2, element 2: x must be finite",
       typed("<f8", H5T_IEEE_F64LE, nan), int64_labels(kTrain), x_test},
      {"inf16", "test/x", "inf at sample 3, element 4: x must be finite", good_x,
       int64_labels(kTrain), typed("<f2", h5_float16(), inf_half)},
      {"bool", "train/y", "byte 2 at index 2 of a bool array (a bool is 0 or 1)", good_x,
       typed("|b1", h5_bool(), bad_bool), x_test},
      {"label", "train/y", "label 18446744073709551615 at index 5 is out of range", good_x,
       typed("<u8", H5T_STD_U64LE, huge_label), x_test},
  };
  for (const Case& c : cases) {
    const auto l = write_layouts(tmp, c.name, c.x_train, c.y_train, c.x_test,
                                 c.name == "bool"
                                     ? typed("|b1", h5_bool(), std::vector<std::uint8_t>(kTest, 1))
                                     : int64_labels(kTest));
    std::string npy_name = c.array;
    npy_name[npy_name.find('/')] = '_';
    for (const auto& where :
         {(l.npy / (npy_name + ".npy")).string(), l.h5.string() + " /" + c.array,
          l.chunked.string() + " /" + c.array}) {
      INFO(where << ": " << c.text);
      const auto path =
          where.ends_with(".npy") ? l.npy : std::filesystem::path(where.substr(0, where.find(' ')));
      CHECK_THAT(data_error_message([&] { load_data(path); }), Contains(where + ": " + c.text));
    }
  }
  // HDF5 types that are not one of the standard layouts: an integer of 12 bits in 2 bytes, a
  // 16-byte float.
  const hid_t int12 = H5Tcopy(H5T_STD_I16LE);
  H5Tset_precision(int12, 12);
  for (const auto& [type, text] :
       {std::pair{int12, "unsupported dtype (integer of 2 bytes, not a standard layout)"},
        std::pair{H5T_NATIVE_LDOUBLE, "unsupported dtype (float of 16 bytes"}}) {
    INFO(text);
    const std::size_t bytes = H5Tget_size(type);
    write_h5(tmp / "odd.h5",
             {{"/train/x", type, {kTrain, kFeatures}, Bytes(kTrain * kFeatures * bytes)},
              {"/train/y", H5T_STD_I64LE, {kTrain}, int64_labels(kTrain).bytes},
              {"/test/x", H5T_IEEE_F32LE, {kTest, kFeatures}, x_test.bytes},
              {"/test/y", H5T_STD_I64LE, {kTest}, int64_labels(kTest).bytes}});
    CHECK_THAT(data_error_message([&] { load_data(tmp / "odd.h5"); }),
               Contains(std::string("odd.h5 /train/x: ").append(text)));
  }
  H5Tclose(int12);
}

TEST_CASE("half_to_float: every float16 is its IEEE value", "[data][dtypes]") {
  // The value of each of the 65536 patterns from its fields, computed in double.
  for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {
    const int exponent = int(bits >> 10) & 0x1f, mantissa = int(bits & 0x3ff);
    const double sign = (bits & 0x8000) ? -1.0 : 1.0;
    const float got = ringtrain::data::half_to_float(static_cast<std::uint16_t>(bits));
    if (exponent == 31) {
      CHECK((mantissa == 0 ? std::isinf(got) : std::isnan(got)));
      continue;
    }
    const double want = exponent == 0 ? sign * std::ldexp(mantissa, -24)
                                      : sign * std::ldexp(1024 + mantissa, exponent - 25);
    if (double(got) != want) FAIL("float16 bits " << bits << ": " << got << " != " << want);
  }
}
