// Trainer: the training loop of `ringtrain train`, for one rank of N.
//
// One step, on every rank:
//   1. the sampler yields the global batch (B positions of the epoch's permutation);
//      this rank takes its slice (b_r samples, possibly 0)
//   2. forward, loss scaled by the reduction convention (1/B), backward
//   3. the ring sums the flat gradient buffer over ranks          (skipped when N = 1)
//   4. every rank applies the same optimizer update
// Evaluation shards the test set over ranks and sums correct counts exactly.
// Rank 0 alone prints and writes the run directory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <memory>

#include <nlohmann/json.hpp>

#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/framework/sequential.hpp"
#include "ringtrain/framework/train/config.hpp"

namespace ringtrain {

struct TrainResults {
  std::uint64_t steps = 0;
  double final_test_accuracy = 0.0;
  double best_test_accuracy = 0.0;
  bool target_reached = false;
  std::uint64_t steps_to_target = 0;
  double time_to_target_s = 0.0;
  double mean_step_s = 0.0;
  double samples_per_s = 0.0;
  double wall_s = 0.0;
  std::uint64_t skipped_steps = 0;  // steps whose gradient was not finite (no update applied)
  nlohmann::json to_json() const;
};

class Trainer {
 public:
  // `model` is unplanned (the trainer plans it for its batches): framework/ cannot name
  // models/, so the caller (the CLI, a test, a course's program) builds it.
  // Validates the configuration (UsageError on bad values, on every rank alike).
  Trainer(TrainConfig config, std::unique_ptr<Sequential> model, const Shape& input_shape,
          const collectives::Communicator& comm);

  // Loads the data, builds the model and trains. Collective over the communicator.
  TrainResults run();

  // What the hang watchdog does when a rank is stuck (default: print and abort the process).
  void set_watchdog_action(std::function<void(const std::string&)> action) { watchdog_action_ = std::move(action); }

  // The model after run() (tests compare parameters).
  const Sequential& model() const;

 private:
  TrainConfig config_;
  std::unique_ptr<Sequential> model_;
  Shape input_shape_;
  const collectives::Communicator& comm_;
  std::function<void(const std::string&)> watchdog_action_;
};

}  // namespace ringtrain
