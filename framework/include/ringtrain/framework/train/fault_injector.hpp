// FaultInjector: the named points of a training run where a test may inject a fault (a NaN
// in one rank's gradient, a hang, a one-ulp difference between replicas, a SIGKILL after a
// step or inside a save) or fix what the checkpoint planner measures.
//
// The production path calls every point through this interface; the default does nothing,
// so a run without faults reads the points as no-ops. Tests configure a ScriptedFaults from
// a FaultPlan (the CLI's hidden --test-* flags fill one), never through the user's
// configuration. A rank of -1 disables each fault.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace ringtrain {

class FaultInjector {
 public:
  virtual ~FaultInjector() = default;

  // Backward of `step` on `rank`: true to put a NaN into this rank's gradient, as a
  // non-finite loss would (every rank must then skip the step together).
  virtual bool poison_gradient(int /*rank*/, std::uint64_t /*step*/) const { return false; }
  // At the end of backward of `step` on `rank`, whose forward and backward took compute_s:
  // a slow rank computes (F − 1) × compute_s more, with real arithmetic (not a sleep), so its
  // core is busy and the measured compute speed falls F-fold (--local-batches auto's case).
  virtual void slow_compute(int /*rank*/, std::uint64_t /*step*/, double /*compute_s*/) const {}
  // --local-batches auto: true if `rank` applies a split of its own instead of the agreed
  // one at each re-split (the split hash check's case: every rank must then stop).
  virtual bool decide_split_alone(int /*rank*/) const { return false; }
  // --local-batches auto: false to go on re-splitting while a rank waits for its core more
  // than the others (a test on a shared machine, where other processes make one rank or
  // another stand out at times).
  virtual bool hold_split_for_core_wait() const { return true; }
  // Just before the gradient sum of `step`: a rank that stalls here (the watchdog's case).
  virtual void before_gradient_sum(int /*rank*/, std::uint64_t /*step*/) const {}
  // After the update of `step`: a change to this rank's parameters (the replica check's case).
  virtual void after_update(int /*rank*/, std::uint64_t /*step*/,
                            std::span<float> /*params*/) const {}
  // After step `done` completed (steps counted from 1): a rank that dies between steps.
  virtual void after_step(int /*rank*/, std::uint64_t /*done*/) const {}
  // Just before the save after step `done`: arm a crash inside one phase of the commit, or a
  // failure of the write.
  virtual void before_save(int /*rank*/, std::uint64_t /*done*/) const {}
  // Just after the snapshot of an asynchronous save after step `done` (training resumes next).
  virtual void after_snapshot(int /*rank*/, std::uint64_t /*done*/) const {}

  // The Young/Daly planner's inputs, fixed instead of measured (nullopt: measured).
  // save_index counts the saves of this attempt from 0.
  virtual std::optional<double> save_cost_s(std::size_t /*save_index*/) const {
    return std::nullopt;
  }
  virtual std::optional<double> step_s() const { return std::nullopt; }
};

// What the hidden --test-* flags ask for.
struct FaultPlan {
  int nan_rank = -1;  // this rank's gradient gets a NaN at nan_step
  std::uint64_t nan_step = 0;
  int perturb_rank = -1;  // this rank's first parameter is nudged by one ulp at perturb_step
  std::uint64_t perturb_step = 0;
  int hang_rank = -1;  // this rank sleeps hang_s before the gradient sum of hang_step
  std::uint64_t hang_step = 0;
  double hang_s = 0.0;
  int kill_rank = -1;  // this rank SIGKILLs itself after completing step kill_step
  std::uint64_t kill_step = 0;
  // Instead: right after its snapshot of the asynchronous save after kill_step, while the
  // save's shards may still be on their way to rank 0's writer.
  bool kill_at_snapshot = false;
  int crash_phase = 0;  // rank 0 SIGKILLs itself in this phase (1..5) of the save at crash_step
  std::uint64_t crash_step = 0;
  // The saves after these steps fail on rank 0 once their .partial is written, as a full disk
  // would fail them (the save is not durable; training goes on).
  std::vector<std::uint64_t> fail_save_steps;
  // The k-th save's cost is save_cost_s[k] (the last value repeats); empty: measured.
  std::vector<double> save_cost_s;
  double step_s = 0.0;  // > 0: the planner converts τ to steps with this step time
  // Every rank waits after completing each of pause_steps until the file pause_file exists
  // (at most a minute), so a test can change the world at known points of the run; a test
  // that pauses twice removes the file between the pauses.
  std::vector<std::uint64_t> pause_steps;
  std::string pause_file;
  // Rank slow_rank computes slow_factor times as long (slow_compute); from step
  // slow_moves_at on, rank slow_moves_to does instead (-1: it never moves).
  int slow_rank = -1;
  double slow_factor = 1.0;
  std::uint64_t slow_moves_at = 0;
  int slow_moves_to = -1;
  int split_alone_rank = -1;      // this rank decides each re-split alone (decide_split_alone)
  bool ignore_core_wait = false;  // hold_split_for_core_wait() false
};

// Fills the slow rank of `plan` from --test-slow-rank's text "R:F" or "R:F@STEP:R2" (rank R
// F times slower, F >= 1; from step STEP on, rank R2; ranks below world_size). Throws
// UsageError naming the text.
void parse_slow_rank(const std::string& text, FaultPlan& plan, int world_size);

// A FaultInjector that does what `plan` says.
std::unique_ptr<FaultInjector> make_scripted_faults(FaultPlan plan);

}  // namespace ringtrain
