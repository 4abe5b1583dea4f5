// The reduction convention: how N ranks' gradients become the one update.
//
// sum-scaled (the default, and the only correct one):
//   every rank scales the *sum* of its per-sample losses by 1/B, B = samples in the global
//   batch this step, and the collective *sums*:
//     g = Σ_r Σ_{i ∈ r} ∇ℓ_i / B = (1/B) Σ_i ∇ℓ_i          whatever the split
//   Example: rank A 1 sample (mean gradient 2), rank B 3 samples (mean 6):
//     g = (1·2 + 3·6) / 4 = 5.
//
// mean-of-means (wrong on purpose, for teaching): every rank averages over its own samples
// and the collective averages over ranks:
//     g = (1/N) Σ_r (1/b_r) Σ_{i ∈ r} ∇ℓ_i   = (2 + 6) / 2 = 4 in the example.
//   It equals sum-scaled only when every rank has the same number of samples.
//
// exact: sum-scaled's update, with its sums made independent of N and of the split
//   (exact_step.hpp): the batch is cut into micro-batches of m samples at fixed global
//   positions, each micro-batch's gradient is added into an exact integer accumulator
//   (collectives/exact_sum.hpp), the ranks sum the integers, and the total is rounded once.
#pragma once

#include <cstddef>
#include <string>

namespace ringtrain {

enum class Reduction { kSumScaled, kMeanOfMeans, kExact };

// Throws UsageError for anything but "sum-scaled" / "mean-of-means" / "exact".
Reduction parse_reduction(const std::string& name);
std::string to_string(Reduction reduction);

// The factor this rank multiplies its loss sum by before backward, so that *summing* the
// ranks' gradients gives the update of the convention.
//   local_samples: b_r this step; global_samples: B; world_size: N
float loss_scale(Reduction reduction, std::size_t local_samples, std::size_t global_samples,
                 int world_size);

// One sentence for the start-up banner and the manifest.
std::string describe(Reduction reduction);

}  // namespace ringtrain
