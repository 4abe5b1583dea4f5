// ScriptedFaults: the FaultInjector that a FaultPlan describes (fault_injector.hpp).
#include "ringtrain/framework/train/fault_injector.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <thread>

#include "ringtrain/checkpoint/commit.hpp"
#include "ringtrain/checkpoint/error.hpp"

namespace ringtrain {
namespace {

class ScriptedFaults final : public FaultInjector {
 public:
  explicit ScriptedFaults(FaultPlan plan) : plan_(std::move(plan)) {}

  bool poison_gradient(int rank, std::uint64_t step) const override {
    return plan_.nan_rank == rank && plan_.nan_step == step;
  }
  void before_gradient_sum(int rank, std::uint64_t step) const override {
    if (plan_.hang_rank == rank && plan_.hang_step == step)
      std::this_thread::sleep_for(std::chrono::duration<double>(plan_.hang_s));
  }
  void after_update(int rank, std::uint64_t step, std::span<float> params) const override {
    if (plan_.perturb_rank == rank && plan_.perturb_step == step && !params.empty())
      params[0] = std::nextafter(params[0], INFINITY);
  }
  void after_step(int rank, std::uint64_t done) const override {
    if (plan_.kill_rank == rank && plan_.kill_step == done) std::raise(SIGKILL);
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
  FaultPlan plan_;
};

}  // namespace

std::unique_ptr<FaultInjector> make_scripted_faults(FaultPlan plan) {
  return std::make_unique<ScriptedFaults>(std::move(plan));
}

}  // namespace ringtrain
