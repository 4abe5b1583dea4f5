// Flatten: (n, d0, d1, ...) -> (n, d0·d1·...). Row-major memory is already flat, so forward
// and backward are copies into the next buffer: y = x, dx = dy.
#pragma once

#include "ringtrain/framework/layer.hpp"

namespace ringtrain {

class Flatten final : public Layer {
 public:
  std::string kind() const override { return "flatten"; }
  // Any per-sample shape; returns (product of its dimensions).
  Shape plan(const Shape& input, std::size_t max_batch) override;
  void forward(std::span<const float> x, std::span<float> y, std::size_t n,
               const StepContext& ctx) override;
  void backward(std::span<const float> x, std::span<const float> y, std::span<const float> dy,
                std::span<float> dx, std::size_t n, const StepContext& ctx) override;

 private:
  std::size_t features_ = 0;  // elements per sample
};

}  // namespace ringtrain
