// manifest.json and the start-up banner (run_report.hpp).
#include "train/run/run_report.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <cmath>
#include <cstdio>

#include "ringtrain/checkpoint/key.hpp"
#include "ringtrain/checkpoint/version.hpp"
#include "ringtrain/framework/blas.hpp"
#include "ringtrain/framework/train/evaluation.hpp"
#include "ringtrain/framework/train/save_options.hpp"
#include "ringtrain/framework/train/trainer.hpp"
#include "train/safety/stop_signals.hpp"

namespace ringtrain {
namespace {

std::string mpi_library_version() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(version, &length);
  std::string v(version, static_cast<std::size_t>(length));
  return v.substr(0, v.find('\n'));
}

std::string bn_statistics(const RunFacts& f) {
  if (f.setup->step.sync_bn) return "global (SyncBatchNorm over all ranks)";
  return f.world.size > 1 ? "per rank (local batch only)" : "global (one process)";
}

bool per_bucket_update(const RunFacts& f) {
  return updates_per_bucket(f.setup->reducer);
}

// The format the gradient sum travels in, and what that does to the sum.
std::string wire_convention(const RunFacts& f) {
  const collectives::RingOptions& ring = f.setup->reducer.ring;
  if (ring.wire == collectives::Wire::kFp32) return "fp32";
  const std::string where = ring.algorithm == collectives::Algorithm::kHierarchical
                                ? " between hosts (sums within a host stay fp32)"
                                : "";
  return "bf16" + where +
         ": each rank rounds what it sends to bf16 (nearest even) and adds what it receives in "
         "fp32; every rank ends with the same bits; each rank's rounding losses are added to "
         "its next gradient (error feedback), and parameters (ZeRO-1's all-gather) stay fp32";
}

nlohmann::json reduction_json(const RunFacts& f) {
  const bool exact = f.config->reduction == Reduction::kExact;
  nlohmann::json json = {
      {"convention", to_string(f.config->reduction)},
      {"scale", f.config->reduction == Reduction::kMeanOfMeans ? "1/(b_r*N)" : "1/B"},
      {"samples_per_step", f.run->global_batch},
      {"collective",
       exact ? "exact sum of integer words on an agreed grid (allreduce_grid), rounded once"
       : f.world.size > 1 ? "sum"
                          : "none (N = 1)"},
      {"wire", wire_convention(f)},
      {"description", describe(f.config->reduction)}};
  if (exact) json["micro_batch"] = f.config->exact_micro_batch;
  return json;
}

nlohmann::json buckets_json(const RunFacts& f) {
  const StepSetup& s = *f.setup;
  nlohmann::json bytes = nlohmann::json::array();
  for (const collectives::Bucket& bucket : s.buckets)
    bytes.push_back(bucket.elements * sizeof(float));
  const ReducerOptions& o = f.setup->reducer;
  return {
      {"cap_bytes", f.setup->bucket_choice.cap_bytes},
      {"cap_reason", f.setup->bucket_choice.reason},
      {"count", s.buckets.size()},
      {"bytes", bytes},
      {"ready_after_layer", s.ready_layers},
      {"order", "backward (bucket 0 holds the last layer's gradients)"},
      {"ring_fit",
       {{"alpha_s", f.setup->ring_fit.model.alpha_s},
        {"bandwidth_Bps", f.setup->ring_fit.model.bandwidth_Bps},
        {"source", f.setup->ring_fit.source}}},
      {"overlap", name_of(f.config->overlap)},
      {"ring_driver", name_of(f.config->poll_driver)},
      {"segment_bytes", o.ring.segment_bytes},
      {"segments_in_flight",
       {{"overlapping", o.overlap_segments_in_flight}, {"blocking", o.ring.segments_in_flight}}},
      {"update_per_bucket", per_bucket_update(f)}};
}

// What MLPerf asks a run to record besides the resolved configuration.
void add_time_to_target_facts(const RunFacts& f, nlohmann::json& m) {
  const TrainConfig& c = *f.config;
  const bool regression = f.data.regression();
  const bool validation = f.validation_samples > 0;
  const Metric metric = metric_for(regression, validation);
  const std::string what =
      regression ? fmt::format("mean squared error over the {} targets of every sample",
                               f.data.num_targets)
                 : std::string("top-1 accuracy");
  const char* direction = metric.higher_better ? ">=" : "<=";
  const std::string split =
      validation ? fmt::format(
                       "the validation split of {} ({} samples held out of train by "
                       "seed {}, --validation-fraction {}; the test set is evaluated "
                       "at the best step and at the end)",
                       f.data.path, f.validation_samples, c.seed, c.validation_fraction)
                 : fmt::format(
                       "the full test set of {} ({} samples; no validation split: best "
                       "and target are chosen on the test set)",
                       f.data.path, f.test_samples);
  m["target"] = {{"metric", fmt::format("{} on {}", what, split)},
                 {"split", validation ? "validation" : "test"},
                 {"key", metric.key},
                 {"reached_when", fmt::format("{} {} target", metric.key, direction)},
                 {"value", c.target > 0 ? nlohmann::json(c.target) : nlohmann::json()}};
  m["loss"] =
      regression
          ? "mse: per-sample loss (1/k) sum_k (y_hat_k - y_k)^2 (the mean over the sample's k "
            "targets, as torch.nn.MSELoss), summed over the batch and scaled by the reduction's "
            "scale: the loss printed is the batch's mean squared error"
          : "cross-entropy: per-sample loss -log softmax(z)[y], summed over the batch and scaled "
            "by the reduction's scale";
  m["evaluation"] = {
      {"every_steps", c.evaluate ? nlohmann::json(f.run->eval_every) : nlohmann::json()},
      {"split", validation ? "validation" : "test"},
      {"method", regression ? "the split's samples shared near-equally over ranks, squared "
                              "errors summed in double in rank order"
                            : "the split's samples shared near-equally over ranks, correct "
                              "counts summed exactly"}};
  m["stopping_rule"] =
      c.target > 0 ? fmt::format("stop at the first evaluation with {} {} {}, else after {} steps",
                                 metric.label, direction, c.target, f.run->total_steps)
                   : fmt::format("stop after {} steps", f.run->total_steps);
  m["data_order"] = fmt::format(
      "epoch e visits the training set in the permutation of (seed {}, e) from a counter-based "
      "generator, independent of the number of ranks; step s takes positions [s*B, (s+1)*B), "
      "the last batch of an epoch may be short; rank r takes its slice of local batches",
      c.seed);
  m["batches"] = {{"global", f.run->global_batch}, {"local", f.run->local_batches}};
  m["seed"] = c.seed;
}

// "  converted: train/x float64 rounded to float32 (to nearest), ..." for samples other than
// float32 and uint8 and for float targets other than float32 (labels always become int32).
std::string converted_arrays(const data::DataInfo& d) {
  std::vector<std::string> parts;
  for (const data::ArrayFacts& a : d.arrays)
    if (!a.conversion.empty() && a.dtype != data::DType::kUint8 &&
        (a.name.ends_with("x") || data::is_floating(a.dtype)))
      parts.push_back(a.name + " " + a.conversion);
  return parts.empty() ? std::string() : fmt::format("  converted: {}", fmt::join(parts, ", "));
}

// Where the samples came from and how they are stored.
nlohmann::json data_json(const data::DataInfo& d) {
  nlohmann::json arrays = nlohmann::json::array();
  for (const data::ArrayFacts& a : d.arrays)
    arrays.push_back({{"name", a.name},
                      {"file", a.where},
                      {"dtype", data::to_string(a.dtype)},
                      {"shape", a.shape},
                      {"mapped", a.mapped},
                      {"conversion", a.conversion.empty() ? "none" : a.conversion},
                      {"xxh3", fmt::format("{:016x}", a.xxh3)}});
  return {{"path", d.path},
          {"digest", d.digest},
          {"layout", data::to_string(d.layout)},
          {"sample_shape", d.sample_shape},
          {"classes", d.num_classes},
          {"targets", d.num_targets},
          {"arrays", arrays}};
}

// The model: its layer list as built (spec), and each layer's output shape and parameters.
// The MTBF --checkpoint-every auto plans with, and where it comes from.
std::pair<double, std::string> planned_mtbf(const TrainConfig& c) {
  if (c.node_mtbf_s > 0) return {c.node_mtbf_s, "--node-mtbf, over the hosts"};
  if (c.mtbf_s > 0) return {c.mtbf_s, "--mtbf"};
  return {kDefaultJobMtbfS, "the default: one day; give --mtbf or --node-mtbf"};
}

// The save plan in one line: when, what it is measured from, the MTBF and its source.
std::string checkpoint_plan(const TrainConfig& c) {
  const std::string kept = fmt::format("; newest {} kept", c.keep);
  if (c.checkpoint_every == "0") return "at the end only (--checkpoint-every 0)";
  if (c.checkpoint_every != "auto")
    return fmt::format("every {} steps and at the end{}", c.checkpoint_every, kept);
  const auto [mtbf_s, source] = planned_mtbf(c);
  return fmt::format(
      "every tau = sqrt(2 C mu) (Young/Daly), C measured by the first save {} steps in, mu = "
      "{:.6g} s ({}){}{}",
      c.log_every, mtbf_s, source, c.checkpoint_async == OnOff::kOn ? ", asynchronous" : "", kept);
}

nlohmann::json model_json(const TrainConfig& c, const Sequential& model) {
  nlohmann::json layers = nlohmann::json::array();
  for (std::size_t i = 0; i < model.num_layers(); ++i)
    layers.push_back({{"layer", fmt::format("layers.{}.{}", i, model.layer(i).kind())},
                      {"output_shape", model.layer_output_shape(i)},
                      {"parameters", model.layer_parameters(i)}});
  return {{"name", c.model},
          {"spec", model.spec()},
          {"input_shape", model.input_shape()},
          {"layers", layers}};
}

// The steps over which the learning-rate schedule is laid out when they follow the run's
// length (cosine decays over the whole run; step without --step-size decays every third of
// it); null when the schedule does not depend on the length.
nlohmann::json schedule_horizon_steps(const TrainConfig& c, std::uint64_t total_steps) {
  const ScheduleConfig s = c.schedule_config(total_steps);
  if (s.kind == "cosine") return s.total_steps;
  if (s.kind == "step" && c.step_size == 0) return s.step_size;
  return nullptr;
}

}  // namespace

