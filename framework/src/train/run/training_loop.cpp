// The loop of a training run (training_run.hpp): one DataParallelStep per iteration and,
// after it, the decisions that are not the step's (log, evaluate, save, stop), then the
// results.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "ringtrain/framework/agreed.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/train/evaluation.hpp"
#include "train/now.hpp"
#include "train/run/training_run.hpp"
#include "train/safety/replica_check.hpp"

namespace ringtrain {

TrainResults TrainingRun::train() {
  start_s_ = now_s();
  for (std::uint64_t step = start_step_; step < plan_.total_steps; ++step) {
    const data::GlobalBatch batch = sampler_.next_batch();
    const StepOutcome outcome = step_->run(step, batch);
    account(outcome, step);
    if (planner_)  // --local-batches auto: a new split between windows
      if (const auto split =
              planner_->after_step(step + 1, outcome.local_samples, instruments_->times()))
        step_->set_split(*split);
    faults_.after_step(comm_.rank(), counters_.step);
    if (after_step(step)) break;
  }
  evaluate_test_at_end();
  finish();
  return results_;
}

// A step's outcome joins the counters and the metrics window. A step every rank skipped (a
// gradient was not finite somewhere) is counted; too many in a row means the run diverged.
void TrainingRun::account(const StepOutcome& outcome, std::uint64_t step) {
  if (outcome.applied) {
    counters_.nonfinite_in_a_row = 0;
  } else {
    stop_if_data_failed(step_->data_failure());
    ++counters_.skipped_steps;
    if (++counters_.nonfinite_in_a_row > config_.max_nonfinite_steps)
      throw AgreedError(
          fmt::format("step {}: the gradient was not finite (NaN or inf) in {} consecutive steps; "
                      "stopping. Lower --lr, or raise --max-nonfinite-steps",
                      step, counters_.nonfinite_in_a_row));
    bar_->message(
        fmt::format("step {}: gradient not finite on some rank: step skipped on all ranks", step));
  }
  metrics_->add(instruments_->times(), outcome.loss_sum, outcome.local_samples, counters_);
  counters_.samples_seen += outcome.global_samples;
  counters_.step = step + 1;
}

// Collective. A rank that could not read its samples poisoned the step; every rank learns it
// here (only after a skipped step: no cost otherwise) and all stop with that rank's message.
// The run ends without a save: the last durable checkpoint is the restart point.
void TrainingRun::stop_if_data_failed(const std::string& failure) {
  fail_together<AgreedError>(comm_, failure);
}

// Collective, at each epoch boundary: a mapped data file that shrank stops every rank before
// a read past its end would raise SIGBUS.
void TrainingRun::check_mapped_data() {
  std::string failure;
  for (const data::Dataset* d : {&train_, &test_})
    if (failure.empty() && d->mapped.file && d->mapped.file->shrank())
      failure = d->mapped.file->shrank_message();
  stop_if_data_failed(failure);
}

// After step `step` (0-based): replica check, metrics, evaluation, checkpoint, the bar.
// Returns true when the run stops early (a signal, or the target reached).
bool TrainingRun::after_step(std::uint64_t step) {
  const std::uint64_t done = step + 1;
  const std::uint64_t total = plan_.total_steps;
  if (done % plan_.steps_per_epoch == 0) check_mapped_data();
  if ((config_.replica_check_every > 0 && done % config_.replica_check_every == 0) ||
      done == total) {
    watchdog_.enter("replica check", step);
    check_replicas(comm_, model_, model_.has_batch_norm() && !setup_.step.sync_bn, done);
    watchdog_.leave();
  }
  bool stop_now = false;
  if (done % config_.log_every == 0 || done == total) {
    const WindowSummary window =
        metrics_->close(done, step_->learning_rate(step), stop_signals_.requested(),
                        model_.parameters().values(), counters_);
    stop_now = window.stop_requested && done < total;
    if (config_.watchdog_s <= 0)  // the automatic limit follows the measured step time
      watchdog_.set_limit(
          std::max(kWatchdogFloorS, 100.0 * counters_.useful_compute_s / double(done)));
  }
  if (config_.evaluate && (done % plan_.eval_every == 0 || done == total)) evaluate_now(done);
  const bool last = done == total || results_.target_reached;
  checkpointer_->poll();  // the messages of a save in flight (--zero-gather writer)
  if (stop_now || last || saves_->due(done)) {
    const double t0 = now_s();
    saves_->save(*state_, done, sampler_.state().epoch,
                 stop_now ? SavePolicy::Reason::kSignal
                 : last   ? SavePolicy::Reason::kEnd
                          : SavePolicy::Reason::kInterval,
                 metrics_->planning_step_s(counters_));
    metrics_->pause(now_s() - t0);  // save time is not step time
  }
  bar_->update(done, fmt::format("loss {:.4f}  lr {:.4g}", metrics_->shown_loss(counters_),
                                 step_->learning_rate(step)));
  results_.steps = done;
  stopped_by_signal_ = stop_now;
  results_.stop_signal = stop_now ? stop_signals_.first() : 0;
  return stop_now || results_.target_reached;
}

// An evaluation of the selection split (validation, else test): the metrics record, the best
// step (with validation, the test set evaluated there too), and the target.
void TrainingRun::evaluate_now(std::uint64_t done) {
  const double t0 = now_s();
  watchdog_.enter("evaluation", done - 1);
  const Evaluation e = evaluate(comm_, model_, selection_split(), config_.seed);
  if (config_.trace_steps > 0 && trace_->recording()) trace_->span(eval_name_, 0, t0, now_s());
  watchdog_.leave();
  const Metric metric = metric_for(test_.regression(), validating());
  const double value = metric.of(e);
  counters_.final_selection_metric = value;
  // Strictly better, or the first value at all (an accuracy of 0 is a best too).
  const bool best = (metric.reached(value, counters_.best_selection_metric) &&
                     value != counters_.best_selection_metric) ||
                    (results_.best_step == 0 && value == counters_.best_selection_metric);
  if (best) {
    counters_.best_selection_metric = value;
    results_.best_step = done;
  }
  if (validating()) {
    results_.final_validation_metric = value;
    results_.best_validation_metric = counters_.best_selection_metric;
  } else {
    results_.final_test_metric = value;
    results_.best_test_metric = counters_.best_selection_metric;
  }
  record_evaluation(done, validating() ? "validation" : "test", metric, e, nullptr);
  if (run_dir_)
    bar_->message(fmt::format("step {:>6}  epoch {:5.2f}  loss {:.4f}  {} {:.4g}", done,
                              double(done) / double(plan_.steps_per_epoch),
                              metrics_->shown_loss(counters_), metric.label, value));
  if (config_.target > 0.0 && metric.reached(value, config_.target) && !results_.target_reached) {
    results_.target_reached = true;
    results_.steps_to_target = done;
    results_.time_to_target_s = now_s() - start_s_;
  }
  if (best && validating()) evaluate_test(done, "best");
  metrics_->pause(now_s() - t0);  // evaluation time is not step time
}

void TrainingRun::finish() {
  bar_->finish();
  if (config_.trace_steps > 0)
    write_trace(comm_, *trace_, trace_lanes(setup_.buckets), run_dir_path_ / "trace.json");
  close_results(results_, counters_, plan_.global_batch, now_s() - start_s_, start_step_);
  if (!run_dir_) return;
  manifest_["results"] = results_.to_json();
  run_dir_->write_manifest(manifest_);
  if (stopped_by_signal_)
    say(fmt::format(
        "stopped by a signal at step {}: {}, checkpoint saved; resume with --resume "
        "auto --run-dir {}",
        results_.steps,
        results_.stop_signal ? stop_signal_name(results_.stop_signal) : "another rank's signal",
        run_dir_path_.string()));
  say(closing_line(results_, config_.target, start_step_, plan_.global_batch));
}

}  // namespace ringtrain
