// BatchNorm: per-channel normalisation by batch statistics, with PyTorch's semantics, and its
// cross-rank form (SyncBatchNorm) built in.
//
//   x, y: (n, C) or (n, C, H, W) (any (n, C, rest...)); statistics per channel over the
//   M = n·H·W values of that channel ("count"), or over all ranks' values if ctx.cross_rank.
//   training:  μ = Σx / M,  σ² = Σx² / M - μ²  (biased),  x̂ = (x - μ) / sqrt(σ² + eps)
//              y = γ · x̂ + β
//              running_mean <- (1 - momentum) · running_mean + momentum · μ
//              running_var  <- (1 - momentum) · running_var  + momentum · σ² · M / (M - 1)
//   eval:      y = γ · (x - running_mean) / sqrt(running_var + eps) + β
// Backward (training), means over the global count M:
//   dβ = Σ dy,   dγ = Σ dy · x̂          (this rank's rows only: the ring sums them later)
//   dx = (γ / σ) · (dy - mean(dy) - x̂ · mean(dy · x̂))     with σ = sqrt(σ² + eps)
//
// Cross-rank (SyncBN): if ctx.cross_rank is set, forward makes one collective call summing
// the packed doubles [count, Σx (C), Σx² (C)] and backward one summing [Σdy (C), Σdy·x̂ (C)],
// so N ranks compute exactly what one process computes on the union of their batches,
// weighted by sample count. Ranks with n = 0 still make both calls. Without cross_rank the
// statistics are this rank's batch only (plain BatchNorm).
//
// Parameters: weight γ (ones), bias β (zeros). Buffers: running_mean (zeros), running_var
// (ones). Training forward throws UsageError when the global count per channel is 1 (the
// unbiased variance is undefined), like PyTorch; a global count of 0 leaves the running
// statistics unchanged.
#pragma once

#include <vector>

#include "ringtrain/framework/layer.hpp"

namespace ringtrain {

class BatchNorm final : public Layer {
 public:
  explicit BatchNorm(std::size_t channels, float eps = 1e-5f, float momentum = 0.1f);

  std::string kind() const override { return "batchnorm"; }
  // Input (C, rest...) with C = channels; returns it unchanged.
  Shape plan(const Shape& input, std::size_t max_batch) override;
  std::vector<ParamSpec> parameter_specs() const override;
  std::vector<ParamSpec> buffer_specs() const override;
  void bind(const LayerBinding& binding) override;
  // Collective in training mode if ctx.cross_rank is set.
  void forward(std::span<const float> x, std::span<float> y, std::size_t n,
               const StepContext& ctx) override;
  // Collective in training mode if ctx.cross_rank is set. Uses the statistics of the last
  // forward, whose ctx.training must match.
  void backward(std::span<const float> x, std::span<const float> y, std::span<const float> dy,
                std::span<float> dx, std::size_t n, const StepContext& ctx) override;

 private:
  std::size_t c_;
  double eps_, momentum_;
  std::size_t spatial_ = 0;    // values per channel per sample: H·W (1 for (n, C))
  double count_ = 0.0;         // M of the last training forward (all ranks if cross-rank)
  std::vector<float> mean_;    // (C) μ of the last training forward
  std::vector<float> invstd_;  // (C) 1 / sqrt(σ² + eps) of the last training forward
  std::vector<double> stats_;  // (1 + 2C) the packed cross-rank buffer
  std::span<float> weight_, bias_, grad_weight_, grad_bias_, running_mean_, running_var_;
};

}  // namespace ringtrain
