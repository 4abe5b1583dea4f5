// The loop's side of --local-batches auto (split_planner.hpp): measure, exchange, decide,
// check, record.
#include "train/run/split_planner.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ringtrain/collectives/small.hpp"
#include "ringtrain/framework/agreed.hpp"
#include "ringtrain/framework/error.hpp"
#include "train/run/rebalance_record.hpp"

namespace ringtrain {
namespace {

// The micro-batch every b_r is a multiple of: m under --reduction exact, else 1.
std::size_t unit_of(const TrainConfig& config) {
  return config.reduction == Reduction::kExact ? config.exact_micro_batch : 1;
}

// A test's rank that decides alone: m samples move from its largest b_r to its smallest.
void decide_alone(std::vector<std::size_t>& split, std::size_t m) {
  const auto most = std::max_element(split.begin(), split.end());
  const auto least = std::min_element(split.begin(), split.end());
  if (most == least || *most < m) return;
  *most -= m;
  *least += m;
}

}  // namespace

SplitPlanner::SplitPlanner(const collectives::Communicator& comm, const TrainConfig& config,
                           std::vector<std::size_t> first, const FaultInjector& faults,
                           RunDirectory* run_dir, std::function<void(const std::string&)> say)
    : comm_(comm),
      faults_(faults),
      run_dir_(run_dir),
      say_(std::move(say)),
      every_(config.rebalance_every),
      smoother_(first.size()),
      window_(first.size(), static_cast<std::size_t>(comm.rank())) {
  request_.global_batch = std::accumulate(first.begin(), first.end(), std::size_t{0});
  request_.micro_batch = unit_of(config);
  // Every rank keeps at least one micro-batch, so it keeps being measured, unless the batch
  // is too small for that (the first split then already leaves ranks empty).
  const std::size_t m = request_.micro_batch;
  request_.floors.assign(first.size(), first.size() * m <= request_.global_batch ? m : 0);
  request_.cap = config.local_batch_cap(first.size());
  request_.current = std::move(first);
  write_plan_text();
}

std::optional<std::vector<std::size_t>> SplitPlanner::after_step(std::uint64_t done,
                                                                 std::size_t samples,
                                                                 const StepTimes& times) {
  StepMeasure measure;
  measure.samples = samples;
  // The core wait was read over forward + backward, communication inside them included: the
  // compute's part of it is taken in proportion to the compute's part of that interval.
  const double interval_s = times.forward_s + times.backward_s;
  measure.compute_s = std::max(0.0, interval_s - times.inside_comm_s);
  measure.core_wait_s =
      interval_s > 0 ? std::min(times.core_wait_s, interval_s) * measure.compute_s / interval_s
                     : 0.0;
  measure.sum_s = std::max(0.0, times.step_s - times.data_s - times.forward_s - times.backward_s);
  window_.add_step(measure);
  window_step_s_ += times.step_s;
  if (done % every_ != 0) return std::nullopt;
  const std::vector<std::size_t> before = request_.current;
  end_window(done);
  if (request_.current == before) return std::nullopt;
  return request_.current;
}

// Collective: the exchange, the check that every rank applied the same split, the records and
// the decision.
void SplitPlanner::end_window(std::uint64_t done) {
  const std::span<double> exchange = window_.pack(request_.current);
  collectives::allreduce_sum(comm_, exchange);
  const WindowTotals totals = window_.unpack(exchange);
  if (!totals.same_split)
    throw AgreedError(fmt::format(
        "--local-batches auto: after step {} the ranks had not applied the same split (rank {} "
        "holds {}); stopping every rank: a re-split must be decided from the same numbers on "
        "every rank",
        done, comm_.rank(), fmt::join(request_.current, ",")));
  std::vector<double> shares;
  for (const ComputeWindow& w : totals.windows)
    shares.push_back(w.compute_s > 0 ? w.core_wait_s / w.compute_s : NAN);
  record_window(done, totals, shares);
  if (run_dir_ && measured_since_ && window_.steps() > 0)
    run_dir_->append_metrics(rebalance_measured_record(done, *measured_since_, request_.current,
                                                       predicted_step_s_,
                                                       window_step_s_ / double(window_.steps())));
  measured_since_.reset();
  smoother_.add_window(totals.windows);
  window_.reset();
  window_step_s_ = 0.0;
  const std::optional<CoreWaitNotice> notice = core_wait_notice(shares);
  const bool again = hold_.persists(notice && notice->hold ? std::optional(notice->rank)
                                                           : std::optional<std::size_t>());
  if (notice && (!notice->hold || again)) {
    const bool hold = notice->hold && faults_.hold_split_for_core_wait();
    bool& said = notice->hold ? noticed_absent_ : noticed_everyone_;
    if (!said)
      say_(fmt::format("after step {}: {}{}", done, notice->line,
                       hold ? "; the split is kept" : ""));
    said = true;
    if (hold) {  // an absent rank is not a slow one: moving samples does not help
      write_plan_text();
      return;
    }
  }
  decide(done, totals.comm_s);
  write_plan_text();
}

void SplitPlanner::record_window(std::uint64_t done, const WindowTotals& totals,
                                 const std::vector<double>& shares) const {
  if (!run_dir_) return;
  std::vector<double> window_speeds, samples;
  nlohmann::json share_list = nlohmann::json::array();
  for (std::size_t r = 0; r < totals.windows.size(); ++r) {
    samples.push_back(totals.windows[r].samples);
    window_speeds.push_back(SpeedSmoother::window_speed(totals.windows[r]));
    share_list.push_back(std::isfinite(shares[r]) ? nlohmann::json(shares[r]) : nlohmann::json());
  }
  run_dir_->append_metrics({{"step", done},
                            {"rebalance_window",
                             {{"split", request_.current},
                              {"samples", samples},
                              {"window_speeds", window_speeds},
                              {"core_wait_share", share_list},
                              {"comm_s", totals.comm_s}}}});
}

// The same numbers on every rank give the same split; a test's rank may decide alone.
void SplitPlanner::decide(std::uint64_t done, double comm_s) {
  request_.speeds = smoother_.speeds();
  request_.comm_s = comm_s;
  const SplitDecision decision = decide_split(request_);
  if (!decision.changed) return;
  if (run_dir_) run_dir_->append_metrics(rebalance_record(done, request_, decision));
  request_.current = decision.split;
  if (faults_.decide_split_alone(comm_.rank()))
    decide_alone(request_.current, request_.micro_batch);
  measured_since_ = done;
  predicted_step_s_ = decision.proposed_step_s;
}

void SplitPlanner::write_plan_text() {
  const std::optional<std::size_t> standing_out = hold_.last();
  plan_text_ = nlohmann::json{{"split", request_.current},
                              {"speeds", smoother_.speeds()},
                              {"standing_out",
                               standing_out ? nlohmann::json(*standing_out) : nlohmann::json()}}
                   .dump();
}

// Untrusted text: anything but N valid entries restarts that part of the plan.
std::string SplitPlanner::resume() {
  const nlohmann::json plan = nlohmann::json::parse(plan_text_, nullptr, false);
  const std::size_t ranks = request_.current.size();
  const auto list = [&](const char* key) {
    return plan.is_object() && plan.contains(key) && plan[key].is_array() &&
                   plan[key].size() == ranks
               ? plan[key]
               : nlohmann::json();
  };
  const nlohmann::json split = list("split"), speeds = list("speeds");
  bool split_ok = !split.is_null();
  std::size_t total = 0;
  for (std::size_t r = 0; split_ok && r < ranks; ++r) {
    split_ok = split[r].is_number_unsigned() && split[r].get<std::size_t>() >= request_.floors[r] &&
               split[r].get<std::size_t>() <= request_.cap &&
               split[r].get<std::size_t>() % request_.micro_batch == 0;
    if (split_ok) total += split[r].get<std::size_t>();
  }
  split_ok = split_ok && total == request_.global_batch;
  if (split_ok) request_.current = split.get<std::vector<std::size_t>>();
  std::vector<double> known(ranks, 0.0);
  for (std::size_t r = 0; !speeds.is_null() && r < ranks; ++r)
    if (speeds[r].is_number()) known[r] = speeds[r].get<double>();
  smoother_.restore(known);
  const bool standing_out_ok = plan.is_object() && plan.contains("standing_out") &&
                               plan["standing_out"].is_number_unsigned() &&
                               plan["standing_out"].get<std::size_t>() < ranks;
  hold_.restore(standing_out_ok ? std::optional(plan["standing_out"].get<std::size_t>())
                                : std::nullopt);
  write_plan_text();
  if (split_ok)
    return fmt::format("the split plan continues: local batches {} (speeds {})",
                       fmt::join(request_.current, "+"), fmt::join(smoother_.speeds(), ", "));
  return fmt::format("the checkpoint holds no split plan for {} ranks: the split restarts at {}",
                     ranks, fmt::join(request_.current, "+"));
}

std::string SplitPlanner::banner_line(double cap_bytes) const {
  return fmt::format(
      "  local batches auto: every {} steps the ranks agree on a split of the global batch {} in "
      "proportion to their measured compute speeds (samples/s of forward + backward, net of "
      "communication and of waiting for a core), in multiples of {}, each rank at least {} and "
      "at most {} (buffers for {} rows: {:.1f} MiB of inputs and layer outputs), kept unless "
      "the predicted step time improves by more than {:.0f} %",
      every_, request_.global_batch, request_.micro_batch, request_.floors.front(), request_.cap,
      request_.cap, cap_bytes / 1048576.0, 100.0 * request_.margin);
}

nlohmann::json SplitPlanner::policy() const {
  return {{"local_batches", "auto"},
          {"rebalance_every", every_},
          {"max_local_batch", request_.cap},
          {"micro_batch", request_.micro_batch},
          {"floors", request_.floors},
          {"margin", request_.margin},
          {"speed_weight", kSpeedWeight},
          {"speed_change", kSpeedChange},
          {"core_wait_notice", kCoreWaitNotice}};
}

}  // namespace ringtrain
