// ReLU: the rectifier and its mask, both elementwise over n * features values.
#include "ringtrain/framework/layers/relu.hpp"

namespace ringtrain {

Shape ReLU::plan(const Shape& input, std::size_t /*max_batch*/) {
  features_ = num_elements(input);
  return input;
}

void ReLU::forward(std::span<const float> x, std::span<float> y, std::size_t n,
                   const StepContext& /*ctx*/) {
  const std::size_t count = n * features_;
  for (std::size_t i = 0; i < count; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void ReLU::backward(std::span<const float> /*x*/, std::span<const float> y,
                    std::span<const float> dy, std::span<float> dx, std::size_t n,
                    const StepContext& /*ctx*/) {
  if (dx.empty()) return;
  const std::size_t count = n * features_;
  for (std::size_t i = 0; i < count; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

}  // namespace ringtrain
