// GradientReducer: the gradient sum of one data-parallel step on the bucketed ring
// (GradientSum, gradient_sum.hpp), bucket by bucket, handing each bucket's summed piece back
// for the optimizer as soon as its sum is there, and the account of what the communication
// cost the step. It composes the pieces, one idea per file:
//
//   bucket_plan.hpp     the buckets, and which layer's backward completes which bucket
//   bucket_rings.hpp    one ring per bucket: start, poll, the sums and (ZeRO-1) all-gathers
//   ring_poller.hpp   who polls the rings (main thread or a thread), the MPI lock
//   step_agreement.hpp  all ranks agree whether the summed gradient is finite
//   optimizer_shard.hpp the elements this rank updates (ZeRO-1: its chunk of each bucket,
//                       between the bucket's reduce-scatter and its all-gather), in pieces
//
// The step, overlap on:
//
//   begin_step(true, B)
//   forward, loss
//   backward: layer L-1 ─ layer_done(L-1) ─ ... ─ layer 0 ─ layer_done(0)
//               a bucket's ring starts at the layer_done that writes its last gradient,
//               while backward goes on with earlier layers
//   finish(ok): the ranks agree whether the step is applied
//   next_summed() until nullopt: as each bucket's sum completes, its piece comes back (in
//               pieces of update_piece_elements, the rings polled between them) and the
//               step's optimizer updates it while later buckets are still in flight; it
//               waits only when nothing else is left
//
// On a bf16 wire (ReducerOptions::ring.wire) each bucket's gradient takes this rank's
// rounding residual before its ring starts (bucket_rings.hpp); a step that is not applied
// drops the residual with its gradient.
//
// Overlap off: finish() runs the same buckets one after another, blocking, after backward;
// the pieces come back after. Same buckets, same chunks, same sums: the two modes give bitwise the
// same parameters (the optimizer is elementwise, so updating by pieces changes nothing either).
//
// Account per step (StepComm, gradient_sum.hpp): comm_s = Σ over the step's collectives (the
// buckets, with ZeRO-1 their all-gathers, and the one-float agreement) of [start, observed
// completion]; they may overlap each other and compute, so comm_s is no share of the step.
// exposed_s = time the main thread was blocked on communication with no compute left. The main
// thread waits only while some collective is in flight, so exposed <= comm; in off mode every
// collective is exposed: exposed = comm.
//
// Collective: every rank constructs it with the same plan and calls begin_step, layer_done,
// finish and next_summed in the same order. Not thread-safe itself (one main thread); kThread adds
// its own thread.
#pragma once

#include <cstddef>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "ringtrain/collectives/buckets.hpp"
#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/collectives/options.hpp"
#include "ringtrain/collectives/wait.hpp"
#include "ringtrain/framework/parameters.hpp"
#include "ringtrain/framework/train/gradient_sum.hpp"
#include "ringtrain/framework/train/optimizer_shard.hpp"
#include "train/sum/bucket_plan.hpp"
#include "train/sum/bucket_rings.hpp"
#include "train/sum/ring_poller.hpp"
#include "train/sum/step_agreement.hpp"
#include "train/trace.hpp"

namespace ringtrain {

class GradientReducer final : public GradientSum {
 public:
  // The plan covers `params` (its entries, in buffer order, and each entry's layer). The
  // gradient buffer params.grads() and the parameters params.values() must stay where they
  // are. `trace` (may be null) receives the rings' spans and the waits. Collective: ranks
  // check that they agree on the plan (one small collective); CollectiveError otherwise.
  // Throws UsageError for a cap of 0 bytes, for zero with Algorithm::kMpi on more than one
  // rank, for too many buckets for MPI's tags, and for kThread without
  // MPI_THREAD_SERIALIZED.
  GradientReducer(const collectives::Communicator& comm, ParameterStore& params,
                  const ReducerOptions& options, Trace* trace);
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  const std::vector<collectives::Bucket>& buckets() const { return plan_.buckets(); }
  // The layer whose backward writes bucket b's last gradient.
  std::size_t ready_layer(std::size_t b) const { return plan_.ready_layer(b); }
  const ReducerOptions& options() const { return options_; }

