// BatchNorm and SyncBatchNorm: per-channel sums (in double), one optional cross-rank sum per
// pass, then an elementwise affine map per channel.
//
// Layout of a batch: (n, C, S) with S = spatial_ values per channel per sample, so channel
// c of sample i is the contiguous run x[(i·C + c)·S, ... + S).
#include "ringtrain/framework/layers/batchnorm.hpp"

#include <algorithm>
#include <cmath>

#include "ringtrain/framework/error.hpp"

namespace ringtrain {

BatchNorm::BatchNorm(std::size_t channels, float eps, float momentum)
    : c_(channels), eps_(eps), momentum_(momentum) {
  if (c_ == 0) throw UsageError("BatchNorm needs channels > 0");
  if (!(eps > 0.0f)) throw UsageError("BatchNorm eps must be > 0, got " + std::to_string(eps));
  if (!(momentum >= 0.0f && momentum <= 1.0f))
    throw UsageError("BatchNorm momentum must be in [0, 1], got " + std::to_string(momentum));
  mean_.assign(c_, 0.0f);
  invstd_.assign(c_, 1.0f);
  stats_.assign(1 + 2 * c_, 0.0);
}

Shape BatchNorm::plan(const Shape& input, std::size_t /*max_batch*/) {
  if (input.empty() || input[0] != c_)
    throw UsageError("BatchNorm(" + std::to_string(c_) + ") needs per-sample input (" +
                     std::to_string(c_) + ") or (" + std::to_string(c_) + ", H, W), got " +
                     to_string(input));
  spatial_ = num_elements(input) / c_;
  return input;
}

std::vector<ParamSpec> BatchNorm::parameter_specs() const {
  return {{"weight", {c_}, Init::kOnes, 0}, {"bias", {c_}, Init::kZeros, 0}};
}

std::vector<ParamSpec> BatchNorm::buffer_specs() const {
  return {{"running_mean", {c_}, Init::kZeros, 0}, {"running_var", {c_}, Init::kOnes, 0}};
}

void BatchNorm::bind(const LayerBinding& binding) {
  weight_ = binding.params[0];
  bias_ = binding.params[1];
  grad_weight_ = binding.grads[0];
  grad_bias_ = binding.grads[1];
  running_mean_ = binding.buffers[0];
  running_var_ = binding.buffers[1];
}

void BatchNorm::forward(std::span<const float> x, std::span<float> y, std::size_t n,
                        const StepContext& ctx) {
  const std::size_t s = spatial_;
  if (!ctx.training) {
    // y = γ · (x - running_mean) / sqrt(running_var + eps) + β
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t c = 0; c < c_; ++c) {
        const float mean = running_mean_[c];
        const float scale = weight_[c] / float(std::sqrt(double(running_var_[c]) + eps_));
        const float shift = bias_[c];
        const float* xr = x.data() + (i * c_ + c) * s;
        float* yr = y.data() + (i * c_ + c) * s;
        for (std::size_t q = 0; q < s; ++q) yr[q] = (xr[q] - mean) * scale + shift;
      }
    return;
  }

  // Local sums, packed for the cross-rank call: [count, Σx (C), Σx² (C)]
  double* sum_x = stats_.data() + 1;
  double* sum_xx = stats_.data() + 1 + c_;
  stats_[0] = double(n * s);
  std::fill(stats_.begin() + 1, stats_.end(), 0.0);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t c = 0; c < c_; ++c) {
      const float* xr = x.data() + (i * c_ + c) * s;
      double s1 = 0.0, s2 = 0.0;
      for (std::size_t q = 0; q < s; ++q) {
        const double v = xr[q];
        s1 += v;
        s2 += v * v;
      }
      sum_x[c] += s1;
      sum_xx[c] += s2;
    }
  if (ctx.cross_rank != nullptr) ctx.cross_rank->sum(stats_);  // collective

  const double count = stats_[0];  // M
  count_ = count;
  if (count == 0.0) return;  // no rank has a sample: nothing to normalise or to learn
  if (count == 1.0)
    throw UsageError(
        "BatchNorm in training needs more than 1 value per channel, got a batch of 1 "
        "(hint: use a larger batch or drop the last incomplete batch)");

  for (std::size_t c = 0; c < c_; ++c) {
    const double mean = sum_x[c] / count;                               // μ
    const double var = std::max(sum_xx[c] / count - mean * mean, 0.0);  // σ² (biased)
    mean_[c] = float(mean);
    invstd_[c] = float(1.0 / std::sqrt(var + eps_));
    running_mean_[c] = float((1.0 - momentum_) * running_mean_[c] + momentum_ * mean);
    running_var_[c] =
        float((1.0 - momentum_) * running_var_[c] + momentum_ * var * count / (count - 1.0));
  }
  // y = γ · (x - μ) / σ + β
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t c = 0; c < c_; ++c) {
      const float mean = mean_[c], scale = weight_[c] * invstd_[c], shift = bias_[c];
      const float* xr = x.data() + (i * c_ + c) * s;
      float* yr = y.data() + (i * c_ + c) * s;
      for (std::size_t q = 0; q < s; ++q) yr[q] = (xr[q] - mean) * scale + shift;
    }
}

