// IDX reader: valid files round trip (gzip and plain), and every kind of malformed file is a
// DataError whose message names the file and the problem.
#include "ringtrain/framework/data/idx.hpp"

#include <catch2/catch.hpp>

#include "idx_files.hpp"
#include "ringtrain/framework/data/dataset.hpp"

using Catch::Matchers::Contains;
using ringtrain::data::IdxSpec;
using ringtrain::data::load_idx_dataset;
using ringtrain::data::read_idx_images;
using ringtrain::data::read_idx_labels;
using namespace ringtrain::test;

namespace {

constexpr std::uint32_t kImages = 0x00000803;
constexpr std::uint32_t kLabels = 0x00000801;

}  // namespace

TEST_CASE("IDX images and labels round trip, gzip and plain", "[data][idx]") {
  TempDir dir;
  const std::uint32_t n = 5, rows = 3, cols = 4;
  const Bytes pixels = image_body(n, rows, cols);
  const Bytes labels = {7, 0, 9, 3, 3};
  for (const char* suffix : {".gz", ""}) {
    SECTION(std::string("suffix '") + suffix + "'") {
      const auto images_file = dir / (std::string("images-idx3-ubyte") + suffix);
      const auto labels_file = dir / (std::string("labels-idx1-ubyte") + suffix);
      write_idx(images_file, idx_bytes(kImages, {n, rows, cols}, pixels));
      write_idx(labels_file, idx_bytes(kLabels, {n}, labels));

      const auto images = read_idx_images(images_file, rows, cols);
      CHECK(images.count == n);
      CHECK(images.rows == rows);
      CHECK(images.cols == cols);
      CHECK(images.pixels == pixels);
      CHECK(read_idx_labels(labels_file, 10) == labels);

      const auto dataset = load_idx_dataset(images_file, labels_file, IdxSpec{rows, cols, 10});
      REQUIRE(dataset.size() == n);
      CHECK(dataset.sample_shape == ringtrain::Shape{1, rows, cols});
      CHECK(dataset.sample_elements() == rows * cols);
      const std::vector<float> values = all_sample_values(dataset);
      REQUIRE(values.size() == pixels.size());
      for (std::size_t i = 0; i < pixels.size(); ++i)
        REQUIRE(values[i] == static_cast<float>(pixels[i]) / 255.0f);
      for (std::size_t i = 0; i < n; ++i) CHECK(dataset.labels[i] == labels[i]);
    }
  }
}

TEST_CASE("IDX pixel bytes 0 and 255 map to exactly 0 and 1", "[data][idx]") {
  TempDir dir;
  write_idx(dir / "i.gz", idx_bytes(kImages, {1, 1, 3}, {0, 255, 51}));
  write_idx(dir / "l.gz", idx_bytes(kLabels, {1}, {1}));
  const auto dataset = load_idx_dataset(dir / "i.gz", dir / "l.gz", IdxSpec{1, 3, 2});
  const std::vector<float> values = all_sample_values(dataset);
  CHECK(values[0] == 0.0f);
  CHECK(values[1] == 1.0f);
  CHECK(values[2] == Approx(0.2f));
}

