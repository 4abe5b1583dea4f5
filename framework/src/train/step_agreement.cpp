// The agreement on skipping a step with a non-finite gradient (see step_agreement.hpp).
#include "ringtrain/framework/train/step_agreement.hpp"

#include <cfloat>
#include <chrono>
#include <cmath>

#include "ringtrain/framework/train/now.hpp"

namespace ringtrain {

// !(|v| <= FLT_MAX) is true for NaN and for ±inf; eight accumulators let the loop vectorise.
bool all_finite(std::span<const float> values) {
  int bad[8] = {};
  std::size_t i = 0;
  for (; i + 8 <= values.size(); i += 8)
    for (int k = 0; k < 8; ++k) bad[k] |= !(std::fabs(values[i + std::size_t(k)]) <= FLT_MAX);
  for (; i < values.size(); ++i) bad[0] |= !(std::fabs(values[i]) <= FLT_MAX);
  int any = 0;
  for (int b : bad) any |= b;
  return any == 0;
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
