// The agreement on skipping a step with a non-finite gradient (see step_agreement.hpp).
#include "train/sum/step_agreement.hpp"

#include <atomic>
#include <cfloat>
#include <chrono>
#include <cmath>

#include "ringtrain/framework/blas.hpp"
#include "train/now.hpp"

namespace ringtrain {

namespace {

// !(|v| <= FLT_MAX) is true for NaN and for ±inf; eight accumulators let the loop vectorise.
bool range_finite(const float* values, std::size_t n) {
  int bad[8] = {};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) bad[k] |= !(std::fabs(values[i + std::size_t(k)]) <= FLT_MAX);
  for (; i < n; ++i) bad[0] |= !(std::fabs(values[i]) <= FLT_MAX);
  int any = 0;
  for (int b : bad) any |= b;
  return any == 0;
}

}  // namespace

// The ranges on the rank's threads, each reporting a non-finite value through one flag.
bool all_finite(std::span<const float> values) {
  constexpr std::size_t kMinPerThread = 64 * 1024;
  std::atomic<bool> bad{false};
  auto check = [&](std::size_t begin, std::size_t end) {
    if (!range_finite(values.data() + begin, end - begin))
      bad.store(true, std::memory_order_relaxed);
  };
  blas::parallel_ranges(values.size(), kMinPerThread, check);
  return !bad.load(std::memory_order_relaxed);
}

void StepAgreement::note_local(bool local_ok, std::span<const float> grads) {
  // With N ranks each rank's ring checks its own chunk of the sum; one rank has no ring.
  local_bad_ = !local_ok || (comm_.size() == 1 && !all_finite(grads));
}

bool StepAgreement::start(const BucketRings& rings) {
  if (rings.started() < rings.size()) return false;
  bool bad = local_bad_;
  for (std::size_t b = 0; b < rings.size(); ++b) {
    const collectives::AsyncAllreduce& ring = rings.at(b).ring;
    if (!ring.own_chunk_reduced()) return false;
    bad = bad || ring.sum_not_finite();
  }
  flag_[0] = bad ? 1.0f : 0.0f;
  start_s_ = now_s();
  ring_.start(comm_, flag_, options_);
  state_ = State::kInFlight;
  return true;
}

bool StepAgreement::advance(const BucketRings& rings, StepComm& account) {
  if (state_ == State::kDone) return false;
  bool moved = false;
  if (state_ == State::kIdle) {
    if (!start(rings)) return false;
    moved = true;
  }
  if (ring_.progress()) {
    done_s_ = now_s();
    state_ = State::kDone;
    account.comm_s += done_s_ - start_s_;
    add_wire_bytes(account, ring_);
    if (comm_.size() > 1) ++account.collectives;
    moved = true;
  }
  return moved;
}

}  // namespace ringtrain
