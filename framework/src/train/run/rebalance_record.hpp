// The records a re-split of the global batch leaves in metrics.jsonl: the decision, with what
// it was based on and the step time it predicts, and, a window later, the step time measured
// under the new split beside that prediction. Both are one JSON object per line like every
// record there, keyed by the step they follow:
//
//   {"step": 40, "rebalance": {"old_split": [32, 32], "new_split": [40, 24],
//     "measured_speeds": [5000.0, 3000.0], "planned_speeds": [5000.0, 3000.0],
//     "comm_s": 0.0003, "margin": 0.05,
//     "predicted_step_s": {"old": 0.0109, "new": 0.0083}}}
//   {"step": 60, "rebalance_measured": {"since_step": 40, "split": [40, 24],
//     "predicted_step_s": 0.0083, "measured_step_s": 0.0086, "measured_over_predicted": 1.04}}
//
// (measured_speeds: the smoothed speeds, 0 where unknown; planned_speeds: those the split
// used, an unknown one replaced by the mean of the known ones.)
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "train/step/batch_split.hpp"

namespace ringtrain {

// The record of a split decided after step `step` from `request`.
nlohmann::json rebalance_record(std::uint64_t step, const SplitRequest& request,
                                const SplitDecision& decision);

// The record of the window after a re-split: the split in force since `since_step`, the step
// time the decision predicted for it, and the mean step time measured (seconds, > 0).
nlohmann::json rebalance_measured_record(std::uint64_t step, std::uint64_t since_step,
                                         const std::vector<std::size_t>& split,
                                         double predicted_step_s, double measured_step_s);

}  // namespace ringtrain
