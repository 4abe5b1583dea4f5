// The training loop of `ringtrain train` (trainer.hpp): set-up, then one DataParallelStep per
// iteration and, after it, the decisions that are not the step's (log, evaluate, save, stop).
#include "ringtrain/framework/train/trainer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <optional>

#include "ringtrain/checkpoint/contained.hpp"
#include "ringtrain/collectives/clock.hpp"
#include "ringtrain/collectives/hierarchical.hpp"
#include "ringtrain/collectives/ring.hpp"
#include "ringtrain/collectives/small.hpp"
#include "ringtrain/collectives/wait.hpp"
#include "ringtrain/framework/blas.hpp"
#include "ringtrain/framework/data/dataset.hpp"
#include "ringtrain/framework/data/sampler.hpp"
#include "ringtrain/framework/data/user_data.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/train/bucket_default.hpp"
#include "ringtrain/framework/train/checkpointer.hpp"
#include "ringtrain/framework/train/data_parallel_step.hpp"
#include "ringtrain/framework/train/evaluation.hpp"
#include "ringtrain/framework/train/run_directory.hpp"
#include "ringtrain/framework/train/training_state.hpp"
#include "train/now.hpp"
#include "train/persistence/save_policy.hpp"
#include "train/run/metrics_log.hpp"
#include "train/run/progress.hpp"
#include "train/run/run_report.hpp"
#include "train/run/step_instruments.hpp"
#include "train/run/trace.hpp"
#include "train/safety/replica_check.hpp"
#include "train/safety/stop_signals.hpp"
#include "train/safety/watchdog.hpp"
#include "train/sum/bucket_plan.hpp"
#include "train/sum/exact_step.hpp"

namespace ringtrain {
namespace {

namespace coll = collectives;

// The hang watchdog's limit when --watchdog-s is not given: 100 × the mean step time so far,
// never below this floor.
constexpr double kWatchdogFloorS = 60.0;

// Runs `load` on every rank; if it failed anywhere, every rank throws the same kind of
// error (`Failure`), so no rank is left waiting in a collective for one that gave up.
// Collective.
template <typename Failure = AgreedError, typename Load>
auto load_agreed(const coll::Communicator& comm, Load&& load) -> decltype(load()) {
  std::string message;
  decltype(load()) value{};
  try {
    value = load();
  } catch (const Error& e) {
    message = e.what();
  }
  double failed[2] = {message.empty() ? 0.0 : 1.0, message.empty() || comm.rank() != 0 ? 0.0 : 1.0};
  coll::allreduce_sum(comm, std::span<double>(failed));
  if (failed[0] > 0.0) {
    if (!message.empty()) throw Failure(message);
    throw Failure("loading failed on another rank (see its message)");
  }
  return value;
}

// `model` is a name or a spec file: runs/net-<time> for --model specs/net.toml.
std::string default_run_dir(const std::string& model) {
  const std::time_t t = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&t));
  return "runs/" + std::filesystem::path(model).stem().string() + "-" + stamp;
}

// The watchdog's message also goes to watchdog-rank<R>.txt in the run directory (where this
// rank knows it): when a rank aborts, hydra may end the job before it has forwarded that
// rank's last stderr line, and the reason a job ended must not be lost.
Watchdog::Action record_then(Watchdog::Action act, int rank, std::filesystem::path dir) {
  return [act = std::move(act), rank, dir = std::move(dir)](const std::string& message) {
    std::error_code ignored;
    if (!dir.empty() && std::filesystem::is_directory(dir, ignored)) {
      if (std::FILE* f =
              std::fopen((dir / fmt::format("watchdog-rank{}.txt", rank)).c_str(), "w")) {
        std::fprintf(f, "%s\n", message.c_str());
        std::fclose(f);
      }
    }
    act(message);
  };
}

