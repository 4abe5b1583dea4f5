// ThreadPool: a fixed set of worker threads, created once, that run the parts of one parallel
// loop inside forward, backward or the update (no thread is created per step).
//
//   ThreadPool pool(2);                        // the caller + 1 worker thread
//   pool.run(parts, [&](std::size_t part) { ... });   // part 0 on the caller, part p on
//                                                      // worker p - 1; returns when all end
//
// Part p always runs on the same thread, and callers split their data by part index only,
// so a parallel loop computes the same thing run after run. Not reentrant: one run() at a
// time, from one thread. An exception thrown by a part is rethrown by run() after every part
// has ended.
//
// Waiting. Between loops a worker waits for the next one, and after its own part the caller
// waits for the workers. Both sleep (a futex) unless the pool may spin: then each first
// watches for the event for up to spin_s() seconds, which turns the start and the end of a
// loop from a wake-up of a sleeping thread (tens of microseconds on a VM) into a few cache
// misses. Spinning takes a core: only where the process's threads have cores of their own
// (blas::set_threads decides it from the ranks per node), never where ranks share cores.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace ringtrain {

class ThreadPool {
 public:
  // `participants` threads take part in run(): the caller and participants - 1 workers.
  explicit ThreadPool(std::size_t participants);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  std::size_t participants() const { return workers_.size() + 1; }

  // How long a waiting thread watches before it sleeps; 0 (the default): it sleeps at once.
  // May be changed between runs.
  void set_spin_s(double seconds) { spin_ns_.store(static_cast<std::int64_t>(seconds * 1e9)); }
  double spin_s() const { return double(spin_ns_.load()) * 1e-9; }

  // Runs body(part) for part in [0, parts), parts <= participants(); blocks until all end.
  template <typename Body>
  void run(std::size_t parts, Body& body) {
    run_parts(
        parts, [](void* context, std::size_t part) { (*static_cast<Body*>(context))(part); },
        &body);
  }

  // What the pool has done since it was made: loops run on more than one thread, and the
  // caller's time between the end of its own part and the end of the last (imbalance and
  // the workers' start). Counted by the caller only, so reading them between runs is exact.
  struct Counters {
    std::uint64_t loops = 0;
    double caller_wait_s = 0.0;
  };
  Counters counters() const { return counters_; }

 private:
  using PartFn = void (*)(void* context, std::size_t part);
  void run_parts(std::size_t parts, PartFn fn, void* context);
  void worker_loop(std::size_t part);
  // The next loop's word (its number in the high 32 bits, its part count in the low), after
  // `seen`; spins first when the pool may.
  std::uint64_t next_loop(std::uint64_t seen) const;
  void wait_for_workers();

  // A loop: parts and number in one word, so that a worker not taking part never reads the
  // loop's function (which the next run() may be writing); fn_ and context_ are written
  // before the word is published and read only by the loop's participants.
  std::atomic<std::uint64_t> loop_{0};
  std::atomic<std::uint32_t> pending_{0};  // participants of the current loop still running
  std::atomic<std::int64_t> spin_ns_{0};
  PartFn fn_ = nullptr;
  void* context_ = nullptr;
  std::mutex error_mutex_;
  std::exception_ptr error_;
  Counters counters_;
  std::vector<std::thread> workers_;
};

}  // namespace ringtrain
