// One window of a rank's measurements for the re-split of the global batch, and their exchange
// in one small allreduce, so that every rank holds bitwise the same numbers and so decides the
// same split (batch_split.hpp) at the same step.
//
// Per step, this rank adds a StepMeasure. At the window's end, pack() lays the window out as
// kSlots doubles per rank, this rank's slot filled and every other slot 0; the ranks
// allreduce-sum the vectors, and unpack() reads every rank's window from the sum. Each element
// of the sum is one rank's value plus zeros, and x + 0 = x exactly in any order, so every rank
// unpacks the same bits whatever order the allreduce adds in.
//
// Slot of rank r (kSlots doubles):
//   samples      Σ b_r over the window's steps (exact as a double below 2^53)
//   compute_s    Σ forward + backward seconds (no communication, no waiting)
//   core_wait_s  Σ of compute_s spent waiting for a core (core_wait.hpp)
//   sum_s        Σ seconds of the step's sum phase (from the end of backward to the update)
//   split_hash   a 48-bit hash of the split this rank applied (exact in a double)
//
// The communication estimate is the least sum_s per step over the ranks: the rank that reaches
// the sum last waits least there, so its sum phase is the closest to the communication alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "train/step/speed_smoother.hpp"

namespace ringtrain {

struct StepMeasure {
  std::size_t samples = 0;  // b_r
  double compute_s = 0.0;
  double core_wait_s = 0.0;
  double sum_s = 0.0;
};

// Every rank's window, read from the summed vector.
struct WindowTotals {
  std::vector<ComputeWindow> windows;  // per rank
  double comm_s = 0.0;                 // the least sum_s per step over the ranks
  bool same_split = true;              // every rank applied the same split
};

class RebalanceWindow {
 public:
  static constexpr std::size_t kSlots = 5;

  // This is rank `rank` of `ranks`; throws Error if rank >= ranks. Plans its vector once.
  RebalanceWindow(std::size_t ranks, std::size_t rank);

  void add_step(const StepMeasure& step);
  std::size_t steps() const { return steps_; }

  // The vector to allreduce-sum in place (ranks × kSlots): this rank's window and the hash of
  // `split_applied`, zeros elsewhere. Valid until the next call.
  std::span<double> pack(std::span<const std::size_t> split_applied);

  // Every rank's window from `summed` (the vector pack() returned, after the allreduce); the
  // window of steps() steps. Throws Error if `summed` is not ranks × kSlots long.
  WindowTotals unpack(std::span<const double> summed) const;

  // Starts the next window.
  void reset();

  // A 48-bit FNV-1a hash of a split (of its values in order).
  static std::uint64_t split_hash(std::span<const std::size_t> split);

 private:
  std::size_t ranks_, rank_;
  std::size_t steps_ = 0;
  StepMeasure total_;  // this rank's sums over the window
  std::vector<double> exchange_;
};

}  // namespace ringtrain
