// Step time account and its metrics window (see step_account.hpp).
#include "ringtrain/framework/train/step_account.hpp"

namespace ringtrain {

void StepWindow::add(const StepTimes& t) {
  sum_.step_s += t.step_s;
  sum_.data_s += t.data_s;
  sum_.forward_s += t.forward_s;
  sum_.backward_s += t.backward_s;
  sum_.optimizer_s += t.optimizer_s;
  sum_.progress_s += t.progress_s;
  sum_.comm_s += t.comm_s;
  sum_.exposed_s += t.exposed_s;
  sum_.collectives += t.collectives;
  (t.overlap ? step_s_on_ : step_s_off_) += t.step_s;
  steps_on_ += t.overlap ? 1 : 0;
  ++steps_;
}

void StepWindow::means(std::span<double> out) const {
  const double n = steps_ > 0 ? double(steps_) : 1.0;
  const double values[kFields.size()] = {sum_.step_s,      sum_.compute_s(), sum_.comm_s,
                                         sum_.exposed_s,   sum_.forward_s,   sum_.backward_s,
                                         sum_.optimizer_s, sum_.progress_s,  sum_.collectives};
  for (std::size_t i = 0; i < kFields.size() - 2 && i < out.size(); ++i) out[i] = values[i] / n;
  // Means over each mode's own steps; 0 for a mode with none.
  const std::size_t steps_off = steps_ - steps_on_;
  if (out.size() >= kFields.size()) {
    out[kFields.size() - 2] = steps_on_ > 0 ? step_s_on_ / double(steps_on_) : 0.0;
    out[kFields.size() - 1] = steps_off > 0 ? step_s_off_ / double(steps_off) : 0.0;
  }
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
  if (all_ranks[F - 2] == 0.0 || all_ranks[F - 1] == 0.0) {
    for (const char* key : {"step_s_overlap_on", "step_s_overlap_off"}) {
      out.erase(key);
      per_rank.erase(key);
    }
  }
  const double comm = all_ranks[2], exposed = all_ranks[3];
  out["overlap_fraction"] = comm > 0 ? nlohmann::json(1.0 - exposed / comm) : nlohmann::json();
  out["per_rank"] = per_rank;
  return out;
}

}  // namespace ringtrain
