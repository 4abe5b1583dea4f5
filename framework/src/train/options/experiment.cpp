// The settings that define an experiment (experiment.hpp) and the comparison of two
// configurations by them.
#include "ringtrain/framework/train/experiment.hpp"

#include <fmt/format.h>

#include <array>
#include <nlohmann/json.hpp>

#include "ringtrain/files/escape.hpp"
#include "ringtrain/framework/error.hpp"

namespace ringtrain {

std::span<const ExperimentKey> experiment_keys() {
  static constexpr std::array<ExperimentKey, 24> kKeys = {{
      {"model_spec", "the layer list (--model, --mlp-hidden, --dropout)"},
      {"data_digest", "the data's digest (--data)"},
      {"validation-fraction", "--validation-fraction"},
      {"loss", "--loss"},
      {"optimizer", "--optimizer"},
      {"lr", "--lr"},
      {"momentum", "--momentum"},
      {"nesterov", "--nesterov"},
      {"weight-decay", "--weight-decay"},
      {"beta1", "--beta1"},
      {"beta2", "--beta2"},
      {"eps", "--eps"},
      {"schedule", "--schedule"},
      {"warmup-steps", "--warmup-steps"},
      {"step-size", "--step-size"},
      {"gamma", "--gamma"},
      {"min-lr", "--min-lr"},
      {"schedule_horizon_steps",
       "the schedule's horizon in steps (cosine: the run's length; step without --step-size: a "
       "third of it), from --steps or --epochs"},
      {"lr-scaling", "--lr-scaling"},
      {"seed", "--seed"},
      {"global-batch", "--global-batch"},
      {"reduction", "--reduction"},
      {"exact-micro-batch", "--exact-micro-batch"},  // compared under --reduction exact only
      {"wire", "--wire"},
  }};
  return kKeys;
}

namespace {

// Whether `key`, one of the experiment's, is compared for a checkpoint whose configuration is
// `stored`: the micro-batch is the exact sum's grid, and the other reductions do not read it.
bool compared(std::string_view key, const nlohmann::json& stored) {
  return key != "exact-micro-batch" || stored.value("reduction", "") == "exact";
}

// A value as a message shows it: text without quotes, escaped and cut (it came from a file).
std::string shown(const nlohmann::json& value) {
  return files::escaped(value.is_string() ? value.get<std::string>() : value.dump(), 60);
}

}  // namespace

void check_same_experiment(const std::string& stored_config_json,
                           const std::string& run_config_json, const std::string& file) {
  const auto stored = nlohmann::json::parse(stored_config_json, nullptr, false);
  const auto run = nlohmann::json::parse(run_config_json, nullptr, false);
  if (!stored.is_object() || !run.is_object()) return;
  std::string differences;
  for (const ExperimentKey& k : experiment_keys()) {
    const std::string key(k.key);
    if (!stored.contains(key) || !run.contains(key) || stored[key] == run[key]) continue;
    if (!compared(key, stored)) continue;
    const std::string separator = differences.empty() ? "" : ", ";
    // The data: each digest with the path it was computed on.
    const auto data_path = [&](const nlohmann::json& json) {
      return key == "data_digest" && json.contains("data_path")
                 ? " (" + shown(json["data_path"]) + ")"
                 : std::string();
    };
    if (key == "model_spec")  // a TOML text: say that it differs, do not print it
      differences += separator + std::string(k.flag) + " differs";
    else
      differences +=
          fmt::format("{}{} {}{} (this launch: {}{})", separator, k.flag, shown(stored[key]),
                      data_path(stored), shown(run[key]), data_path(run));
  }
  if (differences.empty()) return;
  throw UsageError(fmt::format(
      "{}: a checkpoint of another experiment: {}; resume with the settings it was written "
      "with, or start a new run with another --run-dir",
      file, differences));
}

nlohmann::json allowed_changes(const std::string& stored_config_json,
                               const std::string& run_config_json) {
  const auto stored = nlohmann::json::parse(stored_config_json, nullptr, false);
  const auto run = nlohmann::json::parse(run_config_json, nullptr, false);
  nlohmann::json changed = nlohmann::json::object();
  if (!stored.is_object() || !run.is_object()) return changed;
  const auto defines = [&](const std::string& key) {
    for (const ExperimentKey& k : experiment_keys())
      if (k.key == key) return compared(key, stored);
    return false;
  };
  for (const auto& [key, value] : run.items()) {
    if (key == "resume" || defines(key) || !stored.contains(key) || stored[key] == value) continue;
    changed[key] = {stored[key], value};
  }
  return changed;
}

}  // namespace ringtrain