nlohmann::json make_manifest(const RunFacts& f) {
  const TrainConfig& c = *f.config;
  nlohmann::json m;
  m["config"] = c.to_json();
  m["world_size"] = f.world.size;
  m["data"] = data_json(f.data);
  m["local_batches"] = f.run->local_batches;
  m["reduction"] = reduction_json(f);
  m["batch_norm"] = {{"present", f.model->has_batch_norm()}, {"statistics", bn_statistics(f)}};
  m["blas_threads"] = f.run->blas_threads;
  m["blas_kernels"] = blas::core_report();
  m["gemm"] = blas::kernels_report();
  m["cores_per_node"] = f.world.cores;
  m["ranks_per_node"] = f.world.ranks_per_node;
  if (f.hosts > 0) m["hosts"] = f.hosts;  // as the hierarchical allreduce groups the ranks
  m["optimizer"] = f.optimizer;
  m["optimizer_state"] = {
      {"zero", f.setup->reducer.zero ? 1 : 0},
      {"zero_choice", name_of(c.zero)},
      {"bytes_per_rank", f.state_bytes.per_rank},
      {"unsharded_bytes", f.state_bytes.unsharded},
      {"layout", !f.setup->reducer.zero ? "every rank keeps the state of every parameter"
                 : c.collective == CollectiveKind::kHierarchical
                     ? "ZeRO-1: each rank keeps state for the shard of every gradient bucket "
                       "that the hierarchical reduce-scatter leaves it (hierarchical_shard; "
                       "an extra rank of a larger host: none)"
                     : "ZeRO-1: rank r keeps state for chunk r of every gradient bucket "
                       "(the ring's partition)"}};
  m["learning_rate_schedule"] = c.describe_schedule(f.run->total_steps);
  m["steps_per_epoch"] = f.run->steps_per_epoch;
  m["total_steps"] = f.run->total_steps;
  m["parameters"] = f.model->parameters().num_elements();
  if (f.model) m["model"] = model_json(c, *f.model);
  add_time_to_target_facts(f, m);
  m["versions"] = {
      {"ringtrain", RINGTRAIN_VERSION},
      {"source_revision", RINGTRAIN_SOURCE_REVISION},
      {"compiler", fmt::format("g++ {}.{}.{}", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__)},
      {"openblas", blas::config()},
      {"mpi", mpi_library_version()}};
  m["gradient_buckets"] = buckets_json(f);
  // Whether checkpoints carry a MAC; never the key.
  m["checkpoints"] = {{"format_version", checkpoint::kFormatVersion},
                      {"signed", checkpoint::key_file_in_use(c.checkpoint_key).has_value()},
                      {"plan", checkpoint_plan(c)}};
  if (c.checkpoint_every == "auto")
    m["checkpoints"]["mtbf"] = {{"seconds", planned_mtbf(c).first},
                                {"source", planned_mtbf(c).second}};
  return m;
}

