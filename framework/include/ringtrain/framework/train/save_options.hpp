// SavePolicyOptions: when the training loop saves a checkpoint (the save policy's options,
// from --checkpoint-every, --mtbf or --node-mtbf, --max-failed-saves and --checkpoint-async;
// the run plan
// fills them, run_plan.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ringtrain {

struct SavePolicyOptions {
  std::string every = "0";   // --checkpoint-every: K, "auto", or "0" (at the end only)
  double mtbf_s = 0.0;       // --mtbf, for auto
  double node_mtbf_s = 0.0;  // --node-mtbf: the job's MTBF is this over the hosts (save_policy)
  std::uint64_t first_auto_save_steps = 50;  // auto: the first, measured save after this many
  std::size_t max_failed_saves = 3;  // --max-failed-saves: periodic failures in a row tolerated
  bool async = false;  // --checkpoint-async: periodic saves persist on a writer thread
};

}  // namespace ringtrain
