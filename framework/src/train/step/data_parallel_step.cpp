// One data-parallel step (data_parallel_step.hpp): the recipe in run(), each part below it.
#include "ringtrain/framework/train/data_parallel_step.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <numeric>

#include "ringtrain/collectives/exact_sum.hpp"
#include "ringtrain/collectives/small.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/loss.hpp"
#include "train/now.hpp"
#include "train/sum/exact_step.hpp"
#include "train/sum/gradient_reducer.hpp"

namespace ringtrain {
namespace {

namespace coll = collectives;

// SyncBatchNorm's cross-rank sum: one small allreduce of doubles (or of an exact sum's words). It
// runs during backward, while gradient rings may be in flight, so it holds the sum's MPI lock.
// Its seconds are added to `seconds` (communication inside forward and backward).
class CommSum final : public CrossRankSum {
 public:
  CommSum(const coll::Communicator& comm, std::mutex& mpi_mutex, double& seconds)
      : comm_(comm), mutex_(mpi_mutex), seconds_(seconds) {}
  void sum(std::span<double> values) const override {
    const double t0 = now_s();
    std::lock_guard lock(mutex_);
    coll::allreduce_sum(comm_, values);
    seconds_ += now_s() - t0;
  }
  void sum_exact(coll::ExactSum& sum) const override {
    const double t0 = now_s();
    std::lock_guard lock(mutex_);
    coll::allreduce_exact(comm_, sum);
    seconds_ += now_s() - t0;
  }

