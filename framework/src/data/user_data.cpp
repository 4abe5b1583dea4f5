// `--data PATH` (user_data.hpp): find the layout, read the four arrays, check them against
// each other (lengths, ranks, sample shapes, labels, finite values) and make two Datasets.
//
// Vocabulary: "x" holds the samples and "y" the labels of a split; "stored" is as the file
// holds them (StoredArray), before conversion to floats and int32 labels.
#include "ringtrain/framework/data/user_data.hpp"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <system_error>

#include "ringtrain/framework/data/convert.hpp"
#include "ringtrain/framework/data/hdf5_arrays.hpp"
#include "ringtrain/framework/data/npy.hpp"
#include "ringtrain/framework/error.hpp"

namespace ringtrain::data {
namespace fs = std::filesystem;

namespace {

constexpr const char* kArrayNames[4] = {"train/x", "train/y", "test/x", "test/y"};

[[noreturn]] void fail(const std::string& where, const std::string& problem) {
  throw DataError(fmt::format("{}: {}", where, problem));
}

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  return fmt::format("({})", fmt::join(shape, ", "));
}

// x: any numeric dtype (convert.hpp), rank >= 2, at least one sample.
void check_x(const StoredArray& x) {
  if (x.shape.size() < 2)
    fail(x.where, fmt::format("samples (x) of shape {} have the wrong rank: expected (n, ...) "
                              "with at least two dimensions, e.g. (n, features) or (n, C, H, W)",
                              shape_text(x.shape)));
  if (x.shape[0] == 0) fail(x.where, "no samples (x has 0 rows)");
  for (std::uint64_t d : x.shape)
    if (d == 0) fail(x.where, fmt::format("empty samples: shape {}", shape_text(x.shape)));
}

// Targets per sample of a float y: (n) is 1, (n, k) is k; 0 for integer or bool labels.
std::size_t target_width(const StoredArray& y) {
  if (!is_floating(y.dtype)) return 0;
  return y.shape.size() == 2 ? static_cast<std::size_t>(y.shape[1]) : 1;
}

// y: integer or bool labels of rank 1, or float targets (n) or (n, k); as many rows as x has
// samples.
void check_y(const StoredArray& y, const StoredArray& x) {
  if (is_floating(y.dtype)) {
    if (y.shape.size() != 1 && y.shape.size() != 2)
      fail(y.where, fmt::format("float targets (y) of shape {} have the wrong rank: expected (n) "
                                "or (n, k), k targets per sample (regression)",
                                shape_text(y.shape)));
    if (y.shape.size() == 2 && (y.shape[1] == 0 || y.shape[1] > kMaxTargets))
      fail(y.where, fmt::format("float targets (y) of shape {}: k must be in 1..{}",
                                shape_text(y.shape), kMaxTargets));
  } else if (y.shape.size() != 1) {
    fail(y.where, fmt::format("labels (y) of shape {} have the wrong rank: expected (n), one "
                              "class label per sample",
                              shape_text(y.shape)));
  }
  if (y.shape[0] != x.shape[0])
    fail(y.where, fmt::format("{} labels but {} holds {} samples: x and y lengths differ",
                              y.shape[0], x.where, x.shape[0]));
}

// Both splits' y must be of one kind: class labels in both, or targets of one width in both.
void check_same_task(const StoredArray& train_y, const StoredArray& test_y) {
  const std::size_t train_k = target_width(train_y), test_k = target_width(test_y);
  if (train_k == test_k) return;
  const auto kind = [](std::size_t k) {
    return k == 0 ? std::string("integer class labels")
                  : fmt::format("float regression targets ({} per sample)", k);
  };
  fail(test_y.where, fmt::format("holds {} but {} holds {}: the train and test y must be of one "
                                 "kind (integer labels for classification, float targets of the "
                                 "same width for regression)",
                                 kind(test_k), train_y.where, kind(train_k)));
}

// The labels as int32, each checked to be in [0, classes).
std::vector<std::int32_t> read_labels(const StoredArray& y, std::size_t classes) {
  const std::span<const std::uint8_t> bytes = y.bytes();
  std::vector<std::int32_t> labels(static_cast<std::size_t>(y.shape[0]));
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const std::int64_t label = integer_at(y, bytes, i);
    if (label < 0 || static_cast<std::uint64_t>(label) >= classes)
      fail(y.where, fmt::format("label {} at index {} is out of range: expected 0..{} ({} "
                                "classes)",
                                label, i, classes - 1, classes));
    labels[i] = static_cast<std::int32_t>(label);
  }
  return labels;
}

