// Bucketed gradient reduction with overlap (see gradient_reducer.hpp).
//
// Threads: with kThread the communication thread polls rings under mpi_mutex_ and records
// completion times; only the main thread writes the trace (at the end of finish()).
#include "ringtrain/framework/train/gradient_reducer.hpp"

#include <fmt/format.h>
#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <thread>

#include "ringtrain/collectives/small.hpp"
#include "ringtrain/collectives/wait.hpp"
#include "ringtrain/framework/error.hpp"

namespace ringtrain {

namespace coll = collectives;

namespace {

double now_s() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

// True iff no value is NaN or ±inf (!(|v| <= FLT_MAX) is true for both); eight
// accumulators let the loop vectorise.
bool all_finite(std::span<const float> values) {
  int bad[8] = {};
  std::size_t i = 0;
  for (; i + 8 <= values.size(); i += 8)
    for (int k = 0; k < 8; ++k) bad[k] |= !(std::fabs(values[i + std::size_t(k)]) <= FLT_MAX);
  for (; i < values.size(); ++i) bad[0] |= !(std::fabs(values[i]) <= FLT_MAX);
  int any = 0;
  for (int b : bad) any |= b;
  return any == 0;
}

std::vector<coll::Bucket> plan(const ParameterStore& params, const ReducerOptions& options) {
  if (options.cap_bytes == 0) throw UsageError("--bucket-bytes 0: a bucket needs at least 4 bytes");
  std::vector<std::size_t> sizes;
  for (const ParameterEntry& e : params.entries()) sizes.push_back(e.size);
  return coll::plan_buckets(sizes, std::max<std::size_t>(options.cap_bytes, sizeof(float)));
}

}  // namespace

std::string to_string(ProgressDriver driver) {
  return driver == ProgressDriver::kThread ? "thread" : "layers";
}

ProgressDriver parse_progress_driver(const std::string& name) {
  if (name == "layers") return ProgressDriver::kLayers;
  if (name == "thread") return ProgressDriver::kThread;
  throw UsageError("--progress " + name + ": choose one of layers, thread");
}

struct GradientReducer::InFlight {
  coll::AsyncAllreduce ring;
  coll::RingOptions options;
  double start_s = 0.0, done_s = 0.0;
  double gather_start_s = 0.0;  // zero: the all-gather of the updated parameters
  bool started = false, done = false, updated = false;
  bool gathering = false, gathered = false;  // zero
};

struct GradientReducer::Thread {
  std::thread thread;
  std::condition_variable wake;
  bool stopping = false;
  bool main_waiting = false;  // the main thread polls itself: the thread stays asleep
};

GradientReducer::GradientReducer(const coll::Communicator& comm, ParameterStore& params,
                                 const ReducerOptions& options, Trace* trace)
    : comm_(comm),
      grads_(params.grads()),
      params_(params.values()),
      options_(options),
      trace_(trace),
      buckets_(plan(params, options)),
      shard_(buckets_, params.num_elements(), comm.size(), comm.rank(), options.zero) {
  if (options_.zero && options_.ring.algorithm != coll::Algorithm::kRing && comm_.size() > 1)
    throw UsageError(
        "--zero 1 updates the chunk that the ring's reduce-scatter leaves each rank: use "
        "--collective ring");
  for (const coll::Bucket& b : buckets_)
    ready_layer_.push_back(params.entry(b.first_parameter).layer);
  // Ranks that planned differently would pair rings of different sizes: agree first.
  coll::check_same_size(comm_, options_.cap_bytes, "bucket cap (bytes)");
  coll::check_same_size(comm_, buckets_.size(), "number of gradient buckets");

  const int N = comm_.size();
  // Bucket b's ring uses tags [tag + b·2N, tag + (b+1)·2N); one more range for the agreement.
  const long long last_tag = static_cast<long long>(options_.ring.tag) +
                             static_cast<long long>(buckets_.size() + 1) * 2 * N;
  if (last_tag > comm_.tag_upper_bound())
    throw UsageError(
        fmt::format("{} gradient buckets need message tags up to {}, but MPI allows "
                    "{}; raise --bucket-bytes",
                    buckets_.size(), last_tag, comm_.tag_upper_bound()));
  for (std::size_t b = 0; b <= buckets_.size(); ++b) {
    rings_.push_back(std::make_unique<InFlight>());
    InFlight& f = *rings_.back();
    f.options = options_.ring;
    f.options.check_sizes = false;  // agreed above, once
    f.options.tag = options_.ring.tag + static_cast<int>(b) * 2 * N;
  }
  if (trace_) {
    wait_name_ = trace_->name("wait for communication");
    agree_name_ = trace_->name("agree: gradients finite");
    for (std::size_t b = 0; b < buckets_.size(); ++b)
      ring_names_.push_back(trace_->name(fmt::format("ring bucket {}", b)));
  }
  if (options_.driver == ProgressDriver::kThread && N > 1) {
    int provided = 0;
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_SERIALIZED)
      throw UsageError(
          "--progress thread needs MPI initialised with MPI_THREAD_SERIALIZED or "
          "more; this process has less: use --progress layers");
    thread_ = std::make_unique<Thread>();
    thread_->thread = std::thread([this] { thread_main(); });
  }
}

