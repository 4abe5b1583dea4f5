// Dataset: a whole split (train or test) as samples and labels, and the per-step gather.
//
// Loaded once at start-up by every rank (each rank holds the full split: for Fashion-MNIST
// train the 60000 x 784 pixel bytes, 47 MB). In each training step the sampler picks sample
// indices and gather_batch copies those samples into the step's input buffers, allocating
// nothing, on the rank's threads.
// The samples are either floats in memory (`images`) or stay as stored (`mapped`: the IDX
// pixel bytes held in memory, a user dataset's file mapped; float32 is copied as is, uint8
// divided by 255 as it is gathered).
//
//   images:  (n, sample_shape...) float, e.g. (n, 1, rows, cols) in [0, 1], pixel byte / 255
//   labels:  (n) class index in [0, num_classes)       classification; empty for regression
//   targets: (n, num_targets) float, finite            regression; empty for classification
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "ringtrain/framework/data/stored_array.hpp"
#include "ringtrain/framework/tensor.hpp"

namespace ringtrain::data {

// Samples kept as their stored items rather than as floats: sample s is items
// [s * e, (s + 1) * e) from `first`, e = elements per sample, each float32 (copied) or uint8
// (byte / 255, converted when a batch is gathered). The items lie in a mapped file (`file`,
// user data) or in decompressed bytes held in memory (`held`, IDX: a quarter of the floats'
// memory, and no 188 MB of floats to fault in before the first step).
struct MappedSamples {
  std::shared_ptr<const MappedFile> file;                 // keeps the mapping alive
  std::shared_ptr<const std::vector<std::uint8_t>> held;  // or keeps the bytes alive
  std::shared_ptr<const Tensor> floats;  // or floats in memory that views share (holdout.hpp)
  const std::uint8_t* first = nullptr;
  DType dtype = DType::kFloat32;

  bool present() const { return file != nullptr || held != nullptr || floats != nullptr; }
};

struct Dataset {
  Tensor images;  // (n, sample_shape...) floats; empty when `mapped` holds the samples
  std::vector<std::int32_t> labels;  // (n) class labels; empty for regression
  std::vector<float> targets;        // (n, num_targets) regression targets; else empty
  Shape sample_shape;                // e.g. (1, 28, 28) or (features)
  std::size_t num_classes = 0;       // 0 for regression
  std::size_t num_targets = 0;       // k values per sample of a regression y; 0: class labels
  MappedSamples mapped;
  // Samples without y (eval's predictions on data that hold x only): their count, with
  // labels and targets empty; 0 for labelled data.
  std::size_t unlabelled = 0;
  // A view of some of the stored samples (holdout.hpp): sample i is stored sample (*rows)[i]
  // of `images` or `mapped`; labels and targets are the view's own. Null: all, in order.
  std::shared_ptr<const std::vector<std::uint64_t>> rows;
  // XXH3-64 of x's and y's bytes as the file stores them (IDX: the pixel and label bytes
  // after decompression), computed while loading; 0 when loaded without digests.
  std::uint64_t x_xxh3 = 0, y_xxh3 = 0;

  bool regression() const { return num_targets > 0; }
  bool labelled() const { return unlabelled == 0; }
  std::size_t size() const {
    if (!labelled()) return unlabelled;
    return regression() ? targets.size() / num_targets : labels.size();
  }
  // Values the model's output holds per sample: classes (logits) or targets.
  std::size_t outputs() const { return regression() ? num_targets : num_classes; }
  // Floats per sample: 1 * rows * cols (784 for Fashion-MNIST).
  std::size_t sample_elements() const { return size() == 0 ? 0 : num_elements(sample_shape); }
};

// What a valid file pair must contain; the defaults are (Fashion-)MNIST's.
struct IdxSpec {
  std::size_t rows = 28;
  std::size_t cols = 28;
  std::size_t num_classes = 10;
  // --data-memory-limit: the images as floats must fit before they are inflated (0: no check
  // while reading; user_data.hpp checks the whole data after).
  std::uint64_t memory_limit_bytes = 0;
};

enum class Split { kTrain, kTest };

// "train" / "test"
const char* to_string(Split split);

// /usr/share/datasets/fashion-mnist, where the Debian package dataset-fashion-mnist installs.
std::filesystem::path default_data_dir();

// Reads an images file and a labels file (see idx.hpp) and converts them to a Dataset.
// Throws DataError for any defect of either file, and when the two hold different counts.
Dataset load_idx_dataset(const std::filesystem::path& images_file,
                         const std::filesystem::path& labels_file, const IdxSpec& spec = {},
                         bool digest = true);

// Loads a split of Fashion-MNIST from `dir`, which holds the package's files
//   train-images-idx3-ubyte.gz  train-labels-idx1-ubyte.gz     (Split::kTrain, 60000)
//   t10k-images-idx3-ubyte.gz   t10k-labels-idx1-ubyte.gz      (Split::kTest,  10000)
// or the same names without ".gz" (uncompressed), which are used when the .gz is absent.
// Throws DataError: `dir` missing (with the hint to install dataset-fashion-mnist or pass
// --data DIR), a file missing (named), or a malformed file.
Dataset load_fashion_mnist(const std::filesystem::path& dir, Split split, bool digest = true,
                           std::uint64_t memory_limit_bytes = 0);

// Copies the samples `indices` of `dataset`, in order, into the step's buffers:
//   indices:      (k) sample indices, each < dataset.size()
//   images_out:   (k, 1, rows, cols) exactly k * dataset.sample_elements() floats
//   labels_out:   (k)                  classification; not touched for regression
//   targets_out:  (k, num_targets)     regression; not touched for classification
// (neither is touched for unlabelled data, and both may then be empty)
// Allocates nothing. Throws Error on a size mismatch of a buffer it fills, or an index out of
// range.
void gather_batch(const Dataset& dataset, std::span<const std::uint64_t> indices,
                  std::span<float> images_out, std::span<std::int32_t> labels_out,
                  std::span<float> targets_out = {});

// out[i] = bytes[i] / 255 (as float), the conversion of IDX pixels and uint8 user data.
void bytes_to_unit(std::span<const std::uint8_t> bytes, std::span<float> out);

}  // namespace ringtrain::data
