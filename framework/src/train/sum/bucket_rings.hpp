// BucketRings: the ring pool of the gradient sum, one non-blocking ring per bucket, planned
// once and reused every step, and what each ring has done in the current step.
//
// Where it sits in a step: GradientReducer starts bucket b's ring once backward has written
// the bucket (start_sum), polls the rings in flight between layers or from a polling thread
// (poll, ring_poller.hpp), and, with ZeRO-1, starts the all-gather of the bucket's updated
// parameters on the same ring (start_gather). A ring moves only while its rank polls it: MPI
// makes no progress on its own (collectives/async.hpp).
//
// Vocabulary, per bucket and step: started -> summed (the ring's sum is complete: the whole
// allreduce, or with ZeRO-1 only its reduce-scatter, after which this rank's chunk holds the
// full sum) -> updated (the optimizer has run on this rank's piece) -> gathering -> gathered
// (ZeRO-1: every rank holds the bucket's updated parameters). Rings complete in any order.
//
// bf16 wire (RingOptions::wire): the gradient sums travel as bf16 with error feedback
// (collectives/error_feedback.hpp): start_sum adds the bucket's part of this rank's residual
// to the bucket's gradient, and the ring writes the new losses back. The ZeRO-1 all-gather
// moves parameters, so it stays fp32.
//
// Tags: ring b uses [tag + b·2N, tag + (b+1)·2N), so rings in flight together never match
// each other's messages; one more range, after the buckets', is kept for the step's
// agreement (step_agreement.hpp).
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "ringtrain/collectives/async.hpp"
#include "ringtrain/collectives/buckets.hpp"
#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/collectives/error_feedback.hpp"
#include "ringtrain/collectives/options.hpp"
#include "ringtrain/framework/train/gradient_sum.hpp"

namespace ringtrain {

// Adds a completed ring's sent bytes to the step's account.
void add_wire_bytes(StepComm& account, const collectives::AsyncAllreduce& ring);

// One bucket's ring and where it is in this step.
struct BucketRing {
  collectives::AsyncAllreduce ring;
  collectives::RingOptions options;  // its tag range; this step's segments in flight
  double start_s = 0.0;              // the sum started
  double done_s = 0.0;               // the sum completed (ZeRO-1: later, the all-gather did)
  double gather_start_s = 0.0;       // ZeRO-1: the all-gather started
  bool started = false, summed = false, updated = false;
  bool gathering = false, gathered = false;  // ZeRO-1
};

class BucketRings {
 public:
  // One ring per bucket of `buckets`, with `ring`'s algorithm, segments and wait policy.
  // zero: a ring's sum is its reduce-scatter alone (kRing or kHierarchical). Each ring's
  // interval, the count of collectives and the gradient bytes are added to `account`, which
  // must outlive this object. Throws UsageError if the tag ranges exceed MPI's tag bound.
  BucketRings(const collectives::Communicator& comm, std::span<const collectives::Bucket> buckets,
              const collectives::RingOptions& ring, bool zero, StepComm& account);

  // Every call below, const ones included, needs the MPI lock (ring_poller.hpp) held: a
  // polling thread may be polling the same rings.

  // Forgets the last step; rings run this step with `segments_in_flight` segments per ring
  // step posted ahead.
  void begin_step(std::size_t segments_in_flight);
  // Starts bucket b's sum on its span of the flat gradient buffer `grads`. Collective.
  void start_sum(std::size_t b, std::span<float> grads);
  // ZeRO-1: starts the all-gather of bucket b's span of the flat parameter buffer `params`,
  // once this rank has updated its chunk of it. Collective.
  void start_gather(std::size_t b, std::span<float> params);
  // Advances every ring in flight without blocking; true if any completed.
  bool poll();
  // Blocks until bucket b's ring in flight (its sum or its all-gather) completes.
  void wait(std::size_t b);
  void mark_updated(std::size_t b) { rings_[b]->updated = true; }

  std::size_t size() const { return rings_.size(); }
  std::size_t started() const { return started_; }
  std::size_t summed() const { return summed_; }
  std::size_t gathered() const { return gathered_; }
  bool all_updated() const;
  bool in_flight() const { return summed_ < started_ || gathering_ > 0; }
  // Completed MPI operations of this step's rings: a poll that changes it moved data.
  std::size_t events() const;
  const BucketRing& at(std::size_t b) const { return *rings_[b]; }
  // This rank's rounding residual over the whole gradient buffer (empty on an fp32 wire):
  // part of the training state.
  collectives::ErrorFeedback& feedback() { return feedback_; }
  const collectives::ErrorFeedback& feedback() const { return feedback_; }
  // The tag range after the buckets', for the step's agreement.
  const collectives::RingOptions& agreement_options() const { return agreement_options_; }

 private:
  void note_summed(BucketRing& f, double now);
  void note_gathered(BucketRing& f, double now);

  const collectives::Communicator& comm_;
  std::vector<collectives::Bucket> buckets_;
  bool zero_;
  StepComm& account_;
  std::vector<std::unique_ptr<BucketRing>> rings_;  // AsyncAllreduce does not move
  collectives::ErrorFeedback feedback_;             // (gradient elements) on a bf16 wire, else 0
  collectives::RingOptions agreement_options_;
  std::size_t started_ = 0, summed_ = 0;      // this step (in flight between them)
  std::size_t gathering_ = 0, gathered_ = 0;  // ZeRO-1: all-gathers in flight / completed
};

}  // namespace ringtrain
