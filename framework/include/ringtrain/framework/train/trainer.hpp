// Trainer: the training loop of `ringtrain train`, for one rank of N.
//
//   set-up   the data, the run plan (run_plan.hpp: threads, batches, steps, the step's and
//            the sum's options), the model (rank 0's parameters everywhere), the step with
//            what watches it, the run directory and banner, a resume
//   loop     for each step: the sampler's global batch -> DataParallelStep::run
//            (data_parallel_step.hpp: slice, forward, backward, the agreed update), then
//            after_step: replica check, metrics window, evaluation, checkpoint, stop
//   end      trace.json, the manifest's results, the closing line
//
// Evaluation shards the test set over ranks and sums correct counts exactly
// (evaluation.hpp). Rank 0 alone prints and writes the run directory.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/framework/data/user_data.hpp"
#include "ringtrain/framework/sequential.hpp"
#include "ringtrain/framework/train/config.hpp"
#include "ringtrain/framework/train/fault_injector.hpp"

namespace ringtrain {

struct TrainResults {
  std::uint64_t steps = 0;         // the run's steps, from step 0
  std::uint64_t launch_steps = 0;  // of which this launch took (after a resume, fewer)
  bool regression = false;  // the metric: test accuracy, or test MSE (evaluation.hpp: Metric)
  // The split that picks the best step and meets --target: the validation split held out of
  // train (--validation-fraction), or, without one, the test set itself.
  bool validation = false;
  double final_test_metric = 0.0;  // the test set's at the end (NaN: not evaluated)
  // The test set's at the best step: without validation the highest accuracy or the lowest
  // MSE (chosen on the test set itself); with it, the test set's at the step of the best
  // validation value (NaN: that step was not in this launch)
  double best_test_metric = 0.0;
  double final_validation_metric = NAN, best_validation_metric = NAN;  // with validation
  std::uint64_t best_step = 0;  // of the best value on the selection split (0: unknown)
  bool target_reached = false;
  std::uint64_t steps_to_target = 0;
  double time_to_target_s = 0.0;
  double mean_step_s = 0.0;
  double samples_per_s = 0.0;       // global batch / mean_step_s: the steps' own rate
  double wall_s = 0.0;              // this launch's, set-up included
  std::uint64_t skipped_steps = 0;  // steps whose gradient was not finite (no update applied)
  // The signal this rank received that stopped the run at an agreed boundary (stop_signals.hpp;
  // 0: none). The command exits 130 after SIGINT, as a shell expects after Ctrl-C.
  int stop_signal = 0;
  // "final_test_accuracy" / "best_test_accuracy", or "final_test_mse" / "best_test_mse",
  // "split" (validation | test: what best and the target use), "metric" naming the selection
  // metric, "best_step", and with validation "final_validation_accuracy" /
  // "best_validation_accuracy" (or _mse).
  nlohmann::json to_json() const;
};

class Trainer {
 public:
  // Builds an unplanned model for the data: its sample shape (data.sample_shape) and
  // data.outputs() values per sample (its classes, or its regression targets).
  using ModelFactory = std::function<std::unique_ptr<Sequential>(const data::DataInfo& data)>;

  // `model` is unplanned (the trainer plans it for its batches): framework/ cannot name
  // models/, so the caller (the CLI, a test, a course's program) builds it. run() throws
  // UsageError when the data's samples are not `input_shape` or its classes not the model's
  // outputs. Validates the configuration (UsageError on bad values, on every rank alike).
  Trainer(TrainConfig config, std::unique_ptr<Sequential> model, const Shape& input_shape,
          const collectives::Communicator& comm);
  // The model is built by `make_model` once run() has loaded the data (--data PATH).
  Trainer(TrainConfig config, ModelFactory make_model, const collectives::Communicator& comm);
  ~Trainer();

  // Loads the data, builds the model and trains. Collective over the communicator. A defect
  // of the data (data/user_data.hpp) throws UsageError naming the file, on every rank.
  TrainResults run();

  // What the hang watchdog does when a rank is stuck (default: print and abort the process).
  void set_watchdog_action(std::function<void(const std::string&)> action) {
    watchdog_action_ = std::move(action);
  }
  // Faults injected at the run's named points (tests only; default: none).
  void set_fault_injector(std::unique_ptr<FaultInjector> faults) { faults_ = std::move(faults); }

  // The model after run() (tests compare parameters); with a ModelFactory, only after run().
  const Sequential& model() const;

 private:
  TrainConfig config_;
  ModelFactory make_model_;  // empty when the caller gave the model
  std::unique_ptr<Sequential> model_;
  Shape input_shape_;
  const collectives::Communicator& comm_;
  std::function<void(const std::string&)> watchdog_action_;
  std::unique_ptr<FaultInjector> faults_;
};

}  // namespace ringtrain
