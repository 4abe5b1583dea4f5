// The run plan (run_plan.hpp): the configuration, the data and the world turned into what the
// run needs, each policy in one function.
#include "ringtrain/framework/train/run_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "ringtrain/collectives/wait.hpp"
#include "ringtrain/framework/blas.hpp"
#include "ringtrain/framework/data/sampler.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/size_list.hpp"
#include "ringtrain/framework/train/evaluation.hpp"
#include "train/sum/bucket_plan.hpp"

namespace ringtrain {
namespace {

namespace coll = collectives;

SavePolicyOptions save_options(const TrainConfig& c) {
  SavePolicyOptions saves;
  saves.every = c.checkpoint_every;
  saves.mtbf_s = c.mtbf_s;
  saves.node_mtbf_s = c.node_mtbf_s;
  saves.first_auto_save_steps = c.log_every;
  saves.max_failed_saves = c.max_failed_saves;
  saves.async = c.checkpoint_async == OnOff::kOn;
  return saves;
}

ReducerOptions reducer_options(const TrainConfig& c, std::size_t cap_bytes, int blas_threads) {
  ReducerOptions o;
  o.cap_bytes = cap_bytes;
  // Each of the rank's threads updates a default piece's worth between two polls: a piece
  // smaller than two threads' minimum parts runs on one thread (optimizer.hpp).
  o.update_piece_elements *= std::size_t(std::max(1, blas_threads));
  o.overlap = c.overlap != Overlap::kOff;
  o.update_per_bucket = c.bucket_update == OnOff::kOn;
  o.driver = c.poll_driver;
  switch (c.collective) {
    case CollectiveKind::kRing:
      o.ring.algorithm = coll::Algorithm::kRing;
      break;
    case CollectiveKind::kMpi:
      o.ring.algorithm = coll::Algorithm::kMpi;
      break;
    case CollectiveKind::kHierarchical:
      o.ring.algorithm = coll::Algorithm::kHierarchical;
      break;
  }
  o.ring.wire = c.wire;
  if (c.segments_in_flight > 0) o.overlap_segments_in_flight = c.segments_in_flight;
  return o;
}

// Spans a step may record: per layer its forward and backward, per parameter tensor its
// buckets' rings and waits, the optimizer's pieces, and with --reduction exact a pass's adds
// per micro-batch of the largest local batch.
std::size_t trace_events_per_step(const TrainConfig& c, const RunPlan& run,
                                  const ReducerOptions& reducer, const Sequential& model) {
  const std::size_t micro_batches =
      run.largest_local_batch / std::max<std::size_t>(c.exact_micro_batch, 1) + 1;
  const std::size_t exact_passes =
      c.reduction == Reduction::kExact ? micro_batches * (model.parameters().count() + 2) : 0;
  return 2 * model.num_layers() + 3 * model.parameters().count() +
         model.parameters().num_elements() / reducer.update_piece_elements + exact_passes + 16;
}

}  // namespace

bool shards_optimizer_state(const TrainConfig& config, int world_size) {
  switch (config.zero) {
    case ZeroChoice::kOn:
      return true;
    case ZeroChoice::kOff:
      return false;
    case ZeroChoice::kAuto:
      break;
  }
  return world_size > 1 && config.collective != CollectiveKind::kMpi;
}

// --reduction exact: one thread, so that a product's bits do not depend on the thread count
// OpenBLAS would pick for this N (exact_step.hpp; options.cpp refuses more).
int blas_threads(const TrainConfig& config, const WorldFacts& world) {
  if (config.reduction == Reduction::kExact) return 1;
  if (config.blas_threads > 0) return config.blas_threads;
  return std::max(1, world.cores / std::max(1, world.ranks_per_node));
}

WorldFacts world_facts(const coll::Communicator& comm) {
  WorldFacts world;
  world.size = comm.size();
  world.ranks_per_node = comm.ranks_per_node();
  world.cores = blas::available_cores();
  world.oversubscribed = coll::oversubscribed(comm);
  return world;
}

DataFacts data_facts(const data::DataInfo& info, std::size_t train_samples) {
  return {info.sample_shape, info.outputs(), train_samples};
}

ModelOptions model_options(const TrainConfig& config, const Shape& input, std::size_t outputs) {
  ModelOptions options;
  options.mlp_hidden = parse_size_list(config.mlp_hidden, "--mlp-hidden");
  options.dropout = config.dropout;
  options.conv_algorithm = config.conv_algorithm;
  options.input = input;
  options.classes = outputs;
  return options;
}

RunPlan plan_run(const TrainConfig& config, const DataFacts& data, const WorldFacts& world) {
  const auto ranks = static_cast<std::size_t>(world.size);
  RunPlan run;
  run.blas_threads = blas_threads(config, world);
  run.global_batch = config.global_batch;
  run.local_batches = config.first_split(ranks);
  // Under --local-batches auto the buffers and the model are planned for the cap.
  run.largest_local_batch = config.local_batch_cap(ranks);
  run.model_rows = std::max<std::size_t>({run.largest_local_batch, kEvalChunk, 1});
  // The sampler's epochs: the last batch of an epoch may be short (sampler.hpp).
  run.steps_per_epoch = (data.train_samples + config.global_batch - 1) / config.global_batch;
  run.total_steps =
      config.steps > 0
          ? config.steps
          : static_cast<std::uint64_t>(std::ceil(config.epochs * double(run.steps_per_epoch)));
  run.eval_every = config.eval_every > 0 ? config.eval_every : run.steps_per_epoch;
  run.model = model_options(config, data.sample_shape, data.outputs);
  run.optimizer = config.optimizer_config();
  run.saves = save_options(config);
  return run;
}

StepSetup plan_step(const TrainConfig& config, const RunPlan& run, const WorldFacts& world,
                    const Sequential& model) {
  StepSetup setup;
  const std::size_t grad_bytes = model.parameters().num_elements() * sizeof(float);
  setup.ring_fit = ring_fit_for_buckets(config.cost_model, world.size, world.oversubscribed);
  setup.bucket_choice = config.bucket_bytes > 0
                            ? coll::BucketChoice{config.bucket_bytes, "given by --bucket-bytes"}
                            : default_bucket_choice(setup.ring_fit, world.size, grad_bytes,
                                                    config.overlap != Overlap::kOff);
  setup.reducer = reducer_options(config, setup.bucket_choice.cap_bytes, run.blas_threads);
  setup.reducer.zero = shards_optimizer_state(config, world.size);
  const BucketPlan buckets(model.parameters().entries(), setup.reducer.cap_bytes);
  setup.buckets = buckets.buckets();
  for (std::size_t b = 0; b < buckets.size(); ++b)
    setup.ready_layers.push_back(buckets.ready_layer(b));
  StepPlan& step = setup.step;
  step.reduction = config.reduction;
  step.local_batches = run.local_batches;
  step.max_local_batch = run.largest_local_batch;
  step.schedule = config.schedule_config(run.total_steps);
  step.sync_bn = world.size > 1 && (config.sync_bn == SyncBn::kOn ||
                                    (config.sync_bn == SyncBn::kAuto && model.has_batch_norm()));
  step.alternate_overlap = config.overlap == Overlap::kAlternate;
  step.seed = config.seed;
  step.exact_micro_batch = config.exact_micro_batch;
  setup.trace_events_per_step = trace_events_per_step(config, run, setup.reducer, model);
  return setup;
}

void check_loss(const TrainConfig& config, const data::DataInfo& data, const std::string& where) {
  const bool regression = data.regression();
  if (config.loss == LossChoice::kMse && !regression)
    throw UsageError(fmt::format(
        "--loss mse: {} holds integer class labels (y of dtype {}); mse needs float32 targets "
        "(store y as float32 for regression, or use --loss cross-entropy)",
        where, data.arrays.size() > 1 ? to_string(data.arrays[1].dtype) : "uint8"));
  if (config.loss == LossChoice::kCrossEntropy && regression)
    throw UsageError(fmt::format(
        "--loss cross-entropy: {} holds float32 regression targets ({} per sample); "
        "cross-entropy needs integer class labels (use --loss mse, or store y as int64 labels)",
        where, data.num_targets));
  if (!regression && config.target > 1.0)
    throw UsageError(fmt::format(
        "--target {}: {} holds class labels, whose metric is the test accuracy, in [0, 1]",
        config.target, where));
}

}  // namespace ringtrain
