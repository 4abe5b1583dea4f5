// The smoothed compute speeds (speed_smoother.hpp).
#include "train/step/speed_smoother.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "ringtrain/framework/error.hpp"

namespace ringtrain {

SpeedSmoother::SpeedSmoother(std::size_t ranks, double weight)
    : weight_(weight), speeds_(ranks, 0.0) {
  if (!(weight > 0.0 && weight <= 1.0))
    throw UsageError(fmt::format(
        "speed smoothing weight {} must be in (0, 1]: the newest window's share", weight));
}

double SpeedSmoother::window_speed(const ComputeWindow& window) {
  const double net_s = window.compute_s - window.core_wait_s;
  if (!(window.samples > 0.0) || !(net_s > 0.0) || !std::isfinite(window.samples / net_s))
    return 0.0;
  return window.samples / net_s;
}

void SpeedSmoother::add_window(std::span<const ComputeWindow> windows) {
  if (windows.size() != speeds_.size())
    throw Error(
        fmt::format("speed smoothing: {} windows for {} ranks", windows.size(), speeds_.size()));
  for (std::size_t r = 0; r < speeds_.size(); ++r) {
    const double now = window_speed(windows[r]);
    if (now == 0.0) continue;
    const double before = speeds_[r];
    const bool changed =
        !(before > 0.0) || std::max(now, before) > kSpeedChange * std::min(now, before);
    speeds_[r] = changed ? now : weight_ * now + (1.0 - weight_) * before;
  }
}

void SpeedSmoother::restore(std::span<const double> speeds) {
  if (speeds.size() != speeds_.size())
    throw Error(fmt::format("speed smoothing: {} saved speeds for {} ranks", speeds.size(),
                            speeds_.size()));
  for (std::size_t r = 0; r < speeds_.size(); ++r)
    speeds_[r] = std::isfinite(speeds[r]) && speeds[r] > 0.0 ? speeds[r] : 0.0;
}

}  // namespace ringtrain
