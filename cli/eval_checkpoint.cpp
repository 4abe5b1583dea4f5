// The checkpoint of `ringtrain eval` (eval_checkpoint.hpp): which file, what its header
// says, and its weights.
#include "eval_checkpoint.hpp"

#include <fmt/format.h>

#include <cstdio>

#include "ringtrain/checkpoint/commit.hpp"
#include "ringtrain/checkpoint/error.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/train/options.hpp"
#include "ringtrain/framework/train/run_plan.hpp"
#include "ringtrain/framework/train/state_values.hpp"
#include "ringtrain/framework/train/training_state.hpp"

namespace ringtrain::cli {
namespace {

namespace ck = checkpoint;

// The run's options from the header's JSON (untrusted: each value goes through its option's
// parser; keys that are not options are left to the caller).
TrainConfig config_of(const nlohmann::json& json, const std::string& file) {
  TrainConfig config;
  for (const auto& [key, value] : json.items()) {
    const TrainOption* option = find_train_option(key);
    if (option == nullptr || value.is_null()) continue;
    try {
      option->set(config, json_to_text(value));
    } catch (const UsageError& e) {
      throw UsageError(fmt::format("{}: the stored configuration: {}", file, e.what()));
    }
  }
  return config;
}

// The model's layer list: the stored canonical spec, or, in files written before it was
// stored, the built-in model the configuration names (with its --mlp-hidden / --dropout).
models::ModelSpec spec_of(const nlohmann::json& json, const TrainConfig& config,
                          const std::string& file) {
  if (json.contains("model_spec")) {
    if (!json["model_spec"].is_string())
      throw UsageError(file + ": the stored model_spec is not a string");
    return models::parse_model_spec(json["model_spec"].get<std::string>(),
                                    file + " (its model spec)");
  }
  if (models::is_spec_file(config.model))
    throw UsageError(fmt::format(
        "{}: written before checkpoints held the model's spec, by a run of --model {}: "
        "its layer list is not in the file (resume that run for a few steps to get one that "
        "holds it)",
        file, config.model));
  const ModelOptions defaults;
  return models::model_spec(config.model, model_options(config, defaults.input, defaults.classes));
}

std::optional<Shape> shape_of(const nlohmann::json& json, const char* key,
                              const std::string& file) {
  if (!json.contains(key)) return std::nullopt;
  const nlohmann::json& v = json[key];
  Shape shape;
  if (!v.is_array() || v.size() > 8)
    throw UsageError(fmt::format("{}: stored {} is not a shape", file, key));
  for (const nlohmann::json& d : v) {
    if (!d.is_number_unsigned())
      throw UsageError(fmt::format("{}: stored {} is not a shape", file, key));
    shape.push_back(d.get<std::size_t>());
  }
  return shape;
}

}  // namespace

StoredRun read_stored_run(const std::string& file, const ck::MacKey* key) {
  StoredRun run;
  run.file = ck::verify_file_contained(file, key);
  const nlohmann::json json = nlohmann::json::parse(run.file.header.config_json, nullptr, false);
  if (json.is_discarded() || !json.is_object())
    throw UsageError(file + ": the stored configuration is not a JSON object");
  run.config = config_of(json, file);
  run.spec = spec_of(json, run.config, file);
  run.sample_shape = shape_of(json, "sample_shape", file);
  if (json.contains("classes")) {
    if (!json["classes"].is_number_unsigned())
      throw UsageError(file + ": the stored classes is not a whole number");
    run.classes = json["classes"].get<std::size_t>();
  }
  if (json.contains("targets")) {
    if (!json["targets"].is_number_unsigned())
      throw UsageError(file + ": the stored targets is not a whole number");
    run.targets = json["targets"].get<std::size_t>();
  }
  return run;
}

// Reads the file's entries, /model against `model`'s own schema (the rest as the file
// declares them: an eval does not need them), into the model.
void load_weights(const std::string& file, const StoredRun& run, Sequential& model,
                  const ck::MacKey* key) {
  ck::Expected expected;
  expect_model(expected, model);
  for (const ck::EntryInfo& e : run.file.entries) {
    if (e.group == ck::Group::kModel) continue;
    if (e.kind == ck::Kind::kFloat32Array)
      expected.add_array(e.group, e.name, e.shape);
    else
      expected.add(e.group, e.name, e.kind);
  }
  const ck::StateTree tree = ck::read_file_contained(file, expected, nullptr, key);
  check_state_values(tree, run.file.header, file);  // counters a seal cannot vouch for
  restore_model(tree, model);
}

std::filesystem::path choose_checkpoint(const std::filesystem::path& path, const ck::MacKey* key,
                                        bool leader) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return path;
  const std::filesystem::path dir =
      std::filesystem::is_directory(path / "checkpoints", ec) ? path / "checkpoints" : path;
  std::vector<std::string> passed_over;
  for (const std::filesystem::path& file : ck::list_checkpoints(dir)) {
    try {
      ck::verify_file_contained(file, key);
    } catch (const ck::CheckpointError& e) {
      passed_over.push_back(e.what());
      continue;
    }
    if (leader)
      for (const std::string& reason : passed_over)
        std::fprintf(stderr, "eval: passed over %s\n", reason.c_str());
    return file;
  }
  throw UsageError(fmt::format(
      "{}: no checkpoint that verifies ({}); give a checkpoint file or a run directory whose "
      "checkpoints/ holds one",
      path.string(),
      passed_over.empty() ? "none found" : fmt::format("{}", fmt::join(passed_over, "; "))));
}

}  // namespace ringtrain::cli
