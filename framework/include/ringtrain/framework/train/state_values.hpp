// The values of a checkpoint that its layout and checksums cannot vouch for. Without a key
// anyone can recompute a file's seal (bench/README-security.md), so a file that verifies may
// still say that 2^63 steps were taken or that the run is at position 10^9 of a 60,000-sample
// epoch. The checkpoint module refuses non-finite floats in every array (parameters,
// optimizer state, BatchNorm statistics); this checks the counters against each other and
// against the configuration the file records (its header's JSON):
//
//   header step == /progress/step == /schedule/step <= the recorded run's total steps
//   /optimizer/step_count <= step, /progress/skipped_steps <= step
//   /data: dataset_size > 0, 0 < global_batch <= dataset_size (= the recorded global-batch),
//          epoch == step / E and position == (step mod E) * B, E = ceil(dataset_size / B)
//          (the sampler's order is a pure function of those: nothing else can be true)
//   header epoch == /data/epoch; /progress/samples_seen <= step * B
//   /progress: seconds, losses and sample counts finite and >= 0; metrics not NaN
//
// Used where a checkpoint comes in: a resume (Checkpointer::resume), `ringtrain eval` and
// `ringtrain inspect --verify`.
#pragma once

#include <string>

#include "ringtrain/checkpoint/file.hpp"
#include "ringtrain/checkpoint/state_tree.hpp"

namespace ringtrain {

// Throws UsageError "<file>: <entry> is V, ...: refused" for the first value out of range.
// `tree` holds the file's /data, /schedule, /optimizer/step_count and /progress entries.
void check_state_values(const checkpoint::StateTree& tree, const checkpoint::Header& header,
                        const std::string& file);

}  // namespace ringtrain