// The configuration a checkpoint carries: the run's options, and what `ringtrain eval` needs to
// rebuild the model from the file alone: its spec as built (canonical TOML), the data's
// sample shape, loss and classes (or targets); and the data's digest and path, which a resume
// compares with its own (Checkpointer::resume). Files written before these keys existed still load
// (they are read only when present).
nlohmann::json checkpoint_config(const TrainConfig& config, const RunFacts& facts,
                                 const Sequential& model) {
  nlohmann::json json = config.to_json();
  if (!model.spec().empty()) json["model_spec"] = model.spec();
  json["sample_shape"] = facts.data.sample_shape;
  // The loss as resolved for the data (never "auto"): eval and a resume read it back.
  json["loss"] = name_of(facts.data.regression() ? LossChoice::kMse : LossChoice::kCrossEntropy);
  if (facts.data.regression())
    json["targets"] = facts.data.num_targets;
  else
    json["classes"] = facts.data.num_classes;
  json["data_digest"] = facts.data.digest;
  json["data_path"] = facts.data.path;
  return json;
}

ReducerOptions reducer_options(const TrainConfig& c, std::size_t cap_bytes, int blas_threads) {
  ReducerOptions o;
  o.cap_bytes = cap_bytes;
  // Each of the rank's threads updates a default piece's worth between two polls: a piece
  // smaller than two threads' minimum parts runs on one thread (optimizer.hpp).
  o.update_piece_elements *= std::size_t(std::max(1, blas_threads));
  o.overlap = c.overlap != Overlap::kOff;
  o.update_per_bucket = c.bucket_update == OnOff::kOn;
  o.driver = c.progress;
  switch (c.collective) {
    case CollectiveKind::kRing:
      o.ring.algorithm = coll::Algorithm::kRing;
      break;
    case CollectiveKind::kMpi:
      o.ring.algorithm = coll::Algorithm::kMpi;
      break;
    case CollectiveKind::kHierarchical:
      o.ring.algorithm = coll::Algorithm::kHierarchical;
      break;
  }
  o.ring.wire = c.wire;
  if (c.segments_in_flight > 0) o.overlap_segments_in_flight = c.segments_in_flight;
  o.zero = c.zero == 1;
  return o;
}

// One run of the loop: the objects it needs, built in set-up order, and the loop itself.
class TrainingRun {
 public:
  TrainingRun(const TrainConfig& config, Sequential& model, const Shape& input_shape,
              data::DataSplits data, const coll::Communicator& comm, Watchdog::Action on_stuck,
              const FaultInjector& faults);
  TrainResults train();

 private:
  void say(const std::string& line) const;
  void take_data(data::DataSplits data);
  void plan_batches_and_steps();
  void prepare_model(const Shape& input_shape);
  void build_step();
  void open_run_directory();
  std::optional<std::filesystem::path> load_checkpoint();
  void continue_from(const std::optional<std::filesystem::path>& resumed_from);
  double job_mtbf_from_hosts();
  void count_skipped(std::uint64_t step, bool applied);
  void stop_if_data_failed(const std::string& failure);
  void check_mapped_data();
  void account(const StepOutcome& outcome, std::uint64_t step);
  bool after_step(std::uint64_t step);
  void evaluate_now(std::uint64_t done);
  double planning_step_s() const;
  void finish(double start_s);

  const TrainConfig& config_;
  Sequential& model_;
  const coll::Communicator& comm_;
  const FaultInjector& faults_;
  const bool leader_;
  RunFacts facts_;

  data::Dataset train_, test_;
  std::unique_ptr<data::GlobalSampler> sampler_;
  std::unique_ptr<Trace> trace_;
  std::size_t eval_name_ = 0;  // the evaluation's span name in the trace
  std::filesystem::path run_dir_path_;
  std::unique_ptr<RunDirectory> run_dir_;  // rank 0 only
  nlohmann::json manifest_;
  Watchdog watchdog_;
  std::unique_ptr<coll::Hierarchy> hierarchy_;  // --collective hierarchical; outlives step_
  ReducerOptions reducer_;
  std::unique_ptr<BucketPlan> buckets_;           // the gradient sum's, for the records
  std::unique_ptr<StepInstruments> instruments_;  // the step's times, trace, watchdog, faults
  std::unique_ptr<DataParallelStep> step_;

