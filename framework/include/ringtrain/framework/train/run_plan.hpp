// The run plan: everything a training run needs that follows from its configuration, its data
// and its world, decided before the first step by plain functions: no MPI, no clock, no
// model built (only the --cost-model file is read, when one is given). The trainer, a
// course's own loop (examples/train_loop.cpp) and the unit tests get the same answers.
//
//   model_options(config, input, outputs)   what models/ builds the model with
//   plan_run(config, data, world)           before the model: BLAS threads, batches and
//                                           steps, the optimizer, the saves, the model's
//                                           options and the rows it is planned for
//   plan_step(config, run, world, model)    once the model is planned: the step's plan, the
//                                           buckets and the options of the sum over ranks,
//                                           the trace's reservation per step
//
// The policies, each in one place here:
//   BLAS threads   cores per node / ranks per node, so ranks never oversubscribe the node;
//                  --blas-threads N if given; 1 with --reduction exact (a product's bits
//                  must not depend on the thread count OpenBLAS would pick for this N)
//   local batches  near-equal (data::near_equal_split) or --local-batches, summing to B
//   steps          --steps, or ceil(--epochs × steps per epoch); evaluation every epoch
//                  unless --eval-every
//   bucket cap     --bucket-bytes, or the α-β rule of bucket_default.hpp (one bucket when
//                  nothing overlaps)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ringtrain/collectives/buckets.hpp"
#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/framework/data/user_data.hpp"
#include "ringtrain/framework/model_options.hpp"
#include "ringtrain/framework/optim/optimizer.hpp"
#include "ringtrain/framework/sequential.hpp"
#include "ringtrain/framework/train/bucket_default.hpp"
#include "ringtrain/framework/train/config.hpp"
#include "ringtrain/framework/train/data_parallel_step.hpp"
#include "ringtrain/framework/train/gradient_sum.hpp"
#include "ringtrain/framework/train/save_options.hpp"

namespace ringtrain {

// The ranks and the machine as this rank sees them.
struct WorldFacts {
  int size = 1;                 // N
  int ranks_per_node = 1;       // ranks sharing this rank's node
  int cores = 1;                // cores this process may run on (blas::available_cores)
  bool oversubscribed = false;  // more ranks on the node than cores (collectives/wait.hpp)
};
// This rank's world. Local (no MPI call).
WorldFacts world_facts(const collectives::Communicator& comm);

// The training data as the plan needs it.
struct DataFacts {
  Shape sample_shape;             // per sample
  std::size_t outputs = 0;        // classes, or regression targets per sample
  std::size_t train_samples = 0;  // the training split's size
};
DataFacts data_facts(const data::DataInfo& info, std::size_t train_samples);

// The model --model names, as models/ builds it (--mlp-hidden, --dropout, --conv-algorithm),
// for samples of `input` shape and `outputs` values (classes or targets) per sample. Throws
// UsageError for a bad --mlp-hidden.
ModelOptions model_options(const TrainConfig& config, const Shape& input, std::size_t outputs);

// BLAS threads per rank (above): what plan_run puts in RunPlan::blas_threads.
int blas_threads(const TrainConfig& config, const WorldFacts& world);

// What the run needs before its model exists.
struct RunPlan {
  int blas_threads = 1;  // per rank (above)
  std::size_t global_batch = 0;
  std::vector<std::size_t> local_batches;  // b_r of every rank (the first split under auto)
  std::size_t largest_local_batch = 0;     // the cap under --local-batches auto
  std::size_t model_rows = 0;  // the model is planned for this many rows: the largest local
                               // batch and the evaluation's chunks (evaluation.hpp)
  std::uint64_t steps_per_epoch = 0, total_steps = 0, eval_every = 0;
  ModelOptions model;  // for the data's sample shape and outputs
  OptimizerConfig optimizer;
  SavePolicyOptions saves;
};
// --zero: whether each rank keeps the optimizer state of its shard only (ZeRO-1). auto shards
// from 2 ranks on wherever the collective leaves each rank a half of the sum to update (ring,
// hierarchical; not MPI's allreduce): the parameters are bitwise those of unsharded state, the
// update is 1/N of the work and the state 1/N of the memory (bench/README-zero.md).
bool shards_optimizer_state(const TrainConfig& config, int world_size);

// Throws UsageError for --local-batches that do not fit the world or the global batch, and
// for a global batch larger than the data.
RunPlan plan_run(const TrainConfig& config, const DataFacts& data, const WorldFacts& world);

// What the step needs once its model is planned.
struct StepSetup {
  StepPlan step;
  RingFit ring_fit;                         // the α-β fit the default cap comes from
  collectives::BucketChoice bucket_choice;  // the cap and why
  // The gradient's buckets at that cap, in backward order, and the layer whose backward
  // completes each (the sum's own plan of them, bucket_plan.hpp), for the records.
  std::vector<collectives::Bucket> buckets;
  std::vector<std::size_t> ready_layers;
  ReducerOptions reducer;  // ring.hierarchy is the caller's to set (built collectively)
  std::size_t trace_events_per_step = 0;  // spans a step may record (the trace's reservation)
};
// Throws UsageError naming the file for a --cost-model that cannot be read.
StepSetup plan_step(const TrainConfig& config, const RunPlan& run, const WorldFacts& world,
                    const Sequential& model);

// Refuses (UsageError, one line naming `where`) a --loss that does not fit the data's y
// (mse on integer labels, cross-entropy on float targets) and a --target above 1 for
// accuracy. --loss auto fits any data: integer labels train with cross-entropy, float32
// targets with squared error (loss.hpp).
void check_loss(const TrainConfig& config, const data::DataInfo& data, const std::string& where);

}  // namespace ringtrain
