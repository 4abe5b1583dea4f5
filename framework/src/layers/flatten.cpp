// Flatten: a copy that changes only the shape the next layer sees.
#include "ringtrain/framework/layers/flatten.hpp"

#include <algorithm>

namespace ringtrain {

Shape Flatten::plan(const Shape& input, std::size_t /*max_batch*/) {
  features_ = num_elements(input);
  return {features_};
}

void Flatten::forward(std::span<const float> x, std::span<float> y, std::size_t n,
                      const StepContext& /*ctx*/) {
  std::copy_n(x.begin(), n * features_, y.begin());  // y = x
}

void Flatten::backward(std::span<const float> /*x*/, std::span<const float> /*y*/,
                       std::span<const float> dy, std::span<float> dx, std::size_t n,
                       const StepContext& /*ctx*/) {
  if (dx.empty()) return;
  std::copy_n(dy.begin(), n * features_, dx.begin());  // dx = dy
}

}  // namespace ringtrain
