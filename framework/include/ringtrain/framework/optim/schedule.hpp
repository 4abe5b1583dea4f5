// Learning-rate schedules: the lr handed to Optimizer::step at each global step, and the
// batch-size scaling rule that picks base_lr (Goyal et al., "Accurate, Large Minibatch SGD").
//
// `step` is the 0-based index of the update about to be applied. With W = warmup_steps:
//
//   step < W        lr = base_lr · (step + 1) / W          linear warmup, reaches base_lr
//                                                          on step W − 1
//   then s = step − W:
//   constant        lr = base_lr
//   step            lr = base_lr · gamma^⌊s / step_size⌋
//   cosine          lr = min_lr + (base_lr − min_lr) · ½(1 + cos(π · s / (T − W))),
//                   T = total_steps; s is clamped to T − W, so lr = min_lr from step T on
//
// A schedule is a pure function of (config, step): a checkpoint only needs the step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ringtrain {

struct ScheduleConfig {
  std::string kind = "constant";   // constant | step | cosine
  float base_lr = 0.0f;            // required: > 0 (validate rejects the default)
  std::uint64_t warmup_steps = 0;  // 0: no warmup
  std::uint64_t total_steps = 0;   // cosine: > warmup_steps
  std::uint64_t step_size = 0;     // step: > 0, steps between decays (counted after warmup)
  float gamma = 0.1f;              // step: decay factor, in (0, 1]
  float min_lr = 0.0f;             // cosine: final lr, in [0, base_lr]
};

// Throws UsageError naming the field, its value and what is allowed.
void validate(const ScheduleConfig& config);

// The learning rate for 0-based `step`. config must be valid (not checked here: it is
// called every step).
float learning_rate(const ScheduleConfig& config, std::uint64_t step);

// base_lr tuned for reference_batch, scaled for global_batch:
//   none    base_lr
//   linear  base_lr · global_batch / reference_batch    (Goyal et al.; pair with warmup)
//   sqrt    base_lr · √(global_batch / reference_batch)
// Throws UsageError for an unknown rule or a zero batch.
float scale_learning_rate(float base_lr, std::string_view rule, std::size_t global_batch,
                          std::size_t reference_batch = 128);

}  // namespace ringtrain
