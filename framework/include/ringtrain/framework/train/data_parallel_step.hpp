// DataParallelStep: one synchronous data-parallel training step on one rank of N, the unit
// a student reads to see the whole idea. Its run() is the recipe:
//
//   1. slice     this rank's b_r samples of the global batch of B (b_r may be 0)
//   2. forward   outputs and the loss (softmax cross-entropy on class labels, squared error
//                on regression targets: the data decide, loss.hpp); the loss *sum* is
//                scaled by 1/B (the reduction
//                convention, reduction.hpp), so that summing the ranks' gradients gives the
//                gradient of the global batch's mean loss, whatever the split
//   3. backward  layer by layer; as each layer's gradients are final, the reducer may start
//                the ring of the bucket they complete (overlap), while earlier layers compute
//   4. update    the ranks agree whether every gradient was finite, then every rank applies
//                the same optimizer update (bucket by bucket as each sum completes), or every
//                rank skips the step
//
// With --reduction exact, run() takes another road after step 1 (exact_step.hpp): one
// forward and one backward whose layers sum over samples per micro-batch of m samples, each
// micro-batch's gradient added into an exact accumulator, one exact allreduce after
// backward, then the same optimizer update.
//
// It owns what a step uses and nothing else: the reducer, the optimizer, the batch buffers
// (planned once: a step allocates nothing) and the trace's span names. The loop around it
// (logging, evaluation, checkpoints) is the Trainer's.
//
// Collective: every rank calls run() for the same steps with the same global batches.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/framework/data/dataset.hpp"
#include "ringtrain/framework/data/sampler.hpp"
#include "ringtrain/framework/layer.hpp"
#include "ringtrain/framework/loss.hpp"
#include "ringtrain/framework/optim/optimizer.hpp"
#include "ringtrain/framework/optim/schedule.hpp"
#include "ringtrain/framework/sequential.hpp"
#include "ringtrain/framework/train/exact_step.hpp"
#include "ringtrain/framework/train/fault_injector.hpp"
#include "ringtrain/framework/train/gradient_reducer.hpp"
#include "ringtrain/framework/train/reduction.hpp"
#include "ringtrain/framework/train/step_account.hpp"
#include "ringtrain/framework/train/trace.hpp"
#include "ringtrain/framework/train/watchdog.hpp"

namespace ringtrain {

// What a step needs that stays the same from step to step.
struct StepPlan {
  Reduction reduction = Reduction::kSumScaled;
  std::vector<std::size_t> local_batches;  // b_r of every rank (sum B)
  ScheduleConfig schedule;                 // the learning rate of each step
  bool sync_bn = false;                    // BatchNorm statistics summed over ranks
  bool alternate_overlap = false;          // overlap in even steps only (to measure it)
  std::uint64_t seed = 0;                  // keys the model's randomness (dropout)
  std::size_t exact_micro_batch = 16;      // --reduction exact: m
};

// What one step did on this rank.
struct StepOutcome {
  double loss_sum = 0.0;           // Σ ℓ_i over this rank's samples (not scaled)
  std::size_t local_samples = 0;   // b_r
  std::size_t global_samples = 0;  // B (the last batch of an epoch may be short)
  bool applied = true;             // false: some rank's gradient was not finite, all skipped
  StepTimes times;
};

class DataParallelStep {
 public:
  // `model` is planned for at least max(b_r) samples and holds the same parameters on every
  // rank. Builds the reducer (its constructor is collective) and an optimizer whose state
  // covers this rank's shard. `trace` may be null (no trace). All references must outlive
  // the step.
  DataParallelStep(const collectives::Communicator& comm, Sequential& model,
                   const data::Dataset& train, StepPlan plan, const ReducerOptions& reducer,
                   const OptimizerConfig& optimizer, Trace* trace, Watchdog& watchdog,
                   const FaultInjector& faults);
  ~DataParallelStep();
  DataParallelStep(const DataParallelStep&) = delete;
  DataParallelStep& operator=(const DataParallelStep&) = delete;