// The targets (n, k) as float32, each checked finite: one NaN target would poison every
// parameter through the loss.
std::vector<float> read_targets(const StoredArray& y) {
  std::vector<float> targets(static_cast<std::size_t>(y.items()));
  to_float32(y, targets, "y", "target");
  return targets;
}

std::int64_t max_label(const StoredArray& y) {
  const std::span<const std::uint8_t> bytes = y.bytes();
  std::int64_t most = -1;
  for (std::size_t i = 0; i < y.shape[0]; ++i) most = std::max(most, integer_at(y, bytes, i));
  return most;
}

// Bytes of x checked and digested at a time: small enough to stay in cache between the two.
constexpr std::size_t kScanBlockBytes = std::size_t{1} << 16;

// float32 x must hold finite values only: one NaN would poison every parameter. `block`
// holds x's floats from index `first` on.
void check_finite(const StoredArray& x, std::span<const std::uint8_t> block, std::size_t first) {
  const std::size_t per_sample = static_cast<std::size_t>(x.items() / x.shape[0]);
  for (std::size_t k = 0; k < block.size() / sizeof(float); ++k) {
    float v;
    std::memcpy(&v, block.data() + k * sizeof(float), sizeof v);
    if (!std::isfinite(v)) {
      const std::size_t i = first + k;
      fail(x.where, fmt::format("{} at sample {}, element {}: x must be finite", v, i / per_sample,
                                i % per_sample));
    }
  }
}

// One pass over x's stored bytes, block by block: float32 values are checked (check_finite)
// and, with `digest`, the same block goes through XXH3 while it is in cache. Returns the
// XXH3-64 of all the bytes (as XXH3_64bits of them at once), or 0 without `digest`.
std::uint64_t scan_x(const StoredArray& x, bool digest) {
  const bool floats = x.dtype == DType::kFloat32;
  if (!floats && !digest) return 0;
  const std::unique_ptr<XXH3_state_t, XXH_errorcode (*)(XXH3_state_t*)> state(XXH3_createState(),
                                                                              XXH3_freeState);
  if (!state || XXH3_64bits_reset(state.get()) != XXH_OK) throw Error("XXH3: out of memory");
  const std::span<const std::uint8_t> bytes = x.bytes();
  for (std::size_t begin = 0; begin < bytes.size(); begin += kScanBlockBytes) {
    const auto block = bytes.subspan(begin, std::min(kScanBlockBytes, bytes.size() - begin));
    if (floats) check_finite(x, block, begin / sizeof(float));
    if (digest) XXH3_64bits_update(state.get(), block.data(), block.size());
  }
  return digest ? XXH3_64bits_digest(state.get()) : 0;
}

// Every sample of `x` as floats in memory: uint8 / 255, the rest converted (convert.hpp).
// DataError when the floats would not fit in this machine's memory.
Tensor samples_in_memory(const StoredArray& x, const Shape& sample_shape) {
  checked_stored_bytes(x.shape, sizeof(float), memory_bytes(), x.where,
                       "this machine's memory (as floats in memory)");
  Shape shape = sample_shape;
  shape.insert(shape.begin(), static_cast<std::size_t>(x.shape[0]));
  Tensor images(shape);
  const std::span<const std::uint8_t> bytes = x.bytes();
  if (x.dtype == DType::kUint8)
    bytes_to_unit(bytes, images.span());
  else
    to_float32(x, images.span(), "x", "element");
  return images;
}

// x's samples into `dataset`: kept where they lie (mapped) or converted into memory.
void set_samples(Dataset& dataset, const StoredArray& x, const LoadOptions& options) {
  dataset.sample_shape.assign(x.shape.begin() + 1, x.shape.end());
  if (x.mapped() && options.map && samples_kept(x.dtype))
    dataset.mapped = {.file = x.mapping,
                      .held = nullptr,
                      .floats = nullptr,
                      .first = x.bytes().data(),
                      .dtype = x.dtype};
  else
    dataset.images = samples_in_memory(x, dataset.sample_shape);
}

}  // namespace

ArrayFacts array_facts(const std::string& name, const StoredArray& a, bool samples, bool map) {
  const ArrayRole role = samples                ? ArrayRole::kSamples
                         : is_floating(a.dtype) ? ArrayRole::kTargets
                                                : ArrayRole::kLabels;
  return {name,
          a.where,
          a.dtype,
          a.shape,
          samples && map && a.mapped() && samples_kept(a.dtype),
          0,
          conversion_of(a.dtype, role)};
}

