// BatchNorm and SyncBatchNorm: per-channel sums (in double), one optional cross-rank sum per
// pass, then an elementwise affine map per channel.
//
// Threads (blas::parallel_ranges): the sums are cut by channels (each channel's rows still
// added in order by one thread) and the maps by rows, so the thread count changes no bit.
//
// Layout of a batch: (n, C, S) with S = spatial_ values per channel per sample, so channel
// c of sample i is the contiguous run x[(i·C + c)·S, ... + S).
#include "ringtrain/framework/layers/batchnorm.hpp"

#include <algorithm>
#include <cmath>

#include "ringtrain/framework/blas.hpp"
#include "ringtrain/framework/error.hpp"

namespace ringtrain {

namespace {

// Calls plane(c, at) for every (row, channel) plane of a batch of n rows of `channels`
// planes of `spatial` values, `at` being the plane's first element, with the rows cut over
// the rank's threads: each plane is mapped on its own, so the cut changes no bit.
template <typename Plane>
void for_each_plane(std::size_t n, std::size_t channels, std::size_t spatial, std::size_t min_rows,
                    Plane&& plane) {
  auto rows = [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i)
      for (std::size_t c = 0; c < channels; ++c) plane(c, (i * channels + c) * spatial);
  };
  blas::parallel_ranges(n, min_rows, rows);
}

}  // namespace

BatchNorm::BatchNorm(std::size_t channels, float eps, float momentum)
    : c_(channels), eps_(eps), momentum_(momentum) {
  if (c_ == 0) throw UsageError("BatchNorm needs channels > 0");
  if (!(eps > 0.0f)) throw UsageError("BatchNorm eps must be > 0, got " + std::to_string(eps));
  if (!(momentum >= 0.0f && momentum <= 1.0f))
    throw UsageError("BatchNorm momentum must be in [0, 1], got " + std::to_string(momentum));
  mean_.assign(c_, 0.0f);
  invstd_.assign(c_, 1.0f);
  stats_.assign(1 + 2 * c_, 0.0);
  terms_.assign(1 + 2 * c_, 0.0);
  // One block per statistic and channel: each keeps its own window, so a channel of small
  // values is not rounded on the grid of a channel of large ones.
  exact_forward_ = collectives::ExactSum(std::vector<std::size_t>(1 + c_, 1));
  exact_centered_ = collectives::ExactSum(std::vector<std::size_t>(c_, 1));
  exact_backward_ = collectives::ExactSum(std::vector<std::size_t>(2 * c_, 1));
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
    for_each_plane(n, c_, s, min_rows(), [&](std::size_t c, std::size_t at) {
      const float mean = running_mean_[c];
      const float scale = weight_[c] / float(std::sqrt(double(running_var_[c]) + eps_));
      const float shift = bias_[c];
      const float* xr = x.data() + at;
      float* yr = y.data() + at;
      for (std::size_t q = 0; q < s; ++q) yr[q] = (xr[q] - mean) * scale + shift;
    });
    return;
  }

  forward_sums(x, n, ctx);  // collective if ctx.cross_rank
  const double* sum_x = stats_.data() + 1;
  const double* sum_xx = stats_.data() + 1 + c_;

  const double count = stats_[0];  // M
  count_ = count;
  if (count == 0.0) return;  // no rank has a sample: nothing to normalise or to learn
  if (count == 1.0)
    throw UsageError(
        "BatchNorm in training needs more than 1 value per channel, got a batch of 1 "
        "(hint: use a larger batch or drop the last incomplete batch)");

  for (std::size_t c = 0; c < c_; ++c) {
    const double mean = sum_x[c] / count;  // μ
    // σ² (biased); the exact path's sum_xx is already Σ(x − μ)² (exact_forward_sums)
    const double var = ctx.exact_micro_batch > 0 ? sum_xx[c] / count
                                                 : std::max(sum_xx[c] / count - mean * mean, 0.0);
    mean_[c] = float(mean);
    invstd_[c] = float(1.0 / std::sqrt(var + eps_));
    running_mean_[c] = float((1.0 - momentum_) * running_mean_[c] + momentum_ * mean);
    running_var_[c] =
        float((1.0 - momentum_) * running_var_[c] + momentum_ * var * count / (count - 1.0));
  }
  // y = γ · (x - μ) / σ + β
  for_each_plane(n, c_, s, min_rows(), [&](std::size_t c, std::size_t at) {
    const float mean = mean_[c], scale = weight_[c] * invstd_[c], shift = bias_[c];
    const float* xr = x.data() + at;
    float* yr = y.data() + at;
    for (std::size_t q = 0; q < s; ++q) yr[q] = (xr[q] - mean) * scale + shift;
  });
}

