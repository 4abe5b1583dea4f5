// The losses of a step, each returning the *sum* of per-sample losses.
//
// Softmax cross-entropy over C classes (classification, integer labels):
//
//   p_i = softmax(z_i)             z: logits (n, C)
//   ℓ_i = -log p_i[y_i]
//   dz_i = scale · (p_i - onehot(y_i))
//
// Squared error over K targets (regression, float targets; --loss mse), PyTorch's convention:
//
//   ℓ_i = (1/K) Σ_k (ŷ_ik - y_ik)²   ŷ: outputs (n, K), y: targets (n, K)
//   dŷ_i = scale · (2/K) (ŷ_i - y_i)
//
// With scale = 1/n the batch's loss (1/n) Σ_i ℓ_i is the mean over all n·K values, which is
// torch.nn.MSELoss()'s (reduction "mean"), scikit-learn's mean_squared_error and NumPy's
// ((ŷ - y)**2).mean(), and the gradient is MSELoss's: a learning rate carries over from
// PyTorch. The loss evaluation reports is therefore the test MSE itself.
//
// The caller chooses the scale. For one defined update every rank passes
// scale = 1/B with B the number of samples of the *global* batch, so the ring's sum of the
// ranks' gradients is the mean gradient over all samples however the batch was split.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace ringtrain {

struct LossResult {
  double loss_sum = 0.0;    // Σ_i ℓ_i (not scaled)
  std::size_t correct = 0;  // rows whose arg-max logit is the label
};

// dlogits may alias nothing; it is fully overwritten. Labels must be in [0, C).
LossResult softmax_cross_entropy(std::span<const float> logits,
                                 std::span<const std::int32_t> labels, std::size_t n,
                                 std::size_t classes, float scale, std::span<float> dlogits);

// Loss sum and correct count only (evaluation).
LossResult softmax_cross_entropy_eval(std::span<const float> logits,
                                      std::span<const std::int32_t> labels, std::size_t n,
                                      std::size_t classes);

// Σ_i (1/K) Σ_k (ŷ_ik - y_ik)² over n rows of `targets` (n, K) values; writes
// doutputs = scale · (2/K)(ŷ - y) (fully overwritten, may alias nothing). `correct` stays 0.
LossResult squared_error(std::span<const float> outputs, std::span<const float> targets,
                         std::size_t n, std::size_t width, float scale, std::span<float> doutputs);

// Loss sum only (evaluation).
LossResult squared_error_eval(std::span<const float> outputs, std::span<const float> targets,
                              std::size_t n, std::size_t width);

}  // namespace ringtrain
