// Softmax cross-entropy over C classes, returning the *sum* of per-sample losses.
//
//   p_i = softmax(z_i)             z: logits (n, C)
//   ℓ_i = -log p_i[y_i]
//   dz_i = scale · (p_i - onehot(y_i))
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

}  // namespace ringtrain
