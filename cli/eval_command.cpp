// `ringtrain eval CHECKPOINT|RUN_DIR --data PATH [--split test|validation|train]
// [--outputs classes|probabilities|values] [--predictions OUT.npy]`: a checkpoint's model on
// one split of PATH: its metric (accuracy, or MSE for a regression model) and loss where the
// data hold labels, and every sample's prediction.
//
//   1. every rank reads the checkpoint as a resume does (eval_checkpoint.hpp: a file, or a run
//      directory's newest that verifies): the model's spec, sample shape and outputs come
//      from the file, then its parameters and BatchNorm statistics
//   2. every rank loads the split of PATH (split_data.hpp: any layout of --data, or x alone:
//      /x or /test/x without y, test_x.npy alone, one FILE.npy), builds the model, and the
//      ranks split the samples as the trainer's evaluation does (evaluation.hpp). The
//      validation split is the part of train the run held out (--validation-fraction)
//   3. rank 0 prints the metric (when there are labels) and writes OUT.npy through a
//      temporary file and a rename (files/output.hpp): `classes` int64 (n), `probabilities`
//      float32 (n, classes), `values` float32 outputs (logits (n, classes); a regression
//      model's shaped as the y of the data, else (n) or (n, k)). Nothing half-written stays
//      behind, and OUT.npy may not be a device, FIFO or directory, nor one of the command's
//      inputs (the checkpoint, a data file, the key file): that is checked before anything
//      is read
// A defect of the checkpoint or the data, or data the model does not fit, is one line and
// exit 2 on every rank (they agree first), with no predictions file.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "eval_checkpoint.hpp"
#include "ringtrain/checkpoint/contained.hpp"
#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/files/output.hpp"
#include "ringtrain/framework/agreed.hpp"
#include "ringtrain/framework/blas.hpp"
#include "ringtrain/framework/data/holdout.hpp"
#include "ringtrain/framework/data/npy.hpp"
#include "ringtrain/framework/data/split_data.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/train/evaluation.hpp"
#include "ringtrain/framework/train/run_plan.hpp"

