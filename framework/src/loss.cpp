// The losses of loss.hpp. Softmax cross-entropy is computed stably: shift by the row maximum
// before exp.
//   log p[c] = z[c] - m - log Σ_j exp(z[j] - m),   m = max_j z[j]
// Squared error sums in double, as the cross-entropy does, one sample's k terms at a time.
#include "ringtrain/framework/loss.hpp"

#include <cmath>

namespace ringtrain {
namespace {

// One row: returns ℓ and writes p (if probs != nullptr); sets *argmax.
double row_loss(const float* z, std::size_t classes, std::int32_t label, float* probs,
                std::size_t* argmax) {
  std::size_t best = 0;
  for (std::size_t c = 1; c < classes; ++c)
    if (z[c] > z[best]) best = c;
  const float m = z[best];
  double sum = 0.0;
  for (std::size_t c = 0; c < classes; ++c) sum += std::exp(double(z[c]) - m);
  if (probs != nullptr)
    for (std::size_t c = 0; c < classes; ++c) probs[c] = float(std::exp(double(z[c]) - m) / sum);
  *argmax = best;
  return -(double(z[label]) - m - std::log(sum));
}

}  // namespace

LossResult softmax_cross_entropy(std::span<const float> logits,
                                 std::span<const std::int32_t> labels, std::size_t n,
                                 std::size_t classes, float scale, std::span<float> dlogits) {
  LossResult result;
  for (std::size_t i = 0; i < n; ++i) {
    float* dz = dlogits.data() + i * classes;
    std::size_t argmax = 0;
    result.loss_sum += row_loss(logits.data() + i * classes, classes, labels[i], dz, &argmax);
    result.correct += argmax == std::size_t(labels[i]) ? 1 : 0;
    // dz = scale · (p - onehot(y))
    dz[labels[i]] -= 1.0f;
    for (std::size_t c = 0; c < classes; ++c) dz[c] *= scale;
  }
  return result;
}

LossResult softmax_cross_entropy_eval(std::span<const float> logits,
                                      std::span<const std::int32_t> labels, std::size_t n,
                                      std::size_t classes) {
  LossResult result;
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t argmax = 0;
    result.loss_sum += row_loss(logits.data() + i * classes, classes, labels[i], nullptr, &argmax);
    result.correct += argmax == std::size_t(labels[i]) ? 1 : 0;
  }
  return result;
}

LossResult squared_error(std::span<const float> outputs, std::span<const float> targets,
                         std::size_t n, std::size_t width, float scale, std::span<float> doutputs) {
  LossResult result;
  const float factor = scale * (2.0f / float(width));  // dŷ = scale · (2/k)(ŷ - y)
  for (std::size_t i = 0; i < n; ++i) {
    double row = 0.0;  // Σ_k (ŷ_ik - y_ik)²
    for (std::size_t j = i * width; j < (i + 1) * width; ++j) {
      const float residual = outputs[j] - targets[j];  // ŷ - y
      row += double(residual) * double(residual);
      doutputs[j] = factor * residual;
    }
    result.loss_sum += row / double(width);
  }
  return result;
}

LossResult squared_error_eval(std::span<const float> outputs, std::span<const float> targets,
                              std::size_t n, std::size_t width) {
  LossResult result;
  for (std::size_t i = 0; i < n; ++i) {
    double row = 0.0;  // as in training
    for (std::size_t j = i * width; j < (i + 1) * width; ++j) {
      const float residual = outputs[j] - targets[j];
      row += double(residual) * double(residual);
    }
    result.loss_sum += row / double(width);
  }
  return result;
}

}  // namespace ringtrain