// Samples not mapped, as floats, and all labels, as int32 (4 bytes an item either way).
void check_memory_limit(const DataInfo& info, const LoadOptions& options) {
  const bool flag = options.memory_limit_bytes > 0;
  const std::uint64_t limit = flag ? options.memory_limit_bytes : memory_bytes();
  std::uint64_t total = 0;
  std::string parts;
  for (const ArrayFacts& a : info.arrays) {
    if (a.mapped) continue;
    // each below 2^61 (or it throws): the sum of four stays below 2^64
    const std::uint64_t bytes =
        checked_stored_bytes(a.shape, 4, UINT64_MAX / 8, a.where, "2^61 bytes");
    total += bytes;
    parts += fmt::format("{}{} {} bytes", parts.empty() ? "" : ", ", a.name, bytes);
  }
  if (total <= limit) return;
  fail(info.path,
       fmt::format("the data would hold {} bytes in memory ({}), more than {} {} bytes; {}", total,
                   parts, flag ? "--data-memory-limit" : "this machine's memory of", limit,
                   info.layout == DataLayout::kIdx
                       ? "IDX files are compressed and read into memory: store the data as HDF5 "
                         "or .npy to map it"
                       : "samples are mapped only as float32 or uint8 from contiguous, unfiltered "
                         "HDF5 datasets and .npy files: store x that way"));
}

namespace {

// The four arrays (train x, y, test x, y) of an HDF5 file or a .npy folder.
std::vector<StoredArray> read_arrays(const fs::path& path, DataLayout layout,
                                     const LoadOptions& options,
                                     std::optional<std::int64_t>* classes) {
  if (layout == DataLayout::kHdf5) {
    Hdf5Arrays h5 = read_hdf5_arrays(path, {"/train/x", "/train/y", "/test/x", "/test/y"},
                                     options.memory_limit_bytes);
    *classes = h5.classes;
    return std::move(h5.arrays);
  }
  std::vector<StoredArray> arrays;
  for (const char* name : {"train_x.npy", "train_y.npy", "test_x.npy", "test_y.npy"}) {
    std::error_code ec;
    if (!fs::is_regular_file(path / name, ec))
      fail((path / name).string(),
           "file not found (a .npy dataset folder holds train_x.npy, "
           "train_y.npy, test_x.npy and test_y.npy)");
    arrays.push_back(read_npy(path / name));
  }
  return arrays;
}

// max label + 1 over both splits, or the declared count when it says more. A declared count
// below max label + 1 is reported by read_labels as the label that exceeds it.
std::size_t class_count(const StoredArray& train_y, const StoredArray& test_y,
                        std::optional<std::int64_t> declared, const std::string& path) {
  if (declared && *declared > std::int64_t(kMaxClasses))
    fail(path + " attribute classes",
         fmt::format("{} classes is more than the {} supported", *declared, kMaxClasses));
  for (const StoredArray* y : {&train_y, &test_y}) {
    const std::int64_t most = max_label(*y);
    if (most >= std::int64_t(kMaxClasses))
      fail(y->where, fmt::format("label {} would make more than the {} classes supported", most,
                                 kMaxClasses));
  }
  const std::int64_t most = std::max(max_label(train_y), max_label(test_y));
  return static_cast<std::size_t>(std::max<std::int64_t>(declared.value_or(most + 1), 1));
}

DataSplits load_user_data(const fs::path& path, DataLayout layout, const LoadOptions& options) {
  std::optional<std::int64_t> declared;
  const std::vector<StoredArray> a = read_arrays(path, layout, options, &declared);
  check_x(a[0]);
  check_x(a[2]);
  check_y(a[1], a[0]);
  check_y(a[3], a[2]);
  check_same_task(a[1], a[3]);
  if (!std::equal(a[0].shape.begin() + 1, a[0].shape.end(), a[2].shape.begin() + 1,
                  a[2].shape.end()))
    fail(a[2].where, fmt::format("test samples of shape {} differ from the train samples {} of {}",
                                 shape_text(a[2].shape), shape_text(a[0].shape), a[0].where));
  DataSplits splits;
  splits.info.path = path.string();
  splits.info.layout = layout;
  splits.info.num_targets = target_width(a[1]);
  if (!splits.info.regression())
    splits.info.num_classes = class_count(a[1], a[3], declared, path.string());
  // Samples that need no conversion stay mapped; labels are always converted into memory.
  for (std::size_t i = 0; i < 4; ++i)
    splits.info.arrays.push_back(array_facts(kArrayNames[i], a[i], i % 2 == 0, options.map));
  check_memory_limit(splits.info, options);
  splits.train = make_dataset(a[0], a[1], splits.info.num_classes, options);
  splits.test = make_dataset(a[2], a[3], splits.info.num_classes, options);
  splits.info.sample_shape = splits.train.sample_shape;
  for (std::size_t i = 0; i < 4; ++i) {
    const Dataset& d = i < 2 ? splits.train : splits.test;
    splits.info.arrays[i].xxh3 = i % 2 ? d.y_xxh3 : d.x_xxh3;
  }
  if (options.digest) splits.info.digest = data_digest(splits.info.arrays);
  return splits;
}

DataSplits load_idx(const fs::path& dir, const LoadOptions& options) {
  DataSplits splits;
  splits.train = load_fashion_mnist(dir, Split::kTrain, options.digest, options.memory_limit_bytes);
  splits.test = load_fashion_mnist(dir, Split::kTest, options.digest, options.memory_limit_bytes);
  splits.info.path = dir.string();
  splits.info.layout = DataLayout::kIdx;
  splits.info.sample_shape = splits.train.sample_shape;
  splits.info.num_classes = splits.train.num_classes;
  for (std::size_t i = 0; i < 4; ++i) {
    const Dataset& d = i < 2 ? splits.train : splits.test;
    std::vector<std::uint64_t> shape = {d.size()};
    if (i % 2 == 0) shape.insert(shape.end(), d.sample_shape.begin(), d.sample_shape.end());
    splits.info.arrays.push_back(
        {kArrayNames[i], dir.string(), DType::kUint8, shape, false, i % 2 ? d.y_xxh3 : d.x_xxh3,
         conversion_of(DType::kUint8, i % 2 ? ArrayRole::kLabels : ArrayRole::kSamples)});
  }
  // Each images file was checked against the limit before it was inflated; this checks the
  // four arrays together.
  check_memory_limit(splits.info, options);
  if (options.digest) splits.info.digest = data_digest(splits.info.arrays);
  return splits;
}

}  // namespace

