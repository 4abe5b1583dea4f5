// SplitPlanner: --local-batches auto on one rank, the loop's side of the split that follows each
// rank's measured compute speed (bench/README-straggler.md). The pure parts it ties together:
//
//   per step     this rank's b_r, forward + backward seconds net of the communication inside
//                them, the core wait of that interval, the sum phase (RebalanceWindow)
//   every K      one allreduce_sum of every rank's window (RebalanceWindow::pack/unpack): every
//   steps        rank then holds bitwise the same numbers, folds them into the same smoothed
//                speeds (SpeedSmoother) and decides the same split (decide_split) for the
//                same next step
//
// Checks and records, at each window's end:
//   - the hashes of the splits the ranks applied differ (a rank decided alone): every rank
//     throws the same AgreedError, so the run stops on all ranks together
//   - some rank waited for its core a share of its compute kCoreWaitNotice or more above the
//     least share among the ranks (it stands out: something else runs on its core): the split
//     is kept (moving samples does not help an absent rank) and rank 0 says so once; every rank
//     waiting alike (more ranks than cores) is said once too, and the split goes on following
//     the speeds, which are net of the wait (core_wait.hpp)
//   - rank 0 appends to metrics.jsonl a window record (split, the samples each rank computed,
//     the window's speeds, core-wait shares, comm),
//     a `rebalance` record when the split changes and a `rebalance_measured` one a window
//     later (rebalance_record.hpp)
//
// Vocabulary: `done` counts completed steps from 1; a window ends after each step with
// done % K == 0, so the windows fall on the same steps after a resume.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/framework/train/config.hpp"
#include "ringtrain/framework/train/fault_injector.hpp"
#include "ringtrain/framework/train/run_directory.hpp"
#include "train/run/core_wait.hpp"
#include "train/run/step_account.hpp"
#include "train/step/batch_split.hpp"
#include "train/step/rebalance_window.hpp"
#include "train/step/speed_smoother.hpp"

namespace ringtrain {

class SplitPlanner {
 public:
  // The split starts as `first` (N entries); the cap, m and the floors come from `config`
  // (floors: m for every rank, so every rank keeps being measured). `run_dir`: rank 0's run
  // directory (null elsewhere). `say`: rank 0's line printer. References must outlive it.
  SplitPlanner(const collectives::Communicator& comm, const TrainConfig& config,
               std::vector<std::size_t> first, const FaultInjector& faults, RunDirectory* run_dir,
               std::function<void(const std::string&)> say);

  // After step `done`, in which this rank computed `samples` (b_r as the step applied it) in
  // `times`: adds its measure; at a window's end, the exchange and the decision (collective
  // there). Returns the split for the next step when it changed. Throws AgreedError on every
  // rank when the ranks applied different splits.
  std::optional<std::vector<std::size_t>> after_step(std::uint64_t done, std::size_t samples,
                                                     const StepTimes& times);

  // The split in force and the smoothed speeds (samples/s, 0: unknown): checkpointed state.
  const std::vector<std::size_t>& split() const { return request_.current; }
  const std::vector<double>& speeds() const { return smoother_.speeds(); }
  // The plan as the checkpoint holds it (TrainingState::split_plan): JSON text
  // {"split": [...], "speeds": [...], "standing_out": r or null}, the speeds' doubles exactly
  // (standing_out: the rank whose core wait stood out in the last window). Kept current at
  // each window's end; a resume writes the saved text here.
  std::string* plan_text() { return &plan_text_; }
  // Continues the plan in plan_text() after a resume: the saved split if it is valid for this
  // run (N entries summing to B, multiples of m, within the floors and the cap), else the
  // first split; the speeds if there are N (non-finite or negative ones unknown), else none
  // known; the rank that stood out if it is one of the N, else none. Returns the line that
  // says which.
  std::string resume();

  // Rank 0's run directory, once it is open (the records go there).
  void set_run_directory(RunDirectory* run_dir) { run_dir_ = run_dir; }

  // The banner's line: the policy, and the cap's memory (`cap_bytes`: the input and layer
  // outputs planned for cap rows).
  std::string banner_line(double cap_bytes) const;

  // The manifest's "split_policy": auto, K, cap, m, floors, margin, speed weight and change
  // factor, core-wait notice.
  nlohmann::json policy() const;

 private:
  void end_window(std::uint64_t done);
  void record_window(std::uint64_t done, const WindowTotals& totals,
                     const std::vector<double>& shares) const;
  void decide(std::uint64_t done, double comm_s);
  void write_plan_text();

  const collectives::Communicator& comm_;
  const FaultInjector& faults_;
  RunDirectory* run_dir_;
  std::function<void(const std::string&)> say_;
  std::size_t every_;
  SplitRequest request_;  // B, m, floors, cap, the split in force
  SpeedSmoother smoother_;
  RebalanceWindow window_;
  double window_step_s_ = 0.0;  // this rank's step seconds in the open window
  // The re-split whose measurement is due at the next window's end.
  std::optional<std::uint64_t> measured_since_;
  double predicted_step_s_ = 0.0;
  CoreWaitHold hold_;  // the rank that stood out in the window before
  // The core-wait lines printed: a rank that stands out, every rank waiting.
  bool noticed_absent_ = false;
  bool noticed_everyone_ = false;
  std::string plan_text_;
};

}  // namespace ringtrain