nlohmann::json checkpoint_config(const RunFacts& f) {
  nlohmann::json json = f.config->to_json();
  if (!f.model->spec().empty()) json["model_spec"] = f.model->spec();
  json["sample_shape"] = f.data.sample_shape;
  // The loss as resolved for the data (never "auto"): eval and a resume read it back.
  json["loss"] = name_of(f.data.regression() ? LossChoice::kMse : LossChoice::kCrossEntropy);
  if (f.data.regression())
    json["targets"] = f.data.num_targets;
  else
    json["classes"] = f.data.num_classes;
  json["data_digest"] = f.data.digest;
  json["data_path"] = f.data.path;
  json["schedule_horizon_steps"] = schedule_horizon_steps(*f.config, f.run->total_steps);
  return json;
}

namespace {

// +inf (no evaluation yet on regression data) and NaN (not evaluated) are written as null.
nlohmann::json value_or_null(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json();
}

}  // namespace

nlohmann::json TrainResults::to_json() const {
  const std::string key = metric_for(regression).key;  // "test_accuracy" or "test_mse"
  nlohmann::json json = {
      {"steps", steps},
      {"launch_steps", launch_steps},
      {"split", validation ? "validation" : "test"},
      {"metric", metric_for(regression, validation).key},
      {"final_" + key, value_or_null(final_test_metric)},
      {"best_" + key, value_or_null(best_test_metric)},
      {"best_step", best_step > 0 ? nlohmann::json(best_step) : nlohmann::json()},
      {"target_reached", target_reached},
      {"steps_to_target", target_reached ? nlohmann::json(steps_to_target) : nlohmann::json()},
      {"time_to_target_s", target_reached ? nlohmann::json(time_to_target_s) : nlohmann::json()},
      {"mean_step_s", mean_step_s},
      {"samples_per_s", samples_per_s},
      {"wall_s", wall_s},
      {"skipped_steps", skipped_steps},
      {"stop_signal",
       stop_signal ? nlohmann::json(stop_signal_name(stop_signal)) : nlohmann::json()}};
  if (validation) {
    const std::string v = metric_for(regression, true).key;
    json["final_" + v] = value_or_null(final_validation_metric);
    json["best_" + v] = value_or_null(best_validation_metric);
  }
  return json;
}

