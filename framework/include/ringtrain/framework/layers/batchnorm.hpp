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
// Exact (ctx.exact_micro_batch = m > 0, training; --reduction exact, train/exact_step.hpp):
// the same formulas with σ² = Σ(x − μ)² / M (two passes), and every sum taken per
// micro-batch of m rows from this rank's first row (the last may be shorter): its count, Σx,
// then Σ(x − μ)² (forward; two collective sums) and Σdy, Σdy·x̂ (backward), each in double
// in row order, are one term of an exact accumulator
// (collectives/exact_sum.hpp; one block per statistic and channel), the ranks' accumulators
// are summed exactly (ctx.cross_rank->sum_exact, collective; without cross_rank this rank's
// rows are the batch) and rounded to double once. A rank holds whole micro-batches of the
// global batch, so the totals, and with them y, dx, the running statistics and dβ, dγ, are
// the same bits for any split over any N. dβ and dγ are then the totals over every rank
// (not this rank's part): the caller must not sum them over ranks again. Error of a total:
// exact_sum.hpp's bound, about 2^-40 of the largest micro-batch term per term, then one
// rounding to double. A statistic beyond 2^159 (Σx² of values near 2^80) throws
// collectives::ExactSumError.
//
// Parameters: weight γ (ones), bias β (zeros). Buffers: running_mean (zeros), running_var
// (ones). Training forward throws UsageError when the global count per channel is 1 (the
// unbiased variance is undefined), like PyTorch; a global count of 0 leaves the running
// statistics unchanged.
#pragma once

#include <algorithm>
#include <vector>

#include "ringtrain/collectives/exact_sum.hpp"
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
  struct Normaliser {
    float mean, invstd;
  };
  Normaliser normaliser(std::size_t c, bool training) const;
  // The least rows (maps) or channels (sums over `rows` rows) a thread takes: about 32 Ki
  // values each, below which a loop stays on one thread (as ReLU's).
  std::size_t min_rows() const {
    return std::max<std::size_t>(1, kMinPerThread / std::max<std::size_t>(c_ * spatial_, 1));
  }
  std::size_t min_channels(std::size_t rows) const {
    return std::max<std::size_t>(1, kMinPerThread / std::max<std::size_t>(rows * spatial_, 1));
  }
  static constexpr std::size_t kMinPerThread = 32 * 1024;
  void channel_sums(std::span<const float> x, std::size_t first, std::size_t rows, double* sum_x,
                    double* sum_xx) const;
  void gradient_sums(std::span<const float> x, std::span<const float> dy, std::size_t first,
                     std::size_t rows, bool training, double* sum_dy, double* sum_dy_xhat) const;
  // The packed statistics into stats_, by the double path or, with ctx.exact_micro_batch,
  // the exact one (collective when ctx.cross_rank is set).
  void forward_sums(std::span<const float> x, std::size_t n, const StepContext& ctx);
  void backward_sums(std::span<const float> x, std::span<const float> dy, std::size_t n,
                     const StepContext& ctx);
  void exact_forward_sums(std::span<const float> x, std::size_t n, const StepContext& ctx);
  void exact_backward_sums(std::span<const float> x, std::span<const float> dy, std::size_t n,
                           const StepContext& ctx);

  std::size_t c_;
  double eps_, momentum_;
  std::size_t spatial_ = 0;              // values per channel per sample: H·W (1 for (n, C))
  double count_ = 0.0;                   // M of the last training forward (all ranks if cross-rank)
  std::vector<float> mean_;              // (C) μ of the last training forward
  std::vector<float> invstd_;            // (C) 1 / sqrt(σ² + eps) of the last training forward
  std::vector<double> stats_;            // (1 + 2C) the packed cross-rank buffer
  std::vector<double> terms_;            // (1 + 2C) one micro-batch's statistics (exact mode)
  collectives::ExactSum exact_forward_;  // [count, Σx (C)], one block each
  collectives::ExactSum exact_centered_;  // [Σ(x − μ)² (C)], one block each
  collectives::ExactSum exact_backward_;  // [Σdy (C), Σdy·x̂ (C)], one block each
  std::span<float> weight_, bias_, grad_weight_, grad_bias_, running_mean_, running_var_;
};

}  // namespace ringtrain
