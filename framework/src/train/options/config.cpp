// Validation and serialisation of TrainConfig, both derived from the option table
// (options.hpp): validate() runs every option's check, to_json() and to_toml() write every
// option under its flag name.
#include "ringtrain/framework/train/config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "ringtrain/framework/data/sampler.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/train/options.hpp"

namespace ringtrain {

void TrainConfig::validate(int world_size) const {
  for (const TrainOption& option : train_options())
    if (option.check) option.check(*this, world_size);
}

std::vector<std::size_t> TrainConfig::first_split(std::size_t world_size) const {
  if (local_batches.empty() || auto_split())
    return data::near_equal_split(global_batch, world_size);
  return data::parse_local_batches(local_batches, world_size, global_batch);
}

std::size_t TrainConfig::local_batch_cap(std::size_t world_size) const {
  if (auto_split()) return max_local_batch > 0 ? max_local_batch : global_batch;
  const std::vector<std::size_t> split = first_split(world_size);
  return *std::max_element(split.begin(), split.end());
}

namespace {
void require_auto(bool ok, const std::string& message) {
  if (!ok) throw UsageError(message);
}
}  // namespace

void TrainConfig::check_auto_split(int world_size) const {
  const TrainConfig& c = *this;
  const auto world = static_cast<std::size_t>(world_size);
  if (!c.auto_split()) {
    require_auto(
        c.max_local_batch == 0,
        fmt::format("--max-local-batch {} caps the split of --local-batches auto only; drop "
                    "it or add --local-batches auto",
                    c.max_local_batch));
    return;
  }
  require_auto(c.reduction != Reduction::kMeanOfMeans,
               "--local-batches auto with --reduction mean-of-means: that update depends on the "
               "split, so moving samples would change the experiment; use --reduction sum-scaled "
               "or exact");
  const std::size_t cap = c.local_batch_cap(world);
  const std::vector<std::size_t> even = c.first_split(world);
  const std::size_t largest = *std::max_element(even.begin(), even.end());
  require_auto(
      cap <= c.global_batch,
      fmt::format("--max-local-batch {} is above --global-batch {}: a rank never gets more "
                  "than the whole batch",
                  cap, c.global_batch));
  require_auto(
      cap >= largest,
      fmt::format("--max-local-batch {} is below the near-equal split's {} (--global-batch "
                  "{} over {} ranks), the split auto starts from; raise it",
                  cap, largest, c.global_batch, world_size));
}

OptimizerConfig TrainConfig::optimizer_config() const {
  OptimizerConfig opt;
  opt.name = name_of(optimizer);
  opt.momentum = momentum;
  opt.nesterov = nesterov;
  opt.weight_decay = weight_decay;
  opt.beta1 = beta1;
  opt.beta2 = beta2;
  opt.eps = eps;
  return opt;
}

ScheduleConfig TrainConfig::schedule_config(std::uint64_t total_steps) const {
  ScheduleConfig s;
  s.kind = name_of(schedule);
  s.base_lr = scale_learning_rate(lr, name_of(lr_scaling), global_batch, 128);
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
                                 name_of(lr_scaling), lr, global_batch);
  if (s.warmup_steps > 0) text += fmt::format(", linear warmup over {} steps", s.warmup_steps);
  if (s.kind == "constant") text += ", constant";
  if (s.kind == "step") text += fmt::format(", x{} every {} steps", s.gamma, s.step_size);
  if (s.kind == "cosine") text += fmt::format(", cosine to {} at step {}", s.min_lr, s.total_steps);
  return text;
}

nlohmann::json TrainConfig::to_json() const {
  nlohmann::json json = nlohmann::json::object();
  for (const TrainOption& option : train_options()) json[option.name] = option.get(*this);
  return json;
}

std::string TrainConfig::to_toml() const {
  // One `key = value` line per option, in the table's order, strings quoted; `--config`
  // reads it back from any folder: paths absolute, lists as TOML arrays. Left out: empty
  // strings and false switches (the defaults), the options a rerun picks itself (--run-dir,
  // --resume), and whichever of --steps / --epochs the run did not use (the two flags exclude
  // each other).
  std::string text = "# resolved configuration of this run: ringtrain train --config <this file>\n";
  for (const TrainOption& option : train_options()) {
    nlohmann::json value = option.get(*this);
    if (!option.in_config_toml) continue;
    if (value.is_string() && value.get<std::string>().empty()) continue;
    if (value.is_boolean() && !value.get<bool>()) continue;
    if (option.name == (steps > 0 ? "epochs" : "steps")) continue;
    if (value.is_string() && option.names_file(value.get<std::string>()))
      value = std::filesystem::absolute(value.get<std::string>()).lexically_normal().string();
    if (option.list && value != "auto")  // [1024, 1024], as TOML writes an array
      text +=
          fmt::format("{} = [{}]\n", option.name,
                      fmt::join(parse_size_list(value.get<std::string>(), option.flag()), ", "));
    else
      text += option.name + " = " + value.dump() + "\n";
  }
  return text;
}

}  // namespace ringtrain
