// StepInstruments: the trainer's StepProbe (step_probe.hpp), everything that watches a step
// from outside its recipe, in one place:
//
//   times     the step's StepTimes (step_account.hpp): each phase measured with the steady
//             clock as the step enters the next one, the communication from the sum's
//             account; the metrics window adds them up
//   trace     a span per phase of the compute lane ("data", "forward layers.i.kind",
//             "loss", "backward layers.i.kind", "optimizer" per updated piece), while the
//             trace records (--trace-steps)
//   watchdog  the phase a stuck rank is stuck in: "forward/backward" until the sum,
//             "allreduce" until every piece is updated, "optimizer" for the end of the step
//   faults    the test suite's injected faults at the step's named points
//             (fault_injector.hpp): a poisoned gradient, a stall before the sum, a nudged
//             parameter after the update
//
// --reduction exact reports its forward, loss and backward as one: backward_s covers all
// three and forward_s is 0, as the trace shows them inside one "exact: forward, loss,
// backward" span (exact_step.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "ringtrain/framework/sequential.hpp"
#include "ringtrain/framework/train/fault_injector.hpp"
#include "ringtrain/framework/train/step_probe.hpp"
#include "train/run/core_wait.hpp"
#include "train/run/step_account.hpp"
#include "train/safety/watchdog.hpp"
#include "train/trace.hpp"

namespace ringtrain {

class StepInstruments final : public StepProbe {
 public:
  // Names the spans of `model`'s layers in `trace` (null: no trace). rank: this rank (the
  // faults' argument). one_pass: --reduction exact (above). All references must outlive it.
  StepInstruments(const Sequential& model, Trace* trace, Watchdog& watchdog,
                  const FaultInjector& faults, int rank, bool one_pass);

  void begin(std::uint64_t step) override;
  void enter(StepPhase phase) override;
  void layer_done(std::size_t layer) override;
  void inside_comm(double seconds) override { inside_comm_s_ = seconds; }
  bool poison_gradient() override;
  void end(const StepComm& comm, std::span<float> parameters) override;
  Trace* trace() override { return trace_; }

  // The times of the last step that ended.
  const StepTimes& times() const { return times_; }
  // From now on, also read this thread's core wait at the start of forward and the end of
  // backward (StepTimes::core_wait_s): what --local-batches auto needs.
  void measure_core_wait() { core_wait_source_ = available_core_wait_source(); }

 private:
  void span(std::size_t name, double begin_s, double end_s) const;

  Trace* trace_;
  Watchdog& watchdog_;
  const FaultInjector& faults_;
  int rank_;
  bool one_pass_;
  std::vector<std::size_t> forward_names_, backward_names_;
  std::size_t data_name_ = 0, loss_name_ = 0, optimizer_name_ = 0;

  // The current step.
  std::uint64_t step_ = 0;
  StepPhase phase_ = StepPhase::kSlice;
  double step_start_s_ = 0.0, phase_start_s_ = 0.0;
  double layer_end_s_ = 0.0;      // end of the previous span of the compute lane
  double compute_start_s_ = 0.0;  // forward began
  double inside_comm_s_ = 0.0;    // communication inside forward and backward (inside_comm)
  std::optional<CoreWaitSource> core_wait_source_;
  CoreWaitReading core_wait_start_;
  bool traced_ = false;  // this step is recorded in the trace
  StepTimes times_;
};

}  // namespace ringtrain
