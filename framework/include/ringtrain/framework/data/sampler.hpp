// The global sampler: which samples a step uses, and which of them each rank takes.
//
// At the start of every step all ranks ask the GlobalSampler for the same global batch (it
// is a pure function of seed, epoch and position, so no communication is needed), then each
// rank takes its slice of it and gathers those samples (dataset.hpp).
//
// Vocabulary:
//   permutation  the order of all n samples in an epoch, a pure function of (seed, epoch),
//                independent of the number of ranks
//   position     how many samples of the current epoch's permutation are already consumed
//   global batch B samples per step over all ranks; the last step of an epoch may be short
//   local batch  the configured share of one rank; a rank's slice may be 0 samples
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ringtrain::data {

// The epoch's sample order: a permutation of 0..n-1 by Fisher–Yates, swap i drawn from
// random::hash({seed, kStreamSampler, epoch, i}). Requires n < 2^32 (throws UsageError).
std::vector<std::uint64_t> epoch_permutation(std::uint64_t seed, std::uint64_t epoch,
                                             std::size_t n);
// The same permutation written into `out` (n = out.size()); allocates nothing.
void epoch_permutation(std::uint64_t seed, std::uint64_t epoch, std::span<std::uint64_t> out);

// Everything the loader needs to continue exactly where it stopped; saved in checkpoints.
// Independent of the number of ranks.
struct SamplerState {
  std::uint64_t seed = 0;
  std::uint64_t epoch = 0;
  std::uint64_t position = 0;  // samples of `epoch` already consumed, < dataset size
};

// One step's global batch: positions [begin, begin + samples.size()) of the epoch's
// permutation, and the sample indices found there.
struct GlobalBatch {
  std::uint64_t epoch = 0;
  std::uint64_t begin = 0;
  std::span<const std::uint64_t> samples;  // (B) or fewer; valid until the next call
};

class GlobalSampler {
 public:
  // Throws UsageError unless 0 < global_batch <= dataset_size < 2^32.
  GlobalSampler(std::uint64_t seed, std::size_t dataset_size, std::size_t global_batch);

  // The next step's samples, then advances: the position moves by the batch size, and after
  // the epoch's last (possibly short) batch the epoch advances and the position returns to 0.
  // Allocates nothing.
  GlobalBatch next_batch();

  SamplerState state() const { return state_; }
  // Continues from a saved state. Throws DataError if the position is not inside the dataset
  // (position >= dataset size), e.g. a checkpoint written for a different dataset.
  void restore(const SamplerState& state);

  std::size_t steps_per_epoch() const {
    return (dataset_size_ + global_batch_ - 1) / global_batch_;
  }
  std::size_t dataset_size() const { return dataset_size_; }
  std::size_t global_batch() const { return global_batch_; }

 private:
  std::size_t dataset_size_;
  std::size_t global_batch_;
  SamplerState state_;
  std::vector<std::uint64_t> permutation_;  // (n) of state_.epoch, recomputed on a new epoch
  std::vector<std::uint64_t> batch_;        // (B) the samples handed out by next_batch
};

// --- Rank slicing (pure functions) ---

// A near-equal split of `batch` over `ranks`: sizes differ by at most one, larger first.
//   near_equal_split(10, 4) -> {3, 3, 2, 2}. Throws UsageError if ranks == 0.
std::vector<std::size_t> near_equal_split(std::size_t batch, std::size_t ranks);

// The part [begin, begin + count) of a global batch that one rank takes.
struct Slice {
  std::size_t begin = 0;
  std::size_t count = 0;
};

// Rank `rank`'s slice of a global batch of `actual_batch` samples, when the configured local
// batches are `local_batches` (one per rank, summing to the configured global batch B).
// Offsets are prefix sums of the local batches, clipped to actual_batch, so a short last
// batch is taken from the front and trailing ranks may get 0 samples.
// Throws Error if rank >= local_batches.size() or actual_batch > sum(local_batches).
Slice rank_slice(std::span<const std::size_t> local_batches, std::size_t rank,
                 std::size_t actual_batch);

// Parses --local-batches "b0,b1,...": one non-negative count per rank, summing to
// global_batch (a count of 0 is allowed). Throws UsageError with the values on a non-number,
// a negative or empty item, the wrong number of items, or the wrong sum.
std::vector<std::size_t> parse_local_batches(const std::string& text, std::size_t ranks,
                                             std::size_t global_batch);

}  // namespace ringtrain::data
