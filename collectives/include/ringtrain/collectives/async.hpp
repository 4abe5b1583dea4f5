// A non-blocking allreduce: start it, keep computing, poke it now and then, wait at the end.
//
// Where it sits: backward produces gradients bucket by bucket; as soon as a bucket is
// complete the trainer start()s its reduction and calls progress() between layers, so the
// ring moves while backward still runs; wait() at the end of backward is the
// exposed communication time. MPI makes no progress on its own (no progress thread), so the
// ring advances only inside start(), progress() and wait().
//
//   AsyncAllreduce reduction;                  // reuse it: buffers are planned once
//   reduction.start(comm, bucket, options);    // collective (same order on every rank)
//   while (backward_has_work) { compute(); reduction.progress(); }
//   Counters c = reduction.wait();
//
// Several in flight at once on one communicator need distinct RingOptions::tag values.
//
// ZeRO-1 runs the two halves apart: start(..., Collective::kReduceScatter) on the gradient,
// then, once this rank has updated its shard (reduce_scatter_shard below: the ring's own
// chunk, schedule.hpp, or the hierarchical shard), start(..., Collective::kAllGather) on the
// parameters with the same object.
#pragma once

#include <mpi.h>

#include <span>

#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/collectives/hierarchical.hpp"
#include "ringtrain/collectives/options.hpp"
#include "ringtrain/collectives/ring_transfer.hpp"

namespace ringtrain::collectives {

// The elements of M that a reduce-scatter with `options` leaves fully summed on `rank` of N,
// and that its all-gather takes from that rank: chunk `rank` (kRing; kMpi runs no halves) or
// hierarchical_shard of the hierarchy's layout (kHierarchical; CollectiveError without
// options.hierarchy). Local.
ChunkRange reduce_scatter_shard(std::size_t M, int N, int rank, const RingOptions& options);

class AsyncAllreduce {
 public:
  AsyncAllreduce() = default;
  // An unfinished reduction is completed (blocking): no MPI request outlives its buffer.
  ~AsyncAllreduce();
  AsyncAllreduce(const AsyncAllreduce&) = delete;
  AsyncAllreduce& operator=(const AsyncAllreduce&) = delete;

  // Begins data <- Σ over ranks of data, in place. Collective. With options.check_sizes the
  // size agreement check runs first and blocks (one small collective). `comm` and `data`
  // must stay alive and `data` untouched until wait() or progress() reports completion.
  // Throws CollectiveError (size mismatch, MPI failure, still active). `which` other than
  // kAllreduce (one half: schedule.hpp, hierarchical.hpp) needs Algorithm::kRing or
  // kHierarchical; with kMpi it throws CollectiveError, and so does Wire::kBf16 with kMpi.
  // kHierarchical needs options.hierarchy, built on `comm` (CollectiveError otherwise). A
  // hierarchical reduce-scatter leaves the sum on this rank's hierarchical_shard (not chunk
  // `rank`), and its all-gather takes each rank's values from there. `residual` (empty
  // or data.size() floats, alive until completion) receives this rank's bf16 rounding
  // losses: RingTransfer::start (ring_transfer.hpp).
  void start(const Communicator& comm, std::span<float> data, const RingOptions& options = {},
             Collective which = Collective::kAllreduce, std::span<float> residual = {});
  // Advances without blocking; true once the reduction is complete (and when idle).
  bool progress();
  // Blocks until complete (waiting as options.wait says); this rank's counters.
  Counters wait();
  bool active() const {
    return ring_.active() || hierarchical_.active() || mpi_request_ != MPI_REQUEST_NULL;
  }
  // True once this rank's chunk (schedule.hpp: chunk `rank`) holds the full sum: with the
  // ring, after its reduce-scatter, before the all-gather ends; with MPI, at completion;
  // hierarchical: this rank's piece of the sum (hierarchical.hpp).
  bool own_chunk_reduced() const;
  // True if this rank's fully summed chunk holds a NaN or ±inf (valid once
  // own_chunk_reduced()). The chunks of all ranks cover the buffer: "some rank saw one" is
  // "the sum is not finite".
  bool sum_not_finite() const;
  // Completed MPI operations of the ring so far (0 with Algorithm::kMpi): a polling loop
  // compares it to tell progress from idling.
  std::size_t events() const { return ring_.events() + hierarchical_.events(); }
  // This rank's counters of the last reduction, once complete (zero with Algorithm::kMpi).
  Counters counters() const;

 private:
  void check_own_chunk();  // Algorithm::kMpi, at completion

  const Communicator* comm_ = nullptr;
  RingOptions options_;
  std::span<float> data_;
  bool mpi_not_finite_ = false;
  RingTransfer ring_;                           // Algorithm::kRing
  HierarchicalTransfer hierarchical_;           // Algorithm::kHierarchical
  MPI_Request mpi_request_ = MPI_REQUEST_NULL;  // Algorithm::kMpi: MPI_Iallreduce
};

}  // namespace ringtrain::collectives
