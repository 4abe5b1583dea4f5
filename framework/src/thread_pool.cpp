// ThreadPool: one atomic word names the current loop (its number and part count). run()
// publishes the loop's function, then the word, and wakes sleeping workers; worker w runs part
// w + 1 if that part exists and counts itself done in `pending_`. The caller runs part 0
// meanwhile and waits until `pending_` reaches zero. Waiting threads watch the word (or the
// count) for up to spin_s(), then sleep on it (std::atomic::wait, a futex).
#include "ringtrain/framework/thread_pool.hpp"

#include <immintrin.h>

#include <chrono>
#include <limits>

#include "ringtrain/framework/error.hpp"

namespace ringtrain {

namespace {

constexpr std::uint32_t kStop =
    std::numeric_limits<std::uint32_t>::max();  // parts of the last word

std::uint32_t parts_of(std::uint64_t word) {
  return static_cast<std::uint32_t>(word);
}

// Watches `changed` for up to spin_ns; true as soon as it holds.
template <typename Changed>
bool spin_until(std::int64_t spin_ns, Changed changed) {
  if (spin_ns <= 0) return changed();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(spin_ns);
  for (;;) {
    for (int i = 0; i < 32; ++i) {
      if (changed()) return true;
      _mm_pause();
    }
    if (std::chrono::steady_clock::now() >= deadline) return changed();
  }
}

}  // namespace

ThreadPool::ThreadPool(std::size_t participants) {
  if (participants == 0) throw UsageError("ThreadPool needs at least 1 participant");
  workers_.reserve(participants - 1);
  for (std::size_t w = 0; w + 1 < participants; ++w)
    workers_.emplace_back([this, w] { worker_loop(w + 1); });
}

ThreadPool::~ThreadPool() {
  const std::uint64_t number = (loop_.load() >> 32) + 1;
  loop_.store(number << 32 | kStop, std::memory_order_release);
  loop_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::run_parts(std::size_t parts, PartFn fn, void* context) {
  if (parts > participants())
    throw UsageError("ThreadPool::run: " + std::to_string(parts) + " parts but only " +
                     std::to_string(participants()) + " participants");
  if (parts == 0) return;
  if (parts > 1) {
    fn_ = fn;
    context_ = context;
    error_ = nullptr;
    pending_.store(static_cast<std::uint32_t>(parts - 1), std::memory_order_relaxed);
    const std::uint64_t number = (loop_.load(std::memory_order_relaxed) >> 32) + 1;
    loop_.store(number << 32 | parts, std::memory_order_release);
    loop_.notify_all();  // a system call only if some worker sleeps
  }
  std::exception_ptr caller_error;
  try {
    fn(context, 0);
  } catch (...) {
    caller_error = std::current_exception();
  }
  if (parts > 1) {
    const auto t0 = std::chrono::steady_clock::now();
    wait_for_workers();
    counters_.caller_wait_s +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++counters_.loops;
    if (!caller_error) caller_error = error_;
  }
  if (caller_error) std::rethrow_exception(caller_error);
}

void ThreadPool::wait_for_workers() {
  auto ended = [this] { return pending_.load(std::memory_order_acquire) == 0; };
  if (spin_until(spin_ns_.load(std::memory_order_relaxed), ended)) return;
  for (std::uint32_t left; (left = pending_.load(std::memory_order_acquire)) != 0;)
    pending_.wait(left, std::memory_order_acquire);
}

std::uint64_t ThreadPool::next_loop(std::uint64_t seen) const {
  auto changed = [&] { return loop_.load(std::memory_order_acquire) != seen; };
  spin_until(spin_ns_.load(std::memory_order_relaxed), changed);
  std::uint64_t word;
  while ((word = loop_.load(std::memory_order_acquire)) == seen)
    loop_.wait(seen, std::memory_order_acquire);
  return word;
}

void ThreadPool::worker_loop(std::size_t part) {
  std::uint64_t seen = 0;
  for (;;) {
    seen = next_loop(seen);
    if (parts_of(seen) == kStop) return;
    if (part >= parts_of(seen)) continue;  // not in this loop: its fields are not ours to read
    std::exception_ptr error;
    try {
      fn_(context_, part);
    } catch (...) {
      error = std::current_exception();
    }
    if (error) {
      std::lock_guard lock(error_mutex_);
      if (!error_) error_ = error;
    }
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

}  // namespace ringtrain
