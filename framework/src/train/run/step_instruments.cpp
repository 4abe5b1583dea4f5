// The trainer's probe of a step: times, trace, watchdog, faults (step_instruments.hpp).
#include "train/run/step_instruments.hpp"

#include <fmt/format.h>

#include "train/now.hpp"

namespace ringtrain {

StepInstruments::StepInstruments(const Sequential& model, Trace* trace, Watchdog& watchdog,
                                 const FaultInjector& faults, int rank, bool one_pass)
    : trace_(trace), watchdog_(watchdog), faults_(faults), rank_(rank), one_pass_(one_pass) {
  if (!trace_) return;
  for (std::size_t i = 0; i < model.num_layers(); ++i) {
    const std::string path = fmt::format("layers.{}.{}", i, model.layer(i).kind());
    forward_names_.push_back(trace_->name("forward " + path));
    backward_names_.push_back(trace_->name("backward " + path));
  }
  data_name_ = trace_->name("data");
  loss_name_ = trace_->name("loss");
  optimizer_name_ = trace_->name("optimizer");
}

void StepInstruments::span(std::size_t name, double begin_s, double end_s) const {
  if (traced_) trace_->span(name, 0, begin_s, end_s);
}

void StepInstruments::begin(std::uint64_t step) {
  step_start_s_ = phase_start_s_ = now_s();
  step_ = step;
  phase_ = StepPhase::kSlice;
  times_ = StepTimes{};
  inside_comm_s_ = 0.0;
  if (trace_) trace_->begin_step(step);
  traced_ = trace_ && trace_->recording();
  watchdog_.enter("forward/backward", step);
}

// The phase that ends here is measured; the sum's start is where a rank may stall.
// A test's slow rank does its extra work at the end of backward, inside the compute it slows:
// F - 1 times its own compute, without the communication inside it (a wait there is not work).
void StepInstruments::enter(StepPhase phase) {
  if (phase_ == StepPhase::kBackward)
    faults_.slow_compute(rank_, step_, now_s() - compute_start_s_ - inside_comm_s_);
  const double t = now_s();
  switch (phase_) {
    case StepPhase::kSlice:
      times_.data_s = t - phase_start_s_;
      span(data_name_, phase_start_s_, t);
      layer_end_s_ = compute_start_s_ = t;
      if (core_wait_source_) core_wait_start_ = read_core_wait(*core_wait_source_);
      break;
    case StepPhase::kForward:  // the loss is the forward phase's last span
      times_.forward_s = t - phase_start_s_;
      span(loss_name_, layer_end_s_, t);
      layer_end_s_ = t;
      break;
    case StepPhase::kBackward:
      times_.backward_s = t - phase_start_s_;
      if (core_wait_source_) {  // a share the rusage source cannot tell counts as no wait
        const CoreWaitReading end = read_core_wait(*core_wait_source_);
        times_.core_wait_s = core_wait_share(core_wait_start_, end).value_or(0.0) *
                             (end.wall_s - core_wait_start_.wall_s);
      }
      break;
    case StepPhase::kUpdate:
      times_.optimizer_s += t - phase_start_s_;
      span(optimizer_name_, phase_start_s_, t);
      break;
    case StepPhase::kSum:
      break;
  }
  if (phase == StepPhase::kSum && phase_ == StepPhase::kBackward) {
    watchdog_.enter("allreduce", step_);
    faults_.before_gradient_sum(rank_, step_);
  }
  phase_ = phase;
  phase_start_s_ = t;
}

void StepInstruments::layer_done(std::size_t layer) {
  if (!traced_) return;
  const double t = now_s();
  span((phase_ == StepPhase::kForward ? forward_names_ : backward_names_)[layer], layer_end_s_, t);
  layer_end_s_ = t;
}

bool StepInstruments::poison_gradient() {
  return faults_.poison_gradient(rank_, step_);
}

void StepInstruments::end(const StepComm& comm, std::span<float> parameters) {
  watchdog_.enter("optimizer", step_);
  faults_.after_update(rank_, step_, parameters);
  watchdog_.leave();
  times_.step_s = now_s() - step_start_s_;
  times_.poll_s = comm.poll_s;
  times_.comm_s = comm.comm_s;
  times_.exposed_s = comm.exposed_s;
  times_.collectives = double(comm.collectives);
  times_.wire_bytes = comm.wire_bytes;
  times_.inter_host_bytes = comm.inter_host_bytes;
  times_.overlap = comm.overlap;
  times_.inside_comm_s = comm.inside_compute_s;
  if (one_pass_) {
    times_.backward_s += times_.forward_s;
    times_.forward_s = 0.0;
  }
}

}  // namespace ringtrain
