// Dataset: a whole split (train or test) in memory as floats, and the per-step gather.
//
// Loaded once at start-up by every rank (each rank holds the full split: 60000 x 784 floats
// = 188 MB for Fashion-MNIST train). In each training step the sampler picks sample indices
// and gather_batch copies those samples into the step's input buffers, allocating nothing.
//
//   images: (n, 1, rows, cols) float in [0, 1], pixel byte / 255
//   labels: (n) class index in [0, num_classes)
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "ringtrain/framework/tensor.hpp"

namespace ringtrain::data {

struct Dataset {
  Tensor images;                     // (n, 1, rows, cols) float in [0, 1]
  std::vector<std::int32_t> labels;  // (n)

  std::size_t size() const { return labels.size(); }
  // Floats per sample: 1 * rows * cols (784 for Fashion-MNIST).
  std::size_t sample_elements() const { return size() == 0 ? 0 : images.size() / size(); }
};

// What a valid file pair must contain; the defaults are (Fashion-)MNIST's.
struct IdxSpec {
  std::size_t rows = 28;
  std::size_t cols = 28;
  std::size_t num_classes = 10;
};

enum class Split { kTrain, kTest };

// "train" / "test"
const char* to_string(Split split);

// /usr/share/datasets/fashion-mnist, where the Debian package dataset-fashion-mnist installs.
std::filesystem::path default_data_dir();

// Reads an images file and a labels file (see idx.hpp) and converts them to a Dataset.
// Throws DataError for any defect of either file, and when the two hold different counts.
Dataset load_idx_dataset(const std::filesystem::path& images_file,
                         const std::filesystem::path& labels_file, const IdxSpec& spec = {});

// Loads a split of Fashion-MNIST from `dir`, which holds the package's files
//   train-images-idx3-ubyte.gz  train-labels-idx1-ubyte.gz     (Split::kTrain, 60000)
//   t10k-images-idx3-ubyte.gz   t10k-labels-idx1-ubyte.gz      (Split::kTest,  10000)
// or the same names without ".gz" (uncompressed), which are used when the .gz is absent.
// Throws DataError: `dir` missing (with the hint to install dataset-fashion-mnist or pass
// --data DIR), a file missing (named), or a malformed file.
Dataset load_fashion_mnist(const std::filesystem::path& dir, Split split);

// Copies the samples `indices` of `dataset`, in order, into the step's buffers:
//   indices:     (k) sample indices, each < dataset.size()
//   images_out:  (k, 1, rows, cols) exactly k * dataset.sample_elements() floats
//   labels_out:  (k)
// Allocates nothing. Throws Error on a size mismatch or an index out of range.
void gather_batch(const Dataset& dataset, std::span<const std::uint64_t> indices,
                  std::span<float> images_out, std::span<std::int32_t> labels_out);

}  // namespace ringtrain::data