  TrainingProgress progress_;
  std::unique_ptr<TrainingState> state_;
  std::unique_ptr<Checkpointer> checkpointer_;
  std::unique_ptr<SavePolicy> saves_;
  std::unique_ptr<MetricsLog> metrics_;
  std::unique_ptr<Progress> bar_;
  StopSignals stop_signals_;  // SIGTERM / SIGUSR1: save at the next agreed boundary, exit 0
  TrainResults results_;
  std::uint64_t start_step_ = 0;
  double warm_compute_s_ = 0.0;  // this attempt's steps after its first (which pays set-up)
  std::uint64_t warm_steps_ = 0;
  double last_loss_ = NAN;
  double start_s_ = 0.0;
  bool stopped_by_signal_ = false;
};

TrainingRun::TrainingRun(const TrainConfig& config, Sequential& model, const Shape& input_shape,
                         data::DataSplits data, const coll::Communicator& comm,
                         Watchdog::Action on_stuck, const FaultInjector& faults)
    : config_(config),
      model_(model),
      comm_(comm),
      faults_(faults),
      leader_(comm.rank() == 0),
      // Rank 0 alone writes; every rank knows the path (--resume requires an explicit --run-dir).
      run_dir_path_(!config.run_dir.empty() ? config.run_dir
                    : leader_               ? default_run_dir(config.model)
                                            : ""),
      watchdog_(comm.rank(), config.watchdog_s > 0 ? config.watchdog_s : kWatchdogFloorS,
                record_then(std::move(on_stuck), comm.rank(), run_dir_path_)) {
  facts_.config = &config_;
  facts_.world = comm_.size();
  facts_.ranks_per_node = comm_.ranks_per_node();
  // BLAS threads: cores per node / ranks per node unless asked.
  facts_.cores = blas::available_cores();
  // --reduction exact: one thread, so that a product's bits do not depend on the thread count
  // OpenBLAS would pick for this N (exact_step.hpp; options.cpp refuses more).
  facts_.blas_threads = config_.reduction == Reduction::kExact ? 1
                        : config_.blas_threads > 0
                            ? config_.blas_threads
                            : std::max(1, facts_.cores / std::max(1, facts_.ranks_per_node));
  blas::set_threads(facts_.blas_threads);
  blas::set_kernels(blas::resolve_kernels(name_of(config_.gemm)));
  take_data(std::move(data));
  plan_batches_and_steps();
  prepare_model(input_shape);
  build_step();
  // A refused resume (another model, other data, no valid checkpoint) stops every rank before
  // the run directory's manifest and config are rewritten.
  const std::optional<std::filesystem::path> resumed_from = load_checkpoint();
  // Only rank 0 writes it, but a refusal (a folder that holds another run) stops every rank.
  load_agreed(comm_, [&] {
    if (leader_) open_run_directory();
    return 0;
  });
  continue_from(resumed_from);
}

void TrainingRun::say(const std::string& line) const {
  if (leader_ && !config_.quiet) std::printf("%s\n", line.c_str());
}

void TrainingRun::take_data(data::DataSplits data) {
  // Before any evaluation, no MSE is the best yet (a resume restores the stored best).
  if (data.info.regression()) progress_.best_test_metric = INFINITY;
  results_.regression = data.info.regression();
  train_ = std::move(data.train);
  test_ = std::move(data.test);
  facts_.data = std::move(data.info);
  facts_.train_samples = train_.size();
  facts_.test_samples = test_.size();
}

