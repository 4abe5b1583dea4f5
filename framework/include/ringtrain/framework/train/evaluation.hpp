// Evaluation on the test set, shared by the ranks: each rank takes a near-equal slice of the
// test set, runs forward in chunks of kEvalChunk samples (no gradients, BatchNorm with its
// running statistics, no dropout), and one allreduce sums the correct counts and loss sums.
// The counts are integers held in doubles, so their sum is exact: the accuracy is the same
// for every N.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/framework/data/dataset.hpp"
#include "ringtrain/framework/sequential.hpp"

namespace ringtrain {

// Samples per forward pass of an evaluation: the model must be planned for at least this.
inline constexpr std::size_t kEvalChunk = 256;

struct Evaluation {
  double accuracy = 0.0;  // correct / test samples
  double loss = 0.0;      // mean cross-entropy
};

// Collective. `seed` keys the model's randomness as in training (unused without dropout).
Evaluation evaluate(const collectives::Communicator& comm, Sequential& model,
                    const data::Dataset& test, std::uint64_t seed);

// The same, and every sample's predicted class on every rank: `predictions` (test.size()
// entries) receives the index of each sample's largest logit, the first one on ties (the
// rule the accuracy counts with). Each rank fills its slice; one more allreduce (of
// test.size() doubles, exact for class indices) gives every rank the whole list. Collective.
Evaluation evaluate(const collectives::Communicator& comm, Sequential& model,
                    const data::Dataset& test, std::uint64_t seed,
                    std::span<std::int64_t> predictions);

}  // namespace ringtrain
