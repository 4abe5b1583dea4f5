// What a run tells about itself before its first step: manifest.json (the
// resolved configuration, world size, batches, the reduction convention, optimizer,
// schedule, target and stopping rule, buckets, versions, the model's layers and spec) and the
// start-up banner that rank 0 prints (with the model's layer table). Both are made from one
// RunFacts, so they cannot disagree.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ringtrain/collectives/buckets.hpp"
#include "ringtrain/framework/data/user_data.hpp"
#include "ringtrain/framework/sequential.hpp"
#include "ringtrain/framework/train/bucket_default.hpp"
#include "ringtrain/framework/train/config.hpp"
#include "ringtrain/framework/train/gradient_sum.hpp"
#include "ringtrain/framework/train/optimizer_shard.hpp"
#include "ringtrain/framework/train/reduction.hpp"
#include "ringtrain/framework/train/run_plan.hpp"
#include "ringtrain/framework/train/trainer.hpp"
#include "ringtrain/framework/train/training_state.hpp"

namespace ringtrain {

// Everything the manifest and the banner state: the run's plan, and what the trainer learns
// during set-up.
struct RunFacts {
  const TrainConfig* config = nullptr;
  const RunPlan* run = nullptr;       // BLAS threads, batches, steps, evaluation cadence
  const StepSetup* setup = nullptr;   // the step's plan, the buckets' cap and fit, the sum
  const Sequential* model = nullptr;  // planned: its layer table and spec
  WorldFacts world;
  int hosts = 0;        // --collective hierarchical: hosts of the two-level allreduce; else 0
  data::DataInfo data;  // --data: path, layout, shapes, dtypes, classes
  std::size_t train_samples = 0, test_samples = 0;
  std::size_t validation_samples = 0;  // held out of train (--validation-fraction); 0: none
  std::string optimizer;  // Optimizer::describe()
  OptimizerStateBytes state_bytes;
  std::string run_dir;
};

// The manifest without results (TrainResults::to_json() fills "results" later).
nlohmann::json make_manifest(const RunFacts& facts);

// The configuration a checkpoint carries: the run's options, and what `ringtrain eval` needs
// to rebuild the model from the file alone (its spec as built, the data's sample shape, loss
// and classes or targets), and the data's digest and path, which a resume compares with its
// own (Checkpointer::resume).
nlohmann::json checkpoint_config(const RunFacts& facts);

// The results' closing figures after the loop: the skipped steps, the wall time, the mean
// step time over the steps the state holds and the samples per second it makes, and the
// steps this launch took (it started at start_step).
void close_results(TrainResults& results, const TrainingCounters& counters,
                   std::size_t global_batch, double wall_s, std::uint64_t start_step);
// The run's last line on rank 0: "done: S steps in T s, X samples/s (Y in the steps alone),
// test accuracy ...": this launch's steps over its wall time, the steps' own rate (saves,
// evaluations and set-up left out) beside it; after a resume, which steps these were.
std::string closing_line(const TrainResults& results, double target, std::uint64_t start_step,
                         std::size_t global_batch);

// The banner's lines, in order.
std::vector<std::string> banner_lines(const RunFacts& facts);

// On stderr, also with --quiet: mean-of-means is a wrong update on purpose.
void warn_if_wrong_reduction(Reduction reduction);

}  // namespace ringtrain
