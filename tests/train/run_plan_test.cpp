// The run plan (run_plan.hpp) without MPI: each policy from the configuration, the data and
// the world:
//   - BLAS threads: cores per node / ranks per node (at least 1), --blas-threads, 1 for exact;
//   - batches: near-equal or --local-batches (refused when they do not sum to B); the model
//     is planned for the largest local batch or the evaluation's chunks;
//   - steps: --steps, or ceil(--epochs × steps per epoch) with a short last batch; evaluation
//     every epoch unless --eval-every;
//   - the model's options and the saves' options from their flags;
//   - the step: its plan (SyncBN only with BatchNorm and N > 1), the bucket cap (given, one
//     bucket without overlap, else the α-β rule) and its buckets, the reducer's options, and
//     a trace reservation that grows with the layers and, for exact, with the micro-batches.
#include "ringtrain/framework/train/run_plan.hpp"

#include <catch2/catch.hpp>
#include <memory>

#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/layers/batchnorm.hpp"
#include "ringtrain/framework/layers/linear.hpp"
#include "ringtrain/framework/layers/relu.hpp"
#include "ringtrain/framework/train/evaluation.hpp"

using namespace ringtrain;

namespace {

WorldFacts world_of(int size, int ranks_per_node, int cores) {
  WorldFacts world;
  world.size = size;
  world.ranks_per_node = ranks_per_node;
  world.cores = cores;
  world.oversubscribed = ranks_per_node > cores;
  return world;
}

const DataFacts kFashion{{1, 28, 28}, 10, 60000};

// linear 784 -> hidden, relu, [batchnorm], linear -> 10, planned for `rows`.
std::unique_ptr<Sequential> small_model(std::size_t hidden, bool batch_norm, std::size_t rows) {
  auto model = std::make_unique<Sequential>();
  model->add(std::make_unique<Linear>(784, hidden));
  model->add(std::make_unique<ReLU>());
  if (batch_norm) model->add(std::make_unique<BatchNorm>(hidden));
  model->add(std::make_unique<Linear>(hidden, 10));
  model->plan({784}, rows);
  return model;
}

}  // namespace

TEST_CASE("BLAS threads: the node's cores shared by its ranks, unless asked, one for exact") {
  TrainConfig c;
  CHECK(plan_run(c, kFashion, world_of(2, 2, 8)).blas_threads == 4);
  CHECK(plan_run(c, kFashion, world_of(3, 3, 8)).blas_threads == 2);
  CHECK(plan_run(c, kFashion, world_of(4, 4, 2)).blas_threads == 1);  // oversubscribed
  c.blas_threads = 3;
  CHECK(plan_run(c, kFashion, world_of(2, 2, 8)).blas_threads == 3);
  c.blas_threads = 0;
  c.reduction = Reduction::kExact;
  CHECK(plan_run(c, kFashion, world_of(2, 2, 8)).blas_threads == 1);
  CHECK(blas_threads(c, world_of(2, 2, 8)) == 1);
}

TEST_CASE("batches: near-equal or as given, the model planned for the larger of them") {
  TrainConfig c;
  RunPlan run = plan_run(c, kFashion, world_of(3, 3, 8));
  CHECK(run.local_batches == std::vector<std::size_t>{43, 43, 42});
  CHECK(run.largest_local_batch == 43);
  CHECK(run.model_rows == kEvalChunk);
  c.global_batch = 600;
  c.local_batches = "16,584";
  run = plan_run(c, kFashion, world_of(2, 2, 8));
  CHECK(run.local_batches == std::vector<std::size_t>{16, 584});
  CHECK(run.model_rows == 584);
  c.local_batches = "16,500";
  CHECK_THROWS_AS(plan_run(c, kFashion, world_of(2, 2, 8)), UsageError);
}

TEST_CASE("steps: as given, or the epochs' worth, evaluation every epoch unless asked") {
  TrainConfig c;
  c.epochs = 2.5;
  RunPlan run = plan_run(c, kFashion, world_of(2, 2, 8));
  CHECK(run.steps_per_epoch == 469);  // 60000 / 128 = 468.75: the last batch is short
  CHECK(run.total_steps == 1173);     // ceil(2.5 * 469)
  CHECK(run.eval_every == 469);
  c.steps = 40;
  c.eval_every = 15;
  run = plan_run(c, kFashion, world_of(2, 2, 8));
  CHECK(run.total_steps == 40);
  CHECK(run.eval_every == 15);
}

TEST_CASE("the model's and the saves' options follow their flags and the data") {
  TrainConfig c;
  c.mlp_hidden = "64,32";
  c.dropout = 0.25f;
  c.conv_algorithm = Conv2d::Algorithm::kIm2col;
  c.checkpoint_every = "auto";
  c.mtbf_s = 3600;
  c.node_mtbf_s = 7200;
  c.log_every = 20;
  c.max_failed_saves = 2;
  c.checkpoint_async = OnOff::kOff;
  const RunPlan run = plan_run(c, {{3, 16, 16}, 2, 1000}, world_of(2, 2, 8));
  CHECK(run.model.mlp_hidden == std::vector<std::size_t>{64, 32});
  CHECK(run.model.dropout == 0.25f);
  CHECK(run.model.conv_algorithm == Conv2d::Algorithm::kIm2col);
  CHECK(run.model.input == Shape{3, 16, 16});
  CHECK(run.model.classes == 2);
  CHECK(run.saves.every == "auto");
  CHECK(run.saves.mtbf_s == 3600);
  CHECK(run.saves.node_mtbf_s == 7200);
  CHECK(run.saves.first_auto_save_steps == 20);
  CHECK(run.saves.max_failed_saves == 2);
  CHECK_FALSE(run.saves.async);
  CHECK(run.optimizer.name == "sgd");
  c.mlp_hidden = "64,x";
  CHECK_THROWS_AS(model_options(c, {784}, 10), UsageError);
}