void close_results(TrainResults& r, const TrainingCounters& counters, std::size_t global_batch,
                   double wall_s, std::uint64_t start_step) {
  r.launch_steps = r.steps - start_step;
  r.skipped_steps = counters.skipped_steps;
  r.wall_s = wall_s;
  r.mean_step_s = counters.step > 0 ? counters.useful_compute_s / double(counters.step) : 0.0;
  r.samples_per_s = r.mean_step_s > 0 ? double(global_batch) / r.mean_step_s : 0.0;
}

namespace {

// "test accuracy 0.81 (best 0.83 at step 40; best and target on the test set: no validation
// split)", or "validation accuracy 0.8 (best 0.82 at step 40); test accuracy 0.79 at the
// end, 0.8 at the best step".
std::string closing_metrics(const TrainResults& r) {
  const auto at = [&] {
    return r.best_step > 0 ? fmt::format(" at step {}", r.best_step) : std::string();
  };
  const char* test_label = metric_for(r.regression).label;
  if (!r.validation)
    return fmt::format(
        "{} {:.4g} (best {:.4g}{}; best and target on the test set: no "
        "validation split)",
        test_label, r.final_test_metric, r.best_test_metric, at());
  return fmt::format("{} {:.4g} (best {:.4g}{}); {} {:.4g} at the end, {:.4g} at the best step",
                     metric_for(r.regression, true).label, r.final_validation_metric,
                     r.best_validation_metric, at(), test_label, r.final_test_metric,
                     r.best_test_metric);
}

}  // namespace