void TrainingRun::plan_batches_and_steps() {
  const auto world = static_cast<std::size_t>(comm_.size());
  facts_.global_batch = config_.global_batch;
  facts_.local_batches =
      config_.local_batches.empty()
          ? data::near_equal_split(config_.global_batch, world)
          : data::parse_local_batches(config_.local_batches, world, config_.global_batch);
  facts_.largest_local_batch =
      *std::max_element(facts_.local_batches.begin(), facts_.local_batches.end());
  facts_.reduction = config_.reduction;
  sampler_ =
      std::make_unique<data::GlobalSampler>(config_.seed, train_.size(), config_.global_batch);
  facts_.steps_per_epoch = sampler_->steps_per_epoch();
  facts_.total_steps =
      config_.steps > 0
          ? config_.steps
          : static_cast<std::uint64_t>(std::ceil(config_.epochs * double(facts_.steps_per_epoch)));
  facts_.eval_every = config_.eval_every > 0 ? config_.eval_every : facts_.steps_per_epoch;
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
  model_.plan(input_shape, std::max<std::size_t>({facts_.largest_local_batch, kEvalChunk, 1}));
  if (num_elements(model_.output_shape()) != data.outputs())
    throw UsageError(fmt::format("model {} has {} outputs, but {} holds {} {}", config_.model,
                                 num_elements(model_.output_shape()), data.path, data.outputs(),
                                 data.regression() ? "regression targets" : "classes"));
  model_.initialize(config_.seed);
  if (comm_.size() > 1) coll::broadcast(comm_, model_.parameters().values(), 0);
  facts_.model = &model_;
  facts_.has_batch_norm = model_.has_batch_norm();
  facts_.sync_bn =
      comm_.size() > 1 && (config_.sync_bn == SyncBn::kOn ||
                           (config_.sync_bn == SyncBn::kAuto && facts_.has_batch_norm));
  facts_.parameters = model_.parameters().num_elements();
}

// The bucket plan and its reducer, the trace (clocks aligned to rank 0's) and the step.
void TrainingRun::build_step() {
  if (facts_.reduction == Reduction::kExact) check_exact_layers(model_);
  const int world = comm_.size();
  const std::size_t grad_bytes = model_.parameters().num_elements() * sizeof(float);
  facts_.ring_fit = ring_fit_for_buckets(config_.cost_model, world, coll::oversubscribed(comm_));
  facts_.bucket_choice = config_.bucket_bytes > 0
                             ? coll::BucketChoice{config_.bucket_bytes, "given by --bucket-bytes"}
                             : default_bucket_choice(facts_.ring_fit, world, grad_bytes,
                                                     config_.overlap != Overlap::kOff);
  reducer_ = reducer_options(config_, facts_.bucket_choice.cap_bytes, facts_.blas_threads);
  if (config_.collective == CollectiveKind::kHierarchical) {
    hierarchy_ = std::make_unique<coll::Hierarchy>(comm_, config_.ranks_per_host);  // collective
    reducer_.ring.hierarchy = hierarchy_.get();
    facts_.hosts = hierarchy_->layout().hosts;
  }

  const coll::ClockOffset clock = coll::measure_clock_offset(comm_, now_s);
  double origin[1] = {leader_ ? now_s() : 0.0};  // rank 0's start, on rank 0's clock
  if (world > 1) coll::allreduce_sum(comm_, std::span<double>(origin));
  // --reduction exact: a pass and its adds per micro-batch of the largest local batch
  const std::size_t micro_batches =
      facts_.largest_local_batch / std::max<std::size_t>(config_.exact_micro_batch, 1) + 1;
  const std::size_t exact_passes =
      facts_.reduction == Reduction::kExact ? micro_batches * (model_.parameters().count() + 2) : 0;
  const std::size_t events_per_step =
      2 * model_.num_layers() + 3 * model_.parameters().count() +
      model_.parameters().num_elements() / reducer_.update_piece_elements + exact_passes + 16;
  trace_ = std::make_unique<Trace>(config_.trace_steps, events_per_step, origin[0], clock.offset_s,
                                   clock.uncertainty_s);
  eval_name_ = trace_->name("evaluation");

  StepPlan plan;
  plan.reduction = facts_.reduction;
  plan.local_batches = facts_.local_batches;
  plan.schedule = config_.schedule_config(facts_.total_steps);
  plan.sync_bn = facts_.sync_bn;
  plan.alternate_overlap = config_.overlap == Overlap::kAlternate;
  plan.seed = config_.seed;
  plan.exact_micro_batch = config_.exact_micro_batch;
  instruments_ = std::make_unique<StepInstruments>(
      model_, config_.trace_steps > 0 ? trace_.get() : nullptr, watchdog_, faults_, comm_.rank(),
      facts_.reduction == Reduction::kExact);
  step_ = std::make_unique<DataParallelStep>(comm_, model_, train_, std::move(plan), reducer_,
                                             config_.optimizer_config(), *instruments_);
  buckets_ = std::make_unique<BucketPlan>(model_.parameters().entries(), reducer_.cap_bytes);
  facts_.reducer = &reducer_;
  facts_.buckets = buckets_.get();
  facts_.optimizer = step_->optimizer().describe();
  facts_.state_bytes = optimizer_state_bytes(comm_, step_->optimizer(), step_->shard());
}

