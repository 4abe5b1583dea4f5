// When to save and what a save records (save_policy.hpp).
#include "train/persistence/save_policy.hpp"

#include <fmt/format.h>

#include <array>
#include <cstdio>

#include "ringtrain/collectives/small.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/train/config.hpp"
#include "train/now.hpp"

namespace ringtrain {
namespace {

// A watched phase for the life of a scope, left also when an exception leaves the scope.
class WatchedPhase {
 public:
  WatchedPhase(Watchdog& watchdog, const char* phase, std::uint64_t step) : watchdog_(watchdog) {
    watchdog_.enter(phase, step);
  }
  ~WatchedPhase() { watchdog_.leave(); }
  WatchedPhase(const WatchedPhase&) = delete;
  WatchedPhase& operator=(const WatchedPhase&) = delete;

 private:
  Watchdog& watchdog_;
};

// --node-mtbf: the job's MTBF over the hosts this run spans, printed and recorded; else
// --mtbf; else the default. Collective with --node-mtbf.
SavePolicy::Mtbf job_mtbf_s(const collectives::Communicator& comm, const SavePolicyOptions& options,
                            std::uint64_t step, RunDirectory* run_dir,
                            const std::function<void(const std::string&)>& say) {
  if (options.node_mtbf_s <= 0)
    return options.mtbf_s > 0 ? SavePolicy::Mtbf{options.mtbf_s, "--mtbf"}
                              : SavePolicy::Mtbf{kDefaultJobMtbfS, "the default: one day"};
  const JobMtbf job = job_mtbf(comm, options.node_mtbf_s);
  say(fmt::format("job MTBF mu = node MTBF {:.6g} s / {} host{} = {:.6g} s", job.node_mtbf_s,
                  job.hosts, job.hosts == 1 ? "" : "s", job.mtbf_s));
  if (run_dir)
    run_dir->append_metrics(
        {{"step", step},
         {"job_mtbf",
          {{"node_mtbf_s", job.node_mtbf_s}, {"hosts", job.hosts}, {"mtbf_s", job.mtbf_s}}}});
  return {job.mtbf_s,
          fmt::format("--node-mtbf over {} host{}", job.hosts, job.hosts == 1 ? "" : "s")};
}

checkpoint::SaveSchedule make_schedule(const SavePolicyOptions& options, std::uint64_t start_step,
                                       double mtbf_s) {
  if (options.every == "auto")
    return checkpoint::SaveSchedule::young_daly(mtbf_s, start_step, options.first_auto_save_steps);
  return checkpoint::SaveSchedule::every(
      parse_size_list(options.every, "--checkpoint-every").at(0));
}

}  // namespace

JobMtbf job_mtbf(const collectives::Communicator& comm, double node_mtbf_s) {
  double leaders = comm.local_rank() == 0 ? 1.0 : 0.0;
  collectives::allreduce_sum(comm, std::span<double>(&leaders, 1));
  JobMtbf job;
  job.node_mtbf_s = node_mtbf_s;
  job.hosts = static_cast<int>(leaders);
  job.mtbf_s = node_mtbf_s / job.hosts;
  return job;
}

SavePolicy::SavePolicy(const collectives::Communicator& comm, Checkpointer& checkpointer,
                       const SavePolicyOptions& options, std::uint64_t start_step,
                       const FaultInjector& faults, Watchdog& watchdog, Trace* trace,
                       RunDirectory* run_dir, std::function<void(const std::string&)> say)
    : comm_(comm),
      checkpointer_(checkpointer),
      auto_(options.every == "auto"),
      async_(options.async),
      mtbf_(job_mtbf_s(comm, options, start_step, run_dir, say)),
      schedule_(make_schedule(options, start_step, mtbf_.mtbf_s)),
      faults_(faults),
      watchdog_(watchdog),
      trace_(trace),
      run_dir_(run_dir),
      say_(std::move(say)),
      max_failed_saves_(options.max_failed_saves),
      last_durable_step_(start_step) {
  if (trace_) save_name_ = trace_->name("checkpoint save");
}

double SavePolicy::save(const TrainingState& state, std::uint64_t done, std::uint64_t epoch,
                        Reason why, double step_s) {
  const bool async = async_ && why == Reason::kInterval;
  const double t0 = now_s();
  SaveOutcome outcome;
  {
    WatchedPhase watched(watchdog_, "checkpoint save", done);
    if (checkpointer_.in_flight()) settle(checkpointer_.finish_save());  // may throw
    faults_.before_save(comm_.rank(), done);
    if (async) {
      checkpointer_.start_save(state, epoch);
      faults_.after_snapshot(comm_.rank(), done);
    } else
      outcome = checkpointer_.save(state, epoch);
  }
  const double blocked_s = now_s() - t0;  // with the wait for a save in flight
  if (trace_) trace_->span(save_name_, 0, t0, now_s(), -1.0, /*always=*/true);
  if (async) {
    started(done, blocked_s, step_s);
    return blocked_s;
  }
  nlohmann::json record = save_record(outcome, why, blocked_s);
  if (!outcome.durable) {
    failed(outcome, why, record);
    return blocked_s;
  }
  failures_in_a_row_ = 0;
  last_durable_step_ = done;
  if (auto_) {
    // The record comes first, the plan it leads to second.
    const std::array<double, 2> agreed = agree_cost(blocked_s, step_s);
    record["agreed_cost_s"] = agreed[0];
    if (run_dir_) run_dir_->append_metrics(record);
    if (why == Reason::kInterval) plan_interval(done, agreed);  // none follows the others
  } else if (run_dir_) {
    run_dir_->append_metrics(record);
  }
  ++saves_done_;
  return blocked_s;
}

// An asynchronous save's snapshot is taken: marked in metrics.jsonl (a kill campaign tells
// kills during the background write by it), and in auto mode planned from its blocking time.
void SavePolicy::started(std::uint64_t done, double blocked_s, double step_s) {
  if (run_dir_) run_dir_->append_metrics({{"step", done}, {"save_started", "async"}});
  in_flight_blocked_s_ = blocked_s;
  if (!auto_) return;
  const std::array<double, 2> agreed = agree_cost(blocked_s, step_s);
  in_flight_agreed_cost_s_ = agreed[0];
  plan_interval(done, agreed);
}

// The asynchronous save in flight is done: its record, and a failure's consequences.
void SavePolicy::settle(const SaveOutcome& outcome) {
  nlohmann::json record = save_record(outcome, Reason::kInterval, in_flight_blocked_s_);
  record["async"] = true;
  if (auto_) record["agreed_cost_s"] = in_flight_agreed_cost_s_;
  if (!outcome.durable) {
    failed(outcome, Reason::kInterval, record);
    return;
  }
  failures_in_a_row_ = 0;
  last_durable_step_ = outcome.step;
  latency_s_ = outcome.persist_s;
  if (run_dir_) run_dir_->append_metrics(record);
  ++saves_done_;
}

nlohmann::json SavePolicy::save_record(const SaveOutcome& outcome, Reason why,
                                       double blocked_s) const {
  const char* reason = why == Reason::kEnd ? "end" : why == Reason::kSignal ? "signal" : "interval";
  return {{"step", outcome.step},
          {"checkpoint_s", blocked_s},
          {"blocking_s", blocked_s},
          {"persist_s", outcome.persist_s},
          {"reason", reason}};
}

// A save that is not durable: reported and recorded; fatal at the end, at a signal, or
// after too many in a row.
void SavePolicy::failed(const SaveOutcome& outcome, Reason why, nlohmann::json& record) {
  const std::uint64_t done = outcome.step;
  ++failures_in_a_row_;
  schedule_.failed(done);
  record["save_failed"] = outcome.failure;
  record["failures_in_a_row"] = failures_in_a_row_;
  if (run_dir_) run_dir_->append_metrics(record);
  const std::string restart_point = last_durable_step_ == 0
                                        ? std::string("the start of the run")
                                        : fmt::format("step {}", last_durable_step_);
  if (why != Reason::kInterval)
    throw AgreedError(
        fmt::format("the checkpoint at step {} ({}) failed: {}; the newest durable "
                    "checkpoint is at {}",
                    done, why == Reason::kEnd ? "end of the run" : "stop signal", outcome.failure,
                    restart_point));
  if (failures_in_a_row_ >= max_failed_saves_)
    throw AgreedError(fmt::format(
        "{} checkpoint saves in a row failed (the last at step {}: {}); stopping. Free space "
        "or fix the folder, then rerun with --resume auto (it restarts from {})",
        failures_in_a_row_, done, outcome.failure, restart_point));
  if (comm_.rank() == 0)
    std::fprintf(stderr,
                 "ringtrain: warning: the checkpoint at step %llu failed: %s; training goes on, "
                 "the restart point stays %s (%zu of --max-failed-saves %zu in a row)\n",
                 static_cast<unsigned long long>(done), outcome.failure.c_str(),
                 restart_point.c_str(), failures_in_a_row_, max_failed_saves_);
}

// The ranks agree on C and s (MAX: a save costs as much as its slowest rank, a step too);
// the test hooks may fix either.
std::array<double, 2> SavePolicy::agree_cost(double cost_s, double step_s) const {
  std::array<double, 2> agreed = {cost_s, step_s};
  collectives::allreduce_max(comm_, std::span<double>(agreed));
  if (const auto fixed = faults_.save_cost_s(saves_done_)) agreed[0] = *fixed;
  if (const auto fixed = faults_.step_s()) agreed[1] = *fixed;
  return agreed;
}

// Young/Daly with the agreed {C, s}: the schedule re-plans τ when C drifted (or the persist
// latency outgrew τ); a new plan is printed and recorded.
void SavePolicy::plan_interval(std::uint64_t done, const std::array<double, 2>& agreed) {
  const auto plan = schedule_.saved(done, agreed[0], agreed[1], latency_s_);
  if (!plan) return;
  if (async_)
    say_(fmt::format(
        "checkpoint interval (Young/Daly, asynchronous): blocking cost C = {:.4g} s, persist "
        "latency L = {:.4g} s, MTBF mu = {:.6g} s, tau = max(sqrt(2 C mu), L) = {:.4g} s = {} "
        "steps of {:.4g} s; predicted overhead C/tau + (tau/2 + L)/mu = {:.4g} % (mu: {})",
        plan->cost_s, plan->latency_s, plan->mtbf_s, plan->tau_s, plan->every_steps, plan->step_s,
        100.0 * plan->predicted_overhead, mtbf_.source));
  else
    say_(
        fmt::format("checkpoint interval (Young/Daly): save cost C = {:.4g} s, MTBF mu = {:.6g} s, "
                    "tau = sqrt(2 C mu) = {:.4g} s = {} steps of {:.4g} s; predicted overhead "
                    "C/tau + tau/(2 mu) = {:.4g} % (mu: {})",
                    plan->cost_s, plan->mtbf_s, plan->tau_s, plan->every_steps, plan->step_s,
                    100.0 * plan->predicted_overhead, mtbf_.source));
  if (run_dir_)
    run_dir_->append_metrics({{"step", done},
                              {"interval_plan",
                               {{"cost_s", plan->cost_s},
                                {"mtbf_s", plan->mtbf_s},
                                {"mtbf_source", mtbf_.source},
                                {"latency_s", plan->latency_s},
                                {"tau_s", plan->tau_s},
                                {"step_s", plan->step_s},
                                {"every_steps", plan->every_steps},
                                {"predicted_overhead", plan->predicted_overhead}}}});
}

}  // namespace ringtrain
