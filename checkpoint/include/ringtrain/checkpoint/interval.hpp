// When to save: every K steps, or the Young/Daly interval from the measured save cost.
// Pure arithmetic on numbers the caller measured and agreed across ranks;
// no HDF5, no MPI, no clock.
//
//   C   save cost: seconds one save blocks training (the slowest rank's)
//   μ   the job's mean time between failures (--mtbf), seconds
//   τ   interval between saves in seconds of useful compute: τ = √(2·C·μ)  (Young 1974;
//       Daly's first-order optimum for C ≪ μ)
//   s   mean step time (useful compute per step); the interval in steps is round(τ / s) ≥ 1
//   predicted overhead = C/τ + τ/(2μ): save time per useful second, plus the expected replay
//       (half an interval lost per failure, one failure per μ); at τ = √(2Cμ) both terms are
//       equal and the sum is √(2C/μ)
//
// Asynchronous saves (the training loop stops for the snapshot only; the file is written in
// the background) add L, the persist latency: snapshot to durable commit. C is then the
// blocking cost only. A save counts once durable, so a failure x seconds after a snapshot
// loses x if x >= L (this save is durable) and x + τ if x < L (the previous one is the
// restart point). With failures uniform over an interval (τ >= L):
//   expected loss = (1/τ)·∫₀^τ x dx + τ·(L/τ) = τ/2 + L
//   waste = C/τ + (τ/2 + L)/μ,  minimal at τ = √(2Cμ) as before (L does not depend on τ)
// and since at most one save is in flight, τ is kept >= L: τ = max(√(2Cμ), L). L = 0 is the
// synchronous case.
//
// The first save happens after `first_save_steps` steps (a cost must be measured before it
// can be planned); each save's cost is compared with the one the plan used, and a cost
// that drifted by more than kDriftFactor either way re-plans τ. The next save is due one
// interval after the last save, whether it succeeded or failed (a failed save is retried
// one interval later, or `first_save_steps` later if no save has planned one yet).
#pragma once

#include <cstdint>
#include <optional>

namespace ringtrain::checkpoint {

struct IntervalPlan {
  double cost_s = 0.0;              // C used
  double mtbf_s = 0.0;              // μ
  double step_s = 0.0;              // s used
  double latency_s = 0.0;           // L, the persist latency (0: synchronous saves)
  double tau_s = 0.0;               // max(√(2·C·μ), L)
  std::uint64_t every_steps = 0;    // max(1, round(τ / s))
  double predicted_overhead = 0.0;  // C/τ + (τ/2 + L)/μ, a fraction (0.01 = 1 %)
};

// The Young/Daly plan. Throws CheckpointError unless cost_s >= 0, mtbf_s > 0, step_s >= 0,
// latency_s >= 0 and all are finite (a zero step time counts as 1 ns; a zero cost and
// latency give every_steps 1).
IntervalPlan young_daly(double cost_s, double mtbf_s, double step_s, double latency_s = 0.0);

class SaveSchedule {
 public:
  inline static constexpr double kDriftFactor = 1.5;

  // Every `every_steps` steps counted from step 0 (step % K == 0, so restarts keep the same
  // save steps); 0: no periodic saves.
  static SaveSchedule every(std::uint64_t every_steps);
  // Young/Daly with job MTBF `mtbf_s` (> 0); the first save `first_save_steps` (>= 1) steps
  // after `start_step` (the step training starts or resumes at) measures C.
  static SaveSchedule young_daly(double mtbf_s, std::uint64_t start_step,
                                 std::uint64_t first_save_steps);

  // True if a periodic save is due after completing step `done` (steps counted from 1).
  bool due(std::uint64_t done) const;

  // Tell the schedule that a save (periodic or not) was made after step `done`, blocking for
  // cost_s, at mean step time step_s, with latency_s the persist latency last measured (0
  // for synchronous saves). Fixed schedules ignore it. Young/Daly returns the new plan when
  // it (re)planned: on the first save, when cost_s left [C/kDriftFactor, C·kDriftFactor] of
  // the plan's C, or when latency_s exceeds the plan's τ; nullopt otherwise. The next save is
  // due `every_steps` after `done`.
  std::optional<IntervalPlan> saved(std::uint64_t done, double cost_s, double step_s,
                                    double latency_s = 0.0);

  // Tell the schedule that the periodic save after step `done` failed: its cost is not a
  // measurement of C, and the next save is due one interval (or `first_save_steps`) later.
  void failed(std::uint64_t done);

  // The plan in force (nullopt before the first save, or for a fixed schedule).
  const std::optional<IntervalPlan>& plan() const { return plan_; }

 private:
  bool auto_ = false;
  double mtbf_s_ = 0.0;
  std::uint64_t every_ = 0;     // fixed: K
  std::uint64_t next_due_ = 0;  // auto: the step after which the next save is due
  std::uint64_t first_save_steps_ = 0;  // auto: the delay of a save before any plan
  std::optional<IntervalPlan> plan_;
};

}  // namespace ringtrain::checkpoint
