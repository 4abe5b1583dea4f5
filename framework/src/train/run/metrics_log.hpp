// MetricsLog: the metrics window of the training loop. Every --log-every steps the ranks
// close the window together with one small allreduce that carries the window's loss and
// samples, whether any rank got a stop signal, every rank's step account (rank r fills row
// r, the sum gathers them) and every rank's peak resident memory; rank 0 appends the record
// to metrics.jsonl. Time spent in evaluations and saves inside a window is paused: it is not
// step time.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>

#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/framework/train/run_directory.hpp"
#include "ringtrain/framework/train/training_state.hpp"
#include "train/run/step_account.hpp"

namespace ringtrain {

struct WindowSummary {
  double loss = 0.0;            // mean training loss over the window's samples (all ranks)
  bool stop_requested = false;  // some rank received SIGTERM / SIGUSR1
};

class MetricsLog {
 public:
  // run_dir: rank 0's run directory, null on other ranks.
  MetricsLog(const collectives::Communicator& comm, RunDirectory* run_dir,
             std::uint64_t steps_per_epoch);

  // A step's times and loss join the open window and the counters (the loss part and the
  // step's time live in `counters`, which a checkpoint carries, so a resumed run logs the
  // same losses).
  void add(const StepTimes& times, double loss_sum, std::size_t samples,
           TrainingCounters& counters);
  // The step time the Young/Daly plan converts τ with: the mean of this attempt's steps
  // without its first (it pays for first touches and connection set-up), else the mean over
  // the counters.
  double planning_step_s(const TrainingCounters& counters) const;
  // Seconds inside the window that were not steps (evaluation, save).
  void pause(double seconds) { paused_s_ += seconds; }

  // Closes the window after step `done`. Collective. params: the parameters' fingerprint
  // goes into the record (equal runs log equal hashes).
  WindowSummary close(std::uint64_t done, float lr, bool stop_signal, std::span<const float> params,
                      TrainingCounters& counters);
  // The mean training loss of the last window closed (NaN before the first).
  double last_loss() const { return last_loss_; }
  // The loss the progress shows: the last window's; before this launch's first window
  // closes, rank 0's mean over the open window so far (never NaN while a window is open).
  double shown_loss(const TrainingCounters& counters) const;

 private:
  const collectives::Communicator& comm_;
  RunDirectory* run_dir_;
  std::uint64_t steps_per_epoch_;
  StepWindow times_;
  double start_s_;
  double paused_s_ = 0.0;
  double last_loss_;
  std::uint64_t steps_ = 0;  // added by this attempt
  double warm_s_ = 0.0;      // their time, the first one's left out
};

}  // namespace ringtrain
