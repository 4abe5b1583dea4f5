// GradientReducer: the gradient sum of one data-parallel step, bucket by bucket, with the
// optimizer update of each bucket as soon as its sum is there, and the account of what the
// communication cost the step.
//
// Where it sits in a step (trainer.hpp), overlap on:
//
//   forward, loss
//   backward: layer L-1 ─ layer_done(L-1) ─ ... ─ layer 0 ─ layer_done(0)
//               a bucket's ring starts at the layer_done that writes its last gradient
//               (buckets.hpp), while backward goes on with earlier layers
//   finish(update): ranks agree whether the step is applied, then as each bucket's sum
//               completes, update(offset, count) applies the optimizer to it while later
//               buckets are still in flight; it waits only when nothing else is left
//
// Overlap off: finish() runs the same buckets one after another, blocking, after backward,
// then calls update once for the whole buffer. Same buckets, same chunks, same sums: the
// two modes give bitwise the same parameters (the optimizer is elementwise, so updating by
// pieces changes nothing either: optimizer.hpp).
//
// ZeRO-1 (options.zero). Each bucket's ring runs only its reduce-scatter on the gradient;
// once the step is agreed, update(...) is called on this rank's chunk of the bucket alone
// (optimizer_shard.hpp), and the all-gather half of the same ring then carries the updated
// parameters of the bucket to every rank. The reduce-scatter is the first half of the same
// ring and the update is elementwise, so the parameters are bitwise those of zero off. Same
// bytes on the wire; optimizer state and update work divided by N. Needs Algorithm::kRing.
//
// Skipping a step (non-finite gradients). The decision must come before the first bucket is
// updated, and every rank must take the same one. After its reduce-scatter, rank r's chunk
// of each bucket holds the full sum, and the ring tests it for NaN and ±inf in the same pass
// as the last add (ring_transfer.hpp); the chunks of all ranks cover the buffer. Once every
// bucket's chunk is summed (before the last all-gathers end), one 1-float ring sums the
// ranks' "bad" flags: every rank learns whether the summed gradient is finite, as if it had
// tested all of it, and only then updates. A rank whose loss was not finite poisons its
// gradient (the trainer writes a NaN before the bucket starts), so the sum carries it.
//
// Progress. MPI moves data only inside MPI calls (no progress thread in MPICH/UCX), so a
// ring started during backward advances only when this rank polls it. Two drivers:
//   kLayers  the main thread polls between layers (layer_done), between pieces of the
//            per-bucket optimizer update, and while it waits
//   kThread  a communication thread polls while buckets are in flight, sleeping between
//            polls that find nothing; the main thread only starts buckets and waits.
// Which one is the default, and why, is in gradient_reducer.cpp (measured).
//
// Account per step (StepComm): comm_s = Σ over the step's collectives (the buckets and the
// one-float agreement) of [start, observed completion]; they may overlap each other and
// compute, so comm_s is no share of the step. exposed_s = time the main thread was blocked
// on communication with no compute left. The main thread waits only while some collective
// is in flight, so exposed <= comm; in off mode every collective is exposed: exposed = comm.
//
// Collective: every rank constructs it with the same plan and calls layer_done and finish
// in the same order. Not thread-safe itself (one main thread); kThread adds its own thread.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "ringtrain/collectives/async.hpp"
#include "ringtrain/collectives/buckets.hpp"
#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/collectives/options.hpp"
#include "ringtrain/framework/parameters.hpp"
#include "ringtrain/framework/train/optimizer_shard.hpp"
#include "ringtrain/framework/train/trace.hpp"

