// AdamW (Loshchilov & Hutter) with PyTorch 1.13 semantics (torch.optim.AdamW, amsgrad off).
// Per element, at step t = 1, 2, ... with learning rate lr:
//
//   p  *= 1 − lr·wd                       decoupled weight decay: never enters m or v
//   m   = β1·m + (1 − β1)·g               "exp_avg"
//   v   = β2·v + (1 − β2)·g²              "exp_avg_sq"
//   m̂/(√v̂ + eps) is computed as PyTorch does:
//   p  -= (lr / (1 − β1ᵗ)) · m / (√v / √(1 − β2ᵗ) + eps)
//
// The bias corrections are per-step scalars (computed in double), so the loop is one pass.
#pragma once

#include <vector>

#include "ringtrain/framework/optim/optimizer.hpp"

namespace ringtrain {

class AdamW final : public Optimizer {
 public:
  // config must be valid (see validate(OptimizerConfig)); make_optimizer checks it.
  AdamW(const OptimizerConfig& config, std::size_t num_elements);

  void update(std::size_t offset, std::span<float> params, std::span<const float> grads,
              float lr) override;
  std::vector<OptimizerStateView> state() override;
  std::string describe() const override;

 private:
  float beta1_;
  float beta2_;
  float eps_;
  float weight_decay_;
  std::vector<float> exp_avg_;     // m, (num_elements)
  std::vector<float> exp_avg_sq_;  // v, (num_elements)
};

}  // namespace ringtrain
