// ReLU: y = max(x, 0), elementwise, any shape.
// Backward: dx = dy where y > 0, else 0 (the subgradient at 0 is taken as 0).
#pragma once

#include "ringtrain/framework/layer.hpp"

namespace ringtrain {

class ReLU final : public Layer {
 public:
  std::string kind() const override { return "relu"; }
  Shape plan(const Shape& input, std::size_t max_batch) override;
  void forward(std::span<const float> x, std::span<float> y, std::size_t n,
               const StepContext& ctx) override;
  void backward(std::span<const float> x, std::span<const float> y, std::span<const float> dy,
                std::span<float> dx, std::size_t n, const StepContext& ctx) override;

 private:
  std::size_t features_ = 0;  // elements per sample
};

}  // namespace ringtrain