const char* to_string(DataLayout layout) {
  switch (layout) {
    case DataLayout::kHdf5:
      return "hdf5";
    case DataLayout::kNpy:
      return "npy";
    default:
      return "idx";
  }
}

Dataset make_dataset(const StoredArray& x, const StoredArray& y, std::size_t classes,
                     const LoadOptions& options) {
  check_x(x);
  check_y(y, x);
  Dataset dataset;
  dataset.x_xxh3 = scan_x(x, options.digest);
  if (options.digest) dataset.y_xxh3 = XXH3_64bits(y.bytes().data(), y.bytes().size());
  dataset.num_targets = target_width(y);
  if (dataset.regression()) {
    dataset.targets = read_targets(y);
  } else {
    dataset.labels = read_labels(y, classes);
    dataset.num_classes = classes;
  }
  set_samples(dataset, x, options);
  return dataset;
}

Dataset make_unlabelled_dataset(const StoredArray& x, const LoadOptions& options) {
  check_x(x);
  Dataset dataset;
  dataset.x_xxh3 = scan_x(x, options.digest);
  dataset.unlabelled = static_cast<std::size_t>(x.shape[0]);
  set_samples(dataset, x, options);
  return dataset;
}

std::size_t label_count(const StoredArray& y) {
  return static_cast<std::size_t>(max_label(y) + 1);
}

DataSplits load_data(const fs::path& path, const LoadOptions& options) {
  const fs::path where = path.empty() ? default_data_dir() : path;
  std::error_code ec;
  if (fs::is_regular_file(where, ec)) return load_user_data(where, DataLayout::kHdf5, options);
  const fs::path extension = where.extension();
  if (!fs::exists(where, ec) && (extension == ".h5" || extension == ".hdf5"))
    fail(where.string(),
         "file not found (--data takes an HDF5 file, a folder of .npy files or "
         "a folder of IDX files)");
  if (fs::is_directory(where, ec) && fs::exists(where / "train_x.npy", ec))
    return load_user_data(where, DataLayout::kNpy, options);
  return load_idx(where, options);
}

std::string data_digest(const std::vector<ArrayFacts>& arrays) {
  std::string text;  // "train/x float32 (301, 6) 0123456789abcdef\n" per array
  for (const ArrayFacts& a : arrays)
    text +=
        fmt::format("{} {} {} {:016x}\n", a.name, to_string(a.dtype), shape_text(a.shape), a.xxh3);
  return fmt::format("{:016x}", XXH3_64bits(text.data(), text.size()));
}

}  // namespace ringtrain::data
