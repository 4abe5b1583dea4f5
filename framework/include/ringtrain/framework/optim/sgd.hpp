// SGD with momentum, Nesterov and coupled weight decay, with PyTorch 1.13 semantics
// (torch.optim.SGD, dampening 0). Per element, for one step with learning rate lr:
//
//   g   = grad + wd·p              (only if wd != 0: "coupled" decay, it enters the momentum)
//   buf = μ·buf + g                (PyTorch sets buf = g on the first step; with dampening 0
//                                   and buf starting at 0 this is the same, bit for bit)
//   d   = g + μ·buf  if nesterov,  buf otherwise     (d = g when μ = 0: no state at all)
//   p  -= lr·d
//
// State: "momentum" (buf), absent when μ = 0.
#pragma once

#include <vector>

#include "ringtrain/framework/optim/optimizer.hpp"

namespace ringtrain {

class Sgd final : public Optimizer {
 public:
  // config must be valid (see validate(OptimizerConfig)); make_optimizer checks it.
  Sgd(const OptimizerConfig& config, std::size_t num_elements);

  void update(std::size_t offset, std::span<float> params, std::span<const float> grads,
              float lr) override;
  std::vector<OptimizerStateView> state() override;
  std::string describe() const override;

 private:
  float momentum_;
  bool nesterov_;
  float weight_decay_;
  std::vector<float> momentum_buffer_;  // (num_elements) if momentum_ > 0, else empty
};

}  // namespace ringtrain
