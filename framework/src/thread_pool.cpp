// ThreadPool: one generation counter under one mutex. run() publishes the loop (function,
// context, part count), bumps the generation and wakes every worker; worker w runs part
// w + 1 if that part exists, then counts itself done. The caller runs part 0 meanwhile and
// waits until `pending_` reaches zero.
#include "ringtrain/framework/thread_pool.hpp"

#include "ringtrain/framework/error.hpp"

namespace ringtrain {

ThreadPool::ThreadPool(std::size_t participants) {
  if (participants == 0) throw UsageError("ThreadPool needs at least 1 participant");
  workers_.reserve(participants - 1);
  for (std::size_t w = 0; w + 1 < participants; ++w)
    workers_.emplace_back([this, w] { worker_loop(w + 1); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  start_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::run_parts(std::size_t parts, PartFn fn, void* context) {
  if (parts > participants())
    throw UsageError("ThreadPool::run: " + std::to_string(parts) + " parts but only " +
                     std::to_string(participants()) + " participants");
  if (parts == 0) return;
  if (parts > 1) {
    std::lock_guard lock(mutex_);
    fn_ = fn;
    context_ = context;
    parts_ = parts;
    pending_ = parts - 1;
    error_ = nullptr;
    ++generation_;
  }
  if (parts > 1) start_.notify_all();
  std::exception_ptr caller_error;
  try {
    fn(context, 0);
  } catch (...) {
    caller_error = std::current_exception();
  }
  if (parts > 1) {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
    if (!caller_error) caller_error = error_;
  }
  if (caller_error) std::rethrow_exception(caller_error);
}

void ThreadPool::worker_loop(std::size_t part) {
  std::size_t seen = 0;
  std::unique_lock lock(mutex_);
  for (;;) {
    start_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    if (part >= parts_) continue;
    const PartFn fn = fn_;
    void* const context = context_;
    lock.unlock();
    std::exception_ptr error;
    try {
      fn(context, part);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error && !error_) error_ = error;
    if (--pending_ == 0) done_.notify_one();
  }
}

}  // namespace ringtrain
