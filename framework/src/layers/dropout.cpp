// Dropout: a counter-based mask keyed by (seed, layer, sample, element), rows and elements on
// the rank's threads (blas::parallel_ranges: every element on its own, so no bit changes).
//
// Speed note: random::hash folds its key words left to right, h <- mix64(h + γ + word), so
// the hash of (seed, stream, layer, sample, j) is the hash of the row prefix
// (seed, stream, layer, sample) folded once more with j. The prefix is hashed once per row;
// each element then costs one mix64. The unit test checks the mask against random::hash.
#include "ringtrain/framework/layers/dropout.hpp"

#include <algorithm>
#include <cmath>

#include "ringtrain/framework/blas.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/random.hpp"

namespace ringtrain {
namespace {

// Elements per thread below which the loops stay on one thread (as ReLU's).
constexpr std::size_t kMinPerThread = 32 * 1024;

constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ULL;  // the constant random::hash adds

// random::hash({prefix..., j}) given h = random::hash({prefix...})
constexpr std::uint64_t extend_hash(std::uint64_t h, std::uint64_t j) {
  return random::mix64(h + kGolden + j);
}
static_assert(extend_hash(random::hash({1, 2, 3, 4}), 5) == random::hash({1, 2, 3, 4, 5}),
              "random::hash no longer folds word by word; update Dropout's mask");

}  // namespace

Dropout::Dropout(float p) : p_(p) {
  if (!(p >= 0.0f && p <= 1.0f))
    throw UsageError("Dropout probability must be in [0, 1], got " + std::to_string(p));
}

Shape Dropout::plan(const Shape& input, std::size_t max_batch) {
  features_ = num_elements(input);
  mask_.assign(max_batch * features_, 0.0f);
  return input;
}

void Dropout::forward(std::span<const float> x, std::span<float> y, std::size_t n,
                      const StepContext& ctx) {
  const std::size_t count = n * features_;
  if (!ctx.training || p_ == 0.0f) {  // identity
    std::copy_n(x.begin(), count, y.begin());
    return;
  }
  if (!ctx.sample_ids.empty() && ctx.sample_ids.size() != n)
    throw Error("Dropout::forward: " + std::to_string(ctx.sample_ids.size()) +
                " sample ids for a batch of " + std::to_string(n) + " rows");
  if (count > mask_.size())
    throw Error("Dropout::forward: batch of " + std::to_string(n) +
                " rows exceeds the planned maximum");
  const float keep_scale = p_ < 1.0f ? 1.0f / (1.0f - p_) : 0.0f;
  // Rows on the rank's threads: a row's mask depends on its sample id alone.
  auto rows = [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      const std::uint64_t sample = ctx.sample_ids.empty() ? i : ctx.sample_ids[i];
      const std::uint64_t row_key =
          random::hash({ctx.seed, random::kStreamDropout, ctx.layer_index, sample});
      float* m = mask_.data() + i * features_;
      const float* xi = x.data() + i * features_;
      float* yi = y.data() + i * features_;
      for (std::size_t j = 0; j < features_; ++j) {
        // keep iff u >= p;  m = keep / (1 - p);  y = m · x
        m[j] = random::uniform01(extend_hash(row_key, j)) >= p_ ? keep_scale : 0.0f;
        yi[j] = m[j] * xi[j];
      }
    }
  };
  blas::parallel_ranges(
      n, std::max<std::size_t>(1, kMinPerThread / std::max<std::size_t>(features_, 1)), rows);
}

void Dropout::backward(std::span<const float> /*x*/, std::span<const float> /*y*/,
                       std::span<const float> dy, std::span<float> dx, std::size_t n,
                       const StepContext& ctx) {
  if (dx.empty()) return;
  const std::size_t count = n * features_;
  if (!ctx.training || p_ == 0.0f) {
    std::copy_n(dy.begin(), count, dx.begin());  // dx = dy
    return;
  }
  auto mask = [&](std::size_t begin, std::size_t end) {
    for (std::size_t e = begin; e < end; ++e) dx[e] = mask_[e] * dy[e];  // dx = m ⊙ dy
  };
  blas::parallel_ranges(count, kMinPerThread, mask);
}

}  // namespace ringtrain
