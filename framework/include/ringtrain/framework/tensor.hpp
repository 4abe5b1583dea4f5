// Tensor: an owning, row-major float32 array with a shape. Views are std::span<float>.
//
// Shapes are listed outermost first: a batch of images is (n, C, H, W), a weight matrix of a
// Linear layer (out, in). Tensors are allocated when a model is planned, never in a step.
#pragma once

#include <cstddef>
#include <numeric>
#include <span>
#include <string>
#include <vector>

namespace ringtrain {

using Shape = std::vector<std::size_t>;

// Number of elements of a shape; 1 for the empty shape (a scalar).
inline std::size_t num_elements(const Shape& shape) {
  return std::accumulate(shape.begin(), shape.end(), std::size_t{1},
                         [](std::size_t a, std::size_t b) { return a * b; });
}

// "(2, 3, 4)"
std::string to_string(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Shape shape) : shape_(std::move(shape)), data_(num_elements(shape_), 0.0f) {}

  const Shape& shape() const { return shape_; }
  std::size_t size() const { return data_.size(); }
  float* data() { return data_.data(); }
  const float* data() const { return data_.data(); }
  std::span<float> span() { return data_; }
  std::span<const float> span() const { return data_; }
  float& operator[](std::size_t i) { return data_[i]; }
  float operator[](std::size_t i) const { return data_[i]; }

 private:
  Shape shape_;
  std::vector<float> data_;
};

}  // namespace ringtrain
