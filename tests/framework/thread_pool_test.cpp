// ThreadPool: every part runs once per run(), on the same thread run after run; an exception
// of any part comes back from run() after every part ended. blas::parallel_ranges: the ranges
// cover [0, n) once, start on cache lines, and are as many as the threads and the minimum
// allow. all_finite finds a NaN or an infinity in any range at any thread count.
#include "ringtrain/framework/thread_pool.hpp"

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "ringtrain/framework/blas.hpp"
#include "train/sum/step_agreement.hpp"

using ringtrain::ThreadPool;

namespace {

// Runs `runs` loops of every part count on `pool`; after each, every part ran exactly once
// and on the thread it ran on the first time.
void check_runs(ThreadPool& pool, int runs) {
  const std::size_t n = pool.participants();
  std::vector<std::thread::id> first(n);
  std::vector<std::atomic<int>> count(n);
  for (int r = 0; r < runs; ++r) {
    for (std::size_t parts = 0; parts <= n; ++parts) {
      for (auto& c : count) c.store(0);
      auto body = [&](std::size_t part) {
        count[part].fetch_add(1);
        if (first[part] == std::thread::id()) first[part] = std::this_thread::get_id();
        if (first[part] != std::this_thread::get_id()) count[part].fetch_add(100);
      };
      pool.run(parts, body);
      for (std::size_t p = 0; p < n; ++p) REQUIRE(count[p].load() == (p < parts ? 1 : 0));
    }
  }
  REQUIRE(first[0] == std::this_thread::get_id());  // part 0 runs on the caller
}

// The ranges parallel_ranges hands out for n elements, sorted by their start.
std::vector<std::pair<std::size_t, std::size_t>> ranges_of(std::size_t n, std::size_t min) {
  std::mutex mutex;
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  auto record = [&](std::size_t begin, std::size_t end) {
    std::lock_guard lock(mutex);
    ranges.emplace_back(begin, end);
  };
  ringtrain::blas::parallel_ranges(n, min, record);
  std::sort(ranges.begin(), ranges.end());
  return ranges;
}

}  // namespace

TEST_CASE("ThreadPool: each part once per run, on its own thread", "[thread_pool]") {
  for (std::size_t participants = 1; participants <= 4; ++participants) {
    INFO("participants " << participants);
    ThreadPool pool(participants);
    check_runs(pool, 2000);
  }
}

TEST_CASE("ThreadPool: spinning waits: each part once per run, on its own thread",
          "[thread_pool]") {
  // Workers and the caller watch for the next loop (or its end) before they sleep; loops that
  // come quickly, one after another, and loops after the watch has given up both run whole.
  for (std::size_t participants = 2; participants <= 4; ++participants) {
    INFO("participants " << participants);
    ThreadPool pool(participants);
    pool.set_spin_s(1e-3);
    REQUIRE(pool.spin_s() > 0.0);
    check_runs(pool, 2000);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // every worker asleep again
    check_runs(pool, 10);
    pool.set_spin_s(0.0);  // and back to sleeping at once
    check_runs(pool, 100);
  }
}

TEST_CASE("ThreadPool: counters count the loops on several threads", "[thread_pool]") {
  ThreadPool pool(3);
  auto nothing = [](std::size_t) {};
  for (std::size_t parts : {0, 1, 2, 3, 3}) pool.run(parts, nothing);
  REQUIRE(pool.counters().loops == 3);  // a loop of one part runs on the caller alone
  REQUIRE(pool.counters().caller_wait_s >= 0.0);
}

TEST_CASE(
    "blas: the pool spins only where every process's threads have cores, under the own kernels",
    "[thread_pool]") {
  const int cores = ringtrain::blas::available_cores();
  const auto previous = ringtrain::blas::kernels();
  for (auto kernels : {ringtrain::blas::Kernels::kOwn, ringtrain::blas::Kernels::kOpenBlas}) {
    if (kernels == ringtrain::blas::Kernels::kOwn && !ringtrain::blas::own_kernels_supported())
      continue;
    ringtrain::blas::set_kernels(kernels);
    for (int processes : {1, 2, 3}) {
      ringtrain::blas::set_threads(2, processes);
      INFO("processes " << processes << ", cores " << cores);
      const bool fit = 2 * processes <= cores;
      REQUIRE(ringtrain::blas::pool_spins() == (fit && kernels == ringtrain::blas::Kernels::kOwn));
    }
  }
  ringtrain::blas::set_threads(1, 1);
  ringtrain::blas::set_kernels(previous);
}

TEST_CASE("ThreadPool: a part's exception comes back from run(), and the pool goes on",
          "[thread_pool]") {
  ThreadPool pool(3);
  pool.set_spin_s(GENERATE(0.0, 1e-3));
  for (std::size_t thrower = 0; thrower < 3; ++thrower) {
    std::atomic<int> ended = 0;
    auto body = [&](std::size_t part) {
      if (part == thrower) throw std::runtime_error("part " + std::to_string(part));
      ended.fetch_add(1);
    };
    REQUIRE_THROWS_WITH(pool.run(3, body), "part " + std::to_string(thrower));
    REQUIRE(ended.load() == 2);  // the other parts ended before run() returned
  }
  check_runs(pool, 10);
  auto more = [](std::size_t) {};
  CHECK_THROWS(pool.run(4, more));  // more parts than participants
}

TEST_CASE("parallel_ranges: every element once, ranges on cache lines, one per thread it may take",
          "[thread_pool]") {
  for (int threads = 1; threads <= 3; ++threads) {
    ringtrain::blas::ScopedThreads scoped(threads);
    for (std::size_t n : {0ul, 1ul, 1000ul, 4096ul, 65537ul, 300001ul}) {
      for (std::size_t min : {1ul, 1024ul, 32768ul}) {
        INFO("threads " << threads << ", n " << n << ", min " << min);
        const auto ranges = ranges_of(n, min);
        const std::size_t expected =
            std::max<std::size_t>(1, std::min<std::size_t>(threads, n / min));
        REQUIRE(ranges.size() == expected);
        std::size_t next = 0;
        for (const auto& [begin, end] : ranges) {
          REQUIRE(begin == next);
          REQUIRE(begin % 16 == 0);
          REQUIRE(end >= begin);
          next = end;
        }
        REQUIRE(next == n);
      }
    }
  }
}

TEST_CASE("all_finite: a NaN or an infinity anywhere, at 1, 2 and 3 threads", "[thread_pool]") {
  std::vector<float> values(300001, 1.5f);
  const float bad_values[] = {std::numeric_limits<float>::quiet_NaN(),
                              std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity()};
  for (int threads = 1; threads <= 3; ++threads) {
    ringtrain::blas::ScopedThreads scoped(threads);
    INFO("threads " << threads);
    REQUIRE(ringtrain::all_finite(values));
    for (std::size_t at : {0ul, 7ul, 100000ul, 150000ul, 200001ul, 300000ul}) {
      for (float bad : bad_values) {
        INFO("at " << at << ": " << bad);
        values[at] = bad;
        REQUIRE_FALSE(ringtrain::all_finite(values));
        values[at] = std::numeric_limits<float>::max();
        REQUIRE(ringtrain::all_finite(values));
        values[at] = 1.5f;
      }
    }
  }
}
