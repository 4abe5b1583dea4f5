// The losses of a step, each returning the *sum* of per-sample losses.
//
// Softmax cross-entropy over C classes (classification, integer labels):
//
//   p_i = softmax(z_i)             z: logits (n, C)
//   ℓ_i = -log p_i[y_i]
//   dz_i = scale · (p_i - onehot(y_i))
//
// Squared error over K targets (regression, float targets; --loss mse):
//
//   ℓ_i = ½ Σ_k (ŷ_ik - y_ik)²      ŷ: outputs (n, K), y: targets (n, K)
//   dŷ_i = scale · (ŷ_i - y_i)
//
// The ½ makes the gradient the plain residual. The *metric* evaluation reports is the mean
// squared error over every value, MSE = Σ_i Σ_k (ŷ_ik - y_ik)² / (n·K) = 2·Σ_i ℓ_i / (n·K)
// (as scikit-learn's mean_squared_error and NumPy's ((ŷ - y)**2).mean() compute it).
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

// Σ_i ½ Σ_k (ŷ_ik - y_ik)² over n rows of `targets` (n, targets) values; writes
// doutputs = scale · (ŷ - y) (fully overwritten, may alias nothing). `correct` stays 0.
LossResult squared_error(std::span<const float> outputs, std::span<const float> targets,
                         std::size_t n, std::size_t width, float scale, std::span<float> doutputs);

// Loss sum only (evaluation).
LossResult squared_error_eval(std::span<const float> outputs, std::span<const float> targets,
                              std::size_t n, std::size_t width);

}  // namespace ringtrain