  // GradientSum. begin_step: `overlap` says whether this step's rings start during backward
  // (options().overlap unless steps alternate); both modes give bitwise the same sums.
  void begin_step(bool overlap, std::size_t global_samples) override;
  // The layers poll the rings in flight between pieces of long work (StepContext::poll).
  void prepare(StepContext& ctx) override { ctx.poll = &poll_hook_; }
  std::size_t loss_rows(std::size_t local_rows) const override { return local_rows; }
  // Overlap on: starts the buckets the layer completes; polls the ones in flight (kLayers).
  void layer_done(std::size_t layer) override;
  bool finish(bool local_ok) override;
  std::optional<ShardPiece> next_summed() override;
  double loss_share(double local_loss_sum) const override { return local_loss_sum; }
  const StepComm& account() const override { return account_; }
  const OptimizerShard& shard() const override { return shard_; }
  collectives::ErrorFeedback& feedback() override { return rings_.feedback(); }
  std::mutex& mpi_mutex() override { return poller_.mpi_mutex(); }

  // Polls the rings in flight (kLayers; nothing with kThread): for layers to call between
  // pieces of long work (StepContext::poll).
  void poll();
  // For a gradient buffer already summed over ranks by other means, the same on every rank
  // (the exact sum, exact_step.hpp): starts a step whose next_summed() hands back this
  // rank's piece of each bucket, bucket by bucket, and with zero all-gathers each bucket's
  // parameters right after its piece was updated, as with overlap off. The account then
  // holds the all-gathers alone. Collective with zero, local otherwise.
  void begin_summed();

 private:
  // What next_summed() hands back after finish() (or begin_summed()).
  enum class HandBack {
    kNothing,     // the step is over (or not applied)
    kWhole,       // the whole buffer, in one piece
    kBuckets,     // overlap off: each bucket's piece in turn, its all-gather after (ZeRO-1)
    kOverlapped,  // overlap on: each bucket's piece as its sum completes, polling between
    kClosing,     // the last piece went back: close the step's account
  };
  static constexpr std::size_t kNoBucket = std::numeric_limits<std::size_t>::max();

  bool finish_blocking();
  bool finish_overlapped();
  std::optional<ShardPiece> next_bucket();
  std::optional<ShardPiece> next_overlapped();
  void start_update(std::size_t b);
  std::optional<ShardPiece> next_piece();
  void poll_between_pieces();
  void bucket_updated();
  std::optional<ShardPiece> hand_back_done();
  bool step_complete(bool per_bucket) const;
  double wait_exposed(collectives::Waiter& waiter, double poll_t0);
  void trace_rings();

  const collectives::Communicator& comm_;
  std::span<float> grads_;
  std::span<float> params_;
  ReducerOptions options_;
  BucketPlan plan_;
  OptimizerShard shard_;
  StepComm account_;
  BucketRings rings_;  // adds to account_
  StepAgreement agreement_;
  std::function<void()> poll_hook_;  // StepContext::poll, made once

  // This step: its mode and where next_summed() stands.
  bool overlap_ = true;
  HandBack hand_back_ = HandBack::kNothing;
  bool close_blocking_ = false;  // at the end: exposed = comm, and the rings' spans if
  bool trace_at_close_ = false;  // they ran this step
  std::optional<collectives::Waiter> waiter_;  // overlap on: the wait between polls
  double poll_t0_ = 0.0;                       // overlap on: the polls since then are poll_s
  std::size_t bucket_ = 0;            // kBuckets: the next bucket; kOverlapped: the sweep's next
  bool moved_ = false;                // kOverlapped: this round's polls moved a ring
  std::size_t updating_ = kNoBucket;  // the bucket whose piece goes back in pieces
  std::size_t handed_ = 0;            // its elements handed back so far
  std::size_t piece_elements_ = 0;    // at most this many at a time

  Trace* trace_;
  std::size_t wait_name_ = 0, agree_name_ = 0;
  std::vector<std::size_t> ring_names_;

  RingPoller poller_;  // last: its thread stops before the rings it polls go
};

}  // namespace ringtrain