GradientReducer::~GradientReducer() {
  if (thread_) {
    {
      std::lock_guard lock(mpi_mutex_);
      thread_->stopping = true;
    }
    thread_->wake.notify_all();
    thread_->thread.join();
  }
}

// The window of segments in flight per ring step: options.overlap_segments_in_flight while
// overlapping, options.ring.segments_in_flight (2) when blocking. A larger window lets one
// poll move more of a ring, but the receives of a whole window land in scratch before they
// are added, and 8 MiB of it evicts what they are added to. Paired step by step
// (bench/overlap_paired.py, cnn N=2, 2 x 3 runs of 400 steps each, 2026-12-03), the copies
// that overlap puts into backward cost 1.44-1.48 ms per step with 1 segment in flight,
// 1.44-1.68 with 2 and 1.89-1.94 with 8, while the exposed wait they save was 1.2-1.4 ms in
// all; step with / without overlap 1.010-1.014, 1.010-1.022, 1.025-1.026. The mlp's chunks
// have at most 2 segments, so 8 means 2 there; against 8, 1 ran it at 1.003x the samples/s
// and 2 at 1.016x (ab_train.py, 10 rounds each): the noise. Hence 2, as blocking rings.
// bench/README-overlap.md has the runs.
void GradientReducer::begin_step(bool overlap) {
  std::lock_guard lock(mpi_mutex_);  // the thread reads these
  overlap_ = overlap;
  for (std::size_t b = 0; b < buckets_.size(); ++b)
    rings_[b]->options.segments_in_flight =
        overlap ? options_.overlap_segments_in_flight : options_.ring.segments_in_flight;
  started_ = completed_ = gathering_ = gathered_ = 0;
  agreement_ = Agreement::kIdle;
  account_ = StepComm{};
  for (auto& f : rings_) f->started = f->done = f->updated = f->gathering = f->gathered = false;
}

// Caller holds mpi_mutex_.
void GradientReducer::start(std::size_t b) {
  const coll::Bucket& k = buckets_[b];
  std::span<float> data = grads_.subspan(k.offset, k.elements);
  InFlight& f = *rings_[b];
  f.start_s = now_s();
  f.started = true;
  f.ring.start(comm_, data, f.options,
               options_.zero ? coll::Collective::kReduceScatter : coll::Collective::kAllreduce);
  ++started_;
  if (comm_.size() > 1) ++account_.collectives;
  account_.bytes += double(data.size_bytes());
}

// Caller holds mpi_mutex_.
void GradientReducer::complete(std::size_t b, double now) {
  InFlight& f = *rings_[b];
  f.done = true;
  f.done_s = now;
  ++completed_;
  account_.comm_s += now - f.start_s;
}

// Caller holds mpi_mutex_. Bucket b's updated parameters (this rank's chunk of them) go to
// every rank: the all-gather half of the ring whose reduce-scatter summed the gradient.
void GradientReducer::start_gather(std::size_t b) {
  const coll::Bucket& k = buckets_[b];
  InFlight& f = *rings_[b];
  f.gather_start_s = now_s();
  f.gathering = true;
  ++gathering_;
  f.ring.start(comm_, params_.subspan(k.offset, k.elements), f.options,
               coll::Collective::kAllGather);
  if (comm_.size() > 1) ++account_.collectives;
}

