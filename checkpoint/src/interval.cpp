// The save interval (interval.hpp): fixed K, or Young/Daly τ = √(2·C·μ) re-planned on drift.
#include "ringtrain/checkpoint/interval.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "ringtrain/checkpoint/error.hpp"

namespace ringtrain::checkpoint {

IntervalPlan young_daly(double cost_s, double mtbf_s, double step_s, double latency_s) {
  if (!std::isfinite(cost_s) || !std::isfinite(mtbf_s) || !std::isfinite(step_s) ||
      !std::isfinite(latency_s) || cost_s < 0 || mtbf_s <= 0 || step_s < 0 || latency_s < 0)
    throw CheckpointError("Young/Daly interval needs C >= 0, MTBF > 0, step time >= 0 and "
                          "persist latency >= 0 (got C " + std::to_string(cost_s) + " s, MTBF " +
                          std::to_string(mtbf_s) + " s, step " + std::to_string(step_s) +
                          " s, latency " + std::to_string(latency_s) + " s)");
  constexpr double kMinStepS = 1e-9;
  IntervalPlan plan;
  plan.cost_s = cost_s;
  plan.mtbf_s = mtbf_s;
  plan.step_s = step_s;
  plan.latency_s = latency_s;
  plan.tau_s = std::max(std::sqrt(2.0 * cost_s * mtbf_s), latency_s);
  // τ / s steps, rounded half away from zero, at least one step between saves
  const double steps = std::round(plan.tau_s / std::max(step_s, kMinStepS));
  plan.every_steps = steps < 1.0     ? 1
                     : steps >= 1e18 ? std::uint64_t{1000000000000000000}
                                     : static_cast<std::uint64_t>(steps);
  plan.predicted_overhead =
      plan.tau_s > 0 ? cost_s / plan.tau_s + (plan.tau_s / 2.0 + latency_s) / mtbf_s : 0.0;
  return plan;
}

SaveSchedule SaveSchedule::every(std::uint64_t every_steps) {
  SaveSchedule schedule;
  schedule.every_ = every_steps;
  return schedule;
}

SaveSchedule SaveSchedule::young_daly(double mtbf_s, std::uint64_t start_step,
                                      std::uint64_t first_save_steps) {
  if (!(mtbf_s > 0) || !std::isfinite(mtbf_s) || first_save_steps == 0)
    throw CheckpointError("Young/Daly schedule needs MTBF > 0 and a first save after >= 1 step");
  SaveSchedule schedule;
  schedule.auto_ = true;
  schedule.mtbf_s_ = mtbf_s;
  schedule.next_due_ = start_step + first_save_steps;
  schedule.first_save_steps_ = first_save_steps;
  return schedule;
}

bool SaveSchedule::due(std::uint64_t done) const {
  if (auto_) return done == next_due_;
  return every_ > 0 && done % every_ == 0;
}

std::optional<IntervalPlan> SaveSchedule::saved(std::uint64_t done, double cost_s, double step_s,
                                                double latency_s) {
  if (!auto_) return std::nullopt;
  std::optional<IntervalPlan> replanned;
  if (!plan_ || cost_s > plan_->cost_s * kDriftFactor || cost_s < plan_->cost_s / kDriftFactor ||
      latency_s > plan_->tau_s) {
    plan_ = checkpoint::young_daly(cost_s, mtbf_s_, step_s, latency_s);
    replanned = plan_;
  }
  next_due_ = done + plan_->every_steps;
  return replanned;
}

void SaveSchedule::failed(std::uint64_t done) {
  if (auto_) next_due_ = done + (plan_ ? plan_->every_steps : first_save_steps_);
}

}  // namespace ringtrain::checkpoint
