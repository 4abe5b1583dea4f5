// The gradient sum of one step, composed from its pieces (see gradient_reducer.hpp).
//
// Threads: with kThread the communication thread polls the rings under the MPI lock and
// notes their completion times; only the main thread starts rings, hands pieces back (the
// step updates them without the lock) and writes the trace (once the step's sums are in).
//
// next_summed() is finish()'s polling loop cut at each piece it hands back: the state
// below (hand_back_, bucket_, updating_, ...) is where the loop stands between two calls,
// so the pieces, the polls between them and the account are those of one uncut loop.
#include "train/sum/gradient_reducer.hpp"

#include <fmt/format.h>

#include <chrono>
#include <limits>

#include "ringtrain/collectives/small.hpp"
#include "train/now.hpp"

namespace ringtrain {

namespace coll = collectives;

namespace {

// The plan, once the ranks agree on it: ranks that planned differently would pair rings of
// different sizes. Collective (two small allreduces).
BucketPlan agreed_plan(const coll::Communicator& comm, const ParameterStore& params,
                       const ReducerOptions& options) {
  BucketPlan plan(params.entries(), options.cap_bytes);
  check_zero_algorithm(options.zero, options.ring.algorithm, comm.size());
  coll::check_same_size(comm, options.cap_bytes, "bucket cap (bytes)");
  coll::check_same_size(comm, plan.size(), "number of gradient buckets");
  return plan;
}

}  // namespace

bool updates_per_bucket(const ReducerOptions& options, bool overlap) {
  return options.zero || (overlap && options.update_per_bucket);
}

GradientReducer::GradientReducer(const coll::Communicator& comm, ParameterStore& params,
                                 const ReducerOptions& options, Trace* trace)
    : comm_(comm),
      grads_(params.grads()),
      params_(params.values()),
      options_(options),
      plan_(agreed_plan(comm, params, options)),
      shard_(plan_.buckets(), params.num_elements(), comm.size(), comm.rank(), options.zero,
             options.ring),
      rings_(comm, plan_.buckets(), options.ring, options.zero, account_),
      agreement_(comm, rings_.agreement_options()),
      poll_hook_([this] { poll(); }),
      trace_(trace),
      poller_(rings_, options.driver, options.thread_poll_s, comm.size()) {
  if (!trace_) return;
  wait_name_ = trace_->name("wait for communication");
  agree_name_ = trace_->name("agree: gradients finite");
  for (std::size_t b = 0; b < plan_.size(); ++b)
    ring_names_.push_back(trace_->name(fmt::format("ring bucket {}", b)));
}

void GradientReducer::begin_step(bool overlap, std::size_t /*global_samples*/) {
  std::lock_guard lock(poller_.mpi_mutex());  // the thread reads the rings' state
  overlap_ = overlap;
  rings_.begin_step(overlap ? options_.overlap_segments_in_flight
                            : options_.ring.segments_in_flight);
  agreement_.begin_step();
  account_ = StepComm{};
  account_.overlap = overlap;
  hand_back_ = HandBack::kNothing;
  close_blocking_ = trace_at_close_ = false;
  updating_ = kNoBucket;
}

void GradientReducer::layer_done(std::size_t layer) {
  if (!overlap_) return;
  const double t0 = now_s();
  std::lock_guard lock(poller_.mpi_mutex());
  const std::size_t ready = plan_.ready_after(layer);
  const bool started_any = rings_.started() < ready;
  while (rings_.started() < ready) rings_.start_sum(rings_.started(), grads_);
  if (poller_.main_thread_polls())
    rings_.poll();
  else if (started_any)
    poller_.rings_started();
  account_.inside_compute_s += now_s() - t0;
}

void GradientReducer::poll() {
  // Without a thread nobody else touches the rings: in_flight() needs no lock here.
  if (!poller_.main_thread_polls() || !rings_.in_flight()) return;
  const double t0 = now_s();
  std::lock_guard lock(poller_.mpi_mutex());
  rings_.poll();
  account_.inside_compute_s += now_s() - t0;
}

bool GradientReducer::finish(bool local_ok) {
  agreement_.note_local(local_ok, grads_);
  const bool ok = overlap_ ? finish_overlapped() : finish_blocking();
  // A step that is not applied throws its gradient away, and the residual it carried with it.
  if (!ok) rings_.feedback().clear();
  return ok;
}

std::optional<ShardPiece> GradientReducer::next_summed() {
  switch (hand_back_) {
    case HandBack::kWhole:
      hand_back_ = HandBack::kClosing;
      return ShardPiece{0, grads_.size(), 0};
    case HandBack::kBuckets:
      return next_bucket();
    case HandBack::kOverlapped:
      return next_overlapped();
    case HandBack::kClosing:
      return hand_back_done();
    case HandBack::kNothing:
      break;
  }
  return std::nullopt;
}

void GradientReducer::begin_summed() {
  begin_step(false, 0);
  hand_back_ = HandBack::kBuckets;
  bucket_ = 0;
  close_blocking_ = true;  // the all-gathers block; nothing else runs
}

// The step's hand-back is over: its account (and its rings' spans) are closed.
std::optional<ShardPiece> GradientReducer::hand_back_done() {
  hand_back_ = HandBack::kNothing;
  if (close_blocking_) account_.exposed_s = account_.comm_s;  // nothing else ran meanwhile
  if (trace_at_close_) trace_rings();
  close_blocking_ = trace_at_close_ = false;
  return std::nullopt;
}

// Overlap off: every bucket after backward, one after another, then the agreement; the
// pieces come back after it (with ZeRO-1 each bucket's chunk, then its all-gather). All of
// it is exposed.
bool GradientReducer::finish_blocking() {
  coll::Waiter waiter(coll::resolve_wait_policy(options_.ring.wait, comm_));
  {
    std::lock_guard lock(poller_.mpi_mutex());
    for (std::size_t b = 0; b < plan_.size(); ++b) {
      rings_.start_sum(b, grads_);
      rings_.wait(b);
    }
    while (!agreement_.done())
      if (!agreement_.advance(rings_, account_)) waiter.idle();
  }
  const double first_s = plan_.size() > 0 ? rings_.at(0).start_s : agreement_.start_s();
  if (trace_) trace_->span(wait_name_, 0, first_s, agreement_.done_s());
  close_blocking_ = trace_at_close_ = true;
  if (!agreement_.applied()) {
    hand_back_done();
    return false;
  }
  hand_back_ = updates_per_bucket(options_, false) ? HandBack::kBuckets : HandBack::kWhole;
  bucket_ = 0;
  return true;
}

// kBuckets: this rank's piece of each bucket in turn, in one piece; with ZeRO-1 each
// bucket's all-gather, blocking, once its piece is updated (the call after it went back).
std::optional<ShardPiece> GradientReducer::next_bucket() {
  for (;;) {
    if (updating_ != kNoBucket && options_.zero) {
      const std::size_t b = updating_;
      std::lock_guard lock(poller_.mpi_mutex());
      rings_.start_gather(b, params_);
      rings_.wait(b);
      if (trace_) trace_->span(wait_name_, 0, rings_.at(b).gather_start_s, rings_.at(b).done_s);
    }
    updating_ = kNoBucket;
    if (bucket_ == plan_.size()) return hand_back_done();
    updating_ = bucket_++;
    const ShardPiece& mine = shard_.pieces()[updating_];
    if (mine.count > 0) return mine;
  }
}

// Overlap on: the rings started during backward; poll them until the ranks agree. With
// per-bucket updates the pieces come back from there on (next_overlapped); otherwise, and
// when the step is not applied, every sum must be in first. Polls outside the waits and
// the updates count as poll_s.
bool GradientReducer::finish_overlapped() {
  const bool per_bucket = updates_per_bucket(options_, true);
  waiter_.emplace(coll::resolve_wait_policy(options_.ring.wait, comm_));
  poll_t0_ = now_s();
  std::unique_lock lock(poller_.mpi_mutex());
  // A model whose first layers have no parameters leaves buckets that no layer_done started.
  while (rings_.started() < plan_.size()) rings_.start_sum(rings_.started(), grads_);
  poller_.set_main_waiting(true);
  for (;;) {
    bool moved = rings_.poll();
    moved = agreement_.advance(rings_, account_) || moved;
    if (per_bucket && agreement_.done() && agreement_.applied()) {
      hand_back_ = HandBack::kOverlapped;  // the sweep over the summed buckets starts
      bucket_ = 0;
      moved_ = moved;
      return true;
    }
    if (step_complete(per_bucket)) break;
    if (moved) {
      waiter_->reset();
      continue;
    }
    poll_t0_ = wait_exposed(*waiter_, poll_t0_);
  }
  account_.poll_s += now_s() - poll_t0_;
  poller_.set_main_waiting(false);
  lock.unlock();
  trace_rings();
  if (!agreement_.applied()) return false;
  hand_back_ = HandBack::kWhole;
  return true;
}

// kOverlapped: rounds of [sweep: every summed bucket not updated yet goes back, in pieces
// with polls between them; with ZeRO-1 its all-gather starts once it is updated], until the
// step is complete; between rounds the rings are polled, or waited for when nothing moved.
// Each call resumes where the piece before it left the round.
std::optional<ShardPiece> GradientReducer::next_overlapped() {
  if (updating_ != kNoBucket) {
    poll_between_pieces();
    if (std::optional<ShardPiece> piece = next_piece()) return piece;
  }
  std::unique_lock lock(poller_.mpi_mutex());
  if (updating_ != kNoBucket) bucket_updated();
  for (;;) {
    for (; bucket_ < plan_.size(); ++bucket_) {
      const BucketRing& ring = rings_.at(bucket_);
      if (!ring.summed || ring.updated) continue;
      account_.poll_s += now_s() - poll_t0_;
      poller_.set_main_waiting(false);
      lock.unlock();
      start_update(bucket_);
      if (std::optional<ShardPiece> piece = next_piece()) return piece;
      lock.lock();
      bucket_updated();
    }
    if (step_complete(true)) break;
    if (moved_)
      waiter_->reset();
    else
      poll_t0_ = wait_exposed(*waiter_, poll_t0_);
    moved_ = rings_.poll();
    moved_ = agreement_.advance(rings_, account_) || moved_;
    bucket_ = 0;
  }
  account_.poll_s += now_s() - poll_t0_;
  poller_.set_main_waiting(false);
  lock.unlock();
  trace_rings();
  return hand_back_done();
}

// Bucket b's piece goes back next, in pieces that leave room to poll the rings in flight.
// The pieces only serve those polls: with one rank, no ring in flight, or a thread that
// polls them, the bucket goes in one piece, which wakes the rank's threads once, not per
// piece.
void GradientReducer::start_update(std::size_t b) {
  const bool polls_between = comm_.size() > 1 && poller_.main_thread_polls() && rings_.in_flight();
  updating_ = b;
  handed_ = 0;
  piece_elements_ =
      polls_between ? options_.update_piece_elements : std::numeric_limits<std::size_t>::max();
}

// The next piece of bucket updating_'s piece (piece_after), or nullopt.
std::optional<ShardPiece> GradientReducer::next_piece() {
  const ShardPiece piece = piece_after(shard_.pieces()[updating_], handed_, piece_elements_);
  if (piece.count == 0) return std::nullopt;
  handed_ += piece.count;
  return piece;
}

void GradientReducer::poll_between_pieces() {
  if (!poller_.main_thread_polls() || !rings_.in_flight()) return;
  const double t0 = now_s();
  std::lock_guard lock(poller_.mpi_mutex());
  rings_.poll();
  account_.poll_s += now_s() - t0;
}

// Bucket updating_ is updated (the MPI lock is held): with ZeRO-1 its all-gather starts, and
// the main thread polls again.
void GradientReducer::bucket_updated() {
  rings_.mark_updated(updating_);
  if (options_.zero) rings_.start_gather(updating_, params_);
  updating_ = kNoBucket;
  poller_.set_main_waiting(true);
  poll_t0_ = now_s();
  moved_ = true;
}

// Every sum is in and agreed; if the step is applied, every bucket that is updated by itself
// is, and with ZeRO-1 every all-gather has ended.
bool GradientReducer::step_complete(bool per_bucket) const {
  if (!agreement_.done() || rings_.summed() < plan_.size()) return false;
  if (!agreement_.applied()) return true;
  if (per_bucket && !rings_.all_updated()) return false;
  return !options_.zero || rings_.gathered() == plan_.size();
}

// Nothing to compute: this is the wait that lengthens the step. Polls until a ring or the
// agreement moves; returns when it ended.
double GradientReducer::wait_exposed(coll::Waiter& waiter, double poll_t0) {
  const double t0 = now_s();
  account_.poll_s += t0 - poll_t0;
  do {
    waiter.idle();
  } while (!rings_.poll() && !agreement_.advance(rings_, account_));
  const double t1 = now_s();
  account_.exposed_s += t1 - t0;
  if (trace_) trace_->span(wait_name_, 0, t0, t1);
  waiter.reset();
  return t1;
}

void GradientReducer::trace_rings() {
  if (!trace_) return;
  trace_->span(agree_name_, 1, agreement_.start_s(), agreement_.done_s());
  for (std::size_t b = 0; b < plan_.size(); ++b)
    trace_->span(ring_names_[b], 2 + int(b), rings_.at(b).start_s, rings_.at(b).done_s,
                 double(plan_.buckets()[b].elements) * 4.0);
}

}  // namespace ringtrain
