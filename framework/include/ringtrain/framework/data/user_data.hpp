// `--data PATH`: both splits of a dataset in any of its three layouts, checked and described.
//
// Sits before training starts: every rank loads the same PATH, then the model is built for the
// data's sample shape and class count, and the manifest records DataInfo.
//
//   idx    a folder of Fashion-MNIST's IDX files (dataset.hpp), the default
//   hdf5   one HDF5 file with /train/x /train/y /test/x /test/y (hdf5_arrays.hpp)
//   npy    a folder with train_x.npy train_y.npy test_x.npy test_y.npy (npy.hpp)
//
// x: float32 used as is, uint8 divided by 255, any other numeric dtype converted to float32
// (convert.hpp); shape (n, ...), e.g. (n, features) or (n, channels, height, width); the same
// sample shape in both splits.
// y: class labels (n) of any integer dtype or bool; classes = max label + 1 over both splits,
// or the HDF5 root attribute `classes` when it says more. Or regression targets: float16, 32
// or 64 of shape (n) or (n, k), finite, k the same in both splits (y of shape (n) is k = 1).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "ringtrain/framework/data/dataset.hpp"
#include "ringtrain/framework/data/stored_array.hpp"

namespace ringtrain::data {

enum class DataLayout { kIdx, kHdf5, kNpy };

// "idx", "hdf5", "npy"
const char* to_string(DataLayout layout);

inline constexpr std::size_t kMaxClasses = 65536;
inline constexpr std::size_t kMaxTargets = 65536;  // k of a regression y (n, k)

// One array as the manifest records it.
struct ArrayFacts {
  std::string name;   // "train/x", "train/y", "test/x", "test/y"
  std::string where;  // its file (and dataset)
  DType dtype = DType::kUint8;
  std::vector<std::uint64_t> shape;
  bool mapped = false;     // samples read where they lie in the file (labels are always copied)
  std::uint64_t xxh3 = 0;  // XXH3-64 of the stored bytes (dataset.hpp: Dataset::x_xxh3)
  std::string conversion;  // convert.hpp: conversion_of; "" when used as stored
};

struct DataInfo {
  std::string path;
  DataLayout layout = DataLayout::kIdx;
  Shape sample_shape;
  std::size_t num_classes = 0;     // 0 for regression
  std::size_t num_targets = 0;     // k of a float y (n) or (n, k); 0: class labels
  std::vector<ArrayFacts> arrays;  // train/x, train/y, test/x, test/y
  // The data's digest: XXH3-64 (16 hex digits) over each array's name, dtype, shape and
  // xxh3. The same values give the same digest whatever the layout or path that holds them;
  // "" when loaded without digests.
  std::string digest;

  bool regression() const { return num_targets > 0; }
  // Values the model's output holds per sample: classes (logits) or regression targets.
  std::size_t outputs() const { return regression() ? num_targets : num_classes; }
};

struct DataSplits {
  Dataset train, test;
  Dataset validation;  // held out of train (holdout.hpp: --validation-fraction); empty: none
  DataInfo info;
};

struct LoadOptions {
  bool map = true;  // false: copy mapped samples into memory too (tests compare the two)
  // false: no digests (bench_data_load measures what they cost). They are computed in the
  // pass that checks x's values, block by block, so each byte is read from memory once.
  bool digest = true;
  // Bytes the data may hold in memory: samples that are not mapped (as floats: converted
  // samples, convert.hpp, count) and every split's labels (int32); mapped samples live in the
  // page cache and do not count. A
  // chunked or compressed dataset is read into memory, so one larger than this is refused
  // before it is read (read_hdf5_arrays), and data over it are refused. 0: this machine's
  // memory (memory_bytes()).
  std::uint64_t memory_limit_bytes = 0;
};

// The digest of DataInfo::digest over `arrays`.
std::string data_digest(const std::vector<ArrayFacts>& arrays);

// Loads both splits of `path` (empty: the Debian package's Fashion-MNIST folder).
// Throws DataError naming the file (and dataset) for: a missing path or file, x and y
// lengths that differ, a label < 0 or >= classes, more than kMaxClasses classes, NaN or Inf
// in x or in float targets, a float64 value beyond float32's range, a bool byte not 0 or 1, float
// targets of rank > 2 or more than kMaxTargets per sample, one split with labels and the other with
// targets (or targets of another width), an unsupported dtype, a big-endian array, a truncated file
// or a dataset whose stored size exceeds the file, Fortran order, wrong ranks, train and test
// samples of different shapes, data that would hold more than options.memory_limit_bytes in memory
// (naming the limit and what does not fit).
DataSplits load_data(const std::filesystem::path& path, const LoadOptions& options = {});

// Turns a split's stored x and y into a Dataset of `classes` classes (labels checked), or, for
// a float y, of regression targets (checked finite; `classes` is not used).
// Throws DataError as load_data.
Dataset make_dataset(const StoredArray& x, const StoredArray& y, std::size_t classes,
                     const LoadOptions& options = {});
// The samples of `x` without y (Dataset::unlabelled). Throws DataError as load_data.
Dataset make_unlabelled_dataset(const StoredArray& x, const LoadOptions& options = {});
// The largest label of integer or bool labels `y`, plus one.
std::size_t label_count(const StoredArray& y);

// The facts of one stored array as the manifest records them; `samples` for an x, else y
// (labels or targets); mapped when it is samples that need no conversion and `map`.
ArrayFacts array_facts(const std::string& name, const StoredArray& a, bool samples, bool map);
// Refuses data whose arrays would hold more than options.memory_limit_bytes (0: this
// machine's memory) in memory: samples not mapped, as floats, and labels. Throws DataError.
void check_memory_limit(const DataInfo& info, const LoadOptions& options);

}  // namespace ringtrain::data
