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
  ++steps_;
}

void StepWindow::means(std::span<double> out) const {
  const double n = steps_ > 0 ? double(steps_) : 1.0;
  const double values[kFields.size()] = {sum_.step_s,      sum_.compute_s(), sum_.comm_s,
                                         sum_.exposed_s,   sum_.forward_s,   sum_.backward_s,
                                         sum_.optimizer_s, sum_.progress_s,  sum_.collectives};
  for (std::size_t i = 0; i < kFields.size() && i < out.size(); ++i) out[i] = values[i] / n;
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
  const double comm = all_ranks[2], exposed = all_ranks[3];
  out["overlap_fraction"] = comm > 0 ? nlohmann::json(1.0 - exposed / comm) : nlohmann::json();
  out["per_rank"] = per_rank;
  return out;
}

}  // namespace ringtrain
