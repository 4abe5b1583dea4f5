// The metrics window (metrics_log.hpp).
#include "train/run/metrics_log.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ringtrain/collectives/small.hpp"
#include "ringtrain/framework/train/optimizer_shard.hpp"
#include "train/now.hpp"
#include "train/safety/replica_check.hpp"

namespace ringtrain {

MetricsLog::MetricsLog(const collectives::Communicator& comm, RunDirectory* run_dir,
                       std::uint64_t steps_per_epoch)
    : comm_(comm),
      run_dir_(run_dir),
      steps_per_epoch_(steps_per_epoch),
      start_s_(now_s()),
      last_loss_(NAN) {}

void MetricsLog::add(const StepTimes& times, double loss_sum, std::size_t samples,
                     TrainingCounters& counters) {
  times_.add(times);
  counters.window_loss += loss_sum;
  counters.window_samples += double(samples);
  ++counters.window_steps;
  counters.useful_compute_s += times.step_s;
  if (steps_++ > 0) warm_s_ += times.step_s;
}

double MetricsLog::planning_step_s(const TrainingCounters& counters) const {
  if (steps_ > 1) return warm_s_ / double(steps_ - 1);
  return counters.useful_compute_s / double(std::max<std::uint64_t>(1, counters.step));
}

// The allreduced vector: [loss, samples, stop, rank 0's fields..., rank N-1's fields...,
// peak RSS of rank 0 ... rank N-1].
WindowSummary MetricsLog::close(std::uint64_t done, float lr, bool stop_signal,
                                std::span<const float> params, TrainingCounters& counters) {
  const double elapsed_s = now_s() - start_s_ - paused_s_;
  const auto world = static_cast<std::size_t>(comm_.size());
  const auto rank = static_cast<std::size_t>(comm_.rank());
  constexpr std::size_t F = StepWindow::kFields.size();
  const std::size_t rss_at = 3 + world * F;
  std::vector<double> sums(rss_at + world, 0.0);
  sums[0] = counters.window_loss;
  sums[1] = counters.window_samples;
  sums[2] = stop_signal ? 1.0 : 0.0;
  times_.means(std::span(sums).subspan(3 + rank * F, F));
  sums[rss_at + rank] = double(peak_rss_bytes());
  if (world > 1) collectives::allreduce_sum(comm_, std::span<double>(sums));

  const WindowSummary summary{sums[0] / std::max(1.0, sums[1]), sums[2] > 0.0};
  if (run_dir_) {
    nlohmann::json record = {{"step", done},
                             {"epoch", double(done) / double(steps_per_epoch_)},
                             {"loss", summary.loss},
                             {"lr", lr},
                             {"samples_per_s", sums[1] / elapsed_s},
                             {"skipped_steps", counters.skipped_steps}};
    record.update(
        window_metrics(std::span<const double>(sums).subspan(3, rss_at - 3), comm_.size()));
    record["parameter_hash"] = fmt::format("{:016x}", hash_bits(params));
    record["peak_rss_bytes"] =
        std::vector<double>(sums.begin() + std::ptrdiff_t(rss_at), sums.end());
    run_dir_->append_metrics(record);
  }
  last_loss_ = summary.loss;
  counters.window_loss = counters.window_samples = 0.0;
  counters.window_steps = 0;
  times_.reset();
  start_s_ = now_s();
  paused_s_ = 0.0;
  return summary;
}

double MetricsLog::shown_loss(const TrainingCounters& counters) const {
  if (std::isnan(last_loss_) && counters.window_samples > 0)
    return counters.window_loss / counters.window_samples;
  return last_loss_;
}

}  // namespace ringtrain
