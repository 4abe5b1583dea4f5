// DataParallelStep: one synchronous data-parallel training step on one rank of N, the unit
// a student reads to see the whole idea. Its run() is the recipe:
//
//   1. slice     this rank's b_r samples of the global batch of B (b_r may be 0)
//   2. forward   outputs and the loss (softmax cross-entropy on class labels, squared error
//                on regression targets: the data decide, loss.hpp); the loss *sum* is
//                scaled by 1/B (the reduction convention, reduction.hpp), so that summing
//                the ranks' gradients gives the gradient of the global batch's mean loss,
//                whatever the split
//   3. backward  layer by layer; as each layer's gradients are final they go to the sum
//                over ranks, which may start a bucket's ring while earlier layers compute
//   4. sum       the rest of the sum; the ranks agree whether every gradient was finite
//   5. update    every rank applies the same optimizer update to each summed piece as the
//                sum hands it back (bucket by bucket, or the whole buffer), or every rank
//                skips the step
//
// How the ranks sum (gradient_sum.hpp) is the one thing that differs between
// --reduction sum-scaled / mean-of-means (the bucketed ring) and --reduction exact (the
// layers sum per micro-batch of m samples into an exact accumulator, one exact allreduce
// after backward; framework/src/train/sum/exact_step.hpp): the recipe is the same.
//
// It owns what a step uses and nothing else: the sum, the optimizer and the batch buffers
// (planned once: a step allocates nothing). What watches it (times, trace, hang watchdog,
// injected faults) is a StepProbe (step_probe.hpp); the loop around it (logging,
// evaluation, checkpoints) is the Trainer's.
//
// Collective: every rank calls run() for the same steps with the same global batches.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/collectives/error_feedback.hpp"
#include "ringtrain/framework/data/dataset.hpp"
#include "ringtrain/framework/data/sampler.hpp"
#include "ringtrain/framework/layer.hpp"
#include "ringtrain/framework/optim/optimizer.hpp"
#include "ringtrain/framework/optim/schedule.hpp"
#include "ringtrain/framework/sequential.hpp"
#include "ringtrain/framework/train/gradient_sum.hpp"
#include "ringtrain/framework/train/optimizer_shard.hpp"
#include "ringtrain/framework/train/reduction.hpp"
#include "ringtrain/framework/train/step_probe.hpp"

namespace ringtrain {

// What a step needs that stays the same from step to step.
struct StepPlan {
  Reduction reduction = Reduction::kSumScaled;
  std::vector<std::size_t> local_batches;  // b_r of every rank (sum B): the split in force
  std::size_t max_local_batch = 0;  // the buffers' rows, >= every b_r (0: max of local_batches)
  ScheduleConfig schedule;                 // the learning rate of each step
  bool sync_bn = false;                    // BatchNorm statistics summed over ranks
  bool alternate_overlap = false;          // overlap in even steps only (to measure it)
  std::uint64_t seed = 0;                  // keys the model's randomness (dropout)
  std::size_t exact_micro_batch = 16;      // --reduction exact: m
};

// What one step did on this rank.
struct StepOutcome {
  // This rank's share of Σ ℓ_i over the global batch (not scaled): its own samples' loss, or
  // with --reduction exact the exact total on rank 0 and 0 elsewhere (gradient_sum.hpp).
  double loss_sum = 0.0;
  std::size_t local_samples = 0;   // b_r
  std::size_t global_samples = 0;  // B (the last batch of an epoch may be short)
  bool applied = true;             // false: some rank's gradient was not finite, all skipped
};

class DataParallelStep {
 public:
  // `model` is planned for at least max(b_r) samples and holds the same parameters on every
  // rank. Builds the sum over ranks that plan.reduction names (its constructor is
  // collective) and an optimizer whose state covers this rank's shard. `probe` watches every
  // step. All references must outlive the step.
  DataParallelStep(const collectives::Communicator& comm, Sequential& model,
                   const data::Dataset& train, StepPlan plan, const ReducerOptions& reducer,
                   const OptimizerConfig& optimizer, StepProbe& probe);
  ~DataParallelStep();
  DataParallelStep(const DataParallelStep&) = delete;
  DataParallelStep& operator=(const DataParallelStep&) = delete;

