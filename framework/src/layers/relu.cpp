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
  // dy is read unconditionally so the select vectorizes: `y > 0 ? dy[i] : 0` reads dy only
  // where y > 0, which the compiler must keep as a branch, a coin flip on real activations
  // (bench/README-conv.md, "Measurements behind the code comments").
  const float* yp = y.data();
  const float* dyp = dy.data();
  float* dxp = dx.data();
  for (std::size_t i = 0; i < count; ++i) {
    const float g = dyp[i];
    dxp[i] = yp[i] > 0.0f ? g : 0.0f;
  }
}

}  // namespace ringtrain
