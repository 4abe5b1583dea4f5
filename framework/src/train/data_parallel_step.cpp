// One data-parallel step (data_parallel_step.hpp): the recipe in run(), each part below it.
#include "ringtrain/framework/train/data_parallel_step.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <mutex>

#include "ringtrain/collectives/exact_sum.hpp"
#include "ringtrain/collectives/small.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/train/now.hpp"

namespace ringtrain {
namespace {

namespace coll = collectives;

// SyncBatchNorm's cross-rank sum: one small allreduce of doubles (or of an exact sum's words). It
// runs during backward, while gradient rings may be in flight, so it holds the reducer's MPI lock.
class CommSum final : public CrossRankSum {
 public:
  CommSum(const coll::Communicator& comm, std::mutex& mpi_mutex) : comm_(comm), mutex_(mpi_mutex) {}
  void sum(std::span<double> values) const override {
    std::lock_guard lock(mutex_);
    coll::allreduce_sum(comm_, values);
  }
  void sum_exact(coll::ExactSum& sum) const override {
    std::lock_guard lock(mutex_);
    coll::allreduce_exact(comm_, sum);
  }

 private:
  const coll::Communicator& comm_;
  std::mutex& mutex_;
};

}  // namespace

DataParallelStep::DataParallelStep(const coll::Communicator& comm, Sequential& model,
                                   const data::Dataset& train, StepPlan plan,
                                   const ReducerOptions& reducer, const OptimizerConfig& optimizer,
                                   Trace* trace, Watchdog& watchdog, const FaultInjector& faults)
    : comm_(comm),
      model_(model),
      train_(train),
      plan_(std::move(plan)),
      trace_(trace),
      watchdog_(watchdog),
      faults_(faults),
      reducer_(std::make_unique<GradientReducer>(comm, model.parameters(), reducer, trace)),
      // --zero 1: the optimizer's state covers only this rank's chunk of each bucket.
      optimizer_(make_optimizer(optimizer, reducer_->shard().elements())),
      bn_sum_(std::make_unique<CommSum>(comm, reducer_->mpi_mutex())) {
  const std::size_t max_local =
      *std::max_element(plan_.local_batches.begin(), plan_.local_batches.end());
  inputs_.resize(max_local * num_elements(model.input_shape()));
  labels_.resize(train.regression() ? 0 : max_local);
  targets_.resize(max_local * train.num_targets);
  sample_ids_.resize(max_local);
  dlogits_.resize(max_local * num_elements(model.output_shape()));
  if (plan_.reduction == Reduction::kExact)
    exact_ = std::make_unique<ExactGradient>(model, comm, trace_);

  if (trace_) {
    for (std::size_t i = 0; i < model.num_layers(); ++i) {
      const std::string path = fmt::format("layers.{}.{}", i, model.layer(i).kind());
      forward_names_.push_back(trace_->name("forward " + path));
      backward_names_.push_back(trace_->name("backward " + path));
    }
    data_name_ = trace_->name("data");
    loss_name_ = trace_->name("loss");
    optimizer_name_ = trace_->name("optimizer");
    exact_pass_name_ = trace_->name("exact: forward, loss, backward");
  }
  forward_hook_ = [this](std::size_t layer) { on_forward_layer(layer); };
  backward_hook_ = [this](std::size_t layer) { on_backward_layer(layer); };
  backward_trace_hook_ = [this](std::size_t layer) { trace_backward_layer(layer); };
  poll_hook_ = [this] { reducer_->poll(); };
  update_hook_ = [this](std::size_t offset, std::size_t count, std::size_t state_offset) {
    update_piece(offset, count, state_offset);
  };
}

DataParallelStep::~DataParallelStep() = default;

float DataParallelStep::learning_rate(std::uint64_t step) const {
  return ringtrain::learning_rate(plan_.schedule, step);
}

StepOutcome DataParallelStep::run(std::uint64_t step, const data::GlobalBatch& batch) {
  if (exact_) return run_exact(step, batch);
  const double t0 = now_s();
  step_ = step;
  times_ = StepTimes{};
  times_.overlap = reducer_->options().overlap && !(plan_.alternate_overlap && step % 2 == 1);
  if (trace_) trace_->begin_step(step);
  traced_ = trace_ && trace_->recording();
  reducer_->begin_step(times_.overlap);
  watchdog_.enter("forward/backward", step);

  // 1. this rank's slice of the global batch
  const std::size_t n = take_slice(batch);
  const double t_data = now_s();
  layer_end_s_ = t_data;
  if (traced_) trace_->span(data_name_, 0, t0, t_data);
  // 2. forward and the loss, scaled by the reduction convention
  const LossResult loss = forward_and_loss(n, batch.samples.size());
  const double t_forward = now_s();
  // 3. backward, each finished layer handed to the reducer
  backward(n, std::isfinite(loss.loss_sum));
  const double t_backward = now_s();
  // 4. the rest of the sum over ranks, and the same update (or the same skip) everywhere
  const bool applied = sum_and_update();
  const double t_end = now_s();

  const StepComm& comm = reducer_->account();
  times_.step_s = t_end - t0;
  times_.data_s = t_data - t0;
  times_.forward_s = t_forward - t_data;
  times_.backward_s = t_backward - t_forward;
  times_.progress_s = comm.progress_s;
  times_.comm_s = comm.comm_s;
  times_.exposed_s = comm.exposed_s;
  times_.collectives = double(comm.collectives);
  times_.wire_bytes = comm.wire_bytes;
  times_.inter_host_bytes = comm.inter_host_bytes;
  return {loss.loss_sum, n, batch.samples.size(), applied, times_};
}

// Copies the samples of this rank's slice into the input buffers; returns b_r.
std::size_t DataParallelStep::take_slice(const data::GlobalBatch& batch) {
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
  return mine.count;
}

// outputs = model(x)                                       (b_r, outputs)
// loss    = Σ_i ℓ_i;  doutputs = scale · ∂loss/∂outputs,  scale = 1/B for sum-scaled
// ℓ_i: softmax cross-entropy of the logits (class labels) or (1/k) Σ_k (ŷ_ik - y_ik)² (targets)
LossResult DataParallelStep::forward_and_loss(std::size_t n, std::size_t global_samples) {
  const auto outputs = model_.forward(inputs_, n, context(n, true),
                                      traced_ ? forward_hook_ : std::function<void(std::size_t)>{});
  const float scale = loss_scale(plan_.reduction, n, global_samples, comm_.size());
  const std::size_t width = num_elements(model_.output_shape());
  const LossResult loss =
      train_.regression()
          ? squared_error(outputs, targets_, n, width, scale, dlogits_)
          : softmax_cross_entropy(outputs, std::span(labels_).first(n), n, width, scale, dlogits_);
  if (traced_) {
    const double t = now_s();
    trace_->span(loss_name_, 0, layer_end_s_, t);
    layer_end_s_ = t;
  }
  return loss;
}

// A non-finite loss poisons the gradient before its first bucket starts, so the sum carries
// it and every rank skips the step together.
void DataParallelStep::backward(std::size_t n, bool loss_finite) {
  poison_ = !loss_finite || !data_failure_.empty() || faults_.poison_gradient(comm_.rank(), step_);
  model_.backward(dlogits_, n, context(n, true), backward_hook_);
}

// Waits for the buckets still in flight; the reducer calls update_piece on each summed piece
// once the ranks agree that the step is applied.
bool DataParallelStep::sum_and_update() {
  watchdog_.enter("allreduce", step_);
  faults_.before_gradient_sum(comm_.rank(), step_);
  lr_ = learning_rate(step_);
  counted_ = false;
  const bool applied = reducer_->finish(!poison_, update_hook_);
  watchdog_.enter("optimizer", step_);
  faults_.after_update(comm_.rank(), step_, model_.parameters().values());
  watchdog_.leave();
  return applied;
}

void DataParallelStep::on_forward_layer(std::size_t layer) {
  const double t = now_s();
  trace_->span(forward_names_[layer], 0, layer_end_s_, t);
  layer_end_s_ = t;
}

void DataParallelStep::on_backward_layer(std::size_t layer) {
  std::span<float> grads = model_.parameters().grads();
  const bool first_with_gradients =
      model_.parameters().count() > 0 && layer == model_.parameters().entry(0).layer;
  if (poison_ && first_with_gradients && !grads.empty()) grads[0] = NAN;
  reducer_->layer_done(layer);
  if (traced_) trace_backward_layer(layer);
}

void DataParallelStep::trace_backward_layer(std::size_t layer) {
  const double t = now_s();
  trace_->span(backward_names_[layer], 0, layer_end_s_, t);
  layer_end_s_ = t;
}

// params[offset, offset+count) -= the optimizer's step on grads[...]; the optimizer's state
// for them starts at state_offset. The step count advances once per applied step.
void DataParallelStep::update_piece(std::size_t offset, std::size_t count,
                                    std::size_t state_offset) {
  const double t0 = now_s();
  if (!counted_) optimizer_->begin_step();
  counted_ = true;
  ParameterStore& params = model_.parameters();
  optimizer_->update(state_offset, params.values().subspan(offset, count),
                     params.grads().subspan(offset, count), lr_);
  const double t1 = now_s();
  times_.optimizer_s += t1 - t0;
  if (traced_) trace_->span(optimizer_name_, 0, t0, t1);
}

StepContext DataParallelStep::context(std::size_t n, bool training) {
  StepContext ctx;
  ctx.training = training;
  ctx.seed = plan_.seed;
  ctx.sample_ids = std::span(sample_ids_).first(n);
  ctx.cross_rank = plan_.sync_bn ? bn_sum_.get() : nullptr;
  ctx.poll = &poll_hook_;
  return ctx;
}

}  // namespace ringtrain
