// ReLU: the rectifier and its mask, both elementwise over n * features values, on the rank's
// threads (blas::parallel_ranges).
#include "ringtrain/framework/layers/relu.hpp"

#include "ringtrain/framework/blas.hpp"

namespace ringtrain {
namespace {

// Elements per thread below which the loops stay on one thread: a 128 x 1024 activation is
// faster unsplit, a convolution's 128 x 32 x 28 x 28 split (bench/README-gemm.md, "ReLU's
// smallest part").
constexpr std::size_t kMinPerThread = 256 * 1024;

}  // namespace

Shape ReLU::plan(const Shape& input, std::size_t /*max_batch*/) {
  features_ = num_elements(input);
  return input;
}

void ReLU::forward(std::span<const float> x, std::span<float> y, std::size_t n,
                   const StepContext& /*ctx*/) {
  auto rectify = [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
  };
  blas::parallel_ranges(n * features_, kMinPerThread, rectify);
}

void ReLU::backward(std::span<const float> /*x*/, std::span<const float> y,
                    std::span<const float> dy, std::span<float> dx, std::size_t n,
                    const StepContext& /*ctx*/) {
  if (dx.empty()) return;
  // dy is read unconditionally so the select vectorizes: `y > 0 ? dy[i] : 0` reads dy only
  // where y > 0, which the compiler must keep as a branch, a coin flip on real activations
  // (bench/README-conv.md, "Measurements behind the code comments").
  const float* yp = y.data();
  const float* dyp = dy.data();
  float* dxp = dx.data();
  auto mask = [=](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      const float g = dyp[i];
      dxp[i] = yp[i] > 0.0f ? g : 0.0f;
    }
  };
  blas::parallel_ranges(n * features_, kMinPerThread, mask);
}

}  // namespace ringtrain
