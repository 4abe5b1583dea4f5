// GradientReducer: the gradient sum of one data-parallel step, bucket by bucket, with the
// optimizer update of each bucket as soon as its sum is there, and the account of what the
// communication cost the step. It composes the pieces, one idea per file:
//
//   bucket_plan.hpp     the buckets, and which layer's backward completes which bucket
//   bucket_rings.hpp    one ring per bucket: start, poll, the sums and (ZeRO-1) all-gathers
//   ring_progress.hpp   who polls the rings (main thread or a thread), the MPI lock
//   step_agreement.hpp  all ranks agree whether the summed gradient is finite
//   optimizer_shard.hpp the elements this rank updates (ZeRO-1: its chunk of each bucket,
//                       between the bucket's reduce-scatter and its all-gather), in pieces
//
// The step, overlap on:
//
//   begin_step(true)
//   forward, loss
//   backward: layer L-1 ─ layer_done(L-1) ─ ... ─ layer 0 ─ layer_done(0)
//               a bucket's ring starts at the layer_done that writes its last gradient,
//               while backward goes on with earlier layers
//   finish(ok, update): ranks agree whether the step is applied, then as each bucket's sum
//               completes, update(offset, count) applies the optimizer to it while later
//               buckets are still in flight; it waits only when nothing else is left
//
// On a bf16 wire (ReducerOptions::ring.wire) each bucket's gradient takes this rank's
// rounding residual before its ring starts (bucket_rings.hpp); a step that is not applied
// drops the residual with its gradient.
//
// Overlap off: finish() runs the same buckets one after another, blocking, after backward,
// then updates. Same buckets, same chunks, same sums: the two modes give bitwise the same
// parameters (the optimizer is elementwise, so updating by pieces changes nothing either).
//
// Account per step (StepComm): comm_s = Σ over the step's collectives (the buckets, with
// ZeRO-1 their all-gathers, and the one-float agreement) of [start, observed completion];
// they may overlap each other and compute, so comm_s is no share of the step. exposed_s =
// time the main thread was blocked on communication with no compute left. The main thread
// waits only while some collective is in flight, so exposed <= comm; in off mode every
// collective is exposed: exposed = comm.
//
// Collective: every rank constructs it with the same plan and calls begin_step, layer_done
// and finish in the same order. Not thread-safe itself (one main thread); kThread adds its
// own thread.
#pragma once

#include <cstddef>
#include <mutex>
#include <span>
#include <vector>

#include "ringtrain/collectives/buckets.hpp"
#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/collectives/options.hpp"
#include "ringtrain/collectives/wait.hpp"
#include "ringtrain/framework/parameters.hpp"
#include "ringtrain/framework/train/bucket_plan.hpp"
#include "ringtrain/framework/train/bucket_rings.hpp"
#include "ringtrain/framework/train/optimizer_shard.hpp"
#include "ringtrain/framework/train/ring_progress.hpp"
#include "ringtrain/framework/train/step_agreement.hpp"
#include "ringtrain/framework/train/trace.hpp"

