// GradientSum: how the ranks' gradients are summed in a data-parallel step, the one place where
// the two ways differ. The step (data_parallel_step.hpp) talks to it in the recipe's order:
//
//   begin_step(overlap, B)     a new step of B samples over all ranks
//   prepare(ctx)               what the layers must know of the sum (a poll between pieces of
//                              long work; the exact micro-batches and their sink)
//   add_loss(ℓ)                each loss term (loss_rows() rows of this rank's slice at a time)
//   layer_done(layer)          backward: the layer's gradients are final (a ring may start)
//   finish(local_ok)           the rest of the sum; the ranks agree whether the step is applied
//   next_summed() ...          if so, the summed pieces handed back one by one: the step
//                              gives each to the optimizer, until there is none
//
// Two implementations (framework/src/train/sum/):
//   GradientReducer     the bucketed ring (gradient_reducer.hpp): buckets start during
//                       backward, each bucket's piece comes back as soon as its sum is there
//   ExactGradientSum    --reduction exact (exact_step.hpp): exact per micro-batch and over
//                       ranks, the same bits for any N; the whole buffer comes back at once
//                       (with ZeRO-1, each bucket's shard, its all-gather after it)
// DataParallelStep builds the one its StepPlan::reduction names.
//
// Collective: every rank calls the same methods in the same order.
#pragma once

#include <cstddef>
#include <mutex>
#include <optional>

#include "ringtrain/collectives/error_feedback.hpp"
#include "ringtrain/collectives/options.hpp"
#include "ringtrain/framework/layer.hpp"
#include "ringtrain/framework/train/optimizer_shard.hpp"
#include "ringtrain/framework/train/poll_driver.hpp"

namespace ringtrain {

// What one step's communication cost this rank (GradientSum::account()).
struct StepComm {
  double comm_s = 0.0;     // Σ collective intervals (they may overlap each other)
  double exposed_s = 0.0;  // blocked on communication, nothing else to do
  double poll_s = 0.0;     // polls in finish() outside the waits (layer_done's are backward's)
  // Communication done inside forward and backward, whose times include it: ring starts and
  // polls from backward's layers (layer_done, poll), SyncBN's sums. Compute net of it is what
  // --local-batches auto measures.
  double inside_compute_s = 0.0;
  std::size_t collectives = 0;  // rings run when N > 1: one per bucket, and the agreement
  double bytes = 0.0;           // gradient bytes reduced
  // Payload bytes this rank sent in the step's rings (0 with MPI's own allreduce), and of
  // them the bytes sent to another host (--collective hierarchical only; 0 otherwise).
  double wire_bytes = 0.0, inter_host_bytes = 0.0;
  bool overlap = false;  // this step's rings started during backward
};

// The options of the bucketed ring (gradient_reducer.hpp); the exact sum uses its buckets for
// ZeRO-1's all-gathers.
struct ReducerOptions {
  std::size_t cap_bytes = 1024 * 1024;  // bucket cap (buckets.hpp); > 0
  bool overlap = true;                  // rings start during backward (begin_step may vary it)
  bool update_per_bucket = true;        // overlap on: update each bucket once it is summed
  PollDriver driver = PollDriver::kLayers;
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

class GradientSum {
 public:
  virtual ~GradientSum() = default;

  // Starts a step of global_samples samples over all ranks; overlap: its rings may start
  // during backward (the exact sum has none).
  virtual void begin_step(bool overlap, std::size_t global_samples) = 0;
  // Fills in what the layers need of this sum for the step's forward and backward.
  virtual void prepare(StepContext& ctx) = 0;
  // The loss is taken in terms of this many rows of the rank's local_rows (all of them, or
  // the exact sum's micro-batch), each term handed to add_loss (not scaled).
  virtual std::size_t loss_rows(std::size_t local_rows) const = 0;
  virtual void add_loss(double /*loss_sum*/) {}
  // Backward hook: layer `layer` has written its gradients. Collective.
  virtual void layer_done(std::size_t layer) = 0;
  // After backward. local_ok: this rank's loss was finite (and no test poisoned it). Returns
  // whether the step is applied, the same on every rank. Collective.
  virtual bool finish(bool local_ok) = 0;
  // After finish() returned true: the next summed piece of this rank's shard, which the
  // caller updates before it asks again, until nullopt. Together the pieces cover the shard
  // (the whole buffer unless ZeRO-1) once; with ZeRO-1 the parameters are all-gathered by
  // the time it returns nullopt. Collective.
  virtual std::optional<ShardPiece> next_summed() = 0;
  // This rank's share of the step's loss sum, for the sum over ranks of the metrics window:
  // its own loss sum, or (exact) the exact total on rank 0 and 0 elsewhere. After finish().
  virtual double loss_share(double local_loss_sum) const = 0;
  // The step's communication, once next_summed() returned nullopt (or finish() false).
  virtual const StepComm& account() const = 0;
  // Seconds of this step's communication so far inside forward and backward (what
  // account().inside_compute_s holds once the step is summed).
  virtual double inside_compute_s() const { return account().inside_compute_s; }

  // The elements this rank's optimizer owns (build the optimizer with shard().elements()).
  virtual const OptimizerShard& shard() const = 0;
  // This rank's bf16 rounding residual (empty on an fp32 wire): checkpointed state.
  virtual collectives::ErrorFeedback& feedback() = 0;
  // Every MPI call of this rank made while a step may have rings in flight must hold this
  // lock (SyncBatchNorm's sums): with PollDriver::kThread, two threads talk to MPI.
  virtual std::mutex& mpi_mutex() = 0;
};

}  // namespace ringtrain
