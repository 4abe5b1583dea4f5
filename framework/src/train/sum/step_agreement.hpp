// StepAgreement: whether this step's summed gradient is finite, decided the same way on every
// rank before any bucket is updated. A step whose sum holds a NaN or ±inf is skipped.
//
// Where it sits in a step: at GradientReducer::finish, after backward, while bucket rings are
// still in flight. The decision must come before the first bucket is updated, and every rank
// must take the same one, or the replicas would part.
//
// How: after its reduce-scatter, rank r's chunk of each bucket holds the full sum, and the
// ring tests it for NaN and ±inf in the same pass as the last add (ring_transfer.hpp); the
// chunks of all ranks cover the buffer. Once every bucket's own chunk is summed (before the
// last all-gathers end), one 1-float ring sums the ranks' "bad" flags:
//
//   flag = Σ over ranks r of [r's loss was not finite, or one of r's summed chunks is not]
//   the step is applied iff flag == 0
//
// so every rank learns whether the summed gradient is finite, as if it had tested all of it.
// A rank whose loss was not finite poisons its gradient (the trainer writes a NaN before the
// bucket starts), so the sum carries it, and that rank's own flag says so as well.
// With one rank nothing is summed, so it tests its whole gradient itself.
#pragma once

#include <span>

#include "ringtrain/collectives/async.hpp"
#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/collectives/options.hpp"
#include "train/sum/bucket_rings.hpp"

namespace ringtrain {

// True iff no value is NaN or ±inf; the check runs on the rank's threads (blas::parallel_ranges).
bool all_finite(std::span<const float> values);

class StepAgreement {
 public:
  // `options`: the agreement ring's own tag range (BucketRings::agreement_options()).
  StepAgreement(const collectives::Communicator& comm, const collectives::RingOptions& options)
      : comm_(comm), options_(options) {}

  // Forgets the last step's decision.
  void begin_step() { state_ = State::kIdle; }
  // This rank's own verdict, after backward: local_ok says its loss was finite; on one rank
  // `grads` (the whole flat gradient, summed by nobody) is tested here too.
  void note_local(bool local_ok, std::span<const float> grads);
  // Starts the agreement once every bucket's own chunk is summed, and notes its outcome;
  // true if either happened. Caller holds the MPI lock (ring_poller.hpp). Collective: every
  // rank calls it until done().
  bool advance(const BucketRings& rings, StepComm& account);

  bool done() const { return state_ == State::kDone; }
  // Valid once done(): no rank saw a value that was not finite.
  bool applied() const { return flag_[0] == 0.0f; }
  double start_s() const { return start_s_; }
  double done_s() const { return done_s_; }

 private:
  bool start(const BucketRings& rings);  // false if some bucket's own chunk is not summed yet

  enum class State { kIdle, kInFlight, kDone };
  const collectives::Communicator& comm_;
  collectives::RingOptions options_;
  collectives::AsyncAllreduce ring_;
  State state_ = State::kIdle;
  bool local_bad_ = false;
  float flag_[1] = {0.0f};  // the ring's buffer: Σ over ranks of "my part is bad"
  double start_s_ = 0.0, done_s_ = 0.0;
};

}  // namespace ringtrain