std::string closing_line(const TrainResults& r, double target, std::uint64_t start_step,
                         std::size_t global_batch) {
  return fmt::format(
      "done: {} steps in {:.1f} s{}, {:.0f} samples/s ({:.0f} in the steps alone), {}{}",
      r.launch_steps, r.wall_s,
      start_step > 0
          ? fmt::format(" (steps {}-{}, resumed at step {})", start_step + 1, r.steps, start_step)
          : std::string(),
      r.wall_s > 0 ? double(r.launch_steps * global_batch) / r.wall_s : 0.0, r.samples_per_s,
      closing_metrics(r),
      r.target_reached ? fmt::format(", target {} reached at step {} (on the {} split)", target,
                                     r.steps_to_target, r.validation ? "validation" : "test")
                       : std::string());
}

std::vector<std::string> banner_lines(const RunFacts& f) {
  const TrainConfig& c = *f.config;
  std::vector<std::string> lines = {
      fmt::format(
          "ringtrain: {} on {} rank(s), {} BLAS thread(s) per rank ({} cores, {} ranks on this "
          "node)",
          c.model, f.world.size, f.run->blas_threads, f.world.cores, f.world.ranks_per_node),
      "  " + blas::core_report(),
      "  " + blas::kernels_report(),
  };
  if (const std::string warning = blas::kernels_warning(); !warning.empty())
    lines.push_back("  " + warning);
  lines.push_back(fmt::format(
      "  data {} ({}): {} train / {}{} test samples of shape {}, {}{}", f.data.path,
      to_string(f.data.layout), f.train_samples,
      f.validation_samples > 0 ? fmt::format("{} validation / ", f.validation_samples) : "",
      f.test_samples, to_string(f.data.sample_shape),
      f.data.regression()
          ? fmt::format("{} float targets (regression, --loss mse)", f.data.num_targets)
          : fmt::format("{} classes", f.data.num_classes),
      !f.data.arrays.empty() && f.data.arrays[0].mapped ? ", mapped" : ""));
  if (std::string line = converted_arrays(f.data); !line.empty()) lines.push_back(line);
  lines.insert(lines.end(), {fmt::format("  global batch {} = local batches {}",
                                         f.run->global_batch, fmt::join(f.run->local_batches, "+")),
                             fmt::format("  reduction {}", describe(f.config->reduction))});
  if (f.model) {
    const std::string table = f.model->summary();
    std::size_t begin = 0;
    for (std::size_t end; (end = table.find('\n', begin)) != std::string::npos; begin = end + 1)
      lines.push_back("    " + table.substr(begin, end - begin));
  }
  if (f.model->has_batch_norm()) lines.push_back("  batch norm statistics: " + bn_statistics(f));
  lines.push_back(
      fmt::format("  optimizer {}, {}", f.optimizer, c.describe_schedule(f.run->total_steps)));
  lines.push_back(
      fmt::format("  optimizer state: {} bytes per rank (--zero {}{}{}; unsharded {} bytes)",
                  fmt::join(f.state_bytes.per_rank, " / "), f.setup->reducer.zero ? 1 : 0,
                  c.zero == ZeroChoice::kAuto ? " by auto" : "",
                  f.setup->reducer.zero ? ": each rank its shard of every bucket" : "",
                  f.state_bytes.unsharded));
  if (f.world.size > 1)
    lines.push_back(
        fmt::format("  gradient buckets: {} of at most {} bytes ({}); overlap {}, ring driver {}{}",
                    f.setup->buckets.size(), f.setup->bucket_choice.cap_bytes,
                    f.setup->bucket_choice.reason, name_of(c.overlap), name_of(c.poll_driver),
                    per_bucket_update(f) ? ", each bucket updated as soon as it is summed" : ""));
  lines.push_back(
      fmt::format("  {} steps ({} per epoch), evaluation every {} steps ({}), run directory {}",
                  f.run->total_steps, f.run->steps_per_epoch, f.run->eval_every,
                  f.validation_samples > 0
                      ? "validation split: best and target; test set at the best step and the end"
                      : "test set: best and target too, no validation split",
                  f.run_dir));
  lines.push_back("  checkpoints: " + checkpoint_plan(c));
  return lines;
}

void warn_if_wrong_reduction(Reduction reduction) {
  if (reduction != Reduction::kMeanOfMeans) return;
  std::fprintf(
      stderr,
      "ringtrain: WARNING: --reduction mean-of-means divides by the number of ranks, "
      "not by the samples: with unequal local batches the update is not the global "
      "batch's gradient (1 sample with mean gradient 2 and 3 with mean 6 give 4, not 5)\n");
}

}  // namespace ringtrain