// Caller holds mpi_mutex_. Rings complete in any order.
bool GradientReducer::poll_locked() {
  bool any = false;
  for (std::size_t b = 0; b < started_; ++b) {
    InFlight& f = *rings_[b];
    if (!f.done && f.ring.progress()) {
      complete(b, now_s());
      any = true;
    } else if (f.gathering && f.ring.progress()) {
      f.done_s = now_s();
      f.gathering = false;
      f.gathered = true;
      --gathering_;
      ++gathered_;
      account_.comm_s += f.done_s - f.gather_start_s;
      any = true;
    }
  }
  return any;
}

// Caller holds mpi_mutex_. Starts the agreement once every bucket's own chunk holds its sum
// (the flags are final then), and notes its outcome; true if either happened.
bool GradientReducer::advance_agreement() {
  InFlight& agree = *rings_.back();
  if (agreement_ == Agreement::kDone) return false;
  bool moved = false;
  if (agreement_ == Agreement::kIdle) {
    if (started_ < buckets_.size()) return false;
    bool bad = local_bad_;
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      const coll::AsyncAllreduce& ring = rings_[b]->ring;
      if (!ring.own_chunk_reduced()) return false;
      bad = bad || ring.sum_not_finite();
    }
    flag_[0] = bad ? 1.0f : 0.0f;
    agree.start_s = now_s();
    agree.ring.start(comm_, flag_, agree.options);
    agreement_ = Agreement::kInFlight;
    moved = true;
  }
  if (agree.ring.progress()) {
    agree.done_s = now_s();
    agreement_ = Agreement::kDone;
    account_.comm_s += agree.done_s - agree.start_s;
    if (comm_.size() > 1) ++account_.collectives;
    moved = true;
  }
  return moved;
}

void GradientReducer::layer_done(std::size_t layer) {
  if (!overlap_) return;
  std::unique_lock lock(mpi_mutex_);
  bool started_any = false;
  while (started_ < buckets_.size() && ready_layer_[started_] >= layer) {
    start(started_);
    started_any = true;
  }
  if (options_.driver == ProgressDriver::kLayers || !thread_)
    poll_locked();
  else if (started_any)
    thread_->wake.notify_one();
}

void GradientReducer::poll() {
  if (thread_ || !in_flight()) return;
  std::lock_guard lock(mpi_mutex_);
  poll_locked();
}

// This rank's piece of bucket b (all of it unless zero), in pieces that leave room to poll.
void GradientReducer::update_bucket(std::size_t b, const UpdatePiece& update) {
  const ShardPiece& mine = shard_.pieces()[b];
  const std::size_t piece = std::max<std::size_t>(1, options_.update_piece_elements);
  for (std::size_t done = 0; done < mine.count; done += piece) {
    update(mine.flat_offset + done, std::min(piece, mine.count - done), mine.shard_offset + done);
    if (options_.driver == ProgressDriver::kLayers && in_flight()) {
      const double t0 = now_s();
      std::lock_guard lock(mpi_mutex_);
      poll_locked();
      account_.progress_s += now_s() - t0;
    }
  }
  rings_[b]->updated = true;
}

void GradientReducer::trace_rings() {
  if (!trace_) return;
  const InFlight& agree = *rings_.back();
  trace_->span(agree_name_, 1, agree.start_s, agree.done_s);
  for (std::size_t b = 0; b < buckets_.size(); ++b)
    trace_->span(ring_names_[b], 2 + int(b), rings_[b]->start_s, rings_[b]->done_s,
                 double(buckets_[b].elements) * 4.0);
}

