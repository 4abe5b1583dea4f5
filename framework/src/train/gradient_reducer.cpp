// The gradient sum of one step, composed from its pieces (see gradient_reducer.hpp).
//
// Threads: with kThread the communication thread polls the rings under the MPI lock and
// notes their completion times; only the main thread starts rings, updates and writes the
// trace (at the end of finish()).
#include "ringtrain/framework/train/gradient_reducer.hpp"

#include <fmt/format.h>

#include <chrono>
#include <limits>

#include "ringtrain/collectives/small.hpp"
#include "ringtrain/framework/train/now.hpp"

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
      trace_(trace),
      progress_(rings_, options.driver, options.thread_poll_s, comm.size()) {
  if (!trace_) return;
  wait_name_ = trace_->name("wait for communication");
  agree_name_ = trace_->name("agree: gradients finite");
  for (std::size_t b = 0; b < plan_.size(); ++b)
    ring_names_.push_back(trace_->name(fmt::format("ring bucket {}", b)));
}

void GradientReducer::begin_step(bool overlap) {
  std::lock_guard lock(progress_.mpi_mutex());  // the thread reads the rings' state
  overlap_ = overlap;
  rings_.begin_step(overlap ? options_.overlap_segments_in_flight
                            : options_.ring.segments_in_flight);
  agreement_.begin_step();
  account_ = StepComm{};
}

void GradientReducer::layer_done(std::size_t layer) {
  if (!overlap_) return;
  std::lock_guard lock(progress_.mpi_mutex());
  const std::size_t ready = plan_.ready_after(layer);
  const bool started_any = rings_.started() < ready;
  while (rings_.started() < ready) rings_.start_sum(rings_.started(), grads_);
  if (progress_.main_thread_polls())
    rings_.poll();
  else if (started_any)
    progress_.rings_started();
}

void GradientReducer::poll() {
  // Without a thread nobody else touches the rings: in_flight() needs no lock here.
  if (!progress_.main_thread_polls() || !rings_.in_flight()) return;
  std::lock_guard lock(progress_.mpi_mutex());
  rings_.poll();
}

bool GradientReducer::finish(bool local_ok, const UpdatePiece& update) {
  agreement_.note_local(local_ok, grads_);
  const bool ok = overlap_ ? finish_overlapped(update) : finish_blocking(update);
  // A step that is not applied throws its gradient away, and the residual it carried with it.
  if (!ok) rings_.feedback().clear();
  return ok;
}

// Overlap off: every bucket after backward, one after another, then the agreement, then the
// update (with ZeRO-1 each bucket's chunk, then its all-gather); all of it is exposed.
bool GradientReducer::finish_blocking(const UpdatePiece& update) {
  coll::Waiter waiter(coll::resolve_wait_policy(options_.ring.wait, comm_));
  std::lock_guard lock(progress_.mpi_mutex());
  for (std::size_t b = 0; b < plan_.size(); ++b) {
    rings_.start_sum(b, grads_);
    rings_.wait(b);
  }
  while (!agreement_.done())
    if (!agreement_.advance(rings_, account_)) waiter.idle();
  const double first_s = plan_.size() > 0 ? rings_.at(0).start_s : agreement_.start_s();
  if (trace_) trace_->span(wait_name_, 0, first_s, agreement_.done_s());
  const bool ok = agreement_.applied();
  if (ok && updates_per_bucket(options_, false))
    update_each_bucket(update);
  else if (ok)
    update(0, grads_.size(), 0);
  account_.exposed_s = account_.comm_s;  // nothing else ran meanwhile
  trace_rings();
  return ok;
}

