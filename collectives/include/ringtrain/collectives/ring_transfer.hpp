// RingTransfer: the ring's state machine, one collective call in progress. The blocking calls
// of ring.hpp and AsyncAllreduce (async.hpp) drive it; ring.hpp's essay explains the
// algorithm, schedule.hpp the arithmetic. It owns its scratch (2 · segments_in_flight
// segments, for the reduce-scatter receives of two steps) and request slots; they grow on the
// first call and are reused, so a caller that keeps one RingTransfer allocates nothing on the
// hot path.
//
// bf16 on the wire (RingOptions::wire = Wire::kBf16). Sends encode the segment to bf16 into a
// bf16 image of the buffer (the "shadow", M values, planned like the scratch) and send from
// there; reduce-scatter receives land in bf16 scratch and are added in fp32; all-gather
// receives land in the shadow, are decoded into the buffer and forwarded from the shadow as
// they are. Once a rank's own chunk holds its full sum (allreduce: at the last reduce-scatter
// add; all-gather alone: before it is first sent) the rank rounds it to bf16 values in place,
// so the all-gather hands every rank the same bits and the owner keeps them too. Counters
// count the bf16 bytes: half of the fp32 ones. With N = 1 nothing crosses a wire and nothing
// is rounded.
//
// Each rank rounds each element at most once per call: chunks other than its own when it
// sends them in reduce-scatter (a partial sum), its own chunk once it is complete. Chunk c's
// value in an allreduce, starting at rank c+1 and ending at its owner c (ring.hpp), is
//   s_1 = x_{c+1},   s_k = fl32(bf(s_{k-1}) + x_{c+k}) for k = 2..N,   result = bf(s_N)
// Every bf() multiplies what it rounds by (1 + δ) with |δ| <= u = 2^-8, every fl32 add by
// (1 + ε) with |ε| <= v = 2^-24, and x_{c+1}, the longest path, meets N of the first kind
// and N-1 of the second, so against the exact sum S = Σ_r x_r (in fp64, say):
//   |result - S| <= ((1+u)^N (1+v)^(N-1) - 1) · Σ_r |x_r|       ≈ N·2^-8 · Σ_r |x_r|
// as long as no partial sum overflows and none falls below 2^-126 (there the error of a
// rounding is absolute, at most 2^-134). The bound is relative to Σ|x_r|, not |S|: partial
// sums that cancel leave their rounding error behind. bf16_allreduce_error_bound() computes
// it; the allreduce at N = 2, 3, 4 is tested against it with an fp64 reference.
//
// Residual: start() may be given a span of M floats. Where this rank rounds a value p to
// bf(p) it writes residual[i] = p - bf(p) (exact in fp32; 0 where bf(p) is not finite) and
// leaves every other element untouched (all of them with Wire::kFp32). The residuals of all
// ranks add up to everything this call's roundings lost, which is what error feedback
// (error_feedback.hpp) feeds back into the next step.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "ringtrain/collectives/bf16.hpp"
#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/collectives/options.hpp"
#include "ringtrain/collectives/schedule.hpp"
#include "ringtrain/collectives/wait.hpp"

namespace ringtrain::collectives {

// The bound above for an allreduce over N ranks with Wire::kBf16, as a factor of Σ_r |x_r|.
double bf16_allreduce_error_bound(int N);

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
  // Messages of step t carry tag options.tag + t. `residual`, empty or data.size() floats
  // (outliving the transfer too), receives this rank's rounding losses with Wire::kBf16 (see
  // above). Throws CollectiveError if a transfer is still active or options are invalid.
  void start(const Communicator& comm, std::span<float> data, Collective which,
             const RingOptions& options, std::span<float> residual = {});
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

  // Where segment j of chunk c lies in the buffer: [offset, offset + size).
  struct Range {
    std::size_t offset = 0, size = 0;
  };
  Range segment_range(std::size_t chunk, std::size_t segment) const;
  std::span<float> segment_span(std::size_t chunk, std::size_t segment) const;
  std::span<Bf16> shadow_span(std::size_t chunk, std::size_t segment) const;
  void plan_scratch();
  const void* send_buffer(int step, std::size_t segment);  // encodes first with Wire::kBf16
  void finish_reduce(int step, std::size_t segment, std::size_t slot);
  void round_own(std::size_t segment);  // this rank's chunk, to bf16 values (+ residual)
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
  bool has_reduce_steps_ = false, has_gather_steps_ = false;
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
  // Wire::kBf16: the scratch's bf16 twin and the bf16 image of the buffer (M values).
  Wire wire_ = Wire::kFp32;
  std::span<float> residual_;
  std::unique_ptr<Bf16[]> wire_scratch_;
  std::size_t wire_scratch_capacity_ = 0;
  std::unique_ptr<Bf16[]> shadow_;
  std::size_t shadow_capacity_ = 0;

  int lowest_open_ = 0;  // steps below it are finished in both directions
  Counters counters_;
  std::size_t events_ = 0;
  bool sum_not_finite_ = false;
  bool active_ = false;
};

}  // namespace ringtrain::collectives