bool GradientReducer::finish(bool local_ok, const UpdatePiece& update) {
  const std::size_t B = buckets_.size();
  const bool per_bucket = options_.update_per_bucket || options_.zero;
  coll::Waiter waiter(coll::resolve_wait_policy(options_.ring.wait, comm_));
  // With N ranks each rank's ring checks its own chunk of the sum; one rank has no ring.
  local_bad_ = !local_ok || (comm_.size() == 1 && !all_finite(grads_));

  if (!overlap_) {
    // Off: every bucket after backward, one after another, then the agreement; all exposed.
    std::lock_guard lock(mpi_mutex_);
    for (std::size_t b = 0; b < B; ++b) {
      start(b);
      rings_[b]->ring.wait();
      complete(b, now_s());
    }
    while (agreement_ != Agreement::kDone)
      if (!advance_agreement()) waiter.idle();
    if (trace_) trace_->span(wait_name_, 0, rings_[0]->start_s, rings_.back()->done_s);
    const bool ok = flag_[0] == 0.0f;
    if (ok && options_.zero) {
      // Each bucket: update this rank's chunk, then all-gather the parameters, blocking.
      for (std::size_t b = 0; b < B; ++b) {
        const ShardPiece& mine = shard_.pieces()[b];
        if (mine.count > 0) update(mine.flat_offset, mine.count, mine.shard_offset);
        start_gather(b);
        rings_[b]->ring.wait();
        poll_locked();  // notes the completion
        if (trace_) trace_->span(wait_name_, 0, rings_[b]->gather_start_s, rings_[b]->done_s);
      }
    } else if (ok) {
      update(0, grads_.size(), 0);
    }
    account_.exposed_s = account_.comm_s;  // nothing else ran meanwhile
    trace_rings();
    return ok;
  }

  double poll_t0 = now_s();  // polls from here to the next wait or update are progress_s
  std::unique_lock lock(mpi_mutex_);
  while (started_ < B) start(started_);  // a model whose first layers have no parameters
  if (thread_) thread_->main_waiting = true;
  for (;;) {
    bool moved = poll_locked();
    moved = advance_agreement() || moved;
    const bool ok = agreement_ == Agreement::kDone && flag_[0] == 0.0f;
    if (ok && per_bucket) {
      // Update every summed bucket not yet updated, the thread polling meanwhile; with zero,
      // its all-gather of the updated parameters starts right after.
      for (std::size_t b = 0; b < B; ++b) {
        if (!rings_[b]->done || rings_[b]->updated) continue;
        account_.progress_s += now_s() - poll_t0;
        if (thread_) {
          thread_->main_waiting = false;
          thread_->wake.notify_one();
        }
        lock.unlock();
        update_bucket(b, update);
        lock.lock();
        if (options_.zero) start_gather(b);
        if (thread_) thread_->main_waiting = true;
        poll_t0 = now_s();
        moved = true;
      }
    }
    bool all_done = agreement_ == Agreement::kDone && completed_ == B;
    if (all_done && ok && per_bucket)
      for (std::size_t b = 0; b < B; ++b) all_done = all_done && rings_[b]->updated;
    if (all_done && ok && options_.zero) all_done = gathered_ == B;
    if (all_done) break;
    if (moved) {
      waiter.reset();
      continue;
    }
    // Nothing to compute: this is the wait that lengthens the step.
    const double t0 = now_s();
    account_.progress_s += t0 - poll_t0;
    do {
      waiter.idle();
    } while (!poll_locked() && !advance_agreement());
    const double t1 = now_s();
    account_.exposed_s += t1 - t0;
    if (trace_) trace_->span(wait_name_, 0, t0, t1);
    waiter.reset();
    poll_t0 = t1;
  }
  account_.progress_s += now_s() - poll_t0;
  if (thread_) thread_->main_waiting = false;
  lock.unlock();
  trace_rings();
  const bool ok = flag_[0] == 0.0f;
  if (ok && !per_bucket) update(0, grads_.size(), 0);
  return ok;
}

// kThread: poll while rings are in flight and the main thread computes; sleep between polls
// that moved nothing (a spinning thread would take the core from backward).
void GradientReducer::thread_main() {
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);  // wake on time, not up to 50 µs late
  const long sleep_ns = std::max(1000L, static_cast<long>(options_.thread_poll_s * 1e9));
  std::unique_lock lock(mpi_mutex_);
  std::size_t seen = 0;
  for (;;) {
    thread_->wake.wait(
        lock, [&] { return thread_->stopping || (in_flight() && !thread_->main_waiting); });
    if (thread_->stopping) return;
    bool moved = poll_locked();
    std::size_t events = 0;
    for (std::size_t b = 0; b < started_; ++b) events += rings_[b]->ring.events();
    moved = moved || events != seen;
    seen = events;
    lock.unlock();
    if (!moved) {
      timespec ts{0, sleep_ns};
      nanosleep(&ts, nullptr);
    }
    lock.lock();
  }
}

}  // namespace ringtrain
