// The splits a training run evaluates (training_run.hpp). Without --validation-fraction the
// test set is evaluated every --eval-every steps and it alone picks the best step and meets
// --target (a choice made on the test set: its best is optimistic). With it, the validation
// split held out of train does that, and the test set is evaluated only where a result is
// read: at each new best validation step, and at the end of the run. Every evaluation is one
// metrics.jsonl record naming its split: {"step", "split", "<split>_<metric>",
// "<split>_loss", "wall_s"} and, for the test set under validation, "at": "best" | "end".
// A resumed run finds its best step (and the test set's value there) in those records.
#include <fmt/format.h>

#include "ringtrain/collectives/small.hpp"
#include "ringtrain/framework/train/evaluation.hpp"
#include "train/now.hpp"
#include "train/run/training_run.hpp"

namespace ringtrain {

const data::Dataset& TrainingRun::selection_split() const {
  return validating() ? validation_ : test_;
}

void TrainingRun::record_evaluation(std::uint64_t done, const char* split, const Metric& metric,
                                    const Evaluation& e, const char* at) {
  if (!run_dir_) return;
  nlohmann::json record = {{"step", done},
                           {"split", split},
                           {metric.key, metric.of(e)},
                           {fmt::format("{}_loss", split), e.loss},
                           {"wall_s", now_s() - start_s_}};
  if (at) record["at"] = at;
  run_dir_->append_metrics(record);
}

void TrainingRun::evaluate_test(std::uint64_t done, const char* at) {
  const Metric metric = metric_for(test_.regression());
  if (test_step_ != done) {  // the best step's evaluation serves the end too
    watchdog_.enter("evaluation", done - 1);
    last_test_ = evaluate(comm_, model_, test_, config_.seed);
    watchdog_.leave();
    test_step_ = done;
  }
  const double value = metric.of(last_test_);
  (std::string_view(at) == "best" ? results_.best_test_metric : results_.final_test_metric) = value;
  record_evaluation(done, "test", metric, last_test_, at);
  bar_->message(
      fmt::format("step {:>6}  {} {:.4g} ({})", done, metric.label, value,
                  std::string_view(at) == "best" ? "at the best validation step" : "at the end"));
}

// A run that finished (its steps done or its target met) evaluates the test set once more;
// one stopped by a signal leaves that to the launch that finishes it.
void TrainingRun::evaluate_test_at_end() {
  if (!validating() || !config_.evaluate || stopped_by_signal_) return;
  evaluate_test(results_.steps, "end");
}

namespace {

// record[key] if it is a string, else "".
std::string text_of(const nlohmann::json& record, const char* key) {
  const auto at = record.find(key);
  return at != record.end() && at->is_string() ? at->get<std::string>() : std::string();
}

}  // namespace

// The checkpoint holds the best value, not its step: the records metrics.jsonl kept up to the
// checkpoint's step (rank 0's; a file of this run, read only for what the manifest reports)
// give the step and, under validation, the test set's value there. Every rank learns the
// step, which decides when the test set is evaluated next. Collective.
void TrainingRun::recover_best(const std::vector<nlohmann::json>& records) {
  const char* key = metric_for(test_.regression()).key;
  double best_step[1] = {0.0};
  for (const nlohmann::json& r : records) {
    const auto step = r.find("step");
    const auto value = r.find(key);
    if (step == r.end() || !step->is_number_unsigned() || value == r.end() || !value->is_number())
      continue;
    if (validating() && text_of(r, "split") == "test" && text_of(r, "at") == "best") {
      best_step[0] = step->get<double>();  // the last one: each was a new best
      results_.best_test_metric = value->get<double>();
    } else if (!validating() && best_step[0] == 0.0 && !r.contains("at") &&
               value->get<double>() == counters_.best_selection_metric) {
      best_step[0] = step->get<double>();  // the first step with the best value
    }
  }
  if (comm_.size() > 1) collectives::allreduce_max(comm_, std::span<double>(best_step));
  results_.best_step = static_cast<std::uint64_t>(best_step[0]);
}

}  // namespace ringtrain