void BatchNorm::backward(std::span<const float> x, std::span<const float> /*y*/,
                         std::span<const float> dy, std::span<float> dx, std::size_t n,
                         const StepContext& ctx) {
  const std::size_t s = spatial_;
  const bool training = ctx.training;
  backward_sums(x, dy, n, ctx);  // collective if training and ctx.cross_rank
  const double* sum_dy = stats_.data();
  const double* sum_dy_xhat = stats_.data() + c_;

  if (!training) {
    if (dx.empty()) return;
    // dx = γ · dy / sqrt(running_var + eps)
    for_each_plane(n, c_, s, min_rows(), [&](std::size_t c, std::size_t at) {
      const float scale = weight_[c] * normaliser(c, false).invstd;
      const float* dyr = dy.data() + at;
      float* dxr = dx.data() + at;
      for (std::size_t q = 0; q < s; ++q) dxr[q] = scale * dyr[q];
    });
    return;
  }

  if (dx.empty() || n == 0) return;
  // dx = (γ / σ) · (dy - mean(dy) - x̂ · mean(dy · x̂)), means over the global count M
  for_each_plane(n, c_, s, min_rows(), [&](std::size_t c, std::size_t at) {
    const float mean = mean_[c], invstd = invstd_[c];
    const float scale = weight_[c] * invstd;
    const float mean_dy = float(sum_dy[c] / count_);
    const float mean_dy_xhat = float(sum_dy_xhat[c] / count_);
    const float* xr = x.data() + at;
    const float* dyr = dy.data() + at;
    float* dxr = dx.data() + at;
    for (std::size_t q = 0; q < s; ++q) {
      const float xhat = (xr[q] - mean) * invstd;
      dxr[q] = scale * (dyr[q] - mean_dy - xhat * mean_dy_xhat);
    }
  });
}

