// Linear: y = x · Wᵀ + b   (PyTorch's layout: W is (out, in))
//
//   x: (n, in)   W: (out, in)   b: (out)   y: (n, out)
// Backward:
//   dW = dyᵀ · x     (out, in)
//   db = Σ_rows dy   (out)
//   dx = dy · W      (n, in)
// Exact (ctx.exact_micro_batch = m > 0; --reduction exact, train/exact_step.hpp): forward and
// backward run per chunk of m rows from the call's first row (the last may be shorter), each
// chunk exactly the call a per-micro-batch loop would make (the same shapes, so the same
// bits); each chunk's dW and db go to ctx.exact_gradient (required), one term each.
#pragma once

#include "ringtrain/framework/layer.hpp"

namespace ringtrain {

class Linear final : public Layer {
 public:
  Linear(std::size_t in_features, std::size_t out_features);

  std::string kind() const override { return "linear"; }
  Shape plan(const Shape& input, std::size_t max_batch) override;
  std::vector<ParamSpec> parameter_specs() const override;
  void bind(const LayerBinding& binding) override;
  void forward(std::span<const float> x, std::span<float> y, std::size_t n,
               const StepContext& ctx) override;
  void backward(std::span<const float> x, std::span<const float> y, std::span<const float> dy,
                std::span<float> dx, std::size_t n, const StepContext& ctx) override;
  double forward_flops_per_sample() const override { return 2.0 * in_ * out_; }

 private:
  // The whole-call forward and backward of n rows (one chunk in exact mode).
  void forward_rows(const float* x, float* y, std::size_t n);
  void backward_rows(const float* x, const float* dy, float* dx, std::size_t n,
                     const StepContext& ctx);

  std::size_t in_, out_;
  std::span<float> weight_, bias_, grad_weight_, grad_bias_;
};

}  // namespace ringtrain
