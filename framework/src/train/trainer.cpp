// The training loop (see trainer.hpp for the step recipe).
#include "ringtrain/framework/train/trainer.hpp"

#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <thread>

#include "ringtrain/checkpoint/commit.hpp"
#include "ringtrain/checkpoint/interval.hpp"
#include "ringtrain/collectives/clock.hpp"
#include "ringtrain/collectives/ring.hpp"
#include "ringtrain/collectives/small.hpp"
#include "ringtrain/collectives/wait.hpp"
#include "ringtrain/framework/blas.hpp"
#include "ringtrain/framework/data/dataset.hpp"
#include "ringtrain/framework/data/sampler.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/loss.hpp"
#include "ringtrain/framework/optim/optimizer.hpp"
#include "ringtrain/framework/optim/schedule.hpp"
#include "ringtrain/framework/train/bucket_default.hpp"
#include "ringtrain/framework/train/checkpointer.hpp"
#include "ringtrain/framework/train/gradient_reducer.hpp"
#include "ringtrain/framework/train/progress.hpp"
#include "ringtrain/framework/train/reduction.hpp"
#include "ringtrain/framework/train/replica_check.hpp"
#include "ringtrain/framework/train/run_directory.hpp"
#include "ringtrain/framework/train/step_account.hpp"
#include "ringtrain/framework/train/stop_signals.hpp"
#include "ringtrain/framework/train/trace.hpp"
#include "ringtrain/framework/train/training_state.hpp"
#include "ringtrain/framework/train/watchdog.hpp"

namespace ringtrain {
namespace {

namespace coll = collectives;

double now_s() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

// SyncBatchNorm's cross-rank sum: one small allreduce of doubles. It runs during backward,
// while gradient rings may be in flight: it holds the reducer's MPI lock (gradient_reducer.hpp).
class CommSum final : public CrossRankSum {
 public:
  CommSum(const coll::Communicator& comm, std::mutex& mpi_mutex) : comm_(comm), mutex_(mpi_mutex) {}
  void sum(std::span<double> values) const override {
    std::lock_guard lock(mutex_);
    coll::allreduce_sum(comm_, values);
  }

 private:
  const coll::Communicator& comm_;
  std::mutex& mutex_;
};

// Runs `load` on every rank; if it failed anywhere, every rank throws the same kind of
// error, so no rank is left waiting in a collective for one that gave up.
template <typename Load>
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
    if (!message.empty()) throw AgreedError(message);
    throw AgreedError("loading failed on another rank (see its message)");
  }
  return value;
}

std::string default_run_dir(const std::string& model) {
  const std::time_t t = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&t));
  return "runs/" + model + "-" + stamp;
}

std::string mpi_library_version() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(version, &length);
  std::string v(version, static_cast<std::size_t>(length));
  return v.substr(0, v.find('\n'));
}

}  // namespace

