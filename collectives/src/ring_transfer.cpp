// The ring state machine (ring.hpp has the essay, schedule.hpp the arithmetic).
//
// Each step t has its own tag (options.tag + t), so MPI's non-overtaking rule orders the
// segments of one step and nothing orders different steps: a reduce-scatter segment and an
// all-gather segment can be in flight together. Dependencies, checked before posting:
//   send (t, j)  needs the receive (t-1, j) finished (and added): we forward what we got;
//                at the first step the caller's data is sent as it is.
//   recv (t, j)  needs a request slot of step t (and a scratch slot in a reduce-scatter
//                step); in an all-gather step of an allreduce it overwrites the region this
//                rank sent in reduce-scatter step t-(N-1), so that send must have completed.
// Receives are posted for at most two steps at a time, the lower one first, so scratch never
// goes to a step that cannot finish before the one below it. Sends are posted later steps
// first: a segment that is ready to move on goes before new work, which keeps the pipeline
// short and lets the right neighbour read data that is still in cache.
#include "ringtrain/collectives/ring_transfer.hpp"

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <string>

namespace ringtrain::collectives {

RingTransfer::~RingTransfer() {
  drain();
}

void RingTransfer::drain() noexcept {
  if (!active_) return;
  try {
    while (!progress()) {
    }
  } catch (...) {
    // An MPI failure while cleaning up: nothing sensible is left to do in a destructor.
  }
  active_ = false;
}

double bf16_allreduce_error_bound(int N) {
  const double u = std::ldexp(1.0, -8), v = std::ldexp(1.0, -24);
  return std::pow(1 + u, N) * std::pow(1 + v, N - 1) - 1;
}

void RingTransfer::start(const Communicator& comm, std::span<float> data, Collective which,
                         const RingOptions& options, std::span<float> residual) {
  if (active_)
    throw CollectiveError("rank " + std::to_string(comm.rank()) +
                          ": RingTransfer::start while a previous transfer is still active");
  if (options.segment_bytes < sizeof(float) || options.segment_bytes > (std::size_t{1} << 30))
    throw CollectiveError("segment_bytes must be between 4 B and 1 GiB, got " +
                          std::to_string(options.segment_bytes));
  if (options.segments_in_flight == 0)
    throw CollectiveError("segments_in_flight must be at least 1");
  if (options.tag < 0 || options.tag > comm.tag_upper_bound() - 2 * comm.size())
    throw CollectiveError("tag " + std::to_string(options.tag) + " leaves no room for " +
                          std::to_string(2 * comm.size()) + " step tags below MPI_TAG_UB " +
                          std::to_string(comm.tag_upper_bound()));
  if (!residual.empty() && residual.size() != data.size())
    throw CollectiveError("rank " + std::to_string(comm.rank()) + ": residual has " +
                          std::to_string(residual.size()) + " elements, data " +
                          std::to_string(data.size()));

  comm_ = &comm;
  wire_ = options.wire;
  residual_ = residual;
  data_ = data;
  rank_ = comm.rank();
  size_ = comm.size();
  left_ = ring_left(rank_, size_);
  right_ = ring_right(rank_, size_);
  tag_ = options.tag;
  first_step_ = first_step(which, size_);
  end_step_ = first_step_ + num_steps(which, size_);
  lowest_open_ = first_step_;
  has_reduce_steps_ = which != Collective::kAllGather;
  has_gather_steps_ = which != Collective::kReduceScatter;
  segment_elements_ = segment_elements(options.segment_bytes);
  // No more receives ahead than a chunk has segments: a larger window would only reserve
  // scratch that no step can use.
  window_ = std::min(
      options.segments_in_flight,
      std::max<std::size_t>(1, num_segments(chunk_size(data.size(), size_, 0), segment_elements_)));
  counters_ = Counters{};
  events_ = 0;
  sum_not_finite_ = false;

  if (size_ <= 1 || data.empty()) return;  // nothing to move; active_ stays false
  counters_.rounds = static_cast<std::size_t>(end_step_ - first_step_);

  // Plan: per-step bookkeeping and request slots, scratch for two steps' receives. All of it
  // only ever grows, so repeated calls of the same shape allocate nothing.
  const auto num = static_cast<std::size_t>(end_step_ - first_step_);
  steps_.assign(num, Step{});  // no allocation once the capacity is there
  for (int t = first_step_; t < end_step_; ++t) {
    Step& s = steps_[static_cast<std::size_t>(t - first_step_)];
    s.send_segments = num_segments(chunk_size(data.size(), size_, send_chunk(rank_, t, size_)),
                                   segment_elements_);
    s.recv_segments = num_segments(chunk_size(data.size(), size_, recv_chunk(rank_, t, size_)),
                                   segment_elements_);
  }
  if (recv_requests_.size() < num * window_) {
    recv_requests_.resize(num * window_, MPI_REQUEST_NULL);
    send_requests_.resize(num * window_, MPI_REQUEST_NULL);
    recv_scratch_slot_.resize(num * window_, 0);
  }
  plan_scratch();
  active_ = true;
  progress();  // post the first receives and sends right away
}

// Scratch for two steps' reduce-scatter receives (fp32 or bf16, as the wire is), and with
// Wire::kBf16 the shadow. Uninitialised on purpose: every slot is written (by MPI or an
// encode) before it is read, and zero-filling megabytes per call costs more than a small
// allreduce.
void RingTransfer::plan_scratch() {
  free_scratch_.clear();
  const bool bf16 = wire_ == Wire::kBf16;
  if (bf16 && shadow_capacity_ < data_.size()) {
    shadow_capacity_ = data_.size();
    shadow_ = std::make_unique_for_overwrite<Bf16[]>(shadow_capacity_);
  }
  if (!has_reduce_steps_) return;
  scratch_stride_ = std::min(segment_elements_, chunk_size(data_.size(), size_, 0));
  const std::size_t needed = 2 * window_ * scratch_stride_;
  if (!bf16 && scratch_capacity_ < needed) {
    scratch_capacity_ = needed;
    scratch_ = std::make_unique_for_overwrite<float[]>(scratch_capacity_);
  }
  if (bf16 && wire_scratch_capacity_ < needed) {
    wire_scratch_capacity_ = needed;
    wire_scratch_ = std::make_unique_for_overwrite<Bf16[]>(wire_scratch_capacity_);
  }
  free_scratch_.reserve(2 * window_);
  for (std::size_t i = 2 * window_; i-- > 0;) free_scratch_.push_back(i);
}

// Segment j of chunk c: elements [begin + j·S, begin + min((j+1)·S, size)).
RingTransfer::Range RingTransfer::segment_range(std::size_t chunk, std::size_t segment) const {
  const std::size_t begin = chunk_begin(data_.size(), size_, chunk);
  const std::size_t size = chunk_size(data_.size(), size_, chunk);
  const std::size_t offset = segment * segment_elements_;
  return {begin + offset, std::min(segment_elements_, size - offset)};
}

std::span<float> RingTransfer::segment_span(std::size_t chunk, std::size_t segment) const {
  const Range range = segment_range(chunk, segment);
  return data_.subspan(range.offset, range.size);
}

std::span<Bf16> RingTransfer::shadow_span(std::size_t chunk, std::size_t segment) const {
  const Range range = segment_range(chunk, segment);
  return {shadow_.get() + range.offset, range.size};
}

namespace {

// shadow <- bf16(values); residual <- values - shadow (exact: a float and its bf16 rounding
// are within a factor 2 of each other), 0 where the rounded value is not finite. An empty
// residual is not written.
void encode_keeping_loss(std::span<const float> values, std::span<Bf16> shadow,
                         std::span<float> residual) {
  encode_bf16(values, shadow);
  for (std::size_t i = 0; i < residual.size(); ++i) {
    const float rounded = from_bf16(shadow[i]);
    // !(|v| <= FLT_MAX) for NaN and ±inf, written so that the loop vectorises.
    residual[i] = std::fabs(rounded) <= FLT_MAX ? values[i] - rounded : 0.0f;
  }
}

std::span<float> part(std::span<float> residual, std::size_t offset, std::size_t size) {
  return residual.empty() ? residual : residual.subspan(offset, size);
}

// out += in over fp32; true if any sum is NaN or ±inf (!(|v| <= FLT_MAX) is true for both).
// The data is in cache here, so the test costs nothing beside the add.
bool add_noting_not_finite(std::span<float> target, const float* incoming) {
  float* out = target.data();
  int bad[8] = {};
  std::size_t i = 0;
  for (; i + 8 <= target.size(); i += 8)
    for (std::size_t k = 0; k < 8; ++k) {
      const float v = out[i + k] + incoming[i + k];
      out[i + k] = v;
      bad[k] |= !(std::fabs(v) <= FLT_MAX);
    }
  for (; i < target.size(); ++i) {
    out[i] += incoming[i];
    bad[0] |= !(std::fabs(out[i]) <= FLT_MAX);
  }
  bool any = false;
  for (int b : bad) any = any || b != 0;
  return any;
}

bool any_not_finite(std::span<const float> values) {
  int bad = 0;
  for (float v : values) bad |= !(std::fabs(v) <= FLT_MAX);
  return bad != 0;
}

}  // namespace

// Segment j of this rank's own chunk, complete: round it to bf16 values in place, keeping the
// bf16 bits in the shadow for the all-gather sends and the loss in the residual.
void RingTransfer::round_own(std::size_t segment) {
  const auto chunk = static_cast<std::size_t>(rank_);
  const Range range = segment_range(chunk, segment);
  std::span<float> values = segment_span(chunk, segment);
  std::span<Bf16> bits = shadow_span(chunk, segment);
  encode_keeping_loss(values, bits, part(residual_, range.offset, range.size));
  decode_bf16(bits, values);
}

// What send (t, j) puts on the wire. fp32: the buffer itself. bf16: reduce-scatter sends
// encode the partial sum into the shadow (its loss goes to the residual); the first
// all-gather send of an all-gather alone rounds this rank's chunk first; later all-gather
// sends forward the received bits, already in the shadow.
const void* RingTransfer::send_buffer(int t, std::size_t j) {
  const std::size_t chunk = send_chunk(rank_, t, size_);
  if (wire_ == Wire::kFp32) return segment_span(chunk, j).data();
  if (step_reduces(t, size_)) {
    const Range range = segment_range(chunk, j);
    encode_keeping_loss(segment_span(chunk, j), shadow_span(chunk, j),
                        part(residual_, range.offset, range.size));
  } else if (t == size_ - 1 && !has_reduce_steps_) {
    round_own(j);
  }
  return shadow_span(chunk, j).data();
}

bool RingTransfer::try_post_recv(int t) {
  Step& s = steps_[static_cast<std::size_t>(t - first_step_)];
  const std::size_t j = s.recvs_posted;
  if (j >= s.recv_segments || j - s.recvs_done >= window_) return false;
  const bool reduces = step_reduces(t, size_);
  if (reduces && free_scratch_.empty()) return false;
  if (!reduces && has_reduce_steps_) {
    // Our reduce-scatter send of this region, step t-(N-1) segment j, must have completed.
    const Step& rs = steps_[static_cast<std::size_t>(t - (size_ - 1) - first_step_)];
    if (rs.sends_done <= j) return false;
  }
  const std::size_t chunk = recv_chunk(rank_, t, size_);
  const std::size_t slot = static_cast<std::size_t>(t - first_step_) * window_ + j % window_;
  const bool bf16 = wire_ == Wire::kBf16;
  const std::size_t count = segment_range(chunk, j).size;
  void* buffer = bf16 ? static_cast<void*>(shadow_span(chunk, j).data())
                      : static_cast<void*>(segment_span(chunk, j).data());
  if (reduces) {
    recv_scratch_slot_[slot] = free_scratch_.back();
    free_scratch_.pop_back();
    const std::size_t at = recv_scratch_slot_[slot] * scratch_stride_;
    buffer = bf16 ? static_cast<void*>(wire_scratch_.get() + at)
                  : static_cast<void*>(scratch_.get() + at);
  }
  check_mpi(MPI_Irecv(buffer, static_cast<int>(count), bf16 ? MPI_UINT16_T : MPI_FLOAT, left_,
                      tag_ + t, comm_->handle(), &recv_requests_[slot]),
            "MPI_Irecv");
  counters_.bytes_received += count * (bf16 ? sizeof(Bf16) : sizeof(float));
  ++s.recvs_posted;
  return true;
}

bool RingTransfer::try_post_send(int t) {
  Step& s = steps_[static_cast<std::size_t>(t - first_step_)];
  const std::size_t j = s.sends_posted;
  if (j >= s.send_segments || j - s.sends_done >= window_) return false;
  // Forward only what has arrived (and been added) in the step before.
  if (t > first_step_ && steps_[static_cast<std::size_t>(t - 1 - first_step_)].recvs_done <= j)
    return false;
  const bool bf16 = wire_ == Wire::kBf16;
  const std::size_t count = segment_range(send_chunk(rank_, t, size_), j).size;
  const std::size_t slot = static_cast<std::size_t>(t - first_step_) * window_ + j % window_;
  check_mpi(MPI_Isend(send_buffer(t, j), static_cast<int>(count), bf16 ? MPI_UINT16_T : MPI_FLOAT,
                      right_, tag_ + t, comm_->handle(), &send_requests_[slot]),
            "MPI_Isend");
  counters_.bytes_sent += count * (bf16 ? sizeof(Bf16) : sizeof(float));
  ++s.sends_posted;
  return true;
}

// Received segment j of reduce-scatter step t, in scratch slot `slot`: add it into place,
//   data[chunk, j] += scratch[slot]        (bf16 scratch: decoded, then added in fp32)
// At the last add (step N-2) this rank's own chunk holds the full sum: note whether it is
// finite, after rounding it to bf16 values in an allreduce on a bf16 wire (a finite fp32
// sum can round to ±inf).
void RingTransfer::finish_reduce(int t, std::size_t j, std::size_t slot) {
  std::span<float> target = segment_span(recv_chunk(rank_, t, size_), j);
  const std::size_t at = recv_scratch_slot_[slot] * scratch_stride_;
  const bool last = t == size_ - 2;
  if (wire_ == Wire::kFp32 && last) {
    const bool bad = add_noting_not_finite(target, scratch_.get() + at);
    sum_not_finite_ = sum_not_finite_ || bad;
  } else if (wire_ == Wire::kFp32) {
    for (std::size_t i = 0; i < target.size(); ++i) target[i] += scratch_[at + i];
  } else {
    add_bf16({wire_scratch_.get() + at, target.size()}, target);
    if (last && has_gather_steps_) round_own(j);
    if (last) sum_not_finite_ = sum_not_finite_ || any_not_finite(target);
  }
  free_scratch_.push_back(recv_scratch_slot_[slot]);
}

// If the oldest receive of step t has arrived: a reduce-scatter segment is added into place;
// an all-gather segment on a bf16 wire is decoded from the shadow into the buffer.
bool RingTransfer::try_finish_recv(int t) {
  Step& s = steps_[static_cast<std::size_t>(t - first_step_)];
  if (s.recvs_done == s.recvs_posted) return false;
  const std::size_t slot =
      static_cast<std::size_t>(t - first_step_) * window_ + s.recvs_done % window_;
  int flag = 0;
  check_mpi(MPI_Test(&recv_requests_[slot], &flag, MPI_STATUS_IGNORE), "MPI_Test");
  if (!flag) return false;
  const std::size_t chunk = recv_chunk(rank_, t, size_);
  if (step_reduces(t, size_))
    finish_reduce(t, s.recvs_done, slot);
  else if (wire_ == Wire::kBf16)
    decode_bf16(shadow_span(chunk, s.recvs_done), segment_span(chunk, s.recvs_done));
  ++s.recvs_done;
  ++events_;
  return true;
}

bool RingTransfer::try_finish_send(int t) {
  Step& s = steps_[static_cast<std::size_t>(t - first_step_)];
  if (s.sends_done == s.sends_posted) return false;
  const std::size_t slot =
      static_cast<std::size_t>(t - first_step_) * window_ + s.sends_done % window_;
  int flag = 0;
  check_mpi(MPI_Test(&send_requests_[slot], &flag, MPI_STATUS_IGNORE), "MPI_Test");
  if (!flag) return false;
  ++s.sends_done;
  ++events_;
  return true;
}

bool RingTransfer::poll_once() {
  auto step = [&](int t) -> Step& { return steps_[static_cast<std::size_t>(t - first_step_)]; };
  auto finished = [&](int t) {
    const Step& s = step(t);
    return s.recvs_done == s.recv_segments && s.sends_done == s.send_segments;
  };
  while (lowest_open_ < end_step_ && finished(lowest_open_)) ++lowest_open_;
  // Steps that can be active: receives in [lowest unfinished receive step, +1], sends one
  // step beyond (they forward those receives).
  int lowest_recv = lowest_open_;
  while (lowest_recv < end_step_ && step(lowest_recv).recvs_done == step(lowest_recv).recv_segments)
    ++lowest_recv;
  const int last_recv = std::min(end_step_ - 1, lowest_recv + 1);
  const int last_send = std::min(end_step_ - 1, last_recv + 1);

  bool moved = false;
  for (int t = lowest_open_; t <= last_recv; ++t)
    while (try_post_recv(t)) moved = true;
  for (int t = last_send; t >= lowest_open_; --t)
    while (try_post_send(t)) moved = true;
  for (int t = lowest_open_; t <= last_send; ++t) {
    while (try_finish_recv(t)) moved = true;
    while (try_finish_send(t)) moved = true;
  }
  return moved;
}

bool RingTransfer::own_chunk_reduced() const {
  if (!active_ || !has_reduce_steps_) return true;
  const int last_reduce = size_ - 2;  // the step whose receive completes this rank's chunk
  if (last_reduce < first_step_) return true;
  const Step& s = steps_[static_cast<std::size_t>(last_reduce - first_step_)];
  return s.recvs_done == s.recv_segments;
}

bool RingTransfer::progress() {
  if (!active_) return true;
  while (poll_once()) {
  }
  while (lowest_open_ < end_step_) {
    const Step& s = steps_[static_cast<std::size_t>(lowest_open_ - first_step_)];
    if (s.recvs_done != s.recv_segments || s.sends_done != s.send_segments) break;
    ++lowest_open_;
  }
  if (lowest_open_ == end_step_) active_ = false;
  return !active_;
}

Counters RingTransfer::wait(WaitPolicy policy) {
  if (!active_) return counters_;
  Waiter waiter(resolve_wait_policy(policy, *comm_));
  std::size_t seen = events_;
  while (!progress()) {
    if (events_ != seen) {
      seen = events_;
      waiter.reset();
    } else {
      waiter.idle();
    }
  }
  return counters_;
}

}  // namespace ringtrain::collectives
