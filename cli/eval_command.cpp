// `ringtrain eval CHECKPOINT --data PATH [--predictions OUT.npy]`: a checkpoint's model on the
// test split of PATH, its metric (test accuracy, or test MSE for a regression model) and loss,
// and optionally every sample's predicted class (or output values).
//
//   1. every rank reads the checkpoint as a resume does (an untrusted file, parsed in a
//      contained reader child): the model's spec comes from the file (the canonical TOML a
//      run stores in the header's configuration; files written before that name a built-in
//      model, whose spec is compiled in), then its parameters and BatchNorm statistics
//   2. every rank loads PATH (any layout of --data), builds the model for it, and the ranks
//      split the test samples as the trainer's evaluation does (evaluation.hpp)
//   3. rank 0 prints the metric and writes OUT.npy (int64 classes of shape (n); for regression
//      float32 outputs shaped as the test y, (n) or (n, k)) through a temporary file and a
//      rename (files/output.hpp): nothing half-written stays behind, and OUT.npy may not be a
//      device, FIFO or directory, nor one of the command's inputs (the checkpoint, a data
//      file, the key file): that is checked before anything is read
// A defect of the checkpoint or the data, or data the model does not fit, is one line and
// exit 2 on every rank (they agree first), with no predictions file.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "ringtrain/checkpoint/contained.hpp"
#include "ringtrain/checkpoint/error.hpp"
#include "ringtrain/checkpoint/key.hpp"
#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/collectives/small.hpp"
#include "ringtrain/files/output.hpp"
#include "ringtrain/framework/blas.hpp"
#include "ringtrain/framework/data/npy.hpp"
#include "ringtrain/framework/data/user_data.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/train/evaluation.hpp"
#include "ringtrain/framework/train/options.hpp"
#include "ringtrain/framework/train/state_values.hpp"
#include "ringtrain/framework/train/training_state.hpp"
#include "ringtrain/models/registry.hpp"

