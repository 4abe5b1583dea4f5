// Linear layer: two GEMMs forward-and-input-gradient, one GEMM for the weight gradient.
#include "ringtrain/framework/layers/linear.hpp"

#include <algorithm>

#include "ringtrain/framework/blas.hpp"
#include "ringtrain/framework/error.hpp"

namespace ringtrain {

Linear::Linear(std::size_t in_features, std::size_t out_features)
    : in_(in_features), out_(out_features) {
  if (in_ == 0 || out_ == 0) throw UsageError("Linear layer needs in > 0 and out > 0");
}

Shape Linear::plan(const Shape& input, std::size_t /*max_batch*/) {
  if (num_elements(input) != in_)
    throw UsageError("Linear(" + std::to_string(in_) + " -> " + std::to_string(out_) +
                     ") got per-sample input " + to_string(input));
  return {out_};
}

std::vector<ParamSpec> Linear::parameter_specs() const {
  return {{"weight", {out_, in_}, Init::kUniformFanIn, in_},
          {"bias", {out_}, Init::kUniformFanIn, in_}};
}

void Linear::bind(const LayerBinding& binding) {
  weight_ = binding.params[0];
  bias_ = binding.params[1];
  grad_weight_ = binding.grads[0];
  grad_bias_ = binding.grads[1];
}

void Linear::forward(std::span<const float> x, std::span<float> y, std::size_t n,
                     const StepContext& /*ctx*/) {
  // y = 1 · b (broadcast over rows), then y += x · Wᵀ
  for (std::size_t i = 0; i < n; ++i) std::copy(bias_.begin(), bias_.end(), y.begin() + i * out_);
  blas::gemm(blas::Trans::kNo, blas::Trans::kYes, int(n), int(out_), int(in_), 1.0f, x.data(),
             weight_.data(), 1.0f, y.data());
}

void Linear::backward(std::span<const float> x, std::span<const float> /*y*/,
                      std::span<const float> dy, std::span<float> dx, std::size_t n,
                      const StepContext& ctx) {
  if (n == 0) {  // no samples: the gradient of an empty sum is zero
    std::fill(grad_weight_.begin(), grad_weight_.end(), 0.0f);
    std::fill(grad_bias_.begin(), grad_bias_.end(), 0.0f);
    return;
  }
  // dW = dyᵀ · x   (out, in)
  blas::gemm(blas::Trans::kYes, blas::Trans::kNo, int(out_), int(in_), int(n), 1.0f, dy.data(),
             x.data(), 0.0f, grad_weight_.data());
  // db = Σ_i dy[i, :]
  std::fill(grad_bias_.begin(), grad_bias_.end(), 0.0f);
  for (std::size_t i = 0; i < n; ++i) {
    const float* row = dy.data() + i * out_;
    for (std::size_t o = 0; o < out_; ++o) grad_bias_[o] += row[o];
  }
  // dx = dy · W   (n, in)
  if (!dx.empty()) poll_communication(ctx);  // between the two products: rings in flight move
  if (!dx.empty())
    blas::gemm(blas::Trans::kNo, blas::Trans::kNo, int(n), int(in_), int(out_), 1.0f, dy.data(),
               weight_.data(), 0.0f, dx.data());
}

}  // namespace ringtrain