void BatchNorm::backward(std::span<const float> x, std::span<const float> /*y*/,
                         std::span<const float> dy, std::span<float> dx, std::size_t n,
                         const StepContext& ctx) {
  const std::size_t s = spatial_;
  const bool training = ctx.training;
  // In eval mode x is normalised by the running statistics, which are constants.
  auto mean_of = [&](std::size_t c) { return training ? mean_[c] : running_mean_[c]; };
  auto invstd_of = [&](std::size_t c) {
    return training ? invstd_[c] : float(1.0 / std::sqrt(double(running_var_[c]) + eps_));
  };

  // Local sums, packed for the cross-rank call: [Σdy (C), Σdy·x̂ (C)]
  double* sum_dy = stats_.data();
  double* sum_dy_xhat = stats_.data() + c_;
  std::fill(stats_.begin(), stats_.end(), 0.0);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t c = 0; c < c_; ++c) {
      const float mean = mean_of(c), invstd = invstd_of(c);
      const float* xr = x.data() + (i * c_ + c) * s;
      const float* dyr = dy.data() + (i * c_ + c) * s;
      double s1 = 0.0, s2 = 0.0;
      for (std::size_t q = 0; q < s; ++q) {
        const float xhat = (xr[q] - mean) * invstd;
        s1 += dyr[q];
        s2 += double(dyr[q]) * xhat;
      }
      sum_dy[c] += s1;
      sum_dy_xhat[c] += s2;
    }
  // dβ = Σ dy, dγ = Σ dy · x̂ over this rank's rows (the gradient ring sums over ranks)
  for (std::size_t c = 0; c < c_; ++c) {
    grad_bias_[c] = float(sum_dy[c]);
    grad_weight_[c] = float(sum_dy_xhat[c]);
  }

  if (!training) {
    if (dx.empty()) return;
    // dx = γ · dy / sqrt(running_var + eps)
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t c = 0; c < c_; ++c) {
        const float scale = weight_[c] * invstd_of(c);
        const float* dyr = dy.data() + (i * c_ + c) * s;
        float* dxr = dx.data() + (i * c_ + c) * s;
        for (std::size_t q = 0; q < s; ++q) dxr[q] = scale * dyr[q];
      }
    return;
  }

  if (ctx.cross_rank != nullptr) ctx.cross_rank->sum(std::span(stats_).first(2 * c_));
  if (dx.empty() || n == 0) return;
  // dx = (γ / σ) · (dy - mean(dy) - x̂ · mean(dy · x̂)), means over the global count M
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t c = 0; c < c_; ++c) {
      const float mean = mean_[c], invstd = invstd_[c];
      const float scale = weight_[c] * invstd;
      const float mean_dy = float(sum_dy[c] / count_);
      const float mean_dy_xhat = float(sum_dy_xhat[c] / count_);
      const float* xr = x.data() + (i * c_ + c) * s;
      const float* dyr = dy.data() + (i * c_ + c) * s;
      float* dxr = dx.data() + (i * c_ + c) * s;
      for (std::size_t q = 0; q < s; ++q) {
        const float xhat = (xr[q] - mean) * invstd;
        dxr[q] = scale * (dyr[q] - mean_dy - xhat * mean_dy_xhat);
      }
    }
}

}  // namespace ringtrain