void TrainingRun::open_run_directory() {
  run_dir_ =
      std::make_unique<RunDirectory>(run_dir_path_, /*allow_existing=*/!config_.resume.empty());
  facts_.run_dir = run_dir_->path().string();
  manifest_ = make_manifest(facts_);
  // A signed run stays signed: a resume without the key is refused (load_checkpoint).
  manifest_["checkpoints_signed"] = checkpointer_->signs();
  manifest_["results"] = TrainResults{}.to_json();
  run_dir_->write_manifest(manifest_);
  write_file_atomically(run_dir_->path() / "config.toml", config_.to_toml());
  for (const std::string& line : banner_lines(facts_)) say(line);
  warn_if_wrong_reduction(facts_.reduction);
}

// The training state and, with --resume, the checkpoint it continues from (nothing yet written).
std::optional<std::filesystem::path> TrainingRun::load_checkpoint() {
  state_ = std::make_unique<TrainingState>(TrainingState{model_, step_->optimizer(), *sampler_,
                                                         progress_, config_.seed, &step_->shard(),
                                                         &step_->feedback()});
  checkpointer_ = std::make_unique<Checkpointer>(comm_, run_dir_path_ / "checkpoints", config_.keep,
                                                 checkpoint_config(config_, facts_, model_).dump(),
                                                 config_.checkpoint_key, config_.zero_gather);
  if (config_.resume.empty()) return std::nullopt;
  load_agreed<UsageError>(comm_, [&] {
    refuse_unsigned_resume(run_dir_path_, checkpointer_->signs());
    return 0;
  });
  return checkpointer_->resume(*state_, config_.resume, [&](const std::string& m) { say(m); });
}

// What depends on the step we start at: the resume's records, the save policy, the logs.
void TrainingRun::continue_from(const std::optional<std::filesystem::path>& from) {
  if (!config_.resume.empty()) {
    if (from)
      say(fmt::format("resumed from {} at step {} (epoch {}, position {})", from->string(),
                      progress_.step, sampler_->state().epoch, sampler_->state().position));
    else
      say("no checkpoint to resume from in " + checkpointer_->dir().string() +
          ": starting at step 0");
    if (run_dir_) {
      // Records of steps after the checkpoint were logged by the killed attempt.
      run_dir_->truncate_metrics_after(progress_.step);
      run_dir_->append_metrics(
          {{"step", progress_.step},
           {"resumed_from", from ? nlohmann::json(from->filename().string()) : nlohmann::json()}});
    }
  }
  start_step_ = progress_.step;
  SavePolicyOptions saves;
  saves.every = config_.checkpoint_every;
  saves.mtbf_s = config_.mtbf_s;
  if (config_.node_mtbf_s > 0) saves.mtbf_s = job_mtbf_from_hosts();
  saves.first_auto_save_steps = config_.log_every;
  saves.max_failed_saves = config_.max_failed_saves;
  saves.async = config_.checkpoint_async == OnOff::kOn;
  saves_ = std::make_unique<SavePolicy>(comm_, *checkpointer_, saves, start_step_, faults_,
                                        watchdog_, trace_.get(), run_dir_.get(),
                                        [this](const std::string& m) { say(m); });
  metrics_ = std::make_unique<MetricsLog>(comm_, run_dir_.get(), facts_.steps_per_epoch);
  bar_ = std::make_unique<Progress>(stdout, facts_.total_steps, config_.log_every,
                                    leader_ && !config_.quiet);
  // A resume of a finished run has nothing left to do.
  results_.steps = progress_.step;
  results_.best_test_metric = progress_.best_test_metric;
  results_.final_test_metric = progress_.final_test_metric;
}

