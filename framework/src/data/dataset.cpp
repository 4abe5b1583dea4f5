// Dataset loading (IDX: the pixel bytes are kept; each batch converts them to floats in [0, 1])
//
// Loading happens once before the first step; gather_batch runs in every step, after the
// sampler has chosen this rank's sample indices and before the model's forward pass.
#include "ringtrain/framework/data/dataset.hpp"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <string>
#include <system_error>

#include "ringtrain/framework/blas.hpp"
#include "ringtrain/framework/data/idx.hpp"
#include "ringtrain/framework/error.hpp"

namespace ringtrain::data {
namespace fs = std::filesystem;

namespace {

struct SplitFiles {
  const char* images;
  const char* labels;
};

SplitFiles split_files(Split split) {
  if (split == Split::kTrain) return {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"};
  return {"t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};
}

// dir/name.gz if present, else dir/name without .gz if present, else DataError naming the .gz.
fs::path find_file(const fs::path& dir, const char* gz_name, Split split) {
  std::error_code ec;
  const fs::path gz = dir / gz_name;
  if (fs::exists(gz, ec)) return gz;
  fs::path plain = gz;
  plain.replace_extension();
  if (fs::exists(plain, ec)) return plain;
  throw DataError(fmt::format(
      "{}: file not found: the Fashion-MNIST {} split needs {} (or {} uncompressed) in {}; "
      "reinstall the Debian package dataset-fashion-mnist or pass --data DIR",
      gz.string(), to_string(split), gz_name, plain.filename().string(), dir.string()));
}

// pixel byte b -> b / 255, looked up rather than divided 47 million times.
const std::array<float, 256>& unit_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (std::size_t b = 0; b < t.size(); ++b) t[b] = static_cast<float>(b) / 255.0f;
    return t;
  }();
  return table;
}

// Copies sample s of `dataset` (in memory or mapped) into `out` (sample_elements() floats).
void copy_sample(const Dataset& dataset, std::uint64_t s, std::span<float> out) {
  const std::size_t per_sample = out.size();
  if (!dataset.mapped.present()) {
    std::copy_n(dataset.images.data() + s * per_sample, per_sample, out.begin());
  } else if (dataset.mapped.dtype == DType::kUint8) {
    bytes_to_unit({dataset.mapped.first + s * per_sample, per_sample}, out);
  } else {
    std::memcpy(out.data(), dataset.mapped.first + s * per_sample * sizeof(float),
                per_sample * sizeof(float));
  }
}

const std::uint8_t* sample_address(const Dataset& dataset, std::uint64_t s) {
  const std::size_t per_sample = dataset.sample_elements();
  if (!dataset.mapped.present())
    return reinterpret_cast<const std::uint8_t*>(dataset.images.data() + s * per_sample);
  return dataset.mapped.first + s * per_sample * item_bytes(dataset.mapped.dtype);
}

}  // namespace

void bytes_to_unit(std::span<const std::uint8_t> bytes, std::span<float> out) {
  const std::array<float, 256>& to_unit = unit_table();
  std::transform(bytes.begin(), bytes.end(), out.begin(),
                 [&to_unit](std::uint8_t b) { return to_unit[b]; });
}

const char* to_string(Split split) {
  return split == Split::kTrain ? "train" : "test";
}

fs::path default_data_dir() {
  return "/usr/share/datasets/fashion-mnist";
}

Dataset load_idx_dataset(const fs::path& images_file, const fs::path& labels_file,
                         const IdxSpec& spec, bool digest) {
  IdxImages images = read_idx_images(images_file, spec.rows, spec.cols, spec.memory_limit_bytes);
  const std::vector<std::uint8_t> labels = read_idx_labels(labels_file, spec.num_classes);
  if (images.count != labels.size())
    throw DataError(
        fmt::format("{} holds {} images but {} holds {} labels; image/label count "
                    "mismatch (the two files must come from the same split)",
                    images_file.string(), images.count, labels_file.string(), labels.size()));

  Dataset dataset;
  if (digest) {
    dataset.x_xxh3 = XXH3_64bits(images.pixels.data(), images.pixels.size());
    dataset.y_xxh3 = XXH3_64bits(labels.data(), labels.size());
  }
  // The pixel bytes stay bytes; gather_batch converts the samples of each batch.
  auto held = std::make_shared<const std::vector<std::uint8_t>>(std::move(images.pixels));
  dataset.mapped = {.file = nullptr,
                    .held = held,
                    .floats = nullptr,
                    .first = held->data(),
                    .dtype = DType::kUint8};
  dataset.labels.assign(labels.begin(), labels.end());
  dataset.sample_shape = {1, images.rows, images.cols};
  dataset.num_classes = spec.num_classes;
  return dataset;
}

Dataset load_fashion_mnist(const fs::path& dir, Split split, bool digest,
                           std::uint64_t memory_limit_bytes) {
  std::error_code ec;
  if (!fs::exists(dir, ec))
    throw DataError(fmt::format(
        "Fashion-MNIST directory {} does not exist: install the Debian package "
        "dataset-fashion-mnist (apt-get install dataset-fashion-mnist) or pass --data DIR",
        dir.string()));
  if (!fs::is_directory(dir, ec))
    throw DataError(fmt::format(
        "Fashion-MNIST directory {} is not a directory: pass --data DIR with the folder that "
        "holds the IDX files (the Debian package dataset-fashion-mnist installs them in {})",
        dir.string(), default_data_dir().string()));
  const SplitFiles names = split_files(split);
  const fs::path images_file = find_file(dir, names.images, split);
  const fs::path labels_file = find_file(dir, names.labels, split);
  return load_idx_dataset(images_file, labels_file,
                          IdxSpec{.memory_limit_bytes = memory_limit_bytes}, digest);
}

void gather_batch(const Dataset& dataset, std::span<const std::uint64_t> indices,
                  std::span<float> images_out, std::span<std::int32_t> labels_out,
                  std::span<float> targets_out) {
  const std::size_t k = indices.size();
  const std::size_t per_sample = dataset.sample_elements();
  const std::size_t width = dataset.num_targets;  // targets per sample (regression)
  const bool labels_fit = dataset.regression() || !dataset.labelled() || labels_out.size() == k;
  const bool targets_fit = !dataset.regression() || targets_out.size() == k * width;
  if (images_out.size() != k * per_sample || !labels_fit || !targets_fit)
    throw Error(
        fmt::format("gather_batch: {} indices need {} image floats and {} {}, got "
                    "buffers of {} and {}",
                    k, k * per_sample, dataset.regression() ? k * width : k,
                    dataset.regression() ? "target floats" : "labels", images_out.size(),
                    dataset.regression() ? targets_out.size() : labels_out.size()));
  for (std::size_t i = 0; i < k; ++i)
    if (indices[i] >= dataset.size())
      throw Error(
          fmt::format("gather_batch: sample index {} at position {} is out of range for "
                      "a dataset of {} samples",
                      indices[i], i, dataset.size()));
  const std::size_t sample_bytes =
      per_sample * (dataset.mapped.present() ? item_bytes(dataset.mapped.dtype) : sizeof(float));
  // Positions [begin, end) of the batch; the ranges run on the rank's threads.
  auto gather_range = [&](std::size_t begin, std::size_t end) {
    // The samples are scattered over the dataset: ask for all their cache lines first, so
    // the misses overlap instead of waiting one image at a time.
    const auto stored = [&](std::uint64_t s) { return dataset.rows ? (*dataset.rows)[s] : s; };
    for (std::size_t i = begin; i < end; ++i)
      for (std::size_t b = 0; b < sample_bytes; b += 64)
        __builtin_prefetch(sample_address(dataset, stored(indices[i])) + b);
    for (std::size_t i = begin; i < end; ++i) {
      const std::uint64_t s = indices[i];
      // stored sample r occupies items [r * per_sample, (r + 1) * per_sample) of the samples
      copy_sample(dataset, stored(s), images_out.subspan(i * per_sample, per_sample));
      if (dataset.regression())  // targets s: [s * width, (s + 1) * width)
        std::copy_n(dataset.targets.begin() + std::ptrdiff_t(s * width), width,
                    targets_out.begin() + std::ptrdiff_t(i * width));
      else if (dataset.labelled())
        labels_out[i] = dataset.labels[s];
    }
  };
  constexpr std::size_t kMinSamplesPerThread = 32;
  if (!dataset.mapped.file) return blas::parallel_ranges(k, kMinSamplesPerThread, gather_range);
  // A mapped file that shrank raises SIGBUS on a read past its new end: each range copies
  // under read_mapped, and a failed one is reported here, after every thread is done.
  std::atomic<bool> failed = false;
  auto guarded_range = [&](std::size_t begin, std::size_t end) {
    if (!read_mapped([&] { gather_range(begin, end); })) failed = true;
  };
  blas::parallel_ranges(k, kMinSamplesPerThread, guarded_range);
  if (failed) throw DataError(dataset.mapped.file->shrank_message());
}

}  // namespace ringtrain::data
