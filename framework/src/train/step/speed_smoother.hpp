// The compute speeds the batch split follows (batch_split.hpp): each rank's samples per second
// of forward + backward, net of the time it spent waiting for a core, per window of steps and
// then smoothed across windows. Pure: every rank feeds it the same windows (all ranks' windows,
// after one small allreduce), so every rank holds the same speeds.
//
// Vocabulary:
//   window     the steps between two re-splits (--rebalance-every K)
//   samples    the samples a rank computed in the window (the sum of its b_r)
//   compute_s  the seconds of forward + backward in the window: no communication, no waiting
//              at a collective
//   core_wait_s  of compute_s, the seconds the rank was runnable but not running (waiting for
//              a core: core_wait.hpp); an absence, not slowness, so it is taken out
//   speed      samples / (compute_s - core_wait_s) for the window; 0 while unknown
//
// Smoothing: s ← w·s_window + (1 − w)·s, the first known window taken as is. The speed of a
// window is a ratio of sums (all its samples over all its seconds), not a mean of per-step
// ratios, so a short step does not weigh as much as a long one. A rank with no samples or no
// net time in a window keeps its speed (unknown if it never had one).
//
// Change detection: a window whose speed differs from the smoothed one by more than the factor
// kSpeedChange (the larger of the two over the smaller) is a change of regime, not noise: a
// rank became slower or faster (another job started on its node, the slowness moved), and its
// speed is taken as the window's, so the split follows at the next re-split instead of over
// several windows of fading memory. Smoothing is for noise, and the noise between windows at a
// steady split is a few percent: the factor stands well above it, so noise alone does not
// reset a speed, and below the slowdowns the split is for, so those are followed at once. A
// split that moves also changes the measured speeds (a rank's fixed costs per step spread over
// other row counts); that is mostly under the factor and smoothed, and where it is not, the
// speed at the new split is the one to follow anyway.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace ringtrain {

// The weight of the newest window.
inline constexpr double kSpeedWeight = 0.5;
// The factor between a window's speed and the smoothed one above which the window is taken as
// is (a change of regime).
inline constexpr double kSpeedChange = 1.3;

struct ComputeWindow {
  double samples = 0.0;
  double compute_s = 0.0;
  double core_wait_s = 0.0;
};

class SpeedSmoother {
 public:
  // Throws UsageError if weight is not in (0, 1].
  explicit SpeedSmoother(std::size_t ranks, double weight = kSpeedWeight);

  // Folds in one window of every rank (`windows.size()` must be the number of ranks; throws
  // Error otherwise): smoothed, or taken as is where it changed by more than kSpeedChange.
  void add_window(std::span<const ComputeWindow> windows);

  // Each rank's smoothed speed, samples/s; 0 where unknown.
  const std::vector<double>& speeds() const { return speeds_; }

  // Continues from speeds saved in a checkpoint (one per rank; throws Error otherwise).
  void restore(std::span<const double> speeds);

  // The speed of one window, samples/s, or 0 when it says nothing (no samples or no net time).
  static double window_speed(const ComputeWindow& window);

 private:
  double weight_;
  std::vector<double> speeds_;
};

}  // namespace ringtrain
