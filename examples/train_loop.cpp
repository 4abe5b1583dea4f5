// train_loop: a complete data-parallel training program, written against the installed
// ringtrain library (find_package(ringtrain)). It is the loop of `ringtrain train` without
// its options: load the data, build the model, run the data-parallel step, evaluate, save a
// checkpoint. With the same settings it ends bitwise equal to
//   mpiexec -n N ringtrain train --steps STEPS
//
//   usage: mpiexec -n 2 train_loop [STEPS] [RUN_DIR]      (defaults: 200, runs/train_loop)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/collectives/ring.hpp"
#include "ringtrain/framework/blas.hpp"
#include "ringtrain/framework/data/dataset.hpp"
#include "ringtrain/framework/data/sampler.hpp"
#include "ringtrain/framework/train/checkpointer.hpp"
#include "ringtrain/framework/train/data_parallel_step.hpp"
#include "ringtrain/framework/train/evaluation.hpp"
#include "ringtrain/framework/train/run_plan.hpp"
#include "ringtrain/models/registry.hpp"

using namespace ringtrain;

namespace {

int train_loop(int argc, char** argv) {
  const collectives::Communicator comm;
  const bool leader = comm.rank() == 0;
  TrainConfig settings;  // ringtrain train's defaults: batch 128, SGD lr 0.05, seed 0
  settings.steps = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 200;
  const std::string run_dir = argc > 2 ? argv[2] : "runs/train_loop";
  const std::uint64_t steps = settings.steps, seed = settings.seed;

  // 1. Data: Fashion-MNIST from the Debian package; every rank holds all of it.
  const data::Dataset train =
      data::load_fashion_mnist(data::default_data_dir(), data::Split::kTrain);
  const data::Dataset test = data::load_fashion_mnist(data::default_data_dir(), data::Split::kTest);

  // 2. The plan, as ringtrain train makes it: one BLAS thread per core of this rank's share
  //    of the node, each rank's local batch, the model's options (run_plan.hpp).
  const WorldFacts world = world_facts(comm);
  const RunPlan plan =
      plan_run(settings, {train.sample_shape, train.outputs(), train.size()}, world);
  blas::set_threads(plan.blas_threads, world.ranks_per_node);
  blas::set_kernels(blas::resolve_kernels("auto"));

  // 3. The model: initialized from the seed, then rank 0's parameters on every rank.
  auto model = models::make_model("mlp", plan.model);
  model->plan(train.sample_shape, plan.model_rows);
  model->initialize(seed);
  collectives::broadcast(comm, model->parameters().values(), 0);

  // 4. The step: this rank's slice of each global batch, forward, loss scaled by 1/B,
  //    backward with gradient buckets summed by the ring, the same SGD update everywhere.
  const StepSetup setup = plan_step(settings, plan, world, *model);
  StepProbe unwatched;  // nothing times, traces or watches this loop's steps
  DataParallelStep step(comm, *model, train, setup.step, setup.reducer, plan.optimizer, unwatched);

  data::GlobalSampler sampler(seed, train.size(), settings.global_batch);
  double window_loss = 0.0, window_samples = 0.0;
  for (std::uint64_t s = 0; s < steps; ++s) {
    const StepOutcome outcome = step.run(s, sampler.next_batch());
    window_loss += outcome.loss_sum;  // this rank's share; the printed loss is rank 0's
    window_samples += double(outcome.local_samples);
    if (leader && ((s + 1) % 50 == 0 || s + 1 == steps)) {
      std::printf("step %llu  loss %.4f (rank 0's samples)\n",
                  static_cast<unsigned long long>(s + 1),
                  window_loss / std::max(1.0, window_samples));
      window_loss = window_samples = 0.0;
    }
  }

  // 5. Evaluation: the test set split over ranks, correct counts summed exactly.
  const Evaluation result = evaluate(comm, *model, test, seed);
  if (leader) std::printf("test accuracy %.4f\n", result.accuracy);

  // 6. A checkpoint of the whole training state, committed atomically by rank 0.
  TrainingCounters counters;
  counters.step = steps;
  counters.samples_seen = steps * settings.global_batch;
  const TrainingState state{*model, step.optimizer(), sampler, counters, seed, &step.shard()};
  Checkpointer checkpointer(comm, std::string(run_dir) + "/checkpoints", 1, "{}");
  const SaveOutcome saved = checkpointer.save(state, sampler.state().epoch);
  if (!saved.durable) {
    if (leader) std::fprintf(stderr, "train_loop: the checkpoint failed: %s\n", saved.failure.c_str());
    return 1;
  }
  if (leader) std::printf("saved %s/checkpoints (LATEST)\n", run_dir.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  collectives::Environment mpi(&argc, &argv);
  try {
    return train_loop(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_loop: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);  // the other ranks may wait in a collective for this one
  }
}
