// MaxPool2d: the maximum over each k x k window, per channel (no padding, floor mode).
//
//   x: (n, C, H, W)   y: (n, C, Ho, Wo)   Ho = (H - k) / s + 1,  Wo = (W - k) / s + 1
//   y[i, c, oh, ow] = max_{ki, kj < k} x[i, c, oh·s + ki, ow·s + kj]
// Backward: the gradient flows only to the position that won the max (its index is
// remembered from forward, so ties and NaNs are resolved once, like PyTorch: scanning the
// window in row-major order, a strictly larger value or a NaN takes over, so the first of
// tied maxima wins and any NaN wins):
//   dx[i, c, argmax(i, c, oh, ow)] += dy[i, c, oh, ow]     (+= : windows overlap when s < k)
#pragma once

#include <cstdint>
#include <vector>

#include "ringtrain/framework/layer.hpp"

namespace ringtrain {

class MaxPool2d final : public Layer {
 public:
  // stride = 0 means stride = kernel (PyTorch's default). Throws UsageError for kernel 0.
  explicit MaxPool2d(std::size_t kernel, std::size_t stride = 0);

  std::string kind() const override { return "maxpool2d"; }
  // Input (C, H, W) with H, W >= kernel; returns (C, Ho, Wo). Plans the argmax buffer.
  Shape plan(const Shape& input, std::size_t max_batch) override;
  void forward(std::span<const float> x, std::span<float> y, std::size_t n,
               const StepContext& ctx) override;
  // Uses the argmax indices of the last forward (same x, same n).
  void backward(std::span<const float> x, std::span<const float> y, std::span<const float> dy,
                std::span<float> dx, std::size_t n, const StepContext& ctx) override;

 private:
  // One plane (H, W) -> (Ho, Wo) with its winners; and the plane's dx from dy and winners.
  void pool_plane(const float* xp, float* yp, std::uint32_t* ap) const;
  void unpool_plane(const float* dyp, const std::uint32_t* ap, float* dxp) const;

  std::size_t k_, stride_;
  std::size_t c_ = 0, h_ = 0, w_ = 0, ho_ = 0, wo_ = 0;
  std::vector<std::uint32_t> argmax_;  // (max_batch, C, Ho, Wo): index into the sample's plane
};

}  // namespace ringtrain