TEST_CASE("IDX: malformed files are DataErrors naming the file and the problem", "[data][idx]") {
  TempDir dir;
  const Bytes good_images = idx_bytes(kImages, {4, 28, 28}, image_body(4, 28, 28));
  const Bytes good_labels = idx_bytes(kLabels, {4}, {1, 2, 3, 4});

  SECTION("bad magic") {
    const auto file = dir / "bad-magic-idx3-ubyte.gz";
    Bytes bytes = good_images;
    bytes[2] = 0x09;  // type code 09 is not "unsigned byte"
    write_idx(file, bytes);
    const auto msg = data_error_message([&] { read_idx_images(file, 28, 28); });
    CHECK_THAT(msg, Contains(file.filename().string()) && Contains("magic"));
    const auto text = dir / "text.gz";
    write_idx(text, Bytes{'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd', '!'});
    CHECK_THAT(data_error_message([&] { read_idx_labels(text, 10); }),
               Contains("text.gz") && Contains("magic"));
  }
  SECTION("wrong dimension count: a labels file read as images") {
    const auto file = dir / "swapped-labels-idx1-ubyte.gz";
    write_idx(file, good_labels);
    const auto msg = data_error_message([&] { read_idx_images(file, 28, 28); });
    CHECK_THAT(msg, Contains(file.filename().string()) && Contains("dimension"));
  }
  SECTION("truncated header") {
    const auto file = dir / "short-header-idx3-ubyte.gz";
    // magic and the count, but rows and cols missing
    write_idx(file, Bytes(good_images.begin(), good_images.begin() + 8));
    CHECK_THAT(data_error_message([&] { read_idx_images(file, 28, 28); }),
               Contains(file.filename().string()) && Contains("truncated header"));
    const auto tiny = dir / "tiny-idx1-ubyte";
    write_idx(tiny, Bytes{0x00, 0x00});
    CHECK_THAT(data_error_message([&] { read_idx_labels(tiny, 10); }),
               Contains("tiny-idx1-ubyte") && Contains("truncated header"));
    const auto empty = dir / "empty-idx1-ubyte.gz";
    write_idx(empty, Bytes{});
    CHECK_THAT(data_error_message([&] { read_idx_labels(empty, 10); }),
               Contains("empty-idx1-ubyte.gz") && Contains("truncated header"));
  }
  SECTION("truncated body") {
    const auto labels = dir / "cut-labels-idx1-ubyte.gz";
    write_idx(labels, idx_bytes(kLabels, {10}, {1, 2, 3, 4, 5, 6, 7}));
    CHECK_THAT(data_error_message([&] { read_idx_labels(labels, 10); }),
               Contains(labels.filename().string()) && Contains("truncated body") &&
                   Contains("10 labels") && Contains("holds 7"));
    const auto images = dir / "cut-images-idx3-ubyte";
    write_idx(images, Bytes(good_images.begin(), good_images.end() - 100));
    CHECK_THAT(
        data_error_message([&] { read_idx_images(images, 28, 28); }),
        Contains(images.filename().string()) && Contains("truncated body") && Contains("4 images"));
  }
  SECTION("trailing garbage") {
    const auto file = dir / "long-labels-idx1-ubyte.gz";
    Bytes bytes = good_labels;
    bytes.insert(bytes.end(), {9, 9, 9});
    write_idx(file, bytes);
    CHECK_THAT(data_error_message([&] { read_idx_labels(file, 10); }),
               Contains(file.filename().string()) && Contains("trailing") && Contains("3 byte"));
  }
  SECTION("image/label count mismatch") {
    const auto images = dir / "four-images-idx3-ubyte.gz";
    const auto labels = dir / "three-labels-idx1-ubyte.gz";
    write_idx(images, good_images);
    write_idx(labels, idx_bytes(kLabels, {3}, {1, 2, 3}));
    CHECK_THAT(data_error_message([&] { load_idx_dataset(images, labels); }),
               Contains(images.filename().string()) && Contains(labels.filename().string()) &&
                   Contains("mismatch"));
  }
  SECTION("label >= num_classes") {
    const auto file = dir / "big-label-idx1-ubyte.gz";
    write_idx(file, idx_bytes(kLabels, {4}, {1, 2, 10, 4}));
    CHECK_THAT(
        data_error_message([&] { read_idx_labels(file, 10); }),
        Contains(file.filename().string()) && Contains("label 10") && Contains("out of range"));
    // The same file is valid with 11 classes: the limit is the parameter, not a constant.
    CHECK(read_idx_labels(file, 11).size() == 4);
  }
  SECTION("wrong image dimensions") {
    const auto file = dir / "odd-images-idx3-ubyte.gz";
    write_idx(file, idx_bytes(kImages, {2, 28, 27}, image_body(2, 28, 27)));
    CHECK_THAT(
        data_error_message([&] { read_idx_images(file, 28, 28); }),
        Contains(file.filename().string()) && Contains("wrong image size") && Contains("28x27"));
    CHECK(read_idx_images(file, 28, 27).count == 2);
  }
  SECTION("zero images") {
    const auto file = dir / "none-idx3-ubyte.gz";
    write_idx(file, idx_bytes(kImages, {0, 28, 28}, {}));
    CHECK_THAT(data_error_message([&] { read_idx_images(file, 28, 28); }),
               Contains(file.filename().string()) && Contains("0 images"));
  }
  SECTION("not gzip: a .gz name holding plain bytes") {
    const auto file = dir / "plain-labels-idx1-ubyte.gz";
    write_plain(file, good_labels);
    CHECK_THAT(data_error_message([&] { read_idx_labels(file, 10); }),
               Contains(file.filename().string()) && Contains("not gzip"));
    // The same bytes under a name without .gz are a valid plain IDX file.
    const auto plain = dir / "plain-labels-idx1-ubyte";
    write_plain(plain, good_labels);
    CHECK(read_idx_labels(plain, 10) == Bytes{1, 2, 3, 4});
  }
  SECTION("damaged gzip stream") {
    const auto whole = dir / "whole-idx3-ubyte.gz";
    write_idx(whole, good_images);
    const Bytes compressed = read_all(whole);
    REQUIRE(compressed.size() > 40);
    const auto cut = dir / "cut-stream-idx3-ubyte.gz";
    write_plain(cut, Bytes(compressed.begin(), compressed.begin() + compressed.size() / 2));
    CHECK_THAT(data_error_message([&] { read_idx_images(cut, 28, 28); }),
               Contains(cut.filename().string()) && Contains("gzip"));
  }
  SECTION("missing file") {
    const auto file = dir / "absent-idx1-ubyte.gz";
    CHECK_THAT(data_error_message([&] { read_idx_labels(file, 10); }),
               Contains(file.filename().string()) && Contains("not found"));
  }
}
