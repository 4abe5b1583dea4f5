// SavePolicy: when the training loop saves a checkpoint, and what it records about each save.
//
// Saves come every K steps (--checkpoint-every K), at a stop signal, at the end, or with
// --checkpoint-every auto (the default) every τ = √(2·C·μ) seconds of useful compute
// (Young/Daly, checkpoint/interval.hpp), where C is the measured save cost and μ the job's MTBF
// (--mtbf, --node-mtbf over the hosts, or kDefaultJobMtbfS). The saves at the end and at
// a signal plan nothing (no save follows them). In auto
// mode every rank must plan the same interval, so the ranks agree on C and on the step time
// first (both MAX over ranks: a save costs as much as its slowest rank, a step as long as its
// slowest rank). Each save appends {step, checkpoint_s, blocking_s, persist_s, reason} to
// metrics.jsonl (a synchronous save blocks for all of its persist time, so the three are
// equal), and each new plan its figures.
//
// A periodic save that fails (disk full, I/O error, file size limit) does not stop the run:
// rank 0 reports it on stderr and in metrics.jsonl ("save_failed"), the previous durable
// checkpoint stays the restart point, the planner does not take the failed save's cost
// for C, and (in auto mode) the next save is due one interval later. After --max-failed-saves
// failures in a row the run stops (AgreedError). A save at the end or at a stop signal must be
// durable: if it fails, the run stops at once.
//
// With --checkpoint-async on, a periodic save blocks training for its snapshot only; rank 0
// writes the file on a writer thread (checkpointer.hpp). Its outcome is learnt at the next
// save, the end of the run or a stop signal, which wait for it. A record
// {step, "save_started": "async"} marks the snapshot; when the outcome is known its record
// is appended ({..., "async": true}, persist_s the time from snapshot to durable commit)
// and a failure counts as above. The Young/Daly plan then takes C = the blocking cost and
// L = the last persist latency (checkpoint/interval.hpp: τ = max(√(2Cμ), L)). Saves at the
// end and at a signal are synchronous.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>

#include "ringtrain/checkpoint/interval.hpp"
#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/framework/train/checkpointer.hpp"
#include "ringtrain/framework/train/fault_injector.hpp"
#include "ringtrain/framework/train/run_directory.hpp"
#include "ringtrain/framework/train/save_options.hpp"
#include "ringtrain/framework/train/training_state.hpp"
#include "train/safety/watchdog.hpp"
#include "train/trace.hpp"

namespace ringtrain {

// The job's MTBF from one host's (--node-mtbf). A job on H hosts stops when any host fails;
// with independent, exponentially distributed failures the first of H comes after
// μ_job = μ_node / H on average. H counts the shared-memory domains MPI reports (the ranks
// with local rank 0). Collective.
struct JobMtbf {
  double node_mtbf_s = 0.0;
  int hosts = 1;
  double mtbf_s = 0.0;  // node_mtbf_s / hosts
};
JobMtbf job_mtbf(const collectives::Communicator& comm, double node_mtbf_s);

class SavePolicy {
 public:
  // run_dir: rank 0's run directory (null on other ranks). trace may be null. start_step:
  // the step this attempt starts at (after a resume). say: prints on rank 0. Collective with
  // options.node_mtbf_s (job_mtbf; the figures are printed and recorded).
  SavePolicy(const collectives::Communicator& comm, Checkpointer& checkpointer,
             const SavePolicyOptions& options, std::uint64_t start_step,
             const FaultInjector& faults, Watchdog& watchdog, Trace* trace, RunDirectory* run_dir,
             std::function<void(const std::string&)> say);

  // A periodic save is due after completing step `done`.
  bool due(std::uint64_t done) const { return schedule_.due(done); }

  // The job's MTBF μ the plan uses, and where it came from ("--mtbf", "the default: one day",
  // "--node-mtbf over 2 hosts"): printed with each plan and recorded in metrics.jsonl.
  struct Mtbf {
    double mtbf_s = 0.0;
    std::string source;
  };

  // Why a save is made. A periodic save may fail (up to the limit); the others may not.
  enum class Reason { kInterval, kEnd, kSignal };

  // Saves `state` after step `done`. step_s: this attempt's mean step time (the plan turns τ
  // into steps with it). Collective. Returns the seconds the save blocked this rank. Throws
  // AgreedError when a failure is not to be tolerated (see above). A save in flight is
  // waited for first (the wait counts as blocking).
  double save(const TrainingState& state, std::uint64_t done, std::uint64_t epoch, Reason why,
              double step_s);

 private:
  std::array<double, 2> agree_cost(double cost_s, double step_s) const;
  void plan_interval(std::uint64_t done, const std::array<double, 2>& agreed);
  void started(std::uint64_t done, double blocked_s, double step_s);
  void settle(const SaveOutcome& outcome);
  nlohmann::json save_record(const SaveOutcome& outcome, Reason why, double blocked_s) const;
  void failed(const SaveOutcome& outcome, Reason why, nlohmann::json& record);

  const collectives::Communicator& comm_;
  Checkpointer& checkpointer_;
  bool auto_;
  bool async_;
  Mtbf mtbf_;
  checkpoint::SaveSchedule schedule_;
  const FaultInjector& faults_;
  Watchdog& watchdog_;
  Trace* trace_;
  std::size_t save_name_ = 0;
  RunDirectory* run_dir_;
  std::function<void(const std::string&)> say_;
  std::size_t saves_done_ = 0;
  std::size_t max_failed_saves_;
  std::size_t failures_in_a_row_ = 0;
  std::uint64_t last_durable_step_;  // the restart point: the attempt's start if none yet
  double latency_s_ = 0.0;  // L: the persist latency of the last asynchronous save (agreed)
  double in_flight_blocked_s_ = 0.0;      // the save in flight: what its snapshot blocked
  double in_flight_agreed_cost_s_ = 0.0;  // and the C it was planned with (auto)
};

}  // namespace ringtrain