// Per channel, over rows [first, first + rows): sum_x[c] += Σx, sum_xx[c] += Σx², each
// row's run summed in double in value order, the rows added in order.
void BatchNorm::channel_sums(std::span<const float> x, std::size_t first, std::size_t rows,
                             double* sum_x, double* sum_xx) const {
  const std::size_t s = spatial_;
  auto channels = [&](std::size_t begin, std::size_t end) {  // each channel's rows in order
    for (std::size_t i = first; i < first + rows; ++i)
      for (std::size_t c = begin; c < end; ++c) {
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
  };
  blas::parallel_ranges(c_, min_channels(rows), channels);
}

// Per channel, over rows [first, first + rows): sum_dy[c] += Σdy, sum_dy_xhat[c] += Σdy·x̂,
// x̂ from the batch statistics (training) or the running ones.
void BatchNorm::gradient_sums(std::span<const float> x, std::span<const float> dy,
                              std::size_t first, std::size_t rows, bool training, double* sum_dy,
                              double* sum_dy_xhat) const {
  const std::size_t s = spatial_;
  auto channels = [&](std::size_t begin, std::size_t end) {  // each channel's rows in order
    for (std::size_t i = first; i < first + rows; ++i)
      for (std::size_t c = begin; c < end; ++c) {
        const Normaliser norm = normaliser(c, training);
        const float* xr = x.data() + (i * c_ + c) * s;
        const float* dyr = dy.data() + (i * c_ + c) * s;
        double s1 = 0.0, s2 = 0.0;
        for (std::size_t q = 0; q < s; ++q) {
          const float xhat = (xr[q] - norm.mean) * norm.invstd;
          s1 += dyr[q];
          s2 += double(dyr[q]) * xhat;
        }
        sum_dy[c] += s1;
        sum_dy_xhat[c] += s2;
      }
  };
  blas::parallel_ranges(c_, min_channels(rows), channels);
}

// In eval mode x is normalised by the running statistics, which are constants.
BatchNorm::Normaliser BatchNorm::normaliser(std::size_t c, bool training) const {
  if (training) return {mean_[c], invstd_[c]};
  return {running_mean_[c], float(1.0 / std::sqrt(double(running_var_[c]) + eps_))};
}

// stats_ <- [count, Σx (C), Σx² (C)] over this rank's rows, or over every rank's rows.
void BatchNorm::forward_sums(std::span<const float> x, std::size_t n, const StepContext& ctx) {
  if (ctx.exact_micro_batch > 0) return exact_forward_sums(x, n, ctx);
  std::fill(stats_.begin(), stats_.end(), 0.0);
  stats_[0] = double(n * spatial_);
  channel_sums(x, 0, n, stats_.data() + 1, stats_.data() + 1 + c_);
  if (ctx.cross_rank != nullptr) ctx.cross_rank->sum(stats_);  // collective
}

// stats_[0, 2C) <- [Σdy (C), Σdy·x̂ (C)], and dβ, dγ from them. The double path: this rank's
// rows (the gradient ring sums dβ, dγ over ranks later), then in training the cross-rank sum
// for dx. The exact path: the totals over every rank, so dβ and dγ are already the global
// sums, the same bits on every rank (exact_step.hpp: the step must not sum them again).
void BatchNorm::backward_sums(std::span<const float> x, std::span<const float> dy, std::size_t n,
                              const StepContext& ctx) {
  double* sum_dy = stats_.data();
  double* sum_dy_xhat = stats_.data() + c_;
  const bool exact = ctx.training && ctx.exact_micro_batch > 0;
  if (exact) {
    exact_backward_sums(x, dy, n, ctx);
  } else {
    std::fill(stats_.begin(), stats_.end(), 0.0);
    gradient_sums(x, dy, 0, n, ctx.training, sum_dy, sum_dy_xhat);
  }
  // dβ = Σ dy, dγ = Σ dy · x̂
  for (std::size_t c = 0; c < c_; ++c) {
    grad_bias_[c] = float(sum_dy[c]);
    grad_weight_[c] = float(sum_dy_xhat[c]);
  }
  if (!exact && ctx.training && ctx.cross_rank != nullptr)
    ctx.cross_rank->sum(std::span(stats_).first(2 * c_));  // collective
}

// The exact forward statistics, in two passes over this rank's micro-batches of m rows from
// its first row (the last may be shorter):
//   1. each micro-batch's count and Σx (double, as channel_sums) are one term of
//      exact_forward_; the ranks' sums are added exactly and rounded to double once -> μ
//   2. each micro-batch's Σ(x − μ)² (double, row order) is one term of exact_centered_;
//      summed over ranks the same way, it replaces Σx² in stats_.
// Micro-batch j holds the same samples on whichever rank holds it, and μ is the same bits
// everywhere, so every term, hence every total, does not depend on the split or on N. The
// second pass (one more small collective) keeps σ² accurate: E[x²] − μ² cancels about
// log2(μ²/σ²) bits, which the accumulator's 40 bits below its largest term cannot spare.
void BatchNorm::exact_forward_sums(std::span<const float> x, std::size_t n,
                                   const StepContext& ctx) {
  const std::size_t m = ctx.exact_micro_batch, s = spatial_;
  const std::span<double> terms = std::span(terms_).first(1 + c_);
  exact_forward_.clear();
  for (std::size_t first = 0; first < n; first += m) {
    const std::size_t rows = std::min(m, n - first);
    std::fill(terms_.begin(), terms_.end(), 0.0);
    terms[0] = double(rows * s);
    // Σx² lands beyond `terms`, unused: the second pass sums Σ(x − μ)² instead
    channel_sums(x, first, rows, terms.data() + 1, terms_.data() + 1 + c_);
    exact_forward_.add(std::span<const double>(terms));
  }
  if (ctx.cross_rank != nullptr) ctx.cross_rank->sum_exact(exact_forward_);  // collective
  exact_forward_.to_double(std::span(stats_).first(1 + c_));
  const double count = stats_[0];

  const std::span<double> centered = std::span(terms_).first(c_);
  exact_centered_.clear();
  for (std::size_t first = 0; first < n; first += m) {
    const std::size_t rows = std::min(m, n - first);
    std::fill(centered.begin(), centered.end(), 0.0);
    for (std::size_t i = first; i < first + rows; ++i)
      for (std::size_t c = 0; c < c_; ++c) {
        const double mean = stats_[1 + c] / count;  // μ, as forward() computes it
        const float* xr = x.data() + (i * c_ + c) * s;
        double s2 = 0.0;
        for (std::size_t q = 0; q < s; ++q) s2 += (double(xr[q]) - mean) * (double(xr[q]) - mean);
        centered[c] += s2;
      }
    exact_centered_.add(std::span<const double>(centered));
  }
  if (ctx.cross_rank != nullptr) ctx.cross_rank->sum_exact(exact_centered_);  // collective
  exact_centered_.to_double(std::span(stats_).subspan(1 + c_, c_));
}

// The same for [Σdy (C), Σdy·x̂ (C)] (x̂ from this step's statistics) into stats_[0, 2C).
void BatchNorm::exact_backward_sums(std::span<const float> x, std::span<const float> dy,
                                    std::size_t n, const StepContext& ctx) {
  const std::size_t m = ctx.exact_micro_batch;
  const std::span<double> terms = std::span(terms_).first(2 * c_);
  exact_backward_.clear();
  for (std::size_t first = 0; first < n; first += m) {
    const std::size_t rows = std::min(m, n - first);
    std::fill(terms.begin(), terms.end(), 0.0);
    gradient_sums(x, dy, first, rows, true, terms.data(), terms.data() + c_);
    exact_backward_.add(std::span<const double>(terms));
  }
  if (ctx.cross_rank != nullptr) ctx.cross_rank->sum_exact(exact_backward_);  // collective
  exact_backward_.to_double(std::span(stats_).first(2 * c_));
}

}  // namespace ringtrain
