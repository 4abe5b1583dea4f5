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
                     const StepContext& ctx) {
  // chunks of m rows in exact mode, else one chunk of all n
  const std::size_t m =
      ctx.exact_micro_batch > 0 ? ctx.exact_micro_batch : std::max<std::size_t>(n, 1);
  for (std::size_t first = 0; first < n; first += m)
    forward_rows(x.data() + first * in_, y.data() + first * out_, std::min(m, n - first));
}

void Linear::backward(std::span<const float> x, std::span<const float> /*y*/,
                      std::span<const float> dy, std::span<float> dx, std::size_t n,
                      const StepContext& ctx) {
  float* dx_rows = dx.empty() ? nullptr : dx.data();  // null: the input gradient is not needed
  if (ctx.exact_micro_batch == 0) return backward_rows(x.data(), dy.data(), dx_rows, n, ctx);
  if (ctx.exact_gradient == nullptr)
    throw Error("Linear: exact micro-batches (ctx.exact_micro_batch) need ctx.exact_gradient");
  const std::size_t m = ctx.exact_micro_batch;
  for (std::size_t first = 0; first < n; first += m) {
    backward_rows(x.data() + first * in_, dy.data() + first * out_,
                  dx_rows ? dx_rows + first * in_ : nullptr, std::min(m, n - first), ctx);
    ctx.exact_gradient->add(grad_weight_);
    ctx.exact_gradient->add(grad_bias_);
  }
}

// y = 1 · b (broadcast over rows), then y += x · Wᵀ   (n rows)
void Linear::forward_rows(const float* x, float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) std::copy(bias_.begin(), bias_.end(), y + i * out_);
  blas::gemm(blas::Trans::kNo, blas::Trans::kYes, int(n), int(out_), int(in_), 1.0f, x,
             weight_.data(), 1.0f, y);
}

// dW, db of n rows into the gradient views; dx (null: not needed).
void Linear::backward_rows(const float* x, const float* dy, float* dx, std::size_t n,
                           const StepContext& ctx) {
  if (n == 0) {  // no samples: the gradient of an empty sum is zero
    std::fill(grad_weight_.begin(), grad_weight_.end(), 0.0f);
    std::fill(grad_bias_.begin(), grad_bias_.end(), 0.0f);
    return;
  }
  // dW = dyᵀ · x   (out, in)
  blas::gemm(blas::Trans::kYes, blas::Trans::kNo, int(out_), int(in_), int(n), 1.0f, dy, x, 0.0f,
             grad_weight_.data());
  // db = Σ_i dy[i, :]
  std::fill(grad_bias_.begin(), grad_bias_.end(), 0.0f);
  for (std::size_t i = 0; i < n; ++i) {
    const float* row = dy + i * out_;
    for (std::size_t o = 0; o < out_; ++o) grad_bias_[o] += row[o];
  }
  // dx = dy · W   (n, in)
  if (dx != nullptr) poll_communication(ctx);  // between the two products: rings in flight move
  if (dx != nullptr)
    blas::gemm(blas::Trans::kNo, blas::Trans::kNo, int(n), int(in_), int(out_), 1.0f, dy,
               weight_.data(), 0.0f, dx);
}

}  // namespace ringtrain
