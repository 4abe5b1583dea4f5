// TrainingRun: one run of `ringtrain train` on one rank: the objects it needs, built in
// set-up order from the run plan (trainer.cpp), and the loop (training_loop.cpp):
//
//   for each step: the sampler's global batch -> DataParallelStep::run (the recipe), then
//   the outcome joins the counters and the metrics window, and after the step: the replica
//   check, the metrics line, an evaluation, a checkpoint, a stop at a signal or the target
//
// Rank 0 alone prints and writes the run directory; every decision that changes what the
// ranks do next (stop, save) is agreed by a collective first.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/collectives/hierarchical.hpp"
#include "ringtrain/framework/data/sampler.hpp"
#include "ringtrain/framework/data/user_data.hpp"
#include "ringtrain/framework/sequential.hpp"
#include "ringtrain/framework/train/checkpointer.hpp"
#include "ringtrain/framework/train/config.hpp"
#include "ringtrain/framework/train/data_parallel_step.hpp"
#include "ringtrain/framework/train/evaluation.hpp"
#include "ringtrain/framework/train/fault_injector.hpp"
#include "ringtrain/framework/train/run_directory.hpp"
#include "ringtrain/framework/train/run_plan.hpp"
#include "ringtrain/framework/train/trainer.hpp"
#include "ringtrain/framework/train/training_state.hpp"
#include "train/persistence/save_policy.hpp"
#include "train/run/metrics_log.hpp"
#include "train/run/progress_bar.hpp"
#include "train/run/run_report.hpp"
#include "train/run/split_planner.hpp"
#include "train/run/step_instruments.hpp"
#include "train/safety/stop_signals.hpp"
#include "train/safety/watchdog.hpp"
#include "train/trace.hpp"

namespace ringtrain {

// The hang watchdog's limit when --watchdog-s is not given: 100 × the mean step time so far,
// never below this floor.
inline constexpr double kWatchdogFloorS = 60.0;

class TrainingRun {
 public:
  TrainingRun(const TrainConfig& config, Sequential& model, const Shape& input_shape,
              data::DataSplits data, const collectives::Communicator& comm,
              Watchdog::Action on_stuck, const FaultInjector& faults);
  TrainResults train();

 private:
  void say(const std::string& line) const;
  void prepare_model(const Shape& input_shape);
  void build_step();
  void plan_split();
  void open_run_directory();
  std::optional<std::filesystem::path> load_checkpoint();
  void continue_from(const std::optional<std::filesystem::path>& resumed_from);
  void account(const StepOutcome& outcome, std::uint64_t step);
  void stop_if_data_failed(const std::string& failure);
  void check_mapped_data();
  bool after_step(std::uint64_t step);
  void evaluate_now(std::uint64_t done);
  // The split best, --target and the stopping rule use: validation when the run holds one out.
  const data::Dataset& selection_split() const;
  bool validating() const { return validation_.size() > 0; }
  // The test set (split_evaluation.cpp), with --validation-fraction: at a new best step and
  // at the end. Collective.
  void evaluate_test(std::uint64_t done, const char* at);
  void evaluate_test_at_end();
  void recover_best(const std::vector<nlohmann::json>& records);
  void record_evaluation(std::uint64_t done, const char* split, const Metric& metric,
                         const Evaluation& e, const char* at);
  void finish();

  const TrainConfig& config_;
  Sequential& model_;
  const collectives::Communicator& comm_;
  const FaultInjector& faults_;
  const RunPlan plan_;
  StepSetup setup_;
  RunFacts facts_;  // what the manifest and the banner state

  data::Dataset train_, test_;
  data::Dataset validation_;     // --validation-fraction: held out of train; empty: none
  std::uint64_t test_step_ = 0;  // the step of this launch's last test evaluation (0: none)
  Evaluation last_test_;         // and its result
  data::GlobalSampler sampler_;
  std::filesystem::path run_dir_path_;
  std::unique_ptr<RunDirectory> run_dir_;  // rank 0 only
  nlohmann::json manifest_;
  Watchdog watchdog_;
  std::unique_ptr<Trace> trace_;
  std::size_t eval_name_ = 0;                          // the evaluation's span in the trace
  std::unique_ptr<collectives::Hierarchy> hierarchy_;  // --collective hierarchical; outlives step_
  std::unique_ptr<StepInstruments> instruments_;
  std::unique_ptr<DataParallelStep> step_;
  std::unique_ptr<SplitPlanner> planner_;  // --local-batches auto only

  TrainingCounters counters_;
  std::unique_ptr<TrainingState> state_;
  std::unique_ptr<Checkpointer> checkpointer_;
  std::unique_ptr<SavePolicy> saves_;
  std::unique_ptr<MetricsLog> metrics_;
  std::unique_ptr<ProgressBar> bar_;
  StopSignals stop_signals_;  // SIGTERM / SIGUSR1 / SIGINT: save at the next agreed boundary
  TrainResults results_;
  std::uint64_t start_step_ = 0;
  double start_s_ = 0.0;
  bool stopped_by_signal_ = false;
};

}  // namespace ringtrain
