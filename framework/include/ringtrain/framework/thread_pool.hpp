// ThreadPool: a fixed set of worker threads, created once when a layer is planned, that run
// the parts of one parallel loop inside forward or backward (no thread is created per step).
//
//   ThreadPool pool(2);                        // the caller + 1 worker thread
//   pool.run(parts, [&](std::size_t part) { ... });   // part 0 on the caller, part p on
//                                                      // worker p - 1; returns when all end
//
// Part p always runs on the same thread, and callers split their data by part index only,
// so a parallel loop computes the same thing run after run. Workers sleep on a condition
// variable between loops (they never spin: ranks share cores with other ranks).
// Not reentrant: one run() at a time, from one thread. An exception thrown by a part is
// rethrown by run() after every part has ended.
#pragma once

#include <condition_variable>
#include <cstddef>
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

  // Runs body(part) for part in [0, parts), parts <= participants(); blocks until all end.
  template <typename Body>
  void run(std::size_t parts, Body& body) {
    run_parts(parts, [](void* context, std::size_t part) { (*static_cast<Body*>(context))(part); },
              &body);
  }

 private:
  using PartFn = void (*)(void* context, std::size_t part);
  void run_parts(std::size_t parts, PartFn fn, void* context);
  void worker_loop(std::size_t part);

  std::mutex mutex_;
  std::condition_variable start_, done_;
  std::size_t generation_ = 0;  // bumped by each run(): wakes the workers
  std::size_t parts_ = 0, pending_ = 0;
  PartFn fn_ = nullptr;
  void* context_ = nullptr;
  bool stop_ = false;
  std::exception_ptr error_;
  std::vector<std::thread> workers_;
};

}  // namespace ringtrain