 private:
  const coll::Communicator& comm_;
  std::mutex& mutex_;
  double& seconds_;
};

// The way to sum that `reduction` names. Collective.
std::unique_ptr<GradientSum> make_sum(const coll::Communicator& comm, Sequential& model,
                                      const StepPlan& plan, const ReducerOptions& reducer,
                                      Trace* trace) {
  if (plan.reduction == Reduction::kExact)
    return std::make_unique<ExactGradientSum>(comm, model, reducer, plan.exact_micro_batch, trace);
  return std::make_unique<GradientReducer>(comm, model.parameters(), reducer, trace);
}

}  // namespace

DataParallelStep::DataParallelStep(const coll::Communicator& comm, Sequential& model,
                                   const data::Dataset& train, StepPlan plan,
                                   const ReducerOptions& reducer, const OptimizerConfig& optimizer,
                                   StepProbe& probe)
    : comm_(comm),
      model_(model),
      train_(train),
      plan_(std::move(plan)),
      probe_(probe),
      overlap_(reducer.overlap),
      sum_(make_sum(comm, model, plan_, reducer, probe.trace())),
      // --zero 1: the optimizer's state covers only this rank's chunk of each bucket.
      optimizer_(make_optimizer(optimizer, sum_->shard().elements())),
      bn_sum_(std::make_unique<CommSum>(comm, sum_->mpi_mutex(), bn_sum_s_)) {
  const std::size_t max_local = plan_.max_local_batch =
      std::max(plan_.max_local_batch,
               *std::max_element(plan_.local_batches.begin(), plan_.local_batches.end()));
  inputs_.resize(max_local * num_elements(model.input_shape()));
  labels_.resize(train.regression() ? 0 : max_local);
  targets_.resize(max_local * train.num_targets);
  sample_ids_.resize(max_local);
  dlogits_.resize(max_local * num_elements(model.output_shape()));
  // The first element of the gradient: its layer's backward is the last to write into the
  // bucket that holds it (bucket_plan.hpp).
  if (model.parameters().count() > 0) poisoned_layer_ = model.parameters().entry(0).layer;
  forward_hook_ = [this](std::size_t layer) { probe_.layer_done(layer); };
  backward_hook_ = [this](std::size_t layer) { on_backward_layer(layer); };
}

DataParallelStep::~DataParallelStep() = default;

float DataParallelStep::learning_rate(std::uint64_t step) const {
  return ringtrain::learning_rate(plan_.schedule, step);
}

StepOutcome DataParallelStep::run(std::uint64_t step, const data::GlobalBatch& batch) {
  const std::size_t B = batch.samples.size();
  // 1. this rank's slice of the global batch (the step begins)
  const std::size_t n = begin_step(step, batch);
  // 2. forward, and the loss scaled by the reduction convention
  const double loss_sum = loss(forward(n), n, B);
  // 3. backward, each finished layer's gradients handed to the sum over ranks
  const bool finite = backward(n, loss_sum);
  // 4. the rest of the sum; the ranks agree to apply the step, or all skip it
  const bool applied = sum_->finish(finite);
  // 5. the same update on every rank: each summed piece goes to the optimizer
  if (applied)
    while (const std::optional<ShardPiece> piece = sum_->next_summed()) update(*piece);
  return end_step(n, B, loss_sum, applied);
}

void DataParallelStep::set_split(std::span<const std::size_t> split) {
  std::vector<std::size_t>& now = plan_.local_batches;
  const auto total = [](std::span<const std::size_t> s) {
    return std::accumulate(s.begin(), s.end(), std::size_t{0});
  };
  const std::size_t m = plan_.reduction == Reduction::kExact ? plan_.exact_micro_batch : 1;
  bool fits = split.size() == now.size() && total(split) == total(now);
  for (const std::size_t b : split) fits = fits && b <= plan_.max_local_batch && b % m == 0;
  if (!fits)
    throw Error(
        fmt::format("set_split: {} does not replace {}: N entries summing to the same B, "
                    "each a multiple of {} and at most {}",
                    fmt::join(split, ","), fmt::join(now, ","), m, plan_.max_local_batch));
  std::copy(split.begin(), split.end(), now.begin());
}

// Starts step `step`: copies the samples of this rank's slice into the input buffers; returns
// b_r.
std::size_t DataParallelStep::begin_step(std::uint64_t step, const data::GlobalBatch& batch) {
  probe_.begin(step);
  bn_sum_s_ = 0.0;
  lr_ = learning_rate(step);
  counted_ = false;
  const data::Slice mine = data::rank_slice(
      plan_.local_batches, static_cast<std::size_t>(comm_.rank()), batch.samples.size());
  for (std::size_t i = 0; i < mine.count; ++i) sample_ids_[i] = batch.samples[mine.begin + i];
  const std::size_t pixels = num_elements(model_.input_shape());
  try {
    data::gather_batch(train_, std::span(sample_ids_).first(mine.count),
                       std::span(inputs_).first(mine.count * pixels),
                       std::span(labels_).first(train_.regression() ? 0 : mine.count),
                       std::span(targets_).first(mine.count * train_.num_targets));
  } catch (const DataError& e) {
    data_failure_ = e.what();  // the step goes on, poisoned, so no rank waits for this one
    std::fill_n(labels_.begin(), train_.regression() ? 0 : mine.count, 0);
  }
  // --overlap alternate: the rings start during backward in even steps only.
  const bool overlap = overlap_ && !(plan_.alternate_overlap && step % 2 == 1);
  sum_->begin_step(overlap, batch.samples.size());
  return mine.count;
}

// The step's context for the layers: training mode, the keys of their randomness, SyncBN's
// sum over ranks, and what the sum over ranks asks of them.
StepContext DataParallelStep::context(std::size_t n) {
  StepContext ctx;
  ctx.training = true;
  ctx.seed = plan_.seed;
  ctx.sample_ids = std::span<const std::uint64_t>(sample_ids_).first(n);
  ctx.cross_rank = plan_.sync_bn ? bn_sum_.get() : nullptr;
  sum_->prepare(ctx);
  return ctx;
}

// outputs = model(x)                                       (b_r, outputs)
std::span<const float> DataParallelStep::forward(std::size_t n) {
  probe_.enter(StepPhase::kForward);
  const std::size_t pixels = num_elements(model_.input_shape());
  return model_.forward(std::span<const float>(inputs_).first(n * pixels), n, context(n),
                        forward_hook_);
}

// loss = Σ_i ℓ_i over this rank's n rows, taken in terms of loss_rows() rows each (all of
// them, or the exact sum's micro-batches), each term handed to the sum;
// doutputs = scale · ∂loss/∂outputs, scale = 1/B for sum-scaled (reduction.hpp).
double DataParallelStep::loss(std::span<const float> outputs, std::size_t n,
                              std::size_t global_samples) {
  const std::size_t term_rows = std::max<std::size_t>(1, sum_->loss_rows(n));
  double loss_sum = 0.0;
  for (std::size_t first = 0; first < n; first += term_rows) {
    const std::size_t rows = std::min(term_rows, n - first);
    const float scale = loss_scale(plan_.reduction, rows, global_samples, comm_.size());
    const double term = loss_of_rows(outputs, first, rows, scale);
    sum_->add_loss(term);
    loss_sum += term;
  }
  return loss_sum;
}

// Σ ℓ_i over rows [first, first + rows) of the slice, from their outputs; their doutputs into
// dlogits_. ℓ_i: softmax cross-entropy of the logits (class labels) or (1/k) Σ_k (ŷ_ik - y_ik)²
// (targets): the one place the data choose the loss.
double DataParallelStep::loss_of_rows(std::span<const float> outputs, std::size_t first,
                                      std::size_t rows, float scale) {
  const std::size_t width = num_elements(model_.output_shape());
  const std::span<const float> out = outputs.subspan(first * width, rows * width);
  const std::span<float> dout = std::span(dlogits_).subspan(first * width, rows * width);
  if (train_.regression())
    return squared_error(out, std::span<const float>(targets_).subspan(first * train_.num_targets),
                         rows, width, scale, dout)
        .loss_sum;
  return softmax_cross_entropy(out, std::span<const std::int32_t>(labels_).subspan(first, rows),
                               rows, width, scale, dout)
      .loss_sum;
}

// A rank whose loss is not finite, that could not read its samples, or that a test poisons, poisons
// its gradient before the bucket that holds the gradient's first element starts, so the sum carries
// the NaN and every rank skips the step together. Returns whether this rank's gradient is good.
bool DataParallelStep::backward(std::size_t n, double loss_sum) {
  poison_ = !std::isfinite(loss_sum) || !data_failure_.empty() || probe_.poison_gradient();
  probe_.enter(StepPhase::kBackward);
  const std::size_t width = num_elements(model_.output_shape());
  model_.backward(std::span<const float>(dlogits_).first(n * width), n, context(n), backward_hook_);
  probe_.inside_comm(sum_->inside_compute_s() + bn_sum_s_);
  probe_.enter(StepPhase::kSum);
  return !poison_;
}

void DataParallelStep::on_backward_layer(std::size_t layer) {
  std::span<float> grads = model_.parameters().grads();
  if (poison_ && layer == poisoned_layer_ && !grads.empty()) grads[0] = NAN;
  sum_->layer_done(layer);
  probe_.layer_done(layer);
}

// params[piece] -= the optimizer's step on grads[piece]; the optimizer's state for them starts
// at piece.shard_offset. The step count advances once per applied step.
void DataParallelStep::update(const ShardPiece& piece) {
  probe_.enter(StepPhase::kUpdate);
  if (!counted_) optimizer_->begin_step();
  counted_ = true;
  ParameterStore& params = model_.parameters();
  optimizer_->update(piece.shard_offset, params.values().subspan(piece.flat_offset, piece.count),
                     params.grads().subspan(piece.flat_offset, piece.count), lr_);
  probe_.enter(StepPhase::kSum);
}

// The step is done: the probe sees what it cost; the outcome carries this rank's share of
// the loss.
StepOutcome DataParallelStep::end_step(std::size_t n, std::size_t global_samples, double loss_sum,
                                       bool applied) {
  StepComm comm = sum_->account();
  comm.inside_compute_s += bn_sum_s_;
  probe_.end(comm, model_.parameters().values());
  return {sum_->loss_share(loss_sum), n, global_samples, applied};
}

}  // namespace ringtrain