TrainResults TrainingRun::train() {
  start_s_ = now_s();
  for (std::uint64_t step = start_step_; step < facts_.total_steps; ++step) {
    const data::GlobalBatch batch = sampler_->next_batch();
    const StepOutcome outcome = step_->run(step, batch);
    count_skipped(step, outcome.applied);
    account(outcome, step);
    faults_.after_step(comm_.rank(), progress_.step);
    if (after_step(step)) break;
  }
  finish(start_s_);
  return results_;
}

// --node-mtbf: the job's MTBF over the hosts this run spans, printed and recorded.
double TrainingRun::job_mtbf_from_hosts() {
  const JobMtbf job = job_mtbf(comm_, config_.node_mtbf_s);
  say(fmt::format("job MTBF mu = node MTBF {:.6g} s / {} host{} = {:.6g} s", job.node_mtbf_s,
                  job.hosts, job.hosts == 1 ? "" : "s", job.mtbf_s));
  if (run_dir_)
    run_dir_->append_metrics(
        {{"step", progress_.step},
         {"job_mtbf",
          {{"node_mtbf_s", job.node_mtbf_s}, {"hosts", job.hosts}, {"mtbf_s", job.mtbf_s}}}});
  return job.mtbf_s;
}

// Every rank skipped the step together (a gradient was not finite somewhere); too many in
// a row means the run diverged.
void TrainingRun::count_skipped(std::uint64_t step, bool applied) {
  if (applied) {
    progress_.nonfinite_in_a_row = 0;
    return;
  }
  stop_if_data_failed(step_->data_failure());
  ++progress_.skipped_steps;
  if (++progress_.nonfinite_in_a_row > config_.max_nonfinite_steps)
    throw AgreedError(fmt::format(
        "step {}: the gradient was not finite (NaN or inf) in {} consecutive steps; stopping. "
        "Lower --lr, or raise --max-nonfinite-steps",
        step, progress_.nonfinite_in_a_row));
  bar_->message(
      fmt::format("step {}: gradient not finite on some rank: step skipped on all ranks", step));
}