namespace ringtrain {

struct ReducerOptions {
  std::size_t cap_bytes = 1024 * 1024;  // bucket cap (buckets.hpp); > 0
  bool overlap = true;                  // rings start during backward (begin_step may vary it)
  bool update_per_bucket = true;        // overlap on: update each bucket once it is summed
  ProgressDriver driver = ProgressDriver::kLayers;
  double thread_poll_s = 50e-6;               // kThread: sleep between fruitless polls
  std::size_t update_piece_elements = 65536;  // kLayers: poll between pieces of an update
                                              // (the trainer gives each BLAS thread one)
  collectives::RingOptions ring;              // algorithm, segments, wait policy
  // Segments posted ahead per ring step in steps that overlap (ring.segments_in_flight
  // serves the blocking ones). A larger window lets one poll move more of a ring, but the
  // receives of a whole window land in scratch before they are added, and a large window
  // evicts from cache what they are added to. Hence 2, as the blocking rings
  // (bench/README-overlap.md has the measurements).
  std::size_t overlap_segments_in_flight = 2;
  bool zero = false;  // ZeRO-1 (optimizer_shard.hpp): always updates per bucket
};

// Whether a step's optimizer update runs bucket by bucket, each bucket as soon as its sum is
// there (optimizer_shard.hpp), rather than once on the whole buffer after the last sum:
//   --zero 1                 always, overlap or not: each rank updates its chunk of each
//                            bucket between the bucket's reduce-scatter and its all-gather
//   overlap on, --zero 0     if options.update_per_bucket: updates run while later buckets
//                            are still in flight
//   overlap off, --zero 0    never: the buckets are summed one after another, then one update
// `overlap` is the step's mode (begin_step). The second form answers for the run's setting
// options.overlap (the manifest and the start-up banner); with --overlap alternate it holds
// for the steps that overlap.
bool updates_per_bucket(const ReducerOptions& options, bool overlap);
inline bool updates_per_bucket(const ReducerOptions& options) {
  return updates_per_bucket(options, options.overlap);
}

class GradientReducer {
 public:
  // The plan covers `params` (its entries, in buffer order, and each entry's layer). The
  // gradient buffer params.grads() and the parameters params.values() must stay where they
  // are. Collective: ranks check that they agree on the plan (one small collective);
  // CollectiveError otherwise. Throws UsageError for a cap of 0 bytes, for zero with
  // Algorithm::kMpi on more than one rank, for too many buckets for MPI's tags, and for
  // kThread without MPI_THREAD_SERIALIZED.
  GradientReducer(const collectives::Communicator& comm, ParameterStore& params,
                  const ReducerOptions& options, Trace* trace);
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  const std::vector<collectives::Bucket>& buckets() const { return plan_.buckets(); }
  // The layer whose backward writes bucket b's last gradient.
  std::size_t ready_layer(std::size_t b) const { return plan_.ready_layer(b); }
  const ReducerOptions& options() const { return options_; }
  // The elements this rank's optimizer owns: all of them, or with zero its chunk of each
  // bucket. Build the optimizer with shard().elements() elements.
  const OptimizerShard& shard() const { return shard_; }

  // Every MPI call of this rank made while a step may have rings in flight must hold this
  // lock (SyncBatchNorm's sums): with kThread, two threads talk to MPI.
  std::mutex& mpi_mutex() { return progress_.mpi_mutex(); }

  // Starts a step; `overlap` says whether its rings start during backward (options().overlap
  // unless steps alternate). Both modes give bitwise the same sums.
  void begin_step(bool overlap);
  // Backward hook: layer `layer` has written its gradients. Overlap on: starts the buckets it
  // completes; polls the ones in flight (kLayers). Collective.
  void layer_done(std::size_t layer);
  // Polls the rings in flight (kLayers; nothing with kThread): for layers to call between
  // pieces of long work (StepContext::poll).
  void poll();
  // After backward. local_ok: this rank's loss was finite. Returns whether the step is
  // applied (agreed by all ranks); if so, update has been called on pieces that cover this
  // rank's shard (the whole buffer unless zero) exactly once, and with zero the parameters
  // have been all-gathered. Collective.
  bool finish(bool local_ok, const UpdatePiece& update);
  // For a gradient buffer already summed over ranks by other means, the same on every rank
  // (the exact step, exact_step.hpp): update is called on pieces that cover this rank's shard
  // exactly once, bucket by bucket, and with zero each bucket's parameters are all-gathered
  // right after its update, as finish() does with overlap off. Starts its own step (the
  // account then holds the all-gathers alone). Collective with zero, local otherwise.
  void update_summed(const UpdatePiece& update);
  const StepComm& account() const { return account_; }
  // This rank's bf16 rounding residual (empty on an fp32 wire): checkpointed state.
  collectives::ErrorFeedback& feedback() { return rings_.feedback(); }
  const collectives::ErrorFeedback& feedback() const { return rings_.feedback(); }

 private:
  bool finish_blocking(const UpdatePiece& update);
  bool finish_overlapped(const UpdatePiece& update);
  void update_each_bucket(const UpdatePiece& update);
  bool update_summed_buckets(std::unique_lock<std::mutex>& lock, const UpdatePiece& update,
                             double& poll_t0);
  void update_bucket(std::size_t b, const UpdatePiece& update);
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
  bool overlap_ = true;  // this step's mode

  Trace* trace_;
  std::size_t wait_name_ = 0, agree_name_ = 0;
  std::vector<std::size_t> ring_names_;

  RingProgress progress_;  // last: its thread stops before the rings it polls go
};

}  // namespace ringtrain