  // Step `step` (0-based) on `batch`, the global batch the sampler yielded for it.
  // Collective.
  StepOutcome run(std::uint64_t step, const data::GlobalBatch& batch);

  GradientReducer& reducer() { return *reducer_; }
  const GradientReducer& reducer() const { return *reducer_; }
  Optimizer& optimizer() { return *optimizer_; }
  const StepPlan& plan() const { return plan_; }
  // The learning rate of step `step`.
  float learning_rate(std::uint64_t step) const;
  // Why this rank could not read its samples (a mapped data file shrank), "" if it could.
  // Such a step is poisoned like a non-finite loss, so every rank skips it together; the
  // trainer then stops all ranks with this message.
  const std::string& data_failure() const { return data_failure_; }

 private:
  std::size_t take_slice(const data::GlobalBatch& batch);
  LossResult forward_and_loss(std::size_t n, std::size_t global_samples);
  void backward(std::size_t n, bool loss_finite);
  bool sum_and_update();
  void on_forward_layer(std::size_t layer);
  void on_backward_layer(std::size_t layer);
  void trace_backward_layer(std::size_t layer);
  void update_piece(std::size_t offset, std::size_t count, std::size_t state_offset);
  StepContext context(std::size_t n, bool training);
  // --reduction exact (data_parallel_step_exact.cpp).
  StepOutcome run_exact(std::uint64_t step, const data::GlobalBatch& batch);
  double exact_pass(std::size_t n, std::size_t global_samples);
  double exact_loss(std::span<const float> outputs, std::span<float> doutputs, std::size_t first,
                    std::size_t rows, std::size_t global_samples) const;
  bool exact_sum_and_update(bool local_ok);
  void exact_update_shard();

  const collectives::Communicator& comm_;
  Sequential& model_;
  const data::Dataset& train_;
  StepPlan plan_;
  Trace* trace_;
  Watchdog& watchdog_;
  const FaultInjector& faults_;
  std::unique_ptr<GradientReducer> reducer_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<CrossRankSum> bn_sum_;  // SyncBatchNorm's statistics, summed over ranks
  std::unique_ptr<ExactGradient> exact_;  // --reduction exact only

  // Buffers planned once for max(b_r) samples.
  std::vector<float> inputs_;              // (b_r, input...)
  std::vector<std::int32_t> labels_;       // (b_r) classification
  std::vector<float> targets_;             // (b_r, targets) regression
  std::vector<std::uint64_t> sample_ids_;  // (b_r) global sample indices
  std::vector<float> dlogits_;             // (b_r, outputs): classes or targets

  // Span names in the trace.
  std::vector<std::size_t> forward_names_, backward_names_;
  std::size_t data_name_ = 0, loss_name_ = 0, optimizer_name_ = 0;
  std::size_t exact_pass_name_ = 0;  // --reduction exact: a micro-batch's (or the batch's) pass

  // The hooks that forward, backward and the reducer call, made once (a lambda turned into a
  // std::function each step would allocate); they read the step's state below.
  std::function<void(std::size_t)> forward_hook_, backward_hook_;
  std::function<void(std::size_t)> backward_trace_hook_;  // the exact step's: spans only
  std::function<void()> poll_hook_;
  UpdatePiece update_hook_;

  // The current step, as the hooks see it.
  std::uint64_t step_ = 0;
  bool traced_ = false;       // this step is recorded in the trace
  double layer_end_s_ = 0.0;  // end of the previous layer's span
  bool poison_ = false;       // put a NaN into the gradient (non-finite loss, or a test)
  std::string data_failure_;  // take_slice could not read the samples (data_failure())
  float lr_ = 0.0f;
  bool counted_ = false;  // optimizer->begin_step() done for this step
  StepTimes times_;
};

}  // namespace ringtrain
