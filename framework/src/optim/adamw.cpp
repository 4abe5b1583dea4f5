// AdamW update (see adamw.hpp for the rule). The per-step scalars (bias corrections, step
// size) are computed in double, as PyTorch does in Python, once per update() call (a step
// applied in pieces computes the same bits for each piece), then one vectorisable pass
// updates m, v and p together.
#include "ringtrain/framework/optim/adamw.hpp"

#include <fmt/format.h>

#include <cmath>

namespace ringtrain {

AdamW::AdamW(const OptimizerConfig& config, std::size_t num_elements)
    : Optimizer(num_elements),
      beta1_(config.beta1),
      beta2_(config.beta2),
      eps_(config.eps),
      weight_decay_(config.weight_decay),
      exp_avg_(num_elements, 0.0f),
      exp_avg_sq_(num_elements, 0.0f) {}

void AdamW::update(std::size_t offset, std::span<float> params, std::span<const float> grads,
                   float lr) {
  check_piece(offset, params, grads);
  const double t = double(step_count());  // begin_step() has counted this step
  const double bias_correction1 = 1.0 - std::pow(double(beta1_), t);  // 1 − β1ᵗ
  const double bias_correction2 = 1.0 - std::pow(double(beta2_), t);  // 1 − β2ᵗ
  const float step_size = float(double(lr) / bias_correction1);
  const float bias_correction2_sqrt = float(std::sqrt(bias_correction2));
  const float decay = float(1.0 - double(lr) * double(weight_decay_));  // 1 − lr·wd
  const float b1 = beta1_, b2 = beta2_, eps = eps_;
  const float one_minus_b1 = float(1.0 - double(b1));
  const float one_minus_b2 = float(1.0 - double(b2));

  // The piece in parts over the rank's threads (optimizer.hpp).
  for_each_range(params.size(), [&](std::size_t begin, std::size_t end) {
    float* p = params.data();
    const float* grad = grads.data();
    float* m = exp_avg_.data() + offset;
    float* v = exp_avg_sq_.data() + offset;
    for (std::size_t i = begin; i < end; ++i) {
      const float g = grad[i];
      const float mi = b1 * m[i] + one_minus_b1 * g;        // m = β1·m + (1 − β1)·g
      const float vi = b2 * v[i] + one_minus_b2 * (g * g);  // v = β2·v + (1 − β2)·g²
      m[i] = mi;
      v[i] = vi;
      const float denom = std::sqrt(vi) / bias_correction2_sqrt + eps;  // √v̂ + eps
      p[i] = p[i] * decay - step_size * (mi / denom);  // grouped as PyTorch's addcdiv
    }
  });
}

std::vector<OptimizerStateView> AdamW::state() {
  return {{"exp_avg", exp_avg_}, {"exp_avg_sq", exp_avg_sq_}};
}

std::string AdamW::describe() const {
  return fmt::format("adamw(beta1={}, beta2={}, eps={}, weight_decay={})", beta1_, beta2_, eps_,
                     weight_decay_);
}

}  // namespace ringtrain