// This rank's piece of each bucket, one bucket after another; with ZeRO-1 each bucket's
// all-gather right after its update, blocking. The MPI lock is held.
void GradientReducer::update_each_bucket(const UpdatePiece& update) {
  for (std::size_t b = 0; b < plan_.size(); ++b) {
    update_in_pieces(shard_.pieces()[b], std::numeric_limits<std::size_t>::max(), update);
    if (!options_.zero) continue;
    rings_.start_gather(b, params_);
    rings_.wait(b);
    if (trace_) trace_->span(wait_name_, 0, rings_.at(b).gather_start_s, rings_.at(b).done_s);
  }
}

void GradientReducer::update_summed(const UpdatePiece& update) {
  begin_step(false);
  std::lock_guard lock(progress_.mpi_mutex());
  update_each_bucket(update);
  account_.exposed_s = account_.comm_s;  // the all-gathers block; nothing else runs
}

// Overlap on: the rings started during backward; poll them, agree, and update each summed
// bucket (per-bucket updates) while the others are in flight; wait only when nothing is left
// to do. Polls outside the waits and updates count as progress_s.
bool GradientReducer::finish_overlapped(const UpdatePiece& update) {
  const bool per_bucket = updates_per_bucket(options_, true);
  coll::Waiter waiter(coll::resolve_wait_policy(options_.ring.wait, comm_));
  double poll_t0 = now_s();
  std::unique_lock lock(progress_.mpi_mutex());
  // A model whose first layers have no parameters leaves buckets that no layer_done started.
  while (rings_.started() < plan_.size()) rings_.start_sum(rings_.started(), grads_);
  progress_.set_main_waiting(true);
  for (;;) {
    bool moved = rings_.poll();
    moved = agreement_.advance(rings_, account_) || moved;
    const bool ok = agreement_.done() && agreement_.applied();
    if (ok && per_bucket) moved = update_summed_buckets(lock, update, poll_t0) || moved;
    if (step_complete(per_bucket)) break;
    if (moved) {
      waiter.reset();
      continue;
    }
    poll_t0 = wait_exposed(waiter, poll_t0);
  }
  account_.progress_s += now_s() - poll_t0;
  progress_.set_main_waiting(false);
  lock.unlock();
  trace_rings();
  const bool ok = agreement_.applied();
  if (ok && !per_bucket) update(0, grads_.size(), 0);
  return ok;
}

// Updates every summed bucket not updated yet, the thread polling meanwhile; with ZeRO-1 its
// all-gather starts right after. `lock` is held on entry and on return; true if any.
bool GradientReducer::update_summed_buckets(std::unique_lock<std::mutex>& lock,
                                            const UpdatePiece& update, double& poll_t0) {
  bool any = false;
  for (std::size_t b = 0; b < plan_.size(); ++b) {
    if (!rings_.at(b).summed || rings_.at(b).updated) continue;
    account_.progress_s += now_s() - poll_t0;
    progress_.set_main_waiting(false);
    lock.unlock();
    update_bucket(b, update);
    lock.lock();
    rings_.mark_updated(b);
    if (options_.zero) rings_.start_gather(b, params_);
    progress_.set_main_waiting(true);
    poll_t0 = now_s();
    any = true;
  }
  return any;
}

// This rank's piece of bucket b, in pieces that leave room to poll the rings in flight. The
// pieces only serve those polls: with one rank, no ring in flight, or a thread that polls
// them, the bucket goes in one update, which wakes the rank's threads once, not per piece.
void GradientReducer::update_bucket(std::size_t b, const UpdatePiece& update) {
  const bool polls_between =
      comm_.size() > 1 && progress_.main_thread_polls() && rings_.in_flight();
  const std::size_t piece =
      polls_between ? options_.update_piece_elements : std::numeric_limits<std::size_t>::max();
  update_in_pieces(shard_.pieces()[b], piece, update, [&] {
    if (!progress_.main_thread_polls() || !rings_.in_flight()) return;
    const double t0 = now_s();
    std::lock_guard lock(progress_.mpi_mutex());
    rings_.poll();
    account_.progress_s += now_s() - t0;
  });
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
  account_.progress_s += t0 - poll_t0;
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
