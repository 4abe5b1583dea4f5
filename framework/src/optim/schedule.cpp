// Learning-rate schedules and the batch-size scaling rule (see schedule.hpp for formulas).
// Worked example, base_lr 0.4, warmup 4, step_size 10, gamma 0.1:
//   step  0  1  2  3 | 4 .. 13 | 14 .. 23 | 24 ..
//   lr   .1 .2 .3 .4 |   0.4   |   0.04   |  0.004
#include "ringtrain/framework/optim/schedule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "ringtrain/framework/error.hpp"

namespace ringtrain {

void validate(const ScheduleConfig& config) {
  const bool is_step = config.kind == "step";
  const bool is_cosine = config.kind == "cosine";
  if (config.kind != "constant" && !is_step && !is_cosine)
    throw UsageError(
        fmt::format("unknown schedule '{}'; choose one of: constant, step, cosine", config.kind));
  if (!(config.base_lr > 0.0f) || std::isinf(config.base_lr))
    throw UsageError(fmt::format("learning rate {} must be finite and > 0 (--lr)", config.base_lr));
  if (is_step) {
    if (config.step_size == 0)
      throw UsageError("step schedule needs step_size > 0 (steps between decays), got 0");
    if (!(config.gamma > 0.0f && config.gamma <= 1.0f))
      throw UsageError(
          fmt::format("step schedule gamma = {} must be in (0, 1]; 0.1 is usual", config.gamma));
  }
  if (is_cosine) {
    if (config.total_steps <= config.warmup_steps)
      throw UsageError(
          fmt::format("cosine schedule needs total_steps > warmup_steps, got total_steps = {} and "
                      "warmup_steps = {}; set --steps or --epochs, or shorten the warmup",
                      config.total_steps, config.warmup_steps));
    if (!(config.min_lr >= 0.0f && config.min_lr <= config.base_lr))
      throw UsageError(fmt::format("cosine schedule min_lr = {} must be in [0, base_lr = {}]",
                                   config.min_lr, config.base_lr));
  }
}

float learning_rate(const ScheduleConfig& config, std::uint64_t step) {
  const double base_lr = config.base_lr;
  const std::uint64_t warmup = config.warmup_steps;
  if (step < warmup) return float(base_lr * double(step + 1) / double(warmup));
  const std::uint64_t s = step - warmup;  // steps since warmup ended
  if (config.kind == "step")
    return float(base_lr * std::pow(double(config.gamma), double(s / config.step_size)));
  if (config.kind == "cosine") {
    const std::uint64_t span = config.total_steps - warmup;
    const double progress = double(std::min(s, span)) / double(span);  // 0 → 1
    const double min_lr = config.min_lr;
    return float(min_lr + (base_lr - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress)));
  }
  return float(base_lr);  // constant
}

float scale_learning_rate(float base_lr, std::string_view rule, std::size_t global_batch,
                          std::size_t reference_batch) {
  if (global_batch == 0 || reference_batch == 0)
    throw UsageError(fmt::format(
        "learning-rate scaling needs batches > 0, got global batch {} and reference batch {}",
        global_batch, reference_batch));
  const double ratio = double(global_batch) / double(reference_batch);
  if (rule == "none") return base_lr;
  if (rule == "linear") return float(double(base_lr) * ratio);
  if (rule == "sqrt") return float(double(base_lr) * std::sqrt(ratio));
  throw UsageError(
      fmt::format("unknown --lr-scaling '{}'; choose one of: none, linear, sqrt", rule));
}

}  // namespace ringtrain
