// `ringtrain train` (trainer.hpp): the data, loaded on every rank alike, and the model, then
// one TrainingRun (training_run.hpp) set up here from the run plan (run_plan.hpp): the
// model planned and the same on every rank, the trace, the step and what watches it, the
// training state and a resume, the run directory, the save policy and the logs. Its loop is
// training_loop.cpp.
#include "ringtrain/framework/train/trainer.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "ringtrain/checkpoint/contained.hpp"
#include "ringtrain/collectives/ring.hpp"
#include "ringtrain/framework/agreed.hpp"
#include "ringtrain/framework/blas.hpp"
#include "ringtrain/framework/data/holdout.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/train/experiment.hpp"
#include "train/run/training_run.hpp"
#include "train/sum/exact_step.hpp"

namespace ringtrain {

namespace coll = collectives;

TrainingRun::TrainingRun(const TrainConfig& config, Sequential& model, const Shape& input_shape,
                         data::DataSplits data, const coll::Communicator& comm,
                         Watchdog::Action on_stuck, const FaultInjector& faults)
    : config_(config),
      model_(model),
      comm_(comm),
      faults_(faults),
      plan_(plan_run(config, data_facts(data.info, data.train.size()), world_facts(comm))),
      train_(std::move(data.train)),
      test_(std::move(data.test)),
      validation_(std::move(data.validation)),
      sampler_(config.seed, train_.size(), config.global_batch),
      // Rank 0 alone writes; every rank knows the path (--resume requires an explicit --run-dir).
      run_dir_path_(!config.run_dir.empty() ? config.run_dir
                    : comm.rank() == 0      ? default_run_dir(config.model)
                                            : ""),
      watchdog_(comm.rank(), config.watchdog_s > 0 ? config.watchdog_s : kWatchdogFloorS,
                recorded_then(std::move(on_stuck), comm.rank(), run_dir_path_)) {
  blas::set_threads(plan_.blas_threads, std::max(1, comm.ranks_per_node()));
  blas::set_kernels(blas::resolve_kernels(name_of(config_.gemm)));
  // Before any evaluation, no MSE is the best yet (a resume restores the stored best).
  if (data.info.regression()) counters_.best_selection_metric = INFINITY;
  results_.regression = data.info.regression();
  results_.validation = validation_.size() > 0;
  facts_.config = &config_;
  facts_.run = &plan_;
  facts_.setup = &setup_;
  facts_.world = world_facts(comm_);
  facts_.data = std::move(data.info);
  facts_.train_samples = train_.size();
  facts_.test_samples = test_.size();
  facts_.validation_samples = validation_.size();
  prepare_model(input_shape);
  build_step();
  // A refused resume (another model, other data, no valid checkpoint) stops every rank before
  // the run directory's manifest and config are rewritten.
  const std::optional<std::filesystem::path> resumed_from = load_checkpoint();
  // Only rank 0 writes it, but a refusal (a folder that holds another run) stops every rank.
  agreed(comm_, [&] {
    if (comm_.rank() == 0) open_run_directory();
  });
  continue_from(resumed_from);
}

void TrainingRun::say(const std::string& line) const {
  if (comm_.rank() == 0 && !config_.quiet) std::printf("%s\n", line.c_str());
}

// Plans the model for the largest local batch and the evaluation's chunks, initializes it
// from the seed, and gives every rank rank 0's parameters.
void TrainingRun::prepare_model(const Shape& input_shape) {
  const data::DataInfo& data = facts_.data;
  if (input_shape != data.sample_shape)
    throw UsageError(fmt::format(
        "model {} takes samples of shape {}, but {} holds samples of "
        "shape {}",
        config_.model, to_string(input_shape), data.path, to_string(data.sample_shape)));
  model_.plan(input_shape, plan_.model_rows);
  if (num_elements(model_.output_shape()) != data.outputs())
    throw UsageError(fmt::format("model {} has {} outputs, but {} holds {} {}", config_.model,
                                 num_elements(model_.output_shape()), data.path, data.outputs(),
                                 data.regression() ? "regression targets" : "classes"));
  model_.initialize(config_.seed);
  if (comm_.size() > 1) coll::broadcast(comm_, model_.parameters().values(), 0);
  facts_.model = &model_;
}

// The step's plan and its sum's options, the trace (clocks aligned to rank 0's), what
// watches the step, and the step.
void TrainingRun::build_step() {
  if (config_.reduction == Reduction::kExact) check_exact_layers(model_);
  setup_ = plan_step(config_, plan_, facts_.world, model_);
  if (config_.collective == CollectiveKind::kHierarchical) {
    hierarchy_ = std::make_unique<coll::Hierarchy>(comm_, config_.ranks_per_host);  // collective
    setup_.reducer.ring.hierarchy = hierarchy_.get();
    facts_.hosts = hierarchy_->layout().hosts;
  }
  trace_ = make_run_trace(comm_, config_.trace_steps, setup_.trace_events_per_step);
  eval_name_ = trace_->name("evaluation");
  instruments_ = std::make_unique<StepInstruments>(
      model_, config_.trace_steps > 0 ? trace_.get() : nullptr, watchdog_, faults_, comm_.rank(),
      config_.reduction == Reduction::kExact);
  step_ = std::make_unique<DataParallelStep>(comm_, model_, train_, setup_.step, setup_.reducer,
                                             plan_.optimizer, *instruments_);
  if (config_.auto_split()) plan_split();
  facts_.optimizer = step_->optimizer().describe();
  facts_.state_bytes = optimizer_state_bytes(comm_, step_->optimizer(), step_->shard());
}

// The floats a step holds per row for `rows` rows: the input and every layer's output (the
// activations planned for that many rows; layers' own scratch not counted), in bytes.
namespace {
double split_rows_bytes(const Sequential& model, std::size_t rows) {
  std::size_t per_row = num_elements(model.input_shape());
  for (std::size_t i = 0; i < model.num_layers(); ++i)
    per_row += num_elements(model.layer_output_shape(i));
  return double(per_row) * double(rows) * sizeof(float);
}
}  // namespace

// --local-batches auto: the planner of the split, and the core wait measured each step. Per-rank
// BatchNorm would compute something else for each split: refused.
void TrainingRun::plan_split() {
  if (model_.has_batch_norm() && !setup_.step.sync_bn && comm_.size() > 1)
    throw UsageError(
        "--local-batches auto with --sync-bn off: per-rank BatchNorm statistics change with the "
        "split, so moving samples would change the experiment; use --sync-bn on (or auto)");
  planner_ = std::make_unique<SplitPlanner>(comm_, config_, plan_.local_batches, faults_, nullptr,
                                            [this](const std::string& m) { say(m); });
  instruments_->measure_core_wait();
}

void TrainingRun::open_run_directory() {
  run_dir_ =
      std::make_unique<RunDirectory>(run_dir_path_, /*allow_existing=*/!config_.resume.empty());
  facts_.run_dir = run_dir_->path().string();
  manifest_ = make_manifest(facts_);
  if (planner_) {
    planner_->set_run_directory(run_dir_.get());
    manifest_["split_policy"] = planner_->policy();
  }
  // A signed run stays signed: a resume without the key is refused (load_checkpoint).
  manifest_["checkpoints_signed"] = checkpointer_->signs();
  manifest_["results"] = TrainResults{}.to_json();
  run_dir_->write_manifest(manifest_);
  write_file_atomically(run_dir_->path() / "config.toml", config_.to_toml());
  for (const std::string& line : banner_lines(facts_)) say(line);
  if (planner_) say(planner_->banner_line(split_rows_bytes(model_, plan_.largest_local_batch)));
  warn_if_wrong_reduction(config_.reduction);
  if (!config_.deprecation_note.empty())
    std::fprintf(stderr, "%s\n", config_.deprecation_note.c_str());
}

// The training state and, with --resume, the checkpoint it continues from (nothing yet written).
std::optional<std::filesystem::path> TrainingRun::load_checkpoint() {
  state_ = std::make_unique<TrainingState>(
      TrainingState{model_, step_->optimizer(), sampler_, counters_, config_.seed, &step_->shard(),
                    &step_->feedback(), planner_ ? planner_->plan_text() : nullptr});
  checkpointer_ = std::make_unique<Checkpointer>(comm_, run_dir_path_ / "checkpoints", config_.keep,
                                                 checkpoint_config(facts_).dump(),
                                                 config_.checkpoint_key, config_.zero_gather);
  if (config_.resume.empty()) return std::nullopt;
  agreed<UsageError>(comm_, [&] { refuse_unsigned_resume(run_dir_path_, checkpointer_->signs()); });
  return checkpointer_->resume(*state_, config_.resume, [&](const std::string& m) { say(m); });
}

namespace {

// The settings this launch changed since the checkpoint, among those that may change
// (experiment.hpp), and the world size: {key: [the checkpoint's, this launch's]}.
nlohmann::json changes_since(const std::optional<checkpoint::Header>& header,
                             const std::string& config_json, int world_size) {
  if (!header) return nlohmann::json::object();
  nlohmann::json changed = allowed_changes(header->config_json, config_json);
  if (header->world_size != world_size) changed["world_size"] = {header->world_size, world_size};
  return changed;
}

// "; changed since: --log-every 5 -> 10, world_size 2 -> 1" (empty when nothing changed).
std::string changes_text(const nlohmann::json& changed) {
  std::string text;
  for (const auto& [key, values] : changed.items())
    text += fmt::format("{}{}{} {} -> {}", text.empty() ? "; changed since: " : ", ",
                        key.find('_') == std::string::npos ? "--" : "", key, values[0].dump(),
                        values[1].dump());
  return text;
}

}  // namespace

// What depends on the step we start at: the resume's records, the save policy, the logs.
void TrainingRun::continue_from(const std::optional<std::filesystem::path>& from) {
  std::vector<nlohmann::json> records;  // rank 0: metrics.jsonl up to the checkpoint's step
  if (!config_.resume.empty()) {
    // Applied already (this launch's configuration is the one in use); recorded here.
    const nlohmann::json changed = changes_since(checkpointer_->resumed_header(),
                                                 checkpoint_config(facts_).dump(), comm_.size());
    if (from)
      say(fmt::format("resumed from {} at step {} (epoch {}, position {}){}", from->string(),
                      counters_.step, sampler_.state().epoch, sampler_.state().position,
                      changes_text(changed)));
    else
      say("no checkpoint to resume from in " + checkpointer_->dir().string() +
          ": starting at step 0");
    if (run_dir_) {
      // Records of steps after the checkpoint were logged by the killed attempt.
      records = run_dir_->truncate_metrics_after(counters_.step);
      nlohmann::json record = {
          {"step", counters_.step},
          {"resumed_from", from ? nlohmann::json(from->filename().string()) : nlohmann::json()}};
      if (from) record["resume"] = {{"changed", changed}};
      run_dir_->append_metrics(record);
    }
  }
  if (planner_ && from) {  // the split plan of the checkpoint, or a fresh one
    say(planner_->resume());
    step_->set_split(planner_->split());
  }
  start_step_ = counters_.step;
  saves_ = std::make_unique<SavePolicy>(comm_, *checkpointer_, plan_.saves, start_step_, faults_,
                                        watchdog_, trace_.get(), run_dir_.get(),
                                        [this](const std::string& m) {
                                          // A plan mid-run goes on its own line, below the bar.
                                          if (bar_)
                                            bar_->message(m);
                                          else
                                            say(m);
                                        });
  metrics_ = std::make_unique<MetricsLog>(comm_, run_dir_.get(), plan_.steps_per_epoch);
  bar_ = std::make_unique<ProgressBar>(stdout, plan_.total_steps, config_.log_every,
                                       comm_.rank() == 0 && !config_.quiet, config_.progress);
  // A resume of a finished run has nothing left to do.
  results_.steps = counters_.step;
  // The counters hold the selection split's values; the test set's, under validation, are
  // this launch's own (none yet).
  (validating() ? results_.best_validation_metric : results_.best_test_metric) =
      counters_.best_selection_metric;
  (validating() ? results_.final_validation_metric : results_.final_test_metric) =
      counters_.final_selection_metric;
  if (validating()) results_.best_test_metric = results_.final_test_metric = NAN;
  if (from) recover_best(records);
}

Trainer::Trainer(TrainConfig config, std::unique_ptr<Sequential> model, const Shape& input_shape,
                 const coll::Communicator& comm)
    : config_(std::move(config)),
      model_(std::move(model)),
      input_shape_(input_shape),
      comm_(comm),
      faults_(std::make_unique<FaultInjector>()) {
  config_.validate(comm_.size());
  if (!model_) throw Error("Trainer needs a model");
}

Trainer::Trainer(TrainConfig config, ModelFactory make_model, const coll::Communicator& comm)
    : config_(std::move(config)),
      make_model_(std::move(make_model)),
      comm_(comm),
      faults_(std::make_unique<FaultInjector>()) {
  config_.validate(comm_.size());
  if (!make_model_) throw Error("Trainer needs a model factory");
}

Trainer::~Trainer() = default;

const Sequential& Trainer::model() const {
  if (!model_) throw Error("Trainer::model() before run()");
  return *model_;
}

namespace {

// --validation-fraction F: the samples the seed holds out of train (holdout.hpp) become the
// validation split; the rest are trained on.
void hold_out_validation(data::DataSplits& splits, const TrainConfig& config) {
  const data::HoldOut parts =
      data::hold_out(splits.train.size(), config.validation_fraction, config.seed);
  data::Views views = data::split_views(std::move(splits.train), parts);
  splits.train = std::move(views.train);
  splits.validation = std::move(views.validation);
}

}  // namespace

TrainResults Trainer::run() {
  Watchdog::Action on_stuck =
      watchdog_action_ ? watchdog_action_ : Watchdog::Action(default_watchdog_action);
  // A resume reads its checkpoint in a reader child: started now, it is ready by then.
  if (!config_.resume.empty()) checkpoint::prepare_contained_reader();
  // A defect of the user's data is bad input: every rank agrees, exit 2, nothing written.
  data::DataSplits data = agreed<UsageError>(comm_, [&] {
    data::DataSplits splits =
        data::load_data(config_.data_dir, {.memory_limit_bytes = config_.data_memory_limit});
    check_loss(config_, splits.info, splits.info.path);
    if (config_.validation_fraction > 0.0) hold_out_validation(splits, config_);
    return splits;
  });
  // The data may have used the child started ahead (HDF5): one more for the checkpoint.
  if (!config_.resume.empty()) checkpoint::prepare_contained_reader();
  if (make_model_) {
    model_ = make_model_(data.info);
    input_shape_ = data.info.sample_shape;
  }
  TrainingRun run(config_, *model_, input_shape_, std::move(data), comm_, std::move(on_stuck),
                  *faults_);
  return run.train();
}

}  // namespace ringtrain