  // Step `step` (0-based) on `batch`, the global batch the sampler yielded for it.
  // Collective.
  StepOutcome run(std::uint64_t step, const data::GlobalBatch& batch);

  // The split of the steps from now on (--local-batches auto), between steps; allocates
  // nothing. Throws Error unless it has N entries summing to the split in force's B, each a
  // multiple of m under --reduction exact and at most plan().max_local_batch. Every rank must
  // set the same split before the same step.
  void set_split(std::span<const std::size_t> split);

  GradientSum& sum() { return *sum_; }
  const GradientSum& sum() const { return *sum_; }
  // The elements this rank's optimizer owns, and its bf16 wire residual: checkpointed state.
  const OptimizerShard& shard() const { return sum_->shard(); }
  collectives::ErrorFeedback& feedback() { return sum_->feedback(); }
  Optimizer& optimizer() { return *optimizer_; }
  const StepPlan& plan() const { return plan_; }
  // The learning rate of step `step`.
  float learning_rate(std::uint64_t step) const;
  // Why this rank could not read its samples (a mapped data file shrank), "" if it could.
  // Such a step is poisoned like a non-finite loss, so every rank skips it together; the
  // trainer then stops all ranks with this message.
  const std::string& data_failure() const { return data_failure_; }

 private:
  std::size_t begin_step(std::uint64_t step, const data::GlobalBatch& batch);
  StepContext context(std::size_t n);
  std::span<const float> forward(std::size_t n);
  double loss(std::span<const float> outputs, std::size_t n, std::size_t global_samples);
  double loss_of_rows(std::span<const float> outputs, std::size_t first, std::size_t rows,
                      float scale);
  bool backward(std::size_t n, double loss_sum);
  void on_backward_layer(std::size_t layer);
  void update(const ShardPiece& piece);
  StepOutcome end_step(std::size_t n, std::size_t global_samples, double loss_sum, bool applied);

  const collectives::Communicator& comm_;
  Sequential& model_;
  const data::Dataset& train_;
  StepPlan plan_;
  StepProbe& probe_;
  bool overlap_;  // the run's setting: rings start during backward (ReducerOptions::overlap)
  std::unique_ptr<GradientSum> sum_;
  std::unique_ptr<Optimizer> optimizer_;
  double bn_sum_s_ = 0.0;  // this step's seconds in bn_sum_ (before it: bn_sum_ holds it)
  std::unique_ptr<CrossRankSum> bn_sum_;  // SyncBatchNorm's statistics, summed over ranks

  // Buffers planned once for plan_.max_local_batch samples.
  std::vector<float> inputs_;              // (b_r, input...)
  std::vector<std::int32_t> labels_;       // (b_r) classification
  std::vector<float> targets_;             // (b_r, targets) regression
  std::vector<std::uint64_t> sample_ids_;  // (b_r) global sample indices
  std::vector<float> dlogits_;             // (b_r, outputs): classes or targets

  // The hooks that forward and backward call, made once (a lambda turned into a
  // std::function each step would allocate).
  std::function<void(std::size_t)> forward_hook_, backward_hook_;

  // The current step, as the hooks see it.
  std::size_t poisoned_layer_ = 0;  // the layer that writes the gradient's first element
  bool poison_ = false;             // put a NaN into the gradient (non-finite loss, or a test)
  std::string data_failure_;        // begin_step could not read the samples (data_failure())
  float lr_ = 0.0f;
  bool counted_ = false;  // optimizer->begin_step() done for this step
};

}  // namespace ringtrain