namespace ringtrain::cli {
namespace {

namespace ck = checkpoint;

enum class Outputs { kAuto, kClasses, kProbabilities, kValues };

struct EvalArgs {
  std::string checkpoint, data, predictions, key_file;
  std::string split = "test";
  std::string outputs = "auto";
};

// The model's outputs per sample, and whether they are regression values, from the file
// (or, in files written before they were stored, from labelled data).
struct ModelOutputs {
  std::size_t width = 0;
  bool regression = false;
};

ModelOutputs outputs_of(const StoredRun& run, const data::SplitData& split,
                        const std::string& file) {
  const bool regression = run.config.loss == LossChoice::kMse;
  if (regression && run.targets) return {*run.targets, true};
  if (!regression && run.classes) return {*run.classes, false};
  if (!split.data.labelled())
    throw UsageError(fmt::format(
        "{}: written before checkpoints held the model's outputs: eval it on data with labels",
        file));
  return {split.info.outputs(), regression};
}

// Refuses data whose samples, targets or kind of y (labels or targets) differ from those the
// model was trained on. (Labels were checked against the model's classes when loaded.)
void check_fits(const StoredRun& run, const data::SplitData& split, const ModelOutputs& model,
                const std::string& file) {
  const data::DataInfo& data = split.info;
  if (run.sample_shape && *run.sample_shape != data.sample_shape)
    throw UsageError(fmt::format(
        "{} holds samples of shape {}, but the model in {} was trained on samples of shape {}",
        data.path, to_string(data.sample_shape), file, to_string(*run.sample_shape)));
  if (!split.data.labelled()) return;
  if (model.regression != data.regression())
    throw UsageError(
        fmt::format("{} holds {}, but the model in {} was trained with --loss {} on {}", data.path,
                    data.regression() ? "float regression targets" : "integer class labels", file,
                    model.regression ? "mse" : "cross-entropy",
                    model.regression ? "regression targets" : "class labels"));
  if (model.regression && data.num_targets != model.width)
    throw UsageError(
        fmt::format("{} holds {} targets per sample, but the model in {} has {} outputs", data.path,
                    data.num_targets, file, model.width));
}

Outputs parse_outputs(const std::string& text, bool regression) {
  if (text == "auto") return regression ? Outputs::kValues : Outputs::kClasses;
  if (text == "values") return Outputs::kValues;
  if (text != "classes" && text != "probabilities")
    throw UsageError(
        fmt::format("--outputs {}: choose one of classes, probabilities, values", text));
  if (regression)
    throw UsageError(
        fmt::format("--outputs {}: the model is a regression model, whose outputs are values "
                    "(--outputs values)",
                    text));
  return text == "classes" ? Outputs::kClasses : Outputs::kProbabilities;
}

// BLAS threads and kernels as the run that wrote the checkpoint chose them (run_plan.hpp).
void use_run_threads(const collectives::Communicator& comm, const TrainConfig& config) {
  const WorldFacts world = world_facts(comm);
  blas::set_threads(blas_threads(config, world), world.ranks_per_node);
  blas::set_kernels(blas::resolve_kernels(name_of(config.gemm)));
}

// Every file the command reads: the checkpoint, the key file, the data path and, when it is a
// folder, each file in it. --predictions may be none of them.
std::vector<std::filesystem::path> inputs_of(const EvalArgs& args,
                                             const std::filesystem::path& checkpoint) {
  std::vector<std::filesystem::path> inputs = {checkpoint};
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

// softmax of each row of `logits` (n, classes), in double, as float32.
std::vector<float> probabilities(std::span<const float> logits, std::size_t classes) {
  std::vector<float> p(logits.size());
  for (std::size_t i = 0; i < logits.size() / classes; ++i) {
    const auto row = logits.subspan(i * classes, classes);
    const double top = row[argmax(row)];
    double sum = 0.0;
    for (float z : row) sum += std::exp(double(z) - top);
    for (std::size_t c = 0; c < classes; ++c)
      p[i * classes + c] = float(std::exp(double(row[c]) - top) / sum);
  }
  return p;
}

// The bytes of OUT.npy for `outputs` (n, width) of the model.
std::string prediction_bytes(std::span<const float> outputs, std::size_t width, Outputs kind,
                             const data::SplitData& split) {
  const std::uint64_t n = split.data.size();
  if (kind == Outputs::kClasses) {
    std::vector<std::int64_t> classes(n);
    for (std::size_t i = 0; i < n; ++i)
      classes[i] = std::int64_t(argmax(outputs.subspan(i * width, width)));
    return data::npy_int64_vector(classes);
  }
  if (kind == Outputs::kProbabilities)
    return data::npy_float32_array(probabilities(outputs, width), {n, width});
  // values: a regression model's shaped as y; else (n) for one output, (n, width)
  const bool shaped_as_y = split.data.regression() && split.info.arrays.size() > 1;
  std::vector<std::uint64_t> shape = shaped_as_y  ? split.info.arrays[1].shape
                                     : width == 1 ? std::vector<std::uint64_t>{n}
                                                  : std::vector<std::uint64_t>{n, width};
  return data::npy_float32_array(outputs, shape);
}

// --split train or validation: of a run that held out a validation split, the part asked for
// (the same samples as the run's, from its seed and --validation-fraction).
void keep_part(data::SplitData& split, const TrainConfig& run, bool validation) {
  if (run.validation_fraction <= 0.0) {
    if (validation)
      throw UsageError(
          "--split validation: the run held out no validation split (it trained with "
          "--validation-fraction 0); use --split test or --split train");
    return;
  }
  if (!split.data.labelled())
    throw UsageError(
        fmt::format("--split {}: {} holds no train y; the split is drawn from the "
                    "run's labelled training data",
                    validation ? "validation" : "train", split.info.path));
  const data::HoldOut parts = data::hold_out(split.data.size(), run.validation_fraction, run.seed);
  data::Views views = data::split_views(std::move(split.data), parts);
  split.data = std::move(validation ? views.validation : views.train);
}

struct Loaded {
  std::filesystem::path checkpoint;
  StoredRun run;
  data::SplitData split;
  ModelOutputs outputs;
  Outputs kind = Outputs::kAuto;
  std::unique_ptr<Sequential> model;
};

data::Split split_of(const std::string& text) {
  if (text == "test") return data::Split::kTest;
  if (text == "train" || text == "validation") return data::Split::kTrain;
  throw UsageError(fmt::format("--split {}: choose one of test, validation, train", text));
}

// Steps 1 and 2 on every rank: the checkpoint, the data, the model with its weights.
Loaded load(const EvalArgs& args, bool leader) {
  Loaded l;
  const data::Split split = split_of(args.split);
  const std::optional<ck::MacKey> key = ck::MacKey::from_flag_or_environment(args.key_file);
  const ck::MacKey* key_ptr = key ? &*key : nullptr;
  l.checkpoint = choose_checkpoint(args.checkpoint, key_ptr, leader);
  // Before anything else is read: an output that would replace a device or an input.
  if (!args.predictions.empty())
    files::check_output(args.predictions, inputs_of(args, l.checkpoint));
  l.run = read_stored_run(l.checkpoint.string(), key_ptr);
  const bool regression = l.run.config.loss == LossChoice::kMse;
  l.split = data::load_split(args.data, split, regression ? 0 : l.run.classes.value_or(0),
                             {.memory_limit_bytes = l.run.config.data_memory_limit});
  if (args.split != "test") keep_part(l.split, l.run.config, args.split == "validation");
  l.outputs = outputs_of(l.run, l.split, l.checkpoint.string());
  check_fits(l.run, l.split, l.outputs, l.checkpoint.string());
  l.kind = parse_outputs(args.outputs, l.outputs.regression);
  l.model = models::build_model(l.run.spec, l.split.info.sample_shape, l.outputs.width,
                                l.run.config.conv_algorithm,
                                l.outputs.regression ? "regression targets" : "classes");
  l.model->plan(l.split.info.sample_shape, kEvalChunk);
  load_weights(l.checkpoint.string(), l.run, *l.model, key_ptr);
  return l;
}

// "test accuracy 0.91, test loss 0.25" (the words of the split), or that there are no labels.
std::string metric_text(const Evaluation& e, const Loaded& l, const std::string& split) {
  if (!l.split.data.labelled()) return "no labels, so no metric";
  const Metric metric = metric_for(l.outputs.regression);
  std::string label = metric.label;  // "test accuracy" | "test MSE"
  label.replace(0, 4, split);
  return fmt::format("{} {}, {} loss {}", label, metric.of(e), split, e.loss);
}

int run_eval(const EvalArgs& args) {
  collectives::Communicator comm;
  const bool leader = comm.rank() == 0;
  Loaded l;
  agreed<UsageError, std::exception>(comm, [&] { l = load(args, leader); });
  use_run_threads(comm, l.run.config);
  const data::Dataset& samples = l.split.data;
  std::vector<float> outputs(samples.size() * l.outputs.width);
  const Evaluation e = evaluate(comm, *l.model, samples, l.run.config.seed, outputs);
  agreed<AgreedError, std::exception>(comm, [&] {
    if (leader && !args.predictions.empty())
      files::write_file_atomically(args.predictions,
                                   prediction_bytes(outputs, l.outputs.width, l.kind, l.split),
                                   {.inputs = inputs_of(args, l.checkpoint)});
  });
  if (leader)
    std::printf("%s (step %llu) on %s: %zu %s samples, %s%s\n", l.checkpoint.c_str(),
                (unsigned long long)l.run.file.header.step, l.split.info.path.c_str(),
                samples.size(), args.split.c_str(), metric_text(e, l, args.split).c_str(),
                args.predictions.empty() ? "" : ("; predictions in " + args.predictions).c_str());
  return 0;
}

}  // namespace

void add_eval(CLI::App& app, Runner& run) {
  auto args = std::make_shared<EvalArgs>();
  CLI::App* sub = app.add_subcommand(
      "eval",
      "a checkpoint's model on a split of --data: accuracy (or MSE) and loss where the data "
      "hold labels, and predictions");
  sub->add_option("CHECKPOINT", args->checkpoint,
                  "checkpoint file (.h5), or a run directory: its newest checkpoint that "
                  "verifies")
      ->required();
  sub->add_option("--data", args->data,
                  "IDX folder, HDF5 file or .npy folder (default: the Debian package's "
                  "Fashion-MNIST); x alone is enough for predictions: /x or /test/x without y, "
                  "test_x.npy alone, or one FILE.npy");
  sub->add_option("--split", args->split,
                  "test | validation | train: the split evaluated (validation: the part of "
                  "train the run held out with --validation-fraction)")
      ->capture_default_str();
  sub->add_option("--outputs", args->outputs,
                  "auto | classes | probabilities | values: what --predictions holds: classes "
                  "int64 (n), probabilities float32 (n, classes) by softmax, values float32 the "
                  "model's outputs (logits, or a regression model's values shaped as y); auto: "
                  "classes, or values for a regression model")
      ->capture_default_str();
  sub->add_option("--predictions", args->predictions,
                  "write each sample's prediction here (.npy; see --outputs)");
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
