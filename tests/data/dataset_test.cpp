// Dataset: the Fashion-MNIST loader (file names per split, missing directory or file), the
// per-step gather, and the real dataset from the Debian package when it is installed.
#include "ringtrain/framework/data/dataset.hpp"

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "idx_files.hpp"

using Catch::Matchers::Contains;
using ringtrain::data::Dataset;
using ringtrain::data::default_data_dir;
using ringtrain::data::gather_batch;
using ringtrain::data::load_fashion_mnist;
using ringtrain::data::load_idx_dataset;
using ringtrain::data::Split;
using namespace ringtrain::test;

namespace {

constexpr std::uint32_t kImages = 0x00000803;
constexpr std::uint32_t kLabels = 0x00000801;

// A directory laid out like the package's, with n_train and n_test 28x28 images; train labels
// are all 1 and test labels all 2, so a mixed-up split shows.
void write_fake_fashion_mnist(const std::filesystem::path& dir, std::uint32_t n_train,
                              std::uint32_t n_test, const char* suffix) {
  const std::string s = suffix;
  write_idx(dir / ("train-images-idx3-ubyte" + s),
            idx_bytes(kImages, {n_train, 28, 28}, image_body(n_train, 28, 28)));
  write_idx(dir / ("train-labels-idx1-ubyte" + s),
            idx_bytes(kLabels, {n_train}, Bytes(n_train, 1)));
  write_idx(dir / ("t10k-images-idx3-ubyte" + s),
            idx_bytes(kImages, {n_test, 28, 28}, image_body(n_test, 28, 28)));
  write_idx(dir / ("t10k-labels-idx1-ubyte" + s), idx_bytes(kLabels, {n_test}, Bytes(n_test, 2)));
}

}  // namespace

TEST_CASE("load_fashion_mnist reads each split from the package's file names", "[data]") {
  for (const char* suffix : {".gz", ""}) {
    TempDir dir;
    write_fake_fashion_mnist(dir.path(), 3, 2, suffix);
    const Dataset train = load_fashion_mnist(dir.path(), Split::kTrain);
    const Dataset test = load_fashion_mnist(dir.path(), Split::kTest);
    REQUIRE(train.size() == 3);
    REQUIRE(test.size() == 2);
    CHECK(train.sample_shape == ringtrain::Shape{1, 28, 28});
    CHECK(test.sample_shape == ringtrain::Shape{1, 28, 28});
    CHECK(std::all_of(train.labels.begin(), train.labels.end(), [](int l) { return l == 1; }));
    CHECK(std::all_of(test.labels.begin(), test.labels.end(), [](int l) { return l == 2; }));
  }
}

TEST_CASE("load_fashion_mnist: missing directory or file", "[data]") {
  TempDir dir;
  const auto missing = dir / "no-such-dir";
  const auto msg = data_error_message([&] { load_fashion_mnist(missing, Split::kTrain); });
  CHECK_THAT(msg, Contains(missing.string()) && Contains("dataset-fashion-mnist") &&
                      Contains("apt-get install") && Contains("--data DIR"));

  write_fake_fashion_mnist(dir.path(), 3, 2, ".gz");
  std::filesystem::remove(dir / "t10k-labels-idx1-ubyte.gz");
  CHECK(load_fashion_mnist(dir.path(), Split::kTrain).size() == 3);
  CHECK_THAT(data_error_message([&] { load_fashion_mnist(dir.path(), Split::kTest); }),
             Contains("t10k-labels-idx1-ubyte.gz") && Contains("not found"));
}

TEST_CASE("default_data_dir is where the Debian package installs", "[data]") {
  CHECK(default_data_dir() == std::filesystem::path("/usr/share/datasets/fashion-mnist"));
}

TEST_CASE("gather_batch copies the chosen samples in order", "[data]") {
  TempDir dir;
  const std::uint32_t n = 6, rows = 2, cols = 3;
  const Bytes labels = {5, 4, 3, 2, 1, 0};
  write_idx(dir / "i.gz", idx_bytes(kImages, {n, rows, cols}, image_body(n, rows, cols)));
  write_idx(dir / "l.gz", idx_bytes(kLabels, {n}, labels));
  const Dataset dataset = load_idx_dataset(dir / "i.gz", dir / "l.gz", {rows, cols, 10});
  const std::size_t per = rows * cols;

  const std::vector<float> all = all_sample_values(dataset);
  const Bytes body = image_body(n, rows, cols);
  for (std::size_t i = 0; i < body.size(); ++i) REQUIRE(all[i] == body[i] / 255.0f);
  const std::vector<std::uint64_t> indices = {4, 0, 4, 5, 2};  // repeats are allowed
  std::vector<float> images(indices.size() * per, -1.0f);
  std::vector<std::int32_t> out_labels(indices.size(), -1);
  gather_batch(dataset, indices, images, out_labels);
  for (std::size_t i = 0; i < indices.size(); ++i) {
    CHECK(out_labels[i] == labels[indices[i]]);
    for (std::size_t p = 0; p < per; ++p) REQUIRE(images[i * per + p] == all[indices[i] * per + p]);
  }

  gather_batch(dataset, {}, std::span<float>(), std::span<std::int32_t>());  // empty slice

  const std::vector<std::uint64_t> bad = {1, 6};
  std::vector<float> two_images(2 * per);
  std::vector<std::int32_t> two_labels(2);
  CHECK_THROWS_AS(gather_batch(dataset, bad, two_images, two_labels), ringtrain::Error);
  CHECK_THROWS_AS(gather_batch(dataset, std::span(indices).first(2),
                               std::span(two_images).first(per), two_labels),
                  ringtrain::Error);
}

TEST_CASE("the real Fashion-MNIST from the Debian package", "[data][fashion]") {
  const auto dir = default_data_dir();
  if (!std::filesystem::is_directory(dir)) {
    WARN("skipped: " << dir << " not found (apt-get install dataset-fashion-mnist)");
    return;
  }
  // Fashion-MNIST: 60000 train and 10000 test images, 10 classes of equal size.
  const std::array<std::pair<Split, std::size_t>, 2> splits = {
      {{Split::kTrain, 60000}, {Split::kTest, 10000}}};
  for (const auto& [split, expected] : splits) {
    INFO("split " << ringtrain::data::to_string(split));
    const Dataset d = load_fashion_mnist(dir, split);
    REQUIRE(d.size() == expected);
    CHECK(d.sample_shape == ringtrain::Shape{1, 28, 28});
    std::array<std::size_t, 10> per_class{};
    for (std::int32_t label : d.labels) {
      REQUIRE(label >= 0);
      REQUIRE(label < 10);
      per_class[static_cast<std::size_t>(label)] += 1;
    }
    for (std::size_t count : per_class) CHECK(count == expected / 10);
    const std::vector<float> values = all_sample_values(d);
    const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
    CHECK(*lo == 0.0f);  // background pixels
    CHECK(*hi == 1.0f);  // byte 255 maps to exactly 1
  }
}
