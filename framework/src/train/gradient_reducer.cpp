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

// True iff every value is finite and |v| <= bound. !(|v| <= bound) is also true for NaN;
// eight accumulators let the loop vectorise.
bool all_bounded(std::span<const float> values, float bound) {
  int bad[8] = {};
  std::size_t i = 0;
  for (; i + 8 <= values.size(); i += 8)
    for (int k = 0; k < 8; ++k) bad[k] |= !(std::fabs(values[i + std::size_t(k)]) <= bound);
  for (; i < values.size(); ++i) bad[0] |= !(std::fabs(values[i]) <= bound);
  int any = 0;
  for (int b : bad) any |= b;
  return any == 0;
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
  bool started = false, done = false, updated = false;
};

struct GradientReducer::Thread {
  std::thread thread;
  std::condition_variable wake;
  bool stopping = false;
  bool main_waiting = false;  // the main thread polls itself: the thread stays asleep
};

GradientReducer::GradientReducer(const coll::Communicator& comm, ParameterStore& params,
                                 const ReducerOptions& options, Trace* trace)
    : comm_(comm), grads_(params.grads()), options_(options), trace_(trace) {
  if (options_.cap_bytes == 0)
    throw UsageError("--bucket-bytes 0: a bucket needs at least 4 bytes");
  std::vector<std::size_t> sizes;
  for (const ParameterEntry& e : params.entries()) sizes.push_back(e.size);
  buckets_ = coll::plan_buckets(sizes, std::max<std::size_t>(options_.cap_bytes, sizeof(float)));
  for (const coll::Bucket& b : buckets_)
    ready_layer_.push_back(params.entry(b.first_parameter).layer);
  // Ranks that planned differently would pair rings of different sizes: agree first.
  coll::check_same_size(comm_, options_.cap_bytes, "bucket cap (bytes)");
  coll::check_same_size(comm_, buckets_.size(), "number of gradient buckets");

  const int N = comm_.size();
  bound_ = FLT_MAX / float(2 * N);
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

void GradientReducer::begin_step() {
  std::lock_guard lock(mpi_mutex_);  // the thread reads these
  local_bad_ = false;
  started_ = completed_ = 0;
  account_ = StepComm{};
  for (auto& f : rings_) f->started = f->done = f->updated = false;
}

// Caller holds mpi_mutex_.
void GradientReducer::start(std::size_t b) {
  const coll::Bucket& k = buckets_[b];
  std::span<float> data = grads_.subspan(k.offset, k.elements);
  local_bad_ |= !all_bounded(data, bound_);
  InFlight& f = *rings_[b];
  f.start_s = now_s();
  f.started = true;
  f.ring.start(comm_, data, f.options);
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

// Caller holds mpi_mutex_. Rings complete in any order.
bool GradientReducer::poll_locked() {
  bool any = false;
  for (std::size_t b = 0; b < started_; ++b) {
    InFlight& f = *rings_[b];
    if (!f.done && f.ring.progress()) {
      complete(b, now_s());
      any = true;
    }
  }
  return any;
}

void GradientReducer::layer_done(std::size_t layer) {
  if (!options_.overlap) return;
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
  if (thread_ || completed_ == started_) return;
  std::lock_guard lock(mpi_mutex_);
  poll_locked();
}

void GradientReducer::update_bucket(std::size_t b,
                                    const std::function<void(std::size_t, std::size_t)>& update) {
  const coll::Bucket& k = buckets_[b];
  const std::size_t piece = std::max<std::size_t>(1, options_.update_piece_elements);
  for (std::size_t done = 0; done < k.elements; done += piece) {
    update(k.offset + done, std::min(piece, k.elements - done));
    if (options_.driver == ProgressDriver::kLayers && completed_ < started_) {
      const double t0 = now_s();
      std::lock_guard lock(mpi_mutex_);
      poll_locked();
      account_.progress_s += now_s() - t0;
    }
  }
  rings_[b]->updated = true;
}

bool GradientReducer::finish(bool local_ok,
                             const std::function<void(std::size_t, std::size_t)>& update) {
  const std::size_t B = buckets_.size();
  coll::Waiter waiter(coll::resolve_wait_policy(options_.ring.wait, comm_));
  InFlight& agree = *rings_[B];
  float flag[1] = {0.0f};

  if (!options_.overlap) {
    // Off: every bucket after backward, one after another, each fully exposed.
    std::lock_guard lock(mpi_mutex_);
    for (std::size_t b = 0; b < B; ++b) {
      start(b);
      const double t0 = rings_[b]->start_s;
      rings_[b]->ring.wait();
      const double t1 = now_s();
      complete(b, t1);
      account_.exposed_s += t1 - t0;
      if (trace_) {
        trace_->span(wait_name_, 0, t0, t1);
        trace_->span(ring_names_[b], 2 + int(b), t0, t1, double(buckets_[b].elements) * 4.0);
      }
    }
    const double t0 = now_s();
    flag[0] = (local_bad_ || !local_ok) ? 1.0f : 0.0f;
    agree.ring.start(comm_, flag, agree.options);
    agree.ring.wait();
    const double t1 = now_s();
    account_.exposed_s += t1 - t0;
    account_.comm_s += t1 - t0;
    if (comm_.size() > 1) ++account_.collectives;
    if (trace_) trace_->span(agree_name_, 1, t0, t1);
    const bool ok = flag[0] == 0.0f;
    if (ok) update(0, grads_.size());
    return ok;
  }

  const double finish_t0 = now_s();
  std::unique_lock lock(mpi_mutex_);
  while (started_ < B) start(started_);  // a model whose first layers have no parameters
  flag[0] = (local_bad_ || !local_ok) ? 1.0f : 0.0f;
  const double agree_t0 = now_s();
  agree.ring.start(comm_, flag, agree.options);
  bool agreed = false, ok = false;
  if (thread_) thread_->main_waiting = true;
  double poll_t0 = finish_t0;  // polls from here to the next wait or update are progress_s
  for (;;) {
    bool moved = poll_locked();
    if (!agreed && agree.ring.progress()) {
      agreed = true;
      ok = flag[0] == 0.0f;
      agree.done_s = now_s();
      moved = true;
    }
    if (agreed && ok && options_.update_per_bucket) {
      // Update every summed bucket not yet updated, the thread polling meanwhile.
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
        if (thread_) thread_->main_waiting = true;
        poll_t0 = now_s();
        moved = true;
      }
    }
    bool all_done = agreed && completed_ == B;
    if (all_done && ok && options_.update_per_bucket)
      for (std::size_t b = 0; b < B; ++b) all_done = all_done && rings_[b]->updated;
    if (all_done) break;
    if (moved) {
      waiter.reset();
      continue;
    }
    // Nothing to compute: this is the wait that lengthens the step.
    const double t0 = now_s();
    account_.progress_s += t0 - poll_t0;
    for (;;) {
      waiter.idle();
      if (poll_locked()) break;
      if (!agreed && agree.ring.progress()) {
        agreed = true;
        ok = flag[0] == 0.0f;
        agree.done_s = now_s();
        break;
      }
    }
    const double t1 = now_s();
    account_.exposed_s += t1 - t0;
    if (trace_) trace_->span(wait_name_, 0, t0, t1);
    waiter.reset();
    poll_t0 = t1;
  }
  account_.progress_s += now_s() - poll_t0;
  account_.comm_s += agree.done_s - agree_t0;
  if (comm_.size() > 1) ++account_.collectives;
  if (thread_) thread_->main_waiting = false;
  lock.unlock();
  if (trace_) {
    trace_->span(agree_name_, 1, agree_t0, agree.done_s);
    for (std::size_t b = 0; b < B; ++b)
      trace_->span(ring_names_[b], 2 + int(b), rings_[b]->start_s, rings_[b]->done_s,
                   double(buckets_[b].elements) * 4.0);
  }
  if (ok && !options_.update_per_bucket) update(0, grads_.size());
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
    thread_->wake.wait(lock, [&] {
      return thread_->stopping || (completed_ < started_ && !thread_->main_waiting);
    });
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
