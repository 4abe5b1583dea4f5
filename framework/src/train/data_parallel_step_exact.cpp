// The step of `--reduction exact` (exact_step.hpp): the recipe of run() with steps 2 to 4
// done per micro-batch and summed exactly.
#include <algorithm>
#include <cmath>

#include "ringtrain/framework/blas.hpp"
#include "ringtrain/framework/train/data_parallel_step.hpp"
#include "ringtrain/framework/train/now.hpp"

namespace ringtrain {

//   1. slice     this rank's b_r samples (a multiple of m, checked by the options)
//   2. one forward and one backward on all b_r rows, with ctx.exact_micro_batch = m: every
//      sum over samples (dW, db, BatchNorm's statistics) is taken per micro-batch of m rows
//      inside the layers, each micro-batch's gradient going into the exact sum through its
//      sink; the loss per micro-batch of the logits' rows, scaled by 1/B
//   3. the exact allreduces: the gradient's total rounded once into the gradient buffer,
//      then the loss's (reported by rank 0)
//   4. every rank applies the same optimizer update, or every rank skips the step (--zero 1:
//      each rank updates its shard, then the all-gathers)
StepOutcome DataParallelStep::run_exact(std::uint64_t step, const data::GlobalBatch& batch) {
  const double t0 = now_s();
  step_ = step;
  times_ = StepTimes{};
  times_.overlap = false;
  if (trace_) trace_->begin_step(step);
  traced_ = trace_ && trace_->recording();
  watchdog_.enter("forward/backward", step);

  const std::size_t n = take_slice(batch);
  const double t_data = now_s();
  if (traced_) trace_->span(data_name_, 0, t0, t_data);
  const double loss_sum = exact_pass(n, batch.samples.size());
  const double t_backward = now_s();
  const bool applied = exact_sum_and_update(std::isfinite(loss_sum));
  const double t_end = now_s();

  times_.step_s = t_end - t0;
  times_.data_s = t_data - t0;
  times_.backward_s = t_backward - t_data;  // forward, loss and backward in one span
  times_.collectives += 2.0;  // the exact allreduces of the gradient and the loss (and with
                              // --zero 1 the all-gathers)
  // The metrics window sums the ranks' reports: rank 0 reports the exact loss, the others 0.
  const double reported = comm_.rank() == 0 ? exact_->loss() : 0.0;
  return {reported, n, batch.samples.size(), applied, times_};
}

// One forward and one backward on this rank's n rows with ctx.exact_micro_batch = m
// (exact_step.hpp): the layers sum per micro-batch inside the call (BatchNorm's statistics
// over ranks too: collective, also with n = 0) and add each micro-batch's dW, db into the
// exact sum (the sink); y and dx of Linear run on the row-stable products where this CPU has
// them. The loss is taken per micro-batch of the logits' rows, in sample order. Returns this
// rank's loss sum (not scaled; only its finiteness is used).
double DataParallelStep::exact_pass(std::size_t n, std::size_t global_samples) {
  exact_->clear((global_samples + plan_.exact_micro_batch - 1) / plan_.exact_micro_batch);
  const std::size_t pixels = num_elements(model_.input_shape());
  const std::size_t width = num_elements(model_.output_shape());
  const std::size_t m = plan_.exact_micro_batch;
  StepContext ctx = context(n, true);
  ctx.sample_ids = std::span<const std::uint64_t>(sample_ids_).first(n);
  ctx.poll = nullptr;  // no rings in flight
  ctx.exact_micro_batch = m;
  ctx.exact_gradient = &exact_->sink();
  ctx.exact_row_stable = blas::own_kernels_supported();
  const double t0 = now_s();
  layer_end_s_ = t0;
  const auto outputs = model_.forward(std::span<const float>(inputs_).first(n * pixels), n, ctx,
                                      traced_ ? forward_hook_ : std::function<void(std::size_t)>{});
  double loss_sum = 0.0;
  for (std::size_t first = 0; first < n; first += m) {
    const std::size_t rows = std::min(m, n - first);
    const double micro_batch_loss = exact_loss(
        outputs.subspan(first * width, rows * width),
        std::span(dlogits_).subspan(first * width, rows * width), first, rows, global_samples);
    loss_sum += micro_batch_loss;
    exact_->add_loss(micro_batch_loss);
  }
  if (traced_) {
    const double t = now_s();
    trace_->span(loss_name_, 0, layer_end_s_, t);
    layer_end_s_ = t;
  }
  model_.backward(std::span(dlogits_).first(n * width), n, ctx,
                  traced_ ? backward_trace_hook_ : std::function<void(std::size_t)>{});
  // The layers' spans, and their adds into the exact sum, lie inside this one.
  if (traced_) trace_->span(exact_pass_name_, 0, t0, now_s());
  return loss_sum;
}

// The loss of rows [first, first + rows) of this rank's slice, from their outputs (rows,
// width), scaled by 1/B into doutputs (rows, width); returns the rows' loss sum.
double DataParallelStep::exact_loss(std::span<const float> outputs, std::span<float> doutputs,
                                    std::size_t first, std::size_t rows,
                                    std::size_t global_samples) const {
  const std::size_t width = doutputs.size() / std::max<std::size_t>(rows, 1);
  const float scale = loss_scale(plan_.reduction, rows, global_samples, comm_.size());
  const LossResult loss =
      train_.regression()
          ? squared_error(outputs,
                          std::span<const float>(targets_).subspan(first * train_.num_targets),
                          rows, width, scale, doutputs)
          : softmax_cross_entropy(outputs,
                                  std::span<const std::int32_t>(labels_).subspan(first, rows), rows,
                                  width, scale, doutputs);
  return loss.loss_sum;
}

// The exact sum over ranks into the gradient buffer, then the update of every element, or
// the skip of the step on every rank: the rounded total is the same everywhere, so every
// rank sees the same (non-)finite gradient without another agreement.
bool DataParallelStep::exact_sum_and_update(bool local_ok) {
  watchdog_.enter("allreduce", step_);
  if (!local_ok || !data_failure_.empty() || faults_.poison_gradient(comm_.rank(), step_))
    exact_->poison();
  faults_.before_gradient_sum(comm_.rank(), step_);
  ParameterStore& params = model_.parameters();
  const double t0 = now_s();
  const bool applied = exact_->sum_into(comm_, params.grads());
  const double t1 = now_s();
  times_.comm_s = times_.exposed_s = t1 - t0;
  watchdog_.enter("optimizer", step_);
  if (applied && reducer_->options().zero) {
    exact_update_shard();
  } else if (applied) {
    optimizer_->begin_step();
    optimizer_->update(0, params.values(), params.grads(), learning_rate(step_));
    const double t2 = now_s();
    times_.optimizer_s = t2 - t1;
    if (traced_) trace_->span(optimizer_name_, 0, t1, t2);
  }
  faults_.after_update(comm_.rank(), step_, params.values());
  watchdog_.leave();
  return applied;
}

// --zero 1: every rank holds the same rounded total, so each updates only its shard of every
// bucket (with its shard of the optimizer state) and the buckets' all-gathers bring the rest,
// as the ZeRO-1 step with overlap off does (GradientReducer::update_summed). The update is
// elementwise: the parameters are bitwise those of the unsharded exact step.
void DataParallelStep::exact_update_shard() {
  lr_ = learning_rate(step_);
  counted_ = false;
  reducer_->update_summed(update_hook_);  // update_piece adds the optimizer's time
  const StepComm& gathers = reducer_->account();
  times_.comm_s += gathers.comm_s;
  times_.exposed_s += gathers.exposed_s;
  times_.collectives += double(gathers.collectives);
}

}  // namespace ringtrain