namespace ringtrain {

enum class ProgressDriver { kLayers, kThread };
std::string to_string(ProgressDriver driver);
ProgressDriver parse_progress_driver(const std::string& name);  // "layers" | "thread"

struct ReducerOptions {
  std::size_t cap_bytes = 1024 * 1024;  // bucket cap (buckets.hpp); > 0
  bool overlap = true;                  // rings start during backward (begin_step may vary it)
  bool update_per_bucket = true;        // overlap on: update each bucket once it is summed
  ProgressDriver driver = ProgressDriver::kLayers;
  double thread_poll_s = 50e-6;               // kThread: sleep between fruitless polls
  std::size_t update_piece_elements = 65536;  // kLayers: poll between pieces of an update
  collectives::RingOptions ring;              // algorithm, segments, wait policy
  // Segments posted ahead per ring step in steps that overlap (ring.segments_in_flight
  // serves the blocking ones); why 2: gradient_reducer.cpp.
  std::size_t overlap_segments_in_flight = 2;
  bool zero = false;  // ZeRO-1: see above; implies per-bucket updates
};

// update(offset, count, state_offset): apply the optimizer to elements [offset, offset+count)
// of the flat buffers, which are elements [state_offset, state_offset+count) of the
// optimizer's own range (state_offset = offset unless ZeRO-1 shards it).
using UpdatePiece = std::function<void(std::size_t, std::size_t, std::size_t)>;

// What one step's communication cost this rank.
struct StepComm {
  double comm_s = 0.0;          // Σ collective intervals
  double exposed_s = 0.0;       // blocked on communication, nothing else to do
  double progress_s = 0.0;      // polls in finish() outside the waits (layer_done's are backward's)
  std::size_t collectives = 0;  // rings run when N > 1: one per bucket, and the agreement
  double bytes = 0.0;           // gradient bytes reduced
};

class GradientReducer {
 public:
  // The plan covers `params` (its entries, in buffer order, and each entry's layer). The
  // gradient buffer params.grads() must stay where it is. Collective: ranks check that they
  // agree on the plan (one small collective); CollectiveError otherwise.
  // Throws UsageError for zero with Algorithm::kMpi on more than one rank.
  GradientReducer(const collectives::Communicator& comm, ParameterStore& params,
                  const ReducerOptions& options, Trace* trace);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  const std::vector<collectives::Bucket>& buckets() const { return buckets_; }
  // The layer whose backward writes bucket b's last gradient.
  std::size_t ready_layer(std::size_t b) const { return ready_layer_[b]; }
  const ReducerOptions& options() const { return options_; }
  // The elements this rank's optimizer owns: all of them, or with zero its chunk of each
  // bucket. Build the optimizer with shard().elements() elements.
  const OptimizerShard& shard() const { return shard_; }

  // Every MPI call of this rank made while a step may have rings in flight must hold this
  // lock (SyncBatchNorm's sums): with kThread, two threads talk to MPI.
  std::mutex& mpi_mutex() { return mpi_mutex_; }

  // Starts a step; `overlap` says whether its rings start during backward (options().overlap
  // unless steps alternate). Both modes give bitwise the same sums.
  void begin_step(bool overlap);
  // Backward hook: layer `layer` has written its gradients. Overlap on: checks and starts
  // the buckets it completes; polls the ones in flight (kLayers).
  void layer_done(std::size_t layer);
  // Polls the rings in flight (kLayers; nothing with kThread): for layers to call between
  // pieces of long work (StepContext::poll).
  void poll();
  // After backward. local_ok: this rank's loss was finite. Returns whether the step is
  // applied (agreed by all ranks); if so, update has been called on pieces that cover this
  // rank's shard (the whole buffer unless zero) exactly once, and with zero the parameters
  // have been all-gathered. Collective.
  bool finish(bool local_ok, const UpdatePiece& update);
  const StepComm& account() const { return account_; }

 private:
  struct InFlight;
  void start(std::size_t b);
  bool poll_locked();  // progress every ring in flight; true if any completed
  void complete(std::size_t b, double now);
  bool advance_agreement();
  void trace_rings();
  void update_bucket(std::size_t b, const UpdatePiece& update);
  void start_gather(std::size_t b);  // zero: the all-gather of bucket b's parameters
  bool in_flight() const { return completed_ < started_ || gathering_ > 0; }
  void thread_main();

  const collectives::Communicator& comm_;
  std::span<float> grads_;
  std::span<float> params_;
  ReducerOptions options_;
  Trace* trace_;
  std::vector<collectives::Bucket> buckets_;
  OptimizerShard shard_;
  std::vector<std::size_t> ready_layer_;
  std::vector<std::unique_ptr<InFlight>> rings_;  // one per bucket, planned once
  std::size_t wait_name_ = 0, agree_name_ = 0;
  std::vector<std::size_t> ring_names_;

  // Per step.
  bool overlap_ = true;  // this step's mode
  enum class Agreement { kIdle, kInFlight, kDone };
  Agreement agreement_ = Agreement::kIdle;
  float flag_[1] = {0.0f};  // the agreement's buffer: Σ over ranks of "my chunks are bad"
  bool local_bad_ = false;
  std::size_t started_ = 0, completed_ = 0;   // buckets started / completed (in flight between)
  std::size_t gathering_ = 0, gathered_ = 0;  // zero: all-gathers in flight / completed
  StepComm account_;

  // kThread.
  std::mutex mpi_mutex_;
  struct Thread;
  std::unique_ptr<Thread> thread_;
};

}  // namespace ringtrain