namespace ringtrain::cli {
namespace {

namespace ck = checkpoint;

struct EvalArgs {
  std::string checkpoint, data, predictions, key_file;
};

// Runs `work` on every rank; if it threw anywhere, every rank throws `Failure`, rank 0 (the one
// that prints) with the message of the lowest rank that failed, so no rank waits in a
// collective for one that gave up and the reason is never lost.
template <typename Failure, typename Work>
void agreed(const collectives::Communicator& comm, Work&& work) {
  std::string message;
  try {
    work();
  } catch (const std::exception& e) {
    message = e.what();
  }
  double failed[1] = {message.empty() ? 0.0 : 1.0};
  if (comm.size() > 1) collectives::allreduce_sum(comm, std::span<double>(failed));
  if (failed[0] == 0.0) return;
  if (comm.size() > 1) {
    for (const std::string& text : collectives::gather_text(comm, message))
      if (!text.empty()) {
        if (comm.rank() == 0) message = text;
        break;
      }
  }
  throw Failure(message.empty() ? "eval failed on another rank" : message);
}

// What the checkpoint's header says about the run that wrote it.
struct StoredRun {
  ck::VerifyResult file;  // header and every entry's kind and shape
  TrainConfig config;     // seed, kernels, threads, the built-in model's options
  models::ModelSpec spec;
  std::optional<Shape> sample_shape;  // absent in files written before it was stored
  std::optional<std::size_t> classes;
  std::optional<std::size_t> targets;  // regression: outputs per sample (files with "loss")
};

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
  return models::model_spec(config);
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

// Refuses data whose samples, classes, targets or kind of y (labels or targets) differ from
// those the model was trained on.
void check_fits(const StoredRun& run, const data::DataInfo& data, const std::string& file) {
  const bool trained_on_targets = run.config.loss == LossChoice::kMse;
  if (trained_on_targets != data.regression())
    throw UsageError(
        fmt::format("{} holds {}, but the model in {} was trained with --loss {} on {}", data.path,
                    data.regression() ? "float32 regression targets" : "integer class labels", file,
                    trained_on_targets ? "mse" : "cross-entropy",
                    trained_on_targets ? "regression targets" : "class labels"));
  if (run.targets && *run.targets != data.num_targets)
    throw UsageError(
        fmt::format("{} holds {} targets per sample, but the model in {} has {} "
                    "outputs",
                    data.path, data.num_targets, file, *run.targets));
  if (run.sample_shape && *run.sample_shape != data.sample_shape)
    throw UsageError(fmt::format(
        "{} holds samples of shape {}, but the model in {} was trained on samples of shape {}",
        data.path, to_string(data.sample_shape), file, to_string(*run.sample_shape)));
  if (run.classes && *run.classes != data.num_classes)
    throw UsageError(fmt::format("{} holds {} classes, but the model in {} has {} outputs",
                                 data.path, data.num_classes, file, *run.classes));
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

// BLAS threads and kernels as the run that wrote the checkpoint chose them.
void use_run_threads(const collectives::Communicator& comm, const TrainConfig& config) {
  blas::set_threads(config.blas_threads > 0 ? config.blas_threads
                                            : std::max(1, blas::available_cores() /
                                                              std::max(1, comm.ranks_per_node())));
  blas::set_kernels(blas::resolve_kernels(name_of(config.gemm)));
}

// Every file the command reads: the checkpoint, the key file, the data path and, when it is a
// folder, each file in it. --predictions may be none of them.
std::vector<std::filesystem::path> inputs_of(const EvalArgs& args) {
  std::vector<std::filesystem::path> inputs = {args.checkpoint};
  if (const auto key = ck::key_file_in_use(args.key_file)) inputs.push_back(*key);
  const std::filesystem::path data =
      args.data.empty() ? data::default_data_dir() : std::filesystem::path(args.data);
  inputs.push_back(data);
  std::error_code ec;
  if (std::filesystem::is_directory(data, ec))
    for (const auto& entry : std::filesystem::directory_iterator(data, ec))
      inputs.push_back(entry.path());
  return inputs;
}

struct PredictionFile {
  Evaluation evaluation;
  Metric metric;
};

// Evaluates `model` on the test split and, if asked, rank 0 writes the predictions: classes
// as int64 (n), or a regression model's outputs as float32 shaped as the test y. Collective.
PredictionFile evaluate_and_write(const collectives::Communicator& comm, Sequential& model,
                                  const data::DataSplits& data, std::uint64_t seed,
                                  const EvalArgs& args) {
  const data::Dataset& test = data.test;
  std::string bytes;
  Evaluation e;
  if (test.regression()) {
    std::vector<float> outputs(test.size() * test.num_targets);
    e = evaluate(comm, model, test, seed, outputs);
    if (!args.predictions.empty())
      bytes = data::npy_float32_array(outputs, data.info.arrays[3].shape);
  } else {
    std::vector<std::int64_t> predictions(test.size());
    e = evaluate(comm, model, test, seed, predictions);
    if (!args.predictions.empty()) bytes = data::npy_int64_vector(predictions);
  }
  agreed<AgreedError>(comm, [&] {
    if (comm.rank() == 0 && !args.predictions.empty())
      files::write_file_atomically(args.predictions, bytes, {.inputs = inputs_of(args)});
  });
  return {e, metric_for(test.regression())};
}

int run_eval(const EvalArgs& args) {
  collectives::Communicator comm;
  const bool leader = comm.rank() == 0;
  StoredRun run;
  data::DataSplits data;
  std::unique_ptr<Sequential> model;
  agreed<UsageError>(comm, [&] {
    // Before anything is read: an output that would replace a device or an input is refused.
    if (!args.predictions.empty()) files::check_output(args.predictions, inputs_of(args));
    const std::optional<ck::MacKey> key = ck::MacKey::from_flag_or_environment(args.key_file);
    run = read_stored_run(args.checkpoint, key ? &*key : nullptr);
    data = data::load_data(args.data);
    check_fits(run, data.info, args.checkpoint);
    model = models::build_model(run.spec, data.info.sample_shape, data.info.outputs(),
                                run.config.conv_algorithm,
                                data.info.regression() ? "regression targets" : "classes");
    model->plan(data.info.sample_shape, kEvalChunk);
    load_weights(args.checkpoint, run, *model, key ? &*key : nullptr);
  });
  use_run_threads(comm, run.config);
  const PredictionFile out = evaluate_and_write(comm, *model, data, run.config.seed, args);
  if (leader)
    std::printf("%s (step %llu) on %s: %zu test samples, %s %s, test loss %s%s\n",
                args.checkpoint.c_str(), (unsigned long long)run.file.header.step,
                data.info.path.c_str(), data.test.size(), out.metric.label,
                fmt::format("{}", out.metric.of(out.evaluation)).c_str(),
                fmt::format("{}", out.evaluation.loss).c_str(),
                args.predictions.empty() ? "" : ("; predictions in " + args.predictions).c_str());
  return 0;
}

}  // namespace

void add_eval(CLI::App& app, Runner& run) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* sub = app.add_subcommand(
      "eval",
      "a checkpoint's model on the test split of --data: accuracy (or MSE), loss, predictions");
  sub->add_option("CHECKPOINT", args->checkpoint, "checkpoint file (.h5)")->required();
  sub->add_option("--data", args->data,
                  "IDX folder, HDF5 file or .npy folder (default: the Debian package's "
                  "Fashion-MNIST)");
  sub->add_option("--predictions", args->predictions,
                  "write each test sample's predicted class here (.npy, int64, shape (n)); for a "
                  "regression model its outputs (float32, shaped as the test y)");
  sub->add_option("--checkpoint-key", args->key_file,
                  "MAC key file: refuse files not signed with it (default: "
                  "$RINGTRAIN_CHECKPOINT_KEY_FILE)");
  sub->callback([&run, args] {
    run = [args] {
      checkpoint::prepare_contained_reader();
      return run_eval(*args);
    };
  });
}

}  // namespace ringtrain::cli