// Collective. A rank that could not read its samples poisoned the step; every rank learns it
// here (only after a skipped step: no cost otherwise) and all stop with that rank's message.
// The run ends without a save: the last durable checkpoint is the restart point.
void TrainingRun::stop_if_data_failed(const std::string& failure) {
  double failed[1] = {failure.empty() ? 0.0 : 1.0};
  coll::allreduce_sum(comm_, std::span<double>(failed));
  if (failed[0] == 0.0) return;
  std::string message = failure;
  if (comm_.size() > 1)
    for (const std::string& text : coll::gather_text(comm_, failure))
      if (!text.empty() && message.empty()) message = text;
  throw AgreedError(message.empty() ? "reading the data failed on another rank" : message);
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

void TrainingRun::account(const StepOutcome& outcome, std::uint64_t step) {
  const StepTimes& times = instruments_->times();
  metrics_->add(times, outcome.loss_sum, outcome.local_samples, progress_);
  progress_.useful_compute_s += times.step_s;
  if (step > start_step_) {
    warm_compute_s_ += times.step_s;
    ++warm_steps_;
  }
  progress_.samples_seen += outcome.global_samples;
  progress_.step = step + 1;
}

// After step `step` (0-based): replica check, metrics, evaluation, checkpoint, progress.
// Returns true when the run stops early (a signal, or the target reached).
bool TrainingRun::after_step(std::uint64_t step) {
  const std::uint64_t done = step + 1;
  const std::uint64_t total = facts_.total_steps;
  if (done % facts_.steps_per_epoch == 0) check_mapped_data();
  if ((config_.replica_check_every > 0 && done % config_.replica_check_every == 0) ||
      done == total) {
    watchdog_.enter("replica check", step);
    check_replicas(comm_, model_.parameters(), "parameter", done);
    // Per-rank BatchNorm keeps per-rank running statistics by definition: not replicas.
    if (facts_.sync_bn || !facts_.has_batch_norm)
      check_replicas(comm_, model_.buffers(), "buffer", done);
    watchdog_.leave();
  }
  bool stop_now = false;
  if (done % config_.log_every == 0 || done == total) {
    const WindowSummary window =
        metrics_->close(done, step_->learning_rate(step), stop_signals_.requested(),
                        model_.parameters().values(), progress_);
    last_loss_ = window.loss;
    stop_now = window.stop_requested && done < total;
    if (config_.watchdog_s <= 0)  // the automatic limit follows the measured step time
      watchdog_.set_limit(
          std::max(kWatchdogFloorS, 100.0 * progress_.useful_compute_s / double(done)));
  }
  if (config_.evaluate && (done % facts_.eval_every == 0 || done == total)) evaluate_now(done);
  const bool last = done == total || results_.target_reached;
  checkpointer_->poll();  // the messages of a save in flight (--zero-gather writer)
  if (stop_now || last || saves_->due(done)) {
    const double t0 = now_s();
    saves_->save(*state_, done, sampler_->state().epoch,
                 stop_now ? SavePolicy::Reason::kSignal
                 : last   ? SavePolicy::Reason::kEnd
                          : SavePolicy::Reason::kInterval,
                 planning_step_s());
    metrics_->pause(now_s() - t0);  // save time is not step time
  }
  bar_->update(done, fmt::format("loss {:.4f}  lr {:.4g}", last_loss_, step_->learning_rate(step)));
  results_.steps = done;
  stopped_by_signal_ = stop_now;
  return stop_now || results_.target_reached;
}

void TrainingRun::evaluate_now(std::uint64_t done) {
  const double t0 = now_s();
  watchdog_.enter("evaluation", done - 1);
  const Evaluation e = evaluate(comm_, model_, test_, config_.seed);
  if (config_.trace_steps > 0 && trace_->recording()) trace_->span(eval_name_, 0, t0, now_s());
  watchdog_.leave();
  const Metric metric = metric_for(test_.regression());
  const double value = metric.of(e);
  results_.final_test_metric = progress_.final_test_metric = value;
  if (metric.reached(value, progress_.best_test_metric)) progress_.best_test_metric = value;
  results_.best_test_metric = progress_.best_test_metric;
  if (run_dir_) {
    run_dir_->append_metrics({{"step", done},
                              {metric.key, value},
                              {"test_loss", e.loss},
                              {"wall_s", now_s() - start_s_}});
    bar_->message(fmt::format("step {:>6}  epoch {:5.2f}  loss {:.4f}  {} {:.4g}", done,
                              double(done) / double(facts_.steps_per_epoch), last_loss_,
                              metric.label, value));
  }
  if (config_.target > 0.0 && metric.reached(value, config_.target) && !results_.target_reached) {
    results_.target_reached = true;
    results_.steps_to_target = done;
    results_.time_to_target_s = now_s() - start_s_;
  }
  metrics_->pause(now_s() - t0);  // evaluation time is not step time
}

// The step time the Young/Daly plan converts τ with: this attempt's mean without its first
// step (it pays for first touches and connection set-up), else the mean over the state.
double TrainingRun::planning_step_s() const {
  if (warm_steps_ > 0) return warm_compute_s_ / double(warm_steps_);
  return progress_.useful_compute_s / double(std::max<std::uint64_t>(1, progress_.step));
}

void TrainingRun::finish(double start_s) {
  bar_->finish();
  if (config_.trace_steps > 0) {
    std::vector<std::string> lanes = {"compute", "agree"};
    const auto& buckets = buckets_->buckets();
    for (std::size_t b = 0; b < buckets.size(); ++b)
      lanes.push_back(fmt::format("bucket {} ({} floats)", b, buckets[b].elements));
    write_trace(comm_, *trace_, lanes, run_dir_path_ / "trace.json");
  }
  results_.skipped_steps = progress_.skipped_steps;
  results_.wall_s = now_s() - start_s;
  results_.mean_step_s =
      progress_.step > 0 ? progress_.useful_compute_s / double(progress_.step) : 0.0;
  results_.samples_per_s =
      results_.mean_step_s > 0 ? double(facts_.global_batch) / results_.mean_step_s : 0.0;
  if (!run_dir_) return;
  manifest_["results"] = results_.to_json();
  run_dir_->write_manifest(manifest_);
  if (stopped_by_signal_)
    say(
        fmt::format("stopped by a signal at step {}: checkpoint saved; resume with --resume auto "
                    "--run-dir {}",
                    results_.steps, run_dir_path_.string()));
  say(fmt::format(
      "done: {} steps in {:.1f} s, {:.0f} samples/s, {} {:.4g} (best {:.4g}){}", results_.steps,
      results_.wall_s, results_.samples_per_s, metric_for(results_.regression).label,
      results_.final_test_metric, results_.best_test_metric,
      results_.target_reached
          ? fmt::format(", target {} reached at step {}", config_.target, results_.steps_to_target)
          : std::string()));
}

}  // namespace

