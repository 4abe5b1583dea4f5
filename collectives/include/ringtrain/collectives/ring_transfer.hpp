// RingTransfer: the ring's state machine, one collective call in progress. The blocking calls
// of ring.hpp and AsyncAllreduce (async.hpp) drive it; ring.hpp's essay explains the
// algorithm, schedule.hpp the arithmetic. It owns its scratch (2 · segments_in_flight
// segments, for the reduce-scatter receives of two steps) and request slots; they grow on the
// first call and are reused, so a caller that keeps one RingTransfer allocates nothing on the
// hot path.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/collectives/options.hpp"
#include "ringtrain/collectives/schedule.hpp"
#include "ringtrain/collectives/wait.hpp"

namespace ringtrain::collectives {

// Reusable: start() again once the previous transfer has finished.
class RingTransfer {
 public:
  RingTransfer() = default;
  // An unfinished transfer is completed (blocking) so that no MPI request outlives its
  // buffers. Never throws.
  ~RingTransfer();
  RingTransfer(const RingTransfer&) = delete;
  RingTransfer& operator=(const RingTransfer&) = delete;

  // Begins `which` on `data`, in place, and posts the first messages. Every rank of `comm`
  // must start the same collective with the same data.size() and options (the size check,
  // if wanted, is the caller's: ring.hpp). `comm` and `data` must outlive the transfer.
  // Messages of step t carry tag options.tag + t. Throws CollectiveError if a transfer is
  // still active or options are invalid.
  void start(const Communicator& comm, std::span<float> data, Collective which,
             const RingOptions& options);
  // Polls MPI once around (never blocks); returns true once the transfer is complete.
  bool progress();
  // Blocks until complete, idling between polls as `policy` says; returns the counters.
  Counters wait(WaitPolicy policy);

  bool active() const { return active_; }
  // A reduce-scatter or allreduce: true once this rank's chunk (chunk `rank`) holds the full
  // sum, which is before the all-gather ends (true when idle, and for an all-gather).
  bool own_chunk_reduced() const;
  // True if this rank's fully summed chunk holds a NaN or ±inf (valid once
  // own_chunk_reduced()). The ranks' chunks cover the buffer, so "some rank saw one" is "the
  // sum is not finite": one small agreement tells every rank. False for an all-gather.
  bool sum_not_finite() const { return sum_not_finite_; }
  // Completed MPI operations so far: a wait loop compares it to tell progress from idling.
  std::size_t events() const { return events_; }
  const Counters& counters() const { return counters_; }

 private:
  // Progress of one step, per direction: segments posted and finished (in order: only the
  // oldest request of a step is ever tested).
  struct Step {
    std::size_t send_segments = 0, recv_segments = 0;
    std::size_t sends_posted = 0, sends_done = 0;
    std::size_t recvs_posted = 0, recvs_done = 0;
  };

  std::span<float> segment_span(std::size_t chunk, std::size_t segment) const;
  bool try_post_recv(int step);
  bool try_post_send(int step);
  bool try_finish_recv(int step);
  bool try_finish_send(int step);
  bool poll_once();  // one pass over the active steps; true if anything moved
  void drain() noexcept;

  const Communicator* comm_ = nullptr;
  std::span<float> data_;
  int rank_ = 0, size_ = 1, left_ = 0, right_ = 0, tag_ = 0;
  int first_step_ = 0, end_step_ = 0;
  bool has_reduce_steps_ = false;
  std::size_t segment_elements_ = 1, window_ = 1;

  // Planned once, grown only: per step (index step - first_step_), window_ request slots per
  // direction; scratch slots for reduce-scatter receives, two steps' worth, handed out from a
  // free list.
  std::vector<Step> steps_;
  std::vector<MPI_Request> recv_requests_, send_requests_;  // (steps, window_)
  std::vector<std::size_t> recv_scratch_slot_;              // (steps, window_)
  std::unique_ptr<float[]> scratch_;  // (2·window_, scratch_stride_), never zero-filled
  std::size_t scratch_capacity_ = 0;  // elements
  std::size_t scratch_stride_ = 0;    // min(segment, largest chunk) elements per slot
  std::vector<std::size_t> free_scratch_;

  int lowest_open_ = 0;  // steps below it are finished in both directions
  Counters counters_;
  std::size_t events_ = 0;
  bool sum_not_finite_ = false;
  bool active_ = false;
};

}  // namespace ringtrain::collectives
