// SavePolicyOptions: when the training loop saves a checkpoint (the save policy's options,
// from --checkpoint-every, --mtbf or --node-mtbf, --max-failed-saves and --checkpoint-async;
// the run plan
// fills them, run_plan.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ringtrain {

// The job's MTBF that --checkpoint-every auto plans with when neither --mtbf nor --node-mtbf
// is given: one day, a conservative figure for one machine (docs/checkpoints.md says why).
inline constexpr double kDefaultJobMtbfS = 86400.0;

struct SavePolicyOptions {
  std::string every = "auto";  // --checkpoint-every: "auto", K, or "0" (at the end only)
  double mtbf_s = 0.0;         // --mtbf, for auto (0: kDefaultJobMtbfS)
  double node_mtbf_s = 0.0;    // --node-mtbf: the job's MTBF is this over the hosts (save_policy)
  std::uint64_t first_auto_save_steps = 50;  // auto: the first, measured save after this many
  std::size_t max_failed_saves = 3;  // --max-failed-saves: periodic failures in a row tolerated
  bool async = false;  // --checkpoint-async: periodic saves persist on a writer thread
};

}  // namespace ringtrain