void check_loss(const TrainConfig& config, const data::DataInfo& data, const std::string& where) {
  const bool regression = data.regression();
  if (config.loss == LossChoice::kMse && !regression)
    throw UsageError(fmt::format(
        "--loss mse: {} holds integer class labels (y of dtype {}); mse needs float32 targets "
        "(store y as float32 for regression, or use --loss cross-entropy)",
        where, data.arrays.size() > 1 ? to_string(data.arrays[1].dtype) : "uint8"));
  if (config.loss == LossChoice::kCrossEntropy && regression)
    throw UsageError(fmt::format(
        "--loss cross-entropy: {} holds float32 regression targets ({} per sample); "
        "cross-entropy needs integer class labels (use --loss mse, or store y as int64 labels)",
        where, data.num_targets));
  if (!regression && config.target > 1.0)
    throw UsageError(fmt::format(
        "--target {}: {} holds class labels, whose metric is the test accuracy, in [0, 1]",
        config.target, where));
}

nlohmann::json TrainResults::to_json() const {
  const std::string key = metric_for(regression).key;  // "test_accuracy" or "test_mse"
  return {
      {"steps", steps},
      {"metric", key},
      {"final_" + key, final_test_metric},
      // +inf (no evaluation yet on regression data) is written as null
      {"best_" + key,
       std::isfinite(best_test_metric) ? nlohmann::json(best_test_metric) : nlohmann::json()},
      {"target_reached", target_reached},
      {"steps_to_target", target_reached ? nlohmann::json(steps_to_target) : nlohmann::json()},
      {"time_to_target_s", target_reached ? nlohmann::json(time_to_target_s) : nlohmann::json()},
      {"mean_step_s", mean_step_s},
      {"samples_per_s", samples_per_s},
      {"wall_s", wall_s},
      {"skipped_steps", skipped_steps}};
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

TrainResults Trainer::run() {
  Watchdog::Action on_stuck =
      watchdog_action_ ? watchdog_action_ : Watchdog::Action(default_watchdog_action);
  // A resume reads its checkpoint in a reader child: started now, it is ready by then.
  if (!config_.resume.empty()) checkpoint::prepare_contained_reader();
  // A defect of the user's data is bad input: every rank agrees, exit 2, nothing written.
  data::DataSplits data = load_agreed<UsageError>(comm_, [&] {
    data::DataSplits splits =
        data::load_data(config_.data_dir, {.memory_limit_bytes = config_.data_memory_limit});
    check_loss(config_, splits.info, splits.info.path);
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
