// Where a training step's time went, on one rank, and the metrics window it adds up to.
//
// Every figure is measured directly with the steady clock, never derived from the others
// (overlapped durations are not added together):
//   step_s       the whole step, from the batch gather to the end of the optimizer update
//   data_s       gathering this rank's slice of the batch
//   forward_s    forward and the loss
//   backward_s   backward, including the ring polls made between layers
//   optimizer_s  the optimizer update (per bucket or whole)
//   poll_s       ring polls outside those spans (between pieces of a per-bucket update);
//                metrics.jsonl calls it progress_s
//   comm_s       Σ over buckets of [start, observed completion]: overlaps compute and the
//                other buckets, so it is no share of step_s
//   exposed_s    blocked on communication with no compute left
// and the payload bytes this rank sent in the step's rings (wire_bytes), of which
// inter_host_bytes went to another host (--collective hierarchical; 0 otherwise).
// compute_s = data + forward + backward + optimizer + poll. The rest of step_s is
// bookkeeping (watchdog marks, the non-finite decision's branch): compute + exposed ≈ step.
//
// With --overlap alternate a window holds steps of both modes, a few milliseconds apart, and
// also reports step_s, backward_s, exposed_s and comm_s as means over each mode's steps
// (step_s_overlap_on, step_s_overlap_off, ...). The step ratio is what overlap buys, paired
// step by step, free of the drift of a machine whose speed changes between two runs; the
// others say where it went (copies done inside backward, waits no longer exposed).
#pragma once

#include <array>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <span>
#include <vector>

namespace ringtrain {

struct StepTimes {
  double step_s = 0, data_s = 0, forward_s = 0, backward_s = 0, optimizer_s = 0, poll_s = 0,
         comm_s = 0, exposed_s = 0;
  double collectives = 0;                       // rings run this step
  double wire_bytes = 0, inter_host_bytes = 0;  // StepComm's: sent by this rank, between hosts
  bool overlap = true;                          // this step's rings started during backward
  // Measured for --local-batches auto (StepInstruments::measure_split): of forward_s +
  // backward_s, the communication inside them (StepComm::inside_compute_s) and the seconds
  // this thread waited for a core (core_wait.hpp).
  double inside_comm_s = 0, core_wait_s = 0;
  double compute_s() const { return data_s + forward_s + backward_s + optimizer_s + poll_s; }
};

// Sums of StepTimes over the steps of one metrics window.
class StepWindow {
 public:
  // The figures a window reports per rank, in this order.
  // The last kModeFields: step_s, backward_s, exposed_s and comm_s as means over the steps
  // of one mode, overlap on then off for each.
  // clang-format off
  static constexpr std::array<const char*, 19> kFields = {
      "step_s",     "compute_s",   "comm_s",     "exposed_s",  "forward_s",
      "backward_s", "optimizer_s", "progress_s", "collectives", "wire_bytes", "inter_host_bytes",
      "step_s_overlap_on",     "step_s_overlap_off",     "backward_s_overlap_on",
      "backward_s_overlap_off", "exposed_s_overlap_on", "exposed_s_overlap_off",
      "comm_s_overlap_on",     "comm_s_overlap_off"};
  // clang-format on
  static constexpr std::size_t kModeFields = 8;

  void add(const StepTimes& t);
  std::size_t steps() const { return steps_; }
  void reset() { *this = StepWindow{}; }
  // This rank's means per step, kFields order, into `out` (kFields.size() values).
  void means(std::span<double> out) const;

 private:
  StepTimes sum_;
  std::size_t steps_ = 0;
  StepTimes mode_sum_[2];  // [1]: steps with overlap on, [0]: off
  std::size_t mode_steps_[2] = {0, 0};
};

// The window's metrics.jsonl fields from every rank's means (ranks × kFields, row r = rank r):
// rank 0's figures at the top level (the keys dp_speed.py and earlier runs read), each
// field over all ranks under "per_rank", and overlap_fraction = 1 − exposed/comm (null when
// nothing was communicated). The per-mode fields (*_overlap_on/off) appear only when rank
// 0's window had steps of both modes.
nlohmann::json window_metrics(std::span<const double> all_ranks, int ranks);

}  // namespace ringtrain
