// MaxPool2d: window maxima with remembered winners, and the scatter of dy back to them.
#include "ringtrain/framework/layers/maxpool2d.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ringtrain/framework/error.hpp"

namespace ringtrain {

MaxPool2d::MaxPool2d(std::size_t kernel, std::size_t stride)
    : k_(kernel), stride_(stride == 0 ? kernel : stride) {
  if (k_ == 0) throw UsageError("MaxPool2d needs kernel > 0");
}

Shape MaxPool2d::plan(const Shape& input, std::size_t max_batch) {
  if (input.size() != 3 || input[1] < k_ || input[2] < k_)
    throw UsageError("MaxPool2d(kernel " + std::to_string(k_) +
                     ") needs per-sample input (C, H, W) with H, W >= kernel, got " +
                     to_string(input));
  c_ = input[0];
  h_ = input[1];
  w_ = input[2];
  if (h_ * w_ > std::numeric_limits<std::uint32_t>::max())
    throw UsageError("MaxPool2d: image plane " + to_string(input) + " too large");
  ho_ = (h_ - k_) / stride_ + 1;
  wo_ = (w_ - k_) / stride_ + 1;
  argmax_.assign(max_batch * c_ * ho_ * wo_, 0);
  return {c_, ho_, wo_};
}

void MaxPool2d::forward(std::span<const float> x, std::span<float> y, std::size_t n,
                        const StepContext& /*ctx*/) {
  if (n * c_ * ho_ * wo_ > argmax_.size())
    throw Error("MaxPool2d::forward: batch of " + std::to_string(n) +
                " rows exceeds the planned maximum");
  const std::size_t plane_in = h_ * w_, plane_out = ho_ * wo_;
  for (std::size_t plane = 0; plane < n * c_; ++plane) {  // plane = (i, c)
    const float* xp = x.data() + plane * plane_in;
    float* yp = y.data() + plane * plane_out;
    std::uint32_t* ap = argmax_.data() + plane * plane_out;
    for (std::size_t oh = 0; oh < ho_; ++oh) {
      for (std::size_t ow = 0; ow < wo_; ++ow) {
        std::size_t best = oh * stride_ * w_ + ow * stride_;
        float best_value = xp[best];
        for (std::size_t ki = 0; ki < k_; ++ki) {
          const std::size_t row = (oh * stride_ + ki) * w_ + ow * stride_;
          for (std::size_t kj = 0; kj < k_; ++kj) {
            // PyTorch's rule: a larger value or a NaN takes over. Written as selects, not a
            // branch: on real activations the comparison is a coin flip for the predictor.
            const float v = xp[row + kj];
            const bool take = v > best_value || std::isnan(v);
            best_value = take ? v : best_value;
            best = take ? row + kj : best;
          }
        }
        yp[oh * wo_ + ow] = best_value;
        ap[oh * wo_ + ow] = std::uint32_t(best);
      }
    }
  }
}

void MaxPool2d::backward(std::span<const float> /*x*/, std::span<const float> /*y*/,
                         std::span<const float> dy, std::span<float> dx, std::size_t n,
                         const StepContext& /*ctx*/) {
  if (dx.empty()) return;
  const std::size_t plane_in = h_ * w_, plane_out = ho_ * wo_;
  std::fill(dx.begin(), dx.begin() + std::ptrdiff_t(n * c_ * plane_in), 0.0f);
  for (std::size_t plane = 0; plane < n * c_; ++plane) {
    float* dxp = dx.data() + plane * plane_in;
    const float* dyp = dy.data() + plane * plane_out;
    const std::uint32_t* ap = argmax_.data() + plane * plane_out;
    // dx[argmax] += dy
    for (std::size_t q = 0; q < plane_out; ++q) dxp[ap[q]] += dyp[q];
  }
}

}  // namespace ringtrain
