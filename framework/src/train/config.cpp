// Validation and serialisation of TrainConfig. Every check names the flag and the value.
#include "ringtrain/framework/train/config.hpp"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>

#include "ringtrain/framework/data/sampler.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/optim/optimizer.hpp"
#include "ringtrain/framework/train/reduction.hpp"

namespace ringtrain {
namespace {

void require(bool ok, const std::string& message) {
  if (!ok) throw UsageError(message);
}

void require_one_of(const std::string& value, std::initializer_list<const char*> choices,
                    const std::string& flag) {
  for (const char* c : choices)
    if (value == c) return;
  std::string list;
  for (const char* c : choices) list += std::string(list.empty() ? "" : ", ") + c;
  throw UsageError(fmt::format("{} {}: choose one of {}", flag, value, list));
}

// A float as the double with the same shortest decimal form: 0.9f -> 0.9, not 0.8999999761.
double shortest(float value) {
  return std::stod(fmt::format("{}", value));
}

}  // namespace

std::vector<std::size_t> parse_size_list(const std::string& text, const std::string& flag) {
  std::vector<std::size_t> values;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    std::size_t used = 0;
    unsigned long long v = 0;
    try {
      v = std::stoull(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || item[0] == '-' || item[0] == '+')
      throw UsageError(fmt::format("{} {}: '{}' is not a whole number", flag, text, item));
    values.push_back(static_cast<std::size_t>(v));
    start = comma + 1;
  }
  return values;
}

void TrainConfig::validate(int world_size) const {
  require(global_batch > 0, "--global-batch 0: a step needs at least one sample");
  if (!local_batches.empty())
    data::parse_local_batches(local_batches, static_cast<std::size_t>(world_size), global_batch);
  require(steps > 0 || epochs > 0,
          fmt::format("--epochs {}: give --steps S or --epochs E > 0", epochs));
  require(std::isfinite(epochs) && epochs >= 0, fmt::format("--epochs {} must be >= 0", epochs));
  require(std::isfinite(lr) && lr > 0, fmt::format("--lr {}: the learning rate must be > 0", lr));
  require(dropout >= 0.0f && dropout < 1.0f,
          fmt::format("--dropout {} must be in [0, 1)", dropout));
  for (std::size_t w : parse_size_list(mlp_hidden, "--mlp-hidden"))
    require(w > 0, "--mlp-hidden " + mlp_hidden + ": widths must be > 0");
  require(target_accuracy >= 0.0 && target_accuracy <= 1.0,
          fmt::format("--target-accuracy {} must be in [0, 1]", target_accuracy));
  require(target_accuracy == 0.0 || evaluate,
          fmt::format("--target-accuracy {} with --no-eval: the run could never see the target; "
                      "drop --no-eval (--eval-every K sets how often it is checked)",
                      target_accuracy));
  require(log_every > 0, "--log-every 0: must be >= 1");
  if (checkpoint_every == "auto")
    require(
        mtbf_s > 0,
        "--checkpoint-every auto needs --mtbf SECONDS > 0 (the job's mean time between failures)");
  else
    parse_size_list(checkpoint_every, "--checkpoint-every");
  require(keep >= 1, "--keep 0: keep at least the newest checkpoint");
  require(
      resume.empty() || !run_dir.empty(),
      "--resume " + resume + " needs --run-dir DIR (the run to continue; its checkpoints/ folder)");
  require(watchdog_s >= 0, fmt::format("--watchdog-s {} must be >= 0 (0: automatic)", watchdog_s));
  require(blas_threads >= 0,
          fmt::format("--blas-threads {} must be >= 0 (0: automatic)", blas_threads));
  require_one_of(sync_bn, {"auto", "on", "off"}, "--sync-bn");
  require_one_of(conv_algorithm, {"auto", "im2col", "winograd"}, "--conv-algorithm");
  require_one_of(gemm, {"auto", "openblas", "own"}, "--gemm");
  require_one_of(collective, {"ring", "mpi"}, "--collective");
  require_one_of(overlap, {"on", "off", "alternate"}, "--overlap");
  require_one_of(progress, {"layers", "thread"}, "--progress");
  require_one_of(bucket_update, {"on", "off"}, "--bucket-update");
  require(zero == 0 || zero == 1,
          fmt::format("--zero {}: choose 0 (every rank keeps all optimizer state) or 1 (ZeRO-1: "
                      "each rank its shard)",
                      zero));
  require(zero == 0 || collective == "ring",
          "--zero 1 updates the chunk the ring's reduce-scatter leaves each rank: it needs "
          "--collective ring");
  require(segments_in_flight <= 64,
          fmt::format("--segments-in-flight {}: at most 64 (each takes two segments of scratch "
                      "per ring); 0 picks the default",
                      segments_in_flight));
  require(bucket_bytes == 0 || bucket_bytes >= 4,
          fmt::format("--bucket-bytes {}: a bucket holds at least one float (4 bytes); 0 picks "
                      "the default",
                      bucket_bytes));
  require(cost_model.empty() || std::filesystem::is_regular_file(cost_model),
          "--cost-model " + cost_model +
              ": no such file (write one with `ringtrain bench "
              "allreduce --json FILE`)");
  parse_reduction(reduction);
  OptimizerConfig opt;
  opt.name = optimizer;
  opt.momentum = momentum;
  opt.nesterov = nesterov;
  opt.weight_decay = weight_decay;
  opt.beta1 = beta1;
  opt.beta2 = beta2;
  opt.eps = eps;
  ringtrain::validate(opt);
  ringtrain::validate(schedule_config(steps > 0 ? steps : warmup_steps + 1000000));
}

ScheduleConfig TrainConfig::schedule_config(std::uint64_t total_steps) const {
  ScheduleConfig s;
  s.kind = schedule;
  s.base_lr = scale_learning_rate(lr, lr_scaling, global_batch, 128);
  s.warmup_steps = warmup_steps;
  s.total_steps = total_steps;
  s.step_size = step_size > 0 ? step_size
                              : std::max<std::uint64_t>(
                                    1, (total_steps - std::min(total_steps, warmup_steps)) / 3);
  s.gamma = gamma;
  s.min_lr = min_lr;
  return s;
}

std::string TrainConfig::describe_schedule(std::uint64_t total_steps) const {
  const ScheduleConfig s = schedule_config(total_steps);
  std::string text = fmt::format("lr {} ({} scaling of --lr {} for batch {} vs 128)", s.base_lr,
                                 lr_scaling, lr, global_batch);
  if (s.warmup_steps > 0) text += fmt::format(", linear warmup over {} steps", s.warmup_steps);
  if (s.kind == "constant") text += ", constant";
  if (s.kind == "step") text += fmt::format(", x{} every {} steps", s.gamma, s.step_size);
  if (s.kind == "cosine") text += fmt::format(", cosine to {} at step {}", s.min_lr, s.total_steps);
  return text;
}

nlohmann::json TrainConfig::to_json() const {
  return {{"data", data_dir},
          {"model", model},
          {"mlp-hidden", mlp_hidden},
          {"dropout", shortest(dropout)},
          {"conv-algorithm", conv_algorithm},
          {"global-batch", global_batch},
          {"local-batches", local_batches},
          {"steps", steps},
          {"epochs", epochs},
          {"optimizer", optimizer},
          {"lr", shortest(lr)},
          {"momentum", shortest(momentum)},
          {"nesterov", nesterov},
          {"weight-decay", shortest(weight_decay)},
          {"beta1", shortest(beta1)},
          {"beta2", shortest(beta2)},
          {"eps", shortest(eps)},
          {"schedule", schedule},
          {"warmup-steps", warmup_steps},
          {"step-size", step_size},
          {"gamma", shortest(gamma)},
          {"min-lr", shortest(min_lr)},
          {"lr-scaling", lr_scaling},
          {"seed", seed},
          {"reduction", reduction},
          {"sync-bn", sync_bn},
          {"blas-threads", blas_threads},
          {"gemm", gemm},
          {"collective", collective},
          {"bucket-bytes", bucket_bytes},
          {"overlap", overlap},
          {"progress", progress},
          {"bucket-update", bucket_update},
          {"segments-in-flight", segments_in_flight},
          {"cost-model", cost_model},
          {"trace-steps", trace_steps},
          {"zero", zero},
          {"run-dir", run_dir},
          {"eval-every", eval_every},
          {"target-accuracy", target_accuracy},
          {"log-every", log_every},
          {"no-eval", !evaluate},
          {"checkpoint-every", checkpoint_every},
          {"mtbf", mtbf_s},
          {"keep", keep},
          {"replica-check-every", replica_check_every},
          {"max-nonfinite-steps", max_nonfinite_steps},
          {"watchdog-s", watchdog_s},
          {"quiet", quiet}};
}

std::string TrainConfig::to_toml() const {
  // One `key = value` line per flag, strings quoted: `--config` reads it back.
  std::string text = "# resolved configuration of this run: ringtrain train --config <this file>\n";
  const nlohmann::json json = to_json();  // items() borrows: keep the object alive
  for (const auto& [key, value] : json.items()) {
    if (value.is_string() && value.get<std::string>().empty()) continue;  // default
    if (key == "run-dir") continue;  // a rerun goes to a directory of its own
    if (key == (steps > 0 ? "epochs" : "steps")) continue;  // --steps excludes --epochs
    if (value.is_boolean()) {
      if (value.get<bool>()) text += key + " = true\n";
      continue;
    }
    text += key + " = " + value.dump() + "\n";
  }
  return text;
}

}  // namespace ringtrain
