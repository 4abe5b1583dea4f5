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
#include "train/sum/bucket_plan.hpp"

namespace ringtrain {

// Everything the manifest and the banner state; filled by the trainer during setup.
struct RunFacts {
  const TrainConfig* config = nullptr;
  const Sequential* model = nullptr;  // planned: its layer table and spec
  int world = 1;
  int ranks_per_node = 1;
  int hosts = 0;  // --collective hierarchical: hosts of the two-level allreduce; else 0
  int cores = 1;
  int blas_threads = 1;
  data::DataInfo data;  // --data: path, layout, shapes, dtypes, classes
  std::size_t train_samples = 0, test_samples = 0;
  std::size_t global_batch = 0;
  std::vector<std::size_t> local_batches;
  std::size_t largest_local_batch = 0;  // the model's layers are planned for it
  Reduction reduction = Reduction::kSumScaled;
  bool has_batch_norm = false, sync_bn = false;
  std::string optimizer;  // Optimizer::describe()
  OptimizerStateBytes state_bytes;
  std::uint64_t total_steps = 0, steps_per_epoch = 0, eval_every = 0;
  std::size_t parameters = 0;
  const ReducerOptions* reducer = nullptr;  // the gradient sum's options
  const BucketPlan* buckets = nullptr;      // and its buckets
  collectives::BucketChoice bucket_choice;
  RingFit ring_fit;
  std::string run_dir;
};

// The manifest without results (TrainResults::to_json() fills "results" later).
nlohmann::json make_manifest(const RunFacts& facts);

// The banner's lines, in order.
std::vector<std::string> banner_lines(const RunFacts& facts);

// On stderr, also with --quiet: mean-of-means is a wrong update on purpose.
void warn_if_wrong_reduction(Reduction reduction);

}  // namespace ringtrain