TEST_CASE("the step: its plan, the bucket cap, the reducer's options") {
  TrainConfig c;
  c.steps = 30;
  c.seed = 9;
  c.overlap = Overlap::kAlternate;
  c.zero = ZeroChoice::kOn;
  c.wire = collectives::Wire::kBf16;
  c.collective = CollectiveKind::kHierarchical;
  c.segments_in_flight = 5;
  const WorldFacts world = world_of(2, 2, 8);
  const RunPlan run = plan_run(c, kFashion, world);
  auto model = small_model(64, false, run.model_rows);
  StepSetup setup = plan_step(c, run, world, *model);
  CHECK(setup.step.local_batches == run.local_batches);
  CHECK(setup.step.schedule.total_steps == 30);
  CHECK(setup.step.alternate_overlap);
  CHECK(setup.step.seed == 9);
  CHECK_FALSE(setup.step.sync_bn);  // no BatchNorm
  CHECK(setup.reducer.overlap);
  CHECK(setup.reducer.zero);
  CHECK(setup.reducer.ring.wire == collectives::Wire::kBf16);
  CHECK(setup.reducer.ring.algorithm == collectives::Algorithm::kHierarchical);
  CHECK(setup.reducer.overlap_segments_in_flight == 5);
  CHECK(setup.reducer.update_piece_elements == ReducerOptions{}.update_piece_elements * 4);
  CHECK(setup.reducer.cap_bytes == setup.bucket_choice.cap_bytes);

  // SyncBN: with BatchNorm on more than one rank (--sync-bn auto); never at N = 1.
  auto bn = small_model(64, true, run.model_rows);
  CHECK(plan_step(c, run, world, *bn).step.sync_bn);
  CHECK_FALSE(
      plan_step(c, plan_run(c, kFashion, world_of(1, 1, 8)), world_of(1, 1, 8), *bn).step.sync_bn);
  c.sync_bn = SyncBn::kOff;
  CHECK_FALSE(plan_step(c, run, world, *bn).step.sync_bn);

  // The cap: as given; one bucket of the whole gradient when nothing overlaps. The buckets
  // cover the gradient, in backward order: the last layer's first.
  c.bucket_bytes = 256;
  setup = plan_step(c, run, world, *model);
  CHECK(setup.bucket_choice.cap_bytes == 256);
  std::size_t covered = 0;
  for (const collectives::Bucket& b : setup.buckets) covered += b.elements;
  CHECK(covered == model->parameters().num_elements());
  // b (10 floats) of layer 2, its W (640), b (64) of layer 0, its W (50176): each its own.
  CHECK(setup.ready_layers == std::vector<std::size_t>{2, 2, 0, 0});
  c.bucket_bytes = 0;
  c.overlap = Overlap::kOff;
  setup = plan_step(c, run, world, *model);
  CHECK(setup.bucket_choice.cap_bytes == model->parameters().num_elements() * sizeof(float));
  CHECK_FALSE(setup.reducer.overlap);
}

TEST_CASE("ZeRO-1 by default (--zero auto) from 2 ranks on, where the sum has halves") {
  TrainConfig c;
  CHECK(c.zero == ZeroChoice::kAuto);  // the default
  CHECK_FALSE(shards_optimizer_state(c, 1));
  CHECK(shards_optimizer_state(c, 2));
  CHECK(shards_optimizer_state(c, 4));
  c.collective = CollectiveKind::kHierarchical;
  CHECK(shards_optimizer_state(c, 3));
  c.collective = CollectiveKind::kMpi;  // MPI_Allreduce leaves no rank a half to update
  CHECK_FALSE(shards_optimizer_state(c, 2));
  CHECK_NOTHROW(c.validate(2));
  c.zero = ZeroChoice::kOn;
  CHECK_THROWS_AS(c.validate(2), UsageError);
  c.collective = CollectiveKind::kRing;
  CHECK(shards_optimizer_state(c, 1));  // as asked, even where one rank holds every shard
  c.zero = ZeroChoice::kOff;
  CHECK_FALSE(shards_optimizer_state(c, 4));

  // The step's reducer takes the decision, and the flag's words parse.
  const WorldFacts world = world_of(2, 2, 8);
  c.zero = parse_choice<ZeroChoice>("auto", "--zero");
  const RunPlan run = plan_run(c, kFashion, world);
  auto model = small_model(64, false, run.model_rows);
  CHECK(plan_step(c, run, world, *model).reducer.zero);
  c.zero = parse_choice<ZeroChoice>("0", "--zero");
  CHECK_FALSE(plan_step(c, run, world, *model).reducer.zero);
  CHECK_THROWS_AS(parse_choice<ZeroChoice>("2", "--zero"), UsageError);
}

TEST_CASE("the trace's reservation grows with the layers, and for exact with the micro-batches") {
  TrainConfig c;
  c.steps = 10;
  const WorldFacts world = world_of(2, 2, 8);
  const RunPlan run = plan_run(c, kFashion, world);
  auto small = small_model(32, false, run.model_rows);
  auto larger = small_model(32, true, run.model_rows);
  const std::size_t events = plan_step(c, run, world, *small).trace_events_per_step;
  CHECK(plan_step(c, run, world, *larger).trace_events_per_step > events);
  c.reduction = Reduction::kExact;
  c.exact_micro_batch = 16;
  const RunPlan exact = plan_run(c, kFashion, world);
  // 64 samples per rank: 64 / 16 + 1 micro-batches, each the adds of 4 tensors and 2 more.
  CHECK(plan_step(c, exact, world, *small).trace_events_per_step == events + 5 * (4 + 2));
}