nlohmann::json TrainResults::to_json() const {
  return {
      {"steps", steps},
      {"final_test_accuracy", final_test_accuracy},
      {"best_test_accuracy", best_test_accuracy},
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
    : config_(std::move(config)), model_(std::move(model)), input_shape_(input_shape), comm_(comm) {
  config_.validate(comm_.size());
  if (!model_) throw Error("Trainer needs a model");
}

const Sequential& Trainer::model() const {
  return *model_;
}

TrainResults Trainer::run() {
  const int world = comm_.size();
  const int rank = comm_.rank();
  const bool leader = rank == 0;
  std::FILE* out = stdout;
  auto say = [&](const std::string& line) {
    if (leader && !config_.quiet) std::fprintf(out, "%s\n", line.c_str());
  };

  // --- threads: cores per node / ranks per node unless asked (DESIGN §4) ---
  const int cores = blas::available_cores();
  const int threads = config_.blas_threads > 0
                          ? config_.blas_threads
                          : std::max(1, cores / std::max(1, comm_.ranks_per_node()));
  blas::set_threads(threads);
  blas::set_kernels(blas::resolve_kernels(name_of(config_.gemm)));

  // --- data ---
  const std::string data_dir =
      config_.data_dir.empty() ? data::default_data_dir().string() : config_.data_dir;
  auto train =
      load_agreed(comm_, [&] { return data::load_fashion_mnist(data_dir, data::Split::kTrain); });
  auto test =
      load_agreed(comm_, [&] { return data::load_fashion_mnist(data_dir, data::Split::kTest); });

  // --- batches ---
  const std::size_t global_batch = config_.global_batch;
  const std::vector<std::size_t> local_batches =
      config_.local_batches.empty()
          ? data::near_equal_split(global_batch, static_cast<std::size_t>(world))
          : data::parse_local_batches(config_.local_batches, static_cast<std::size_t>(world),
                                      global_batch);
  const std::size_t max_local = *std::max_element(local_batches.begin(), local_batches.end());
  const Reduction reduction = config_.reduction;

  // --- model ---
  Sequential& model = *model_;
  constexpr std::size_t kEvalChunk = 256;
  model.plan(input_shape_, std::max<std::size_t>({max_local, kEvalChunk, 1}));
  model.initialize(config_.seed);
  // Rank 0's parameters are the truth; every rank starts from them.
  if (world > 1) coll::broadcast(comm_, model.parameters().values(), 0);

  const bool has_bn = model.has_batch_norm();
  const bool sync_bn =
      world > 1 && (config_.sync_bn == SyncBn::kOn || (config_.sync_bn == SyncBn::kAuto && has_bn));

  // --- optimizer and schedule ---
  OptimizerConfig opt;
  opt.name = name_of(config_.optimizer);
  opt.momentum = config_.momentum;
  opt.nesterov = config_.nesterov;
  opt.weight_decay = config_.weight_decay;
  opt.beta1 = config_.beta1;
  opt.beta2 = config_.beta2;
  opt.eps = config_.eps;

  data::GlobalSampler sampler(config_.seed, train.size(), global_batch);
  const std::uint64_t steps_per_epoch = sampler.steps_per_epoch();
  const std::uint64_t total_steps =
      config_.steps > 0
          ? config_.steps
          : static_cast<std::uint64_t>(std::ceil(config_.epochs * double(steps_per_epoch)));
  const ScheduleConfig schedule = config_.schedule_config(total_steps);
  const std::uint64_t eval_every = config_.eval_every > 0 ? config_.eval_every : steps_per_epoch;

  // --- gradient buckets, their reducer, and the trace (clocks aligned to rank 0's) ---
  const std::size_t grad_bytes = model.parameters().num_elements() * sizeof(float);
  const RingFit ring_fit =
      ring_fit_for_buckets(config_.cost_model, world, coll::oversubscribed(comm_));
  const coll::BucketChoice bucket_choice =
      config_.bucket_bytes > 0
          ? coll::BucketChoice{config_.bucket_bytes, "given by --bucket-bytes"}
          : default_bucket_choice(ring_fit, world, grad_bytes, config_.overlap != Overlap::kOff);
  coll::RingOptions ring;
  ring.algorithm =
      config_.collective == CollectiveKind::kMpi ? coll::Algorithm::kMpi : coll::Algorithm::kRing;
  ReducerOptions reducer_options;
  reducer_options.cap_bytes = bucket_choice.cap_bytes;
  const bool alternate = config_.overlap == Overlap::kAlternate;  // on in even steps, off in odd
  reducer_options.overlap = config_.overlap != Overlap::kOff;
  reducer_options.update_per_bucket = config_.bucket_update == OnOff::kOn;
  reducer_options.driver = config_.progress;
  reducer_options.ring = ring;
  if (config_.segments_in_flight > 0)
    reducer_options.overlap_segments_in_flight = config_.segments_in_flight;
  reducer_options.zero = config_.zero == 1;
  const coll::ClockOffset clock = coll::measure_clock_offset(comm_, now_s);
  double origin[1] = {leader ? now_s() : 0.0};  // rank 0's start, on rank 0's clock
  if (world > 1) coll::allreduce_sum(comm_, std::span<double>(origin));
  const std::size_t layers = model.num_layers();
  Trace trace(config_.trace_steps,
              2 * layers + 3 * model.parameters().count() +
                  model.parameters().num_elements() / reducer_options.update_piece_elements + 16,
              origin[0], clock.offset_s, clock.uncertainty_s);
  Trace* tracing = config_.trace_steps > 0 ? &trace : nullptr;
  GradientReducer reducer(comm_, model.parameters(), reducer_options, tracing);
  const bool per_bucket_update =  // ZeRO-1 updates bucket by bucket in both overlap modes
      (reducer_options.overlap && reducer_options.update_per_bucket) || reducer_options.zero;
  // --zero 1: the optimizer's state covers only this rank's chunk of each bucket.
  auto optimizer = make_optimizer(opt, reducer.shard().elements());
  const OptimizerStateBytes state_bytes = optimizer_state_bytes(comm_, *optimizer, reducer.shard());
  CommSum comm_sum(comm_, reducer.mpi_mutex());
  std::vector<std::size_t> forward_names, backward_names;
  for (std::size_t i = 0; i < layers; ++i) {
    const std::string path = fmt::format("layers.{}.{}", i, model.layer(i).kind());
    forward_names.push_back(trace.name("forward " + path));
    backward_names.push_back(trace.name("backward " + path));
  }
  const std::size_t data_name = trace.name("data"), loss_name = trace.name("loss");
  const std::size_t optimizer_name = trace.name("optimizer");
  const std::size_t save_name = trace.name("checkpoint save"), eval_name = trace.name("evaluation");
  std::vector<std::string> lanes = {"compute", "agree"};
  for (std::size_t b = 0; b < reducer.buckets().size(); ++b)
    lanes.push_back(fmt::format("bucket {} ({} floats)", b, reducer.buckets()[b].elements));

  // --- run directory and banner (rank 0) ---
  // Rank 0 alone writes; every rank knows the path (--resume requires an explicit --run-dir).
  const std::filesystem::path run_dir_path = !config_.run_dir.empty() ? config_.run_dir
                                             : leader ? default_run_dir(config_.model)
                                                      : "";
  std::unique_ptr<RunDirectory> run_dir;
  nlohmann::json manifest;
  if (leader) {
    run_dir =
        std::make_unique<RunDirectory>(run_dir_path, /*allow_existing=*/!config_.resume.empty());
    manifest["config"] = config_.to_json();
    manifest["world_size"] = world;
    manifest["local_batches"] = local_batches;
    manifest["reduction"] = {{"convention", to_string(reduction)},
                             {"scale", reduction == Reduction::kSumScaled ? "1/B" : "1/(b_r*N)"},
                             {"samples_per_step", global_batch},
                             {"collective", world > 1 ? "sum" : "none (N = 1)"},
                             {"description", describe(reduction)}};
    manifest["batch_norm"] = {{"present", has_bn},
                              {"statistics", sync_bn ? "global (SyncBatchNorm over all ranks)"
                                                     : (world > 1 ? "per rank (local batch only)"
                                                                  : "global (one process)")}};
    manifest["blas_threads"] = threads;
    manifest["blas_kernels"] = blas::core_report();
    manifest["gemm"] = blas::kernels_report();
    manifest["cores_per_node"] = cores;
    manifest["ranks_per_node"] = comm_.ranks_per_node();
    manifest["optimizer"] = optimizer->describe();
    manifest["optimizer_state"] = {
        {"zero", config_.zero},
        {"bytes_per_rank", state_bytes.per_rank},
        {"unsharded_bytes", state_bytes.unsharded},
        {"layout", config_.zero == 1 ? "ZeRO-1: rank r keeps state for chunk r of every "
                                       "gradient bucket (the ring's partition)"
                                     : "every rank keeps the state of every parameter"}};
    manifest["learning_rate_schedule"] = config_.describe_schedule(total_steps);
    manifest["steps_per_epoch"] = steps_per_epoch;
    manifest["total_steps"] = total_steps;
    manifest["parameters"] = model.parameters().num_elements();
    // What MLPerf asks a run to record, beside the resolved config.
    manifest["target"] = {
        {"metric", "top-1 accuracy on the full Fashion-MNIST test set (10,000 images)"},
        {"value",
         config_.target_accuracy > 0 ? nlohmann::json(config_.target_accuracy) : nlohmann::json()}};
    manifest["evaluation"] = {
        {"every_steps", config_.evaluate ? nlohmann::json(eval_every) : nlohmann::json()},
        {"method", "test set split near-equally over ranks, correct counts summed exactly"}};
    manifest["stopping_rule"] =
        config_.target_accuracy > 0
            ? fmt::format(
                  "stop at the first evaluation with test accuracy >= {}, else after {} steps",
                  config_.target_accuracy, total_steps)
            : fmt::format("stop after {} steps", total_steps);
    manifest["data_order"] = fmt::format(
        "epoch e visits the training set in the permutation of (seed {}, e) from a counter-based "
        "generator, independent of the number of ranks; step s takes positions [s*B, (s+1)*B), "
        "the last batch of an epoch may be short; rank r takes its slice of local batches",
        config_.seed);
    manifest["batches"] = {{"global", global_batch}, {"local", local_batches}};
    manifest["seed"] = config_.seed;
    manifest["versions"] = {
        {"ringtrain", RINGTRAIN_VERSION},
        {"source_revision", RINGTRAIN_SOURCE_REVISION},
        {"compiler", fmt::format("g++ {}.{}.{}", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__)},
        {"openblas", blas::config()},
        {"mpi", mpi_library_version()}};
    nlohmann::json bucket_sizes = nlohmann::json::array(), ready_layers = nlohmann::json::array();
    for (std::size_t b = 0; b < reducer.buckets().size(); ++b) {
      bucket_sizes.push_back(reducer.buckets()[b].elements * sizeof(float));
      ready_layers.push_back(reducer.ready_layer(b));
    }
    manifest["gradient_buckets"] = {
        {"cap_bytes", bucket_choice.cap_bytes},
        {"cap_reason", bucket_choice.reason},
        {"count", reducer.buckets().size()},
        {"bytes", bucket_sizes},
        {"ready_after_layer", ready_layers},
        {"order", "backward (bucket 0 holds the last layer's gradients)"},
        {"ring_fit",
         {{"alpha_s", ring_fit.model.alpha_s},
          {"bandwidth_Bps", ring_fit.model.bandwidth_Bps},
          {"source", ring_fit.source}}},
        {"overlap", name_of(config_.overlap)},
        {"progress", name_of(config_.progress)},
        {"segment_bytes", reducer_options.ring.segment_bytes},
        {"segments_in_flight",
         {{"overlapping", reducer_options.overlap_segments_in_flight},
          {"blocking", reducer_options.ring.segments_in_flight}}},
        {"update_per_bucket", per_bucket_update}};
    manifest["results"] = TrainResults{}.to_json();
    run_dir->write_manifest(manifest);
    write_file_atomically(run_dir->path() / "config.toml", config_.to_toml());

    say(fmt::format(
        "ringtrain: {} on {} rank(s), {} BLAS thread(s) per rank ({} cores, {} ranks on this node)",
        config_.model, world, threads, cores, comm_.ranks_per_node()));
    say("  " + blas::core_report());
    say("  " + blas::kernels_report());
    say(fmt::format("  data {}: {} train / {} test samples", data_dir, train.size(), test.size()));
    say(fmt::format("  global batch {} = local batches {}", global_batch,
                    fmt::join(local_batches, "+")));
    say(fmt::format("  reduction {}", describe(reduction)));
    if (reduction == Reduction::kMeanOfMeans)  // on stderr, also with --quiet: it is a wrong update
      std::fprintf(
          stderr,
          "ringtrain: WARNING: --reduction mean-of-means divides by the number of ranks, "
          "not by the samples: with unequal local batches the update is not the global "
          "batch's gradient (1 sample with mean gradient 2 and 3 with mean 6 give 4, not 5)\n");
    if (has_bn)
      say(fmt::format("  batch norm statistics: {}",
                      manifest["batch_norm"]["statistics"].get<std::string>()));
    say(fmt::format("  optimizer {}, {}", optimizer->describe(),
                    config_.describe_schedule(total_steps)));
    say(fmt::format("  optimizer state: {} bytes per rank (--zero {}{}; unsharded {} bytes)",
                    fmt::join(state_bytes.per_rank, " / "), config_.zero,
                    config_.zero == 1 ? ": each rank its chunk of every bucket" : "",
                    state_bytes.unsharded));
    if (world > 1) {
      say(fmt::format("  gradient buckets: {} of at most {} bytes ({}); overlap {}, progress {}{}",
                      reducer.buckets().size(), bucket_choice.cap_bytes, bucket_choice.reason,
                      name_of(config_.overlap), name_of(config_.progress),
                      per_bucket_update ? ", each bucket updated as soon as it is summed" : ""));
    }
    say(fmt::format("  {} steps ({} per epoch), evaluation every {} steps, run directory {}",
                    total_steps, steps_per_epoch, eval_every, run_dir->path().string()));
  }

  // --- buffers planned once: the loop allocates nothing ---
  const std::size_t pixels = num_elements(model.input_shape());
  const std::size_t classes = num_elements(model.output_shape());
  std::vector<float> images(max_local * pixels);
  std::vector<std::int32_t> labels(max_local);
  std::vector<std::uint64_t> sample_ids(max_local);
  std::vector<float> dlogits(max_local * classes);
  std::span<float> grads = model.parameters().grads();
  std::span<float> params = model.parameters().values();

  // Evaluation: the test set split near-equally over ranks, correct counts summed exactly.
  auto evaluate = [&]() -> std::pair<double, double> {
    const auto shares = data::near_equal_split(test.size(), static_cast<std::size_t>(world));
    const data::Slice mine = data::rank_slice(shares, static_cast<std::size_t>(rank), test.size());
    std::vector<std::uint64_t> ids(kEvalChunk);
    std::vector<float> x(kEvalChunk * pixels);
    std::vector<std::int32_t> y(kEvalChunk);
    double totals[2] = {0.0, 0.0};  // correct, loss sum
    StepContext ctx;
    ctx.training = false;
    ctx.seed = config_.seed;
    for (std::size_t begin = 0; begin < mine.count; begin += kEvalChunk) {
      const std::size_t n = std::min(kEvalChunk, mine.count - begin);
      for (std::size_t i = 0; i < n; ++i) ids[i] = mine.begin + begin + i;
      data::gather_batch(test, std::span(ids).first(n), std::span(x).first(n * pixels),
                         std::span(y).first(n));
      auto logits = model.forward(x, n, ctx);
      const LossResult r = softmax_cross_entropy_eval(logits, std::span(y).first(n), n, classes);
      totals[0] += double(r.correct);
      totals[1] += r.loss_sum;
    }
    if (world > 1) coll::allreduce_sum(comm_, std::span<double>(totals));
    return {totals[0] / double(test.size()), totals[1] / double(test.size())};
  };

  // Watchdog: automatic limit = 100 × the mean step time so far, at least 60 s.
  constexpr double kWatchdogFloorS = 60.0;
  // The message also goes to watchdog-rank<R>.txt in the run directory (where this rank knows
  // it): when a rank aborts, hydra may end the job before it has forwarded that rank's last
  // stderr line (pmodels/mpich#518), and the reason a job ended must not be lost.
  auto record_then_act = [rank, dir = run_dir_path,
                          act = watchdog_action_ ? watchdog_action_
                                                 : Watchdog::Action(default_watchdog_action)](
                             const std::string& message) {
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
  Watchdog watchdog(rank, config_.watchdog_s > 0 ? config_.watchdog_s : kWatchdogFloorS,
                    record_then_act);
  const TrainConfig::TestHooks& hooks = config_.hooks;

  // --- the training state, and a resume if asked ---
  TrainingProgress state_progress;
  const TrainingState state{model,          *optimizer,   sampler,
                            state_progress, config_.seed, &reducer.shard()};
  Checkpointer checkpointer(comm_, run_dir_path / "checkpoints", config_.keep,
                            config_.to_json().dump());
  if (!config_.resume.empty()) {
    const auto from =
        checkpointer.resume(state, config_.resume, [&](const std::string& m) { say(m); });
    if (from) {
      say(fmt::format("resumed from {} at step {} (epoch {}, position {})", from->string(),
                      state_progress.step, sampler.state().epoch, sampler.state().position));
      if (leader) {
        run_dir->truncate_metrics_after(state_progress.step);
        run_dir->append_metrics(
            {{"step", state_progress.step}, {"resumed_from", from->filename().string()}});
      }
    } else {
      say("no checkpoint to resume from in " + checkpointer.dir().string() +
          ": starting at step 0");
      if (leader) {
        run_dir->truncate_metrics_after(0);  // an attempt killed before its first save
        run_dir->append_metrics({{"step", 0}, {"resumed_from", nullptr}});
      }
    }
  }
  TrainingProgress& prog = state_progress;

  // --- checkpoint interval: fixed K, or Young/Daly from the measured save cost ---
  // Always a save at the end; periodic ones every K steps, or every τ = √(2·C·μ) of useful
  // compute (checkpoint/interval.hpp), first measured one --log-every after the start.
  const bool auto_interval = config_.checkpoint_every == "auto";
  checkpoint::SaveSchedule schedule_of_saves =
      auto_interval
          ? checkpoint::SaveSchedule::young_daly(config_.mtbf_s, prog.step, config_.log_every)
          : checkpoint::SaveSchedule::every(
                parse_size_list(config_.checkpoint_every, "--checkpoint-every").at(0));
  std::size_t saves_done = 0;
  // The step time the plan converts τ with: this attempt's mean, without its first step (it
  // pays for first touches and connection set-up, 100x a later step at N=2 here).
  double warm_compute_s = 0.0;
  std::uint64_t warm_steps = 0;
  auto save = [&](const char* why) {
    watchdog.enter("checkpoint save", prog.step);
    if (hooks.crash_phase > 0 && hooks.crash_step == prog.step && rank == 0)
      checkpoint::set_crash_hook([phase = hooks.crash_phase](int now) {
        if (now == phase) std::raise(SIGKILL);  // injected fault: die in this phase of the save
      });
    const double save_t0 = now_s();
    const double cost = checkpointer.save(state, sampler.state().epoch);
    trace.span(save_name, 0, save_t0, now_s(), -1.0, /*always=*/true);
    watchdog.leave();
    nlohmann::json record = {{"step", prog.step}, {"checkpoint_s", cost}, {"reason", why}};
    if (auto_interval) {
      // Every rank must plan the same interval: the save costs as much as its slowest rank,
      // and a step lasts as long as its slowest rank.
      const double step_s =
          warm_steps > 0 ? warm_compute_s / double(warm_steps)
                         : prog.useful_compute_s / double(std::max<std::uint64_t>(1, prog.step));
      double agreed[2] = {cost, step_s};
      coll::allreduce_max(comm_, std::span<double>(agreed));
      if (!hooks.save_cost_s.empty())  // test hooks: fixed cost and step time, a known plan
        agreed[0] = hooks.save_cost_s[std::min(saves_done, hooks.save_cost_s.size() - 1)];
      if (hooks.step_s > 0) agreed[1] = hooks.step_s;
      record["agreed_cost_s"] = agreed[0];
      if (leader) run_dir->append_metrics(record);
      if (const auto plan = schedule_of_saves.saved(prog.step, agreed[0], agreed[1])) {
        say(fmt::format(
            "checkpoint interval (Young/Daly): save cost C = {:.4g} s, MTBF mu = {:.6g} s, "
            "tau = sqrt(2 C mu) = {:.4g} s = {} steps of {:.4g} s; predicted overhead "
            "C/tau + tau/(2 mu) = {:.4g} %",
            plan->cost_s, plan->mtbf_s, plan->tau_s, plan->every_steps, plan->step_s,
            100.0 * plan->predicted_overhead));
        if (leader)
          run_dir->append_metrics({{"step", prog.step},
                                   {"interval_plan",
                                    {{"cost_s", plan->cost_s},
                                     {"mtbf_s", plan->mtbf_s},
                                     {"tau_s", plan->tau_s},
                                     {"step_s", plan->step_s},
                                     {"every_steps", plan->every_steps},
                                     {"predicted_overhead", plan->predicted_overhead}}}});
      }
    } else if (leader) {
      run_dir->append_metrics(record);
    }
    ++saves_done;
    return cost;
  };

  // SIGTERM / SIGUSR1 (Slurm's warning before preemption; hydra forwards both): save at the
  // next agreed step boundary and exit 0.
  StopSignals stop_signals;

  TrainResults results;
  results.steps = prog.step;  // a resume of a finished run has nothing left to do
  results.best_test_accuracy = prog.best_test_accuracy;
  results.final_test_accuracy = prog.final_test_accuracy;
  Progress progress(out, total_steps, config_.log_every, leader && !config_.quiet);
  StepWindow window_times;
  double window_start = now_s();
  double window_paused_s = 0.0;  // evaluations and saves inside the window: not step time

  // The hooks of a step, made once (a lambda turned into a std::function each step would
  // allocate); they read the step's state through these variables.
  double t_layer = 0.0;  // end of the previous layer (trace spans)
  bool traced = false;   // this step is recorded in the trace
  std::uint64_t current_step = 0;
  bool loss_finite = true;
  float lr = 0.0f;
  bool counted = false;  // optimizer->begin_step() done for this step
  StepTimes* step_times = nullptr;
  const std::size_t first_gradient_layer =
      model.parameters().count() > 0 ? model.parameters().entry(0).layer : 0;
  const std::function<void(std::size_t)> no_hook;
  const std::function<void()> poll_rings = [&] { reducer.poll(); };
  const std::function<void(std::size_t)> forward_done = [&](std::size_t i) {
    const double t = now_s();
    trace.span(forward_names[i], 0, t_layer, t);
    t_layer = t;
  };
  const std::function<void(std::size_t)> backward_done = [&](std::size_t i) {
    // A non-finite loss poisons the gradient before its bucket starts, so the sum carries it
    // and every rank skips the step (as does the NaN a test hook injects here).
    if (i == first_gradient_layer && !grads.empty() &&
        (!loss_finite || (hooks.nan_rank == rank && hooks.nan_step == current_step)))
      grads[0] = NAN;
    reducer.layer_done(i);
    if (traced) {
      const double t = now_s();
      trace.span(backward_names[i], 0, t_layer, t);
      t_layer = t;
    }
  };
  const UpdatePiece update_piece = [&](std::size_t offset, std::size_t count,
                                       std::size_t state_offset) {
    const double u0 = now_s();
    if (!counted) optimizer->begin_step();  // the step count advances only for applied steps
    counted = true;
    optimizer->update(state_offset, params.subspan(offset, count), grads.subspan(offset, count),
                      lr);
    const double u1 = now_s();
    step_times->optimizer_s += u1 - u0;
    if (traced) trace.span(optimizer_name, 0, u0, u1);
  };
  const double start = now_s();
  double last_loss = NAN;
  bool stopped_by_signal = false;

  const std::uint64_t start_step = prog.step;
  for (std::uint64_t step = start_step; step < total_steps; ++step) {
    StepTimes times;
    const double t0 = now_s();
    trace.begin_step(step);
    const bool overlap_step = reducer_options.overlap && !(alternate && step % 2 == 1);
    reducer.begin_step(overlap_step);
    const bool tracing_step = tracing && trace.recording();
    watchdog.enter("forward/backward", step);
    // 1. this step's global batch and this rank's slice of it
    const data::GlobalBatch batch = sampler.next_batch();
    const std::size_t batch_samples = batch.samples.size();
    const data::Slice mine =
        data::rank_slice(local_batches, static_cast<std::size_t>(rank), batch_samples);
    for (std::size_t i = 0; i < mine.count; ++i) sample_ids[i] = batch.samples[mine.begin + i];
    data::gather_batch(train, std::span(sample_ids).first(mine.count),
                       std::span(images).first(mine.count * pixels),
                       std::span(labels).first(mine.count));
    const double t_data = now_s();
    if (tracing_step) trace.span(data_name, 0, t0, t_data);

    // 2. forward, loss scaled by the convention, backward; each bucket's ring starts as soon
    //    as backward has written its last gradient (overlap on)
    StepContext ctx;
    ctx.training = true;
    ctx.seed = config_.seed;
    ctx.sample_ids = std::span(sample_ids).first(mine.count);
    ctx.cross_rank = sync_bn ? &comm_sum : nullptr;
    ctx.poll = &poll_rings;
    t_layer = t_data;
    traced = tracing_step;
    auto logits = model.forward(images, mine.count, ctx, traced ? forward_done : no_hook);
    const float scale = loss_scale(reduction, mine.count, batch_samples, world);
    const LossResult loss = softmax_cross_entropy(logits, std::span(labels).first(mine.count),
                                                  mine.count, classes, scale, dlogits);
    const double t_forward = now_s();
    if (tracing_step) trace.span(loss_name, 0, t_layer, t_forward);
    t_layer = t_forward;
    current_step = step;
    loss_finite = std::isfinite(loss.loss_sum);
    model.backward(dlogits, mine.count, ctx, backward_done);
    const double t_backward = now_s();

    // 3. the rest of the gradient sum, and 4. the same update everywhere, bucket by bucket
    //    as each sum completes, unless some rank's gradient was not finite: the ranks agree
    //    on that before any update (gradient_reducer.hpp), so all take the same decision.
    watchdog.enter("allreduce", step);
    if (hooks.hang_rank == rank && hooks.hang_step == step)
      std::this_thread::sleep_for(std::chrono::duration<double>(hooks.hang_s));  // injected fault
    lr = learning_rate(schedule, step);
    counted = false;
    step_times = &times;
    const bool applied = reducer.finish(loss_finite, update_piece);
    watchdog.enter("optimizer", step);
    if (applied) {
      prog.nonfinite_in_a_row = 0;
    } else {
      ++prog.skipped_steps;
      if (++prog.nonfinite_in_a_row > config_.max_nonfinite_steps)
        throw AgreedError(fmt::format(
            "step {}: the gradient was not finite (NaN or inf) in {} consecutive steps; stopping. "
            "Lower --lr, or raise --max-nonfinite-steps",
            step, prog.nonfinite_in_a_row));
      progress.message(fmt::format(
          "step {}: gradient not finite on some rank: step skipped on all ranks", step));
    }
    if (hooks.perturb_rank == rank && hooks.perturb_step == step)
      params[0] = std::nextafter(params[0], INFINITY);  // injected fault: one ulp on one rank
    watchdog.leave();
    const double t3 = now_s();

    const StepComm& sc = reducer.account();
    times.step_s = t3 - t0;
    times.data_s = t_data - t0;
    times.forward_s = t_forward - t_data;
    times.backward_s = t_backward - t_forward;
    times.progress_s = sc.progress_s;
    times.comm_s = sc.comm_s;
    times.exposed_s = sc.exposed_s;
    times.collectives = double(sc.collectives);
    times.overlap = overlap_step;
    window_times.add(times);
    prog.window_loss += loss.loss_sum;
    prog.window_samples += double(mine.count);
    ++prog.window_steps;
    prog.useful_compute_s += t3 - t0;
    if (step > start_step) {
      warm_compute_s += t3 - t0;
      ++warm_steps;
    }
    prog.samples_seen += batch_samples;
    prog.step = step + 1;
    const std::uint64_t done = prog.step;
    if (hooks.kill_rank == rank && hooks.kill_step == done) std::raise(SIGKILL);  // injected fault

    const bool log_now = done % config_.log_every == 0 || done == total_steps;
    const bool eval_now = config_.evaluate && (done % eval_every == 0 || done == total_steps);
    if ((config_.replica_check_every > 0 && done % config_.replica_check_every == 0) ||
        done == total_steps) {
      watchdog.enter("replica check", step);
      check_replicas(comm_, model.parameters(), "parameter", done);
      // Per-rank BatchNorm keeps per-rank running statistics by definition: not replicas.
      if (sync_bn || !has_bn) check_replicas(comm_, model.buffers(), "buffer", done);
      watchdog.leave();
    }
    bool stop_now = false;
    if (log_now) {
      // One small allreduce: the window's loss and samples, whether a rank got a stop signal,
      // every rank's step account (rank r fills row r, the sum gathers them), and every rank's
      // peak resident memory (entry r after the rows).
      const double elapsed = now_s() - window_start - window_paused_s;
      constexpr std::size_t F = StepWindow::kFields.size();
      const std::size_t rss_at = 3 + std::size_t(world) * F;
      std::vector<double> sums(rss_at + std::size_t(world), 0.0);
      sums[rss_at + std::size_t(rank)] = double(peak_rss_bytes());
      sums[0] = prog.window_loss;
      sums[1] = prog.window_samples;
      sums[2] = stop_signals.requested() ? 1.0 : 0.0;
      window_times.means(std::span(sums).subspan(3 + std::size_t(rank) * F, F));
      if (world > 1) coll::allreduce_sum(comm_, std::span<double>(sums));
      last_loss = sums[0] / std::max(1.0, sums[1]);

      stop_now = sums[2] > 0.0 && done < total_steps;
      if (leader) {
        nlohmann::json record = {{"step", done},
                                 {"epoch", double(done) / double(steps_per_epoch)},
                                 {"loss", last_loss},
                                 {"lr", learning_rate(schedule, step)},
                                 {"samples_per_s", sums[1] / elapsed},
                                 {"skipped_steps", prog.skipped_steps}};
        record.update(window_metrics(std::span<const double>(sums).subspan(3, rss_at - 3), world));
        // A fingerprint of the parameters after this step (equal runs log equal ones).
        record["parameter_hash"] = fmt::format("{:016x}", hash_bits(params));
        record["peak_rss_bytes"] =
            std::vector<double>(sums.begin() + std::ptrdiff_t(rss_at), sums.end());
        run_dir->append_metrics(record);
      }
      prog.window_loss = prog.window_samples = 0.0;
      prog.window_steps = 0;
      window_times.reset();
      window_start = now_s();
      window_paused_s = 0.0;
      if (config_.watchdog_s <= 0)  // automatic limit follows the measured step time
        watchdog.set_limit(std::max(kWatchdogFloorS, 100.0 * prog.useful_compute_s / double(done)));
    }
    if (eval_now) {
      const double eval_t0 = now_s();
      watchdog.enter("evaluation", step);
      const auto [accuracy, test_loss] = evaluate();
      if (tracing_step) trace.span(eval_name, 0, eval_t0, now_s());
      watchdog.leave();
      results.final_test_accuracy = prog.final_test_accuracy = accuracy;
      results.best_test_accuracy = prog.best_test_accuracy =
          std::max(prog.best_test_accuracy, accuracy);
      if (leader) {
        run_dir->append_metrics({{"step", done},
                                 {"test_accuracy", accuracy},
                                 {"test_loss", test_loss},
                                 {"wall_s", now_s() - start}});
        progress.message(fmt::format("step {:>6}  epoch {:5.2f}  loss {:.4f}  test accuracy {:.4f}",
                                     done, double(done) / double(steps_per_epoch), last_loss,
                                     accuracy));
      }
      if (config_.target_accuracy > 0.0 && accuracy >= config_.target_accuracy &&
          !results.target_reached) {
        results.target_reached = true;
        results.steps_to_target = done;
        results.time_to_target_s = now_s() - start;
      }
      window_paused_s += now_s() - eval_t0;  // evaluation time is not step time
    }
    // Checkpoints: every K steps (or the Young/Daly interval), at a stop signal, at the end.
    const bool last = done == total_steps || results.target_reached;
    if (stop_now || last || schedule_of_saves.due(done)) {
      const double save_t0 = now_s();
      save(stop_now ? "signal" : last ? "end" : "interval");
      window_paused_s += now_s() - save_t0;  // save time is not step time
    }
    progress.update(
        done, fmt::format("loss {:.4f}  lr {:.4g}", last_loss, learning_rate(schedule, step)));
    results.steps = done;
    if (stop_now) {
      stopped_by_signal = true;
      break;
    }
    if (results.target_reached) break;
  }
  progress.finish();
  if (tracing) write_trace(comm_, trace, lanes, run_dir_path / "trace.json");

  results.skipped_steps = prog.skipped_steps;
  results.wall_s = now_s() - start;
  results.mean_step_s = prog.step > 0 ? prog.useful_compute_s / double(prog.step) : 0.0;
  results.samples_per_s =
      results.mean_step_s > 0 ? double(global_batch) / results.mean_step_s : 0.0;
  if (leader) {
    manifest["results"] = results.to_json();
    run_dir->write_manifest(manifest);
    if (stopped_by_signal)
      say(
          fmt::format("stopped by a signal at step {}: checkpoint saved; resume with --resume auto "
                      "--run-dir {}",
                      results.steps, run_dir_path.string()));
    say(fmt::format(
        "done: {} steps in {:.1f} s, {:.0f} samples/s, test accuracy {:.4f} (best {:.4f}){}",
        results.steps, results.wall_s, results.samples_per_s, results.final_test_accuracy,
        results.best_test_accuracy,
        results.target_reached ? fmt::format(", target {} reached at step {}",
                                             config_.target_accuracy, results.steps_to_target)
                               : std::string()));
  }
  return results;
}

}  // namespace ringtrain
