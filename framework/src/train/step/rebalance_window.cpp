// One window of measurements and their exchange (rebalance_window.hpp).
#include "train/step/rebalance_window.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "ringtrain/framework/error.hpp"

namespace ringtrain {

RebalanceWindow::RebalanceWindow(std::size_t ranks, std::size_t rank)
    : ranks_(ranks), rank_(rank), exchange_(ranks * kSlots, 0.0) {
  if (rank >= ranks) throw Error(fmt::format("rebalance window: rank {} of {} ranks", rank, ranks));
}

void RebalanceWindow::add_step(const StepMeasure& step) {
  total_.samples += step.samples;
  total_.compute_s += step.compute_s;
  total_.core_wait_s += step.core_wait_s;
  total_.sum_s += step.sum_s;
  ++steps_;
}

std::span<double> RebalanceWindow::pack(std::span<const std::size_t> split_applied) {
  std::fill(exchange_.begin(), exchange_.end(), 0.0);
  double* slot = exchange_.data() + rank_ * kSlots;
  slot[0] = double(total_.samples);
  slot[1] = total_.compute_s;
  slot[2] = total_.core_wait_s;
  slot[3] = total_.sum_s;
  slot[4] = double(split_hash(split_applied));
  return exchange_;
}

WindowTotals RebalanceWindow::unpack(std::span<const double> summed) const {
  if (summed.size() != ranks_ * kSlots)
    throw Error(fmt::format("rebalance window: {} values summed, {} expected ({} ranks × {})",
                            summed.size(), ranks_ * kSlots, ranks_, kSlots));
  WindowTotals totals;
  double least_sum_s = std::numeric_limits<double>::infinity();
  for (std::size_t r = 0; r < ranks_; ++r) {
    const std::span<const double> slot = summed.subspan(r * kSlots, kSlots);
    totals.windows.push_back({slot[0], slot[1], slot[2]});
    least_sum_s = std::min(least_sum_s, slot[3]);
    totals.same_split = totals.same_split && slot[4] == summed[4];
  }
  totals.comm_s = steps_ > 0 ? least_sum_s / double(steps_) : 0.0;
  return totals;
}

void RebalanceWindow::reset() {
  steps_ = 0;
  total_ = StepMeasure{};
}

std::uint64_t RebalanceWindow::split_hash(std::span<const std::size_t> split) {
  std::uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a, 64-bit, over each value's 8 bytes
  for (const std::size_t value : split)
    for (int byte = 0; byte < 8; ++byte) {
      hash ^= (std::uint64_t(value) >> (8 * byte)) & 0xffu;
      hash *= 0x100000001b3ull;
    }
  return hash >> 16;  // 48 bits: exact in a double
}

}  // namespace ringtrain
