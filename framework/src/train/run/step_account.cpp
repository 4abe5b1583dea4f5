// Step time account and its metrics window (see step_account.hpp).
#include "train/run/step_account.hpp"

namespace ringtrain {

void StepWindow::add(const StepTimes& t) {
  sum_.step_s += t.step_s;
  sum_.data_s += t.data_s;
  sum_.forward_s += t.forward_s;
  sum_.backward_s += t.backward_s;
  sum_.optimizer_s += t.optimizer_s;
  sum_.poll_s += t.poll_s;
  sum_.comm_s += t.comm_s;
  sum_.exposed_s += t.exposed_s;
  sum_.collectives += t.collectives;
  sum_.wire_bytes += t.wire_bytes;
  sum_.inter_host_bytes += t.inter_host_bytes;
  StepTimes& mode = mode_sum_[t.overlap ? 1 : 0];
  mode.step_s += t.step_s;
  mode.backward_s += t.backward_s;
  mode.exposed_s += t.exposed_s;
  mode.comm_s += t.comm_s;
  ++mode_steps_[t.overlap ? 1 : 0];
  ++steps_;
}

void StepWindow::means(std::span<double> out) const {
  const double n = steps_ > 0 ? double(steps_) : 1.0;
  const double values[kFields.size()] = {sum_.step_s,      sum_.compute_s(),     sum_.comm_s,
                                         sum_.exposed_s,   sum_.forward_s,       sum_.backward_s,
                                         sum_.optimizer_s, sum_.poll_s,          sum_.collectives,
                                         sum_.wire_bytes,  sum_.inter_host_bytes};
  const std::size_t common = kFields.size() - kModeFields;
  for (std::size_t i = 0; i < common && i < out.size(); ++i) out[i] = values[i] / n;
  if (out.size() < kFields.size()) return;
  // Means over each mode's own steps (kFields order: on, off per figure); 0 for no steps.
  std::size_t at = common;
  for (double StepTimes::*figure :
       {&StepTimes::step_s, &StepTimes::backward_s, &StepTimes::exposed_s, &StepTimes::comm_s})
    for (int mode : {1, 0})
      out[at++] = mode_steps_[mode] > 0 ? mode_sum_[mode].*figure / double(mode_steps_[mode]) : 0.0;
}

nlohmann::json window_metrics(std::span<const double> all_ranks, int ranks) {
  const std::size_t F = StepWindow::kFields.size();
  nlohmann::json out, per_rank;
  for (std::size_t f = 0; f < F; ++f) {
    nlohmann::json column = nlohmann::json::array();
    for (int r = 0; r < ranks; ++r) column.push_back(all_ranks[std::size_t(r) * F + f]);
    out[StepWindow::kFields[f]] = all_ranks[f];
    per_rank[StepWindow::kFields[f]] = column;
  }
  const std::size_t modes_at = F - StepWindow::kModeFields;  // step_s_overlap_on, then off
  if (all_ranks[modes_at] == 0.0 || all_ranks[modes_at + 1] == 0.0) {
    for (std::size_t f = modes_at; f < F; ++f) {
      out.erase(StepWindow::kFields[f]);
      per_rank.erase(StepWindow::kFields[f]);
    }
  }
  const double comm = all_ranks[2], exposed = all_ranks[3];
  out["overlap_fraction"] = comm > 0 ? nlohmann::json(1.0 - exposed / comm) : nlohmann::json();
  out["per_rank"] = per_rank;
  return out;
}

}  // namespace ringtrain
