// ScriptedFaults: the FaultInjector that a FaultPlan describes (fault_injector.hpp).
#include "ringtrain/framework/train/fault_injector.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "ringtrain/checkpoint/commit.hpp"
#include "ringtrain/checkpoint/error.hpp"
#include "ringtrain/framework/error.hpp"
#include "train/now.hpp"
#include "train/safety/stop_signals.hpp"

namespace ringtrain {
namespace {

class ScriptedFaults final : public FaultInjector {
 public:
  explicit ScriptedFaults(FaultPlan plan) : plan_(std::move(plan)) {}

  bool poison_gradient(int rank, std::uint64_t step) const override {
    return plan_.nan_rank == rank && plan_.nan_step == step;
  }
  void slow_compute(int rank, std::uint64_t step, double compute_s) const override {
    const bool moved = plan_.slow_moves_to >= 0 && step >= plan_.slow_moves_at;
    if ((moved ? plan_.slow_moves_to : plan_.slow_rank) != rank || plan_.slow_factor <= 1.0) return;
    // Arithmetic until the time is up: the core is busy, as a slower core's would be.
    const double until = now_s() + (plan_.slow_factor - 1.0) * compute_s;
    double x = 1.0;
    while (now_s() < until)
      for (int i = 0; i < 256; ++i) x = x * 0.999999 + 1e-6;
    spin_sink_ = x;
  }
  bool decide_split_alone(int rank) const override { return plan_.split_alone_rank == rank; }
  bool hold_split_for_core_wait() const override { return !plan_.ignore_core_wait; }
  void before_gradient_sum(int rank, std::uint64_t step) const override {
    if (plan_.hang_rank == rank && plan_.hang_step == step)
      std::this_thread::sleep_for(std::chrono::duration<double>(plan_.hang_s));
  }
  void after_update(int rank, std::uint64_t step, std::span<float> params) const override {
    if (plan_.perturb_rank == rank && plan_.perturb_step == step && !params.empty())
      params[0] = std::nextafter(params[0], INFINITY);
  }
  void after_step(int rank, std::uint64_t done) const override {
    if (!plan_.kill_at_snapshot && plan_.kill_rank == rank && plan_.kill_step == done)
      std::raise(SIGKILL);
    if (!plan_.pause_file.empty() && std::ranges::count(plan_.pause_steps, done) > 0)
      wait_for_pause_file(rank, done);
  }
  void after_snapshot(int rank, std::uint64_t done) const override {
    if (plan_.kill_at_snapshot && plan_.kill_rank == rank && plan_.kill_step == done)
      std::raise(SIGKILL);
  }
  void before_save(int rank, std::uint64_t done) const override {
    if (rank != 0) return;
    if (plan_.crash_phase > 0 && plan_.crash_step == done)
      checkpoint::set_crash_hook([phase = plan_.crash_phase](int now) {
        if (now == phase) std::raise(SIGKILL);
      });
    else if (std::find(plan_.fail_save_steps.begin(), plan_.fail_save_steps.end(), done) !=
             plan_.fail_save_steps.end())
      checkpoint::set_crash_hook([](int now) {
        if (now == checkpoint::kAfterPartialWritten)
          throw checkpoint::CheckpointError("(injected by --test-fail-save-steps)",
                                            "No space left on device");
      });
    else if (!plan_.fail_save_steps.empty())
      checkpoint::set_crash_hook({});
  }
  std::optional<double> save_cost_s(std::size_t save_index) const override {
    if (plan_.save_cost_s.empty()) return std::nullopt;
    return plan_.save_cost_s[std::min(save_index, plan_.save_cost_s.size() - 1)];
  }
  std::optional<double> step_s() const override {
    if (plan_.step_s <= 0) return std::nullopt;
    return plan_.step_s;
  }

 private:
  // Says so (rank 0) and polls for the test's file; a stop signal ends the wait too (the run
  // then stops at the next agreed boundary), and it gives up after a minute so a broken test
  // cannot hang a run.
  void wait_for_pause_file(int rank, std::uint64_t done) const {
    if (rank == 0)
      std::fprintf(stderr, "ringtrain: test pause after step %llu until %s exists\n",
                   static_cast<unsigned long long>(done), plan_.pause_file.c_str());
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(1);
    while (!std::filesystem::exists(plan_.pause_file) && !stop_signal_arrived() &&
           std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  FaultPlan plan_;
  mutable volatile double spin_sink_ = 0.0;  // keeps the slow rank's arithmetic
};

}  // namespace

void parse_slow_rank(const std::string& text, FaultPlan& plan, int world_size) {
  int rank = -1, to = -1;
  double factor = 0.0;
  unsigned long long at = 0;
  char end = 0;
  const int one = std::sscanf(text.c_str(), "%d:%lf%c", &rank, &factor, &end);
  const int moving = std::sscanf(text.c_str(), "%d:%lf@%llu:%d%c", &rank, &factor, &at, &to, &end);
  const bool ok = (one == 2 || moving == 4) && rank >= 0 && rank < world_size &&
                  std::isfinite(factor) && factor >= 1.0 && factor <= 1000.0 &&
                  (moving != 4 || (to >= 0 && to < world_size));
  if (!ok)
    throw UsageError(
        fmt::format("--test-slow-rank {}: expected R:F or R:F@STEP:R2 (ranks 0 to "
                    "{}, 1 <= F <= 1000)",
                    text, world_size - 1));
  plan.slow_rank = rank;
  plan.slow_factor = factor;
  plan.slow_moves_at = moving == 4 ? at : 0;
  plan.slow_moves_to = moving == 4 ? to : -1;
}

std::unique_ptr<FaultInjector> make_scripted_faults(FaultPlan plan) {
  return std::make_unique<ScriptedFaults>(std::move(plan));
}

}  // namespace ringtrain
