// Who polls the gradient rings (see ring_poller.hpp).
//
// Threads: the communication thread polls the rings under mpi_mutex_, which notes their
// completion times; everything else (starting rings, the trace) is the main thread's.
#include "train/sum/ring_poller.hpp"

#include <mpi.h>
#include <sys/prctl.h>
#include <time.h>

#include <algorithm>

#include "ringtrain/framework/error.hpp"

namespace ringtrain {

std::string to_string(PollDriver driver) {
  return driver == PollDriver::kThread ? "thread" : "layers";
}

PollDriver parse_poll_driver(const std::string& name) {
  if (name == "layers") return PollDriver::kLayers;
  if (name == "thread") return PollDriver::kThread;
  throw UsageError("--ring-driver " + name + ": choose one of layers, thread");
}

struct RingPoller::Thread {
  std::thread thread;
  std::condition_variable wake;
  bool stopping = false;
  bool main_waiting = false;  // the main thread polls itself: the thread stays asleep
};

RingPoller::RingPoller(BucketRings& rings, PollDriver driver, double thread_poll_s, int world_size)
    : rings_(rings), thread_poll_s_(thread_poll_s) {
  if (driver != PollDriver::kThread || world_size == 1) return;
  int provided = 0;
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_SERIALIZED)
    throw UsageError(
        "--ring-driver thread needs MPI initialised with MPI_THREAD_SERIALIZED or "
        "more; this process has less: use --ring-driver layers");
  thread_ = std::make_unique<Thread>();
  thread_->thread = std::thread([this] { thread_main(); });
}

RingPoller::~RingPoller() {
  if (!thread_) return;
  {
    std::lock_guard lock(mpi_mutex_);
    thread_->stopping = true;
  }
  thread_->wake.notify_all();
  thread_->thread.join();
}

void RingPoller::rings_started() {
  if (thread_) thread_->wake.notify_one();
}

void RingPoller::set_main_waiting(bool waiting) {
  if (!thread_) return;
  thread_->main_waiting = waiting;
  if (!waiting) thread_->wake.notify_one();
}

// Poll while rings are in flight and the main thread computes; sleep between polls that
// moved nothing. A poll moved something if a ring completed or any of the rings' MPI
// operations did.
void RingPoller::thread_main() {
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);  // wake on time, not up to 50 µs late
  const long sleep_ns = std::max(1000L, static_cast<long>(thread_poll_s_ * 1e9));
  std::unique_lock lock(mpi_mutex_);
  std::size_t seen = 0;
  for (;;) {
    thread_->wake.wait(
        lock, [&] { return thread_->stopping || (rings_.in_flight() && !thread_->main_waiting); });
    if (thread_->stopping) return;
    bool moved = rings_.poll();
    const std::size_t events = rings_.events();
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
