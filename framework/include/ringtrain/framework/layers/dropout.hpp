// Dropout (inverted): in training each element is kept with probability 1 - p and scaled by
// 1 / (1 - p), so evaluation is the identity and needs no rescaling.
//
//   x, y: (n, features...)    m[i, j] = 1 / (1 - p) if u(i, j) >= p else 0
//   training:  y = m ⊙ x      backward: dx = m ⊙ dy
//   eval:      y = x          backward: dx = dy
//   u(i, j) = uniform01(hash(seed, kStreamDropout, layer_index, sample_id(i), j))
// sample_id(i) = ctx.sample_ids[i] (the global dataset index of row i), or i if the
// context carries no ids. The mask of a sample therefore depends on the sample, not on the
// rank or row that processed it, and backward recomputes nothing: the scaled
// mask is kept from forward in a buffer planned for max_batch rows.
#pragma once

#include <vector>

#include "ringtrain/framework/layer.hpp"

namespace ringtrain {

class Dropout final : public Layer {
 public:
  // p in [0, 1]: the probability of dropping an element. Throws UsageError otherwise.
  explicit Dropout(float p);

  std::string kind() const override { return "dropout"; }
  Shape plan(const Shape& input, std::size_t max_batch) override;
  // Throws Error if ctx.sample_ids is neither empty nor n long.
  void forward(std::span<const float> x, std::span<float> y, std::size_t n,
               const StepContext& ctx) override;
  // Uses the mask of the last forward (ctx.training must match that forward's).
  void backward(std::span<const float> x, std::span<const float> y, std::span<const float> dy,
                std::span<float> dx, std::size_t n, const StepContext& ctx) override;

  float p() const { return p_; }

 private:
  float p_;
  std::size_t features_ = 0;
  std::vector<float> mask_;  // (max_batch, features): 0 or 1 / (1 - p)
};

}  // namespace ringtrain
