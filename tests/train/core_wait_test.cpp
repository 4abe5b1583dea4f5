// The core-wait measurement (train/run/core_wait.hpp) against the thread's CPU clock: a busy
// thread is either running or waiting, so its wait share is 1 − CPU time / wall time whatever
// else the machine runs; a sleeping thread does not wait; two busy threads pinned to one CPU
// wait about half of the time each. And the diagnostic: a rank that stands out against every
// rank waiting alike.
#include "train/run/core_wait.hpp"

#include <pthread.h>
#include <sched.h>

#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <ctime>
#include <latch>
#include <limits>
#include <thread>
#include <vector>

#include "ringtrain/framework/error.hpp"

using namespace ringtrain;

namespace {

double thread_cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

// One interval of this thread, read from both sources where schedstat exists. The rusage
// readings enclose only the work and the thread's CPU clock, so a file read of schedstat cannot
// add a voluntary switch to the rusage interval.
struct Measured {
  std::optional<double> schedstat_share, rusage_share;
  double cpu_share = 0.0;  // CPU time / wall time, from the thread's CPU clock
  bool blocked = false;    // a voluntary switch (a page fault, a lock) fell into the interval
};

template <typename Work>
Measured measure(bool schedstat, Work work) {
  const CoreWaitReading stat0 =
      schedstat ? read_core_wait(CoreWaitSource::kSchedstat) : CoreWaitReading{};
  const CoreWaitReading usage0 = read_core_wait(CoreWaitSource::kRusage);
  const double cpu0 = thread_cpu_s();
  work();
  const double cpu1 = thread_cpu_s();
  const CoreWaitReading usage1 = read_core_wait(CoreWaitSource::kRusage);
  const CoreWaitReading stat1 =
      schedstat ? read_core_wait(CoreWaitSource::kSchedstat) : CoreWaitReading{};
  Measured m;
  if (schedstat) m.schedstat_share = core_wait_share(stat0, stat1);
  m.rusage_share = core_wait_share(usage0, usage1);
  m.cpu_share = (cpu1 - cpu0) / (usage1.wall_s - usage0.wall_s);
  m.blocked = usage1.voluntary_switches != usage0.voluntary_switches;
  return m;
}

void spin_s(double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  volatile std::uint64_t turns = 0;
  while (std::chrono::steady_clock::now() < end) turns = turns + 1;
}

bool has_schedstat() {
  return available_core_wait_source() == CoreWaitSource::kSchedstat;
}

// A busy interval's shares: 1 − CPU share (schedstat closely; rusage's CPU time is coarser).
// A busy loop can still block now and then (a page fault on a loaded machine); rusage cannot
// tell that time from a wait and must say the share is unknown.
void check_busy(const Measured& m) {
  INFO("CPU share " << m.cpu_share << (m.blocked ? ", blocked once or more" : ""));
  if (m.schedstat_share) CHECK(*m.schedstat_share == Approx(1.0 - m.cpu_share).margin(0.05));
  if (m.blocked) {
    CHECK_FALSE(m.rusage_share);
    return;
  }
  REQUIRE(m.rusage_share);
  CHECK(*m.rusage_share == Approx(1.0 - m.cpu_share).margin(0.1));
}

// A busy interval in which the thread did not block: up to five tries, since a loaded machine
// may make the thread block (a page fault) once in a while. Five blocked tries in a row fail.
Measured measure_busy(bool schedstat, double seconds) {
  Measured m;
  for (int attempt = 0; attempt < 5; ++attempt) {
    m = measure(schedstat, [seconds] { spin_s(seconds); });
    check_busy(m);
    if (!m.blocked) return m;
  }
  FAIL("the busy thread blocked in each of 5 intervals");
  return m;
}

}  // namespace

TEST_CASE("core wait: a busy thread's wait is its wall time off the CPU", "[core_wait]") {
  const bool schedstat = has_schedstat();
  if (!schedstat)
    WARN("no "
         << "/proc/thread-self/schedstat here: the rusage source alone");
  const Measured m = measure_busy(schedstat, 0.2);
  // A thread that had a core to itself (CPU share above 90 %) waited little.
  if (m.cpu_share > 0.9 && m.schedstat_share) CHECK(*m.schedstat_share < 0.1);
}

TEST_CASE("core wait: sleeping is not waiting for a core", "[core_wait]") {
  const bool schedstat = has_schedstat();
  const Measured m =
      measure(schedstat, [] { std::this_thread::sleep_for(std::chrono::milliseconds(100)); });
  if (schedstat) {
    REQUIRE(m.schedstat_share);
    CHECK(*m.schedstat_share < 0.2);
  }
  // rusage sees the voluntary switch and cannot split the time off the CPU: unknown.
  CHECK_FALSE(m.rusage_share);
}

TEST_CASE("core wait: two busy threads pinned to one CPU wait for it", "[core_wait]") {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
  int cpu = 0;
  while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &allowed)) ++cpu;
  REQUIRE(cpu < CPU_SETSIZE);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  const bool schedstat = has_schedstat();
  std::array<Measured, 2> measured;
  std::array<int, 2> pinned{-1, -1};
  std::latch start(2);
  auto busy = [&](std::size_t t) {
    pinned[t] = sched_setaffinity(0, sizeof one, &one);  // 0: the calling thread
    start.arrive_and_wait();
    if (pinned[t] == 0) measured[t] = measure(schedstat, [] { spin_s(0.3); });
  };
  std::thread first(busy, 0), second(busy, 1);
  first.join();
  second.join();
  if (pinned[0] != 0 || pinned[1] != 0) {
    // ctest reports the case as skipped on this line (SKIP_REGULAR_EXPRESSION).
    WARN("core wait test skipped: a thread may not pin itself to CPU " << cpu << " here");
    return;
  }
  for (const Measured& m : measured) check_busy(m);
  // Sharing one CPU, each runs about half of the time; more load elsewhere only adds waits.
  // A thread that blocked has no rusage share (check_busy); the other one's must show the wait.
  const double unknown = -1.0;
  const double most = std::max(measured[0].rusage_share.value_or(unknown),
                               measured[1].rusage_share.value_or(unknown));
  if (most != unknown) CHECK(most > 0.35);
  if (schedstat) CHECK(std::max(*measured[0].schedstat_share, *measured[1].schedstat_share) > 0.35);
  CHECK((most != unknown || schedstat));  // at least one source measured the shared CPU
}

TEST_CASE("core wait: readings of one interval come from one source", "[core_wait]") {
  CoreWaitReading a, b;
  a.source = CoreWaitSource::kSchedstat;
  b.source = CoreWaitSource::kRusage;
  CHECK_THROWS_AS(core_wait_share(a, b), Error);
  b.source = CoreWaitSource::kSchedstat;
  CHECK_FALSE(core_wait_share(a, b));  // no time passed
}

TEST_CASE("core wait: a rank that stands out is named, and the split is held", "[core_wait]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Rank 1 waits 47 points more than rank 0 (the least; rank 2 unknown, left out).
  const std::vector<double> shares{0.01, 0.48, nan, 0.3};
  const std::optional<CoreWaitNotice> notice = core_wait_notice(shares);
  REQUIRE(notice);
  CHECK(notice->hold);
  CHECK(notice->rank == 1);
  CHECK_THAT(notice->line,
             Catch::Matchers::StartsWith("rank 1 waits for its core 48 % of the time, rank 0 1 %"));
  // Two of three high and one low: the highest is named.
  const std::optional<CoreWaitNotice> two = core_wait_notice(std::vector<double>{0.45, 0.5, 0.05});
  REQUIRE(two);
  CHECK(two->hold);
  CHECK_THAT(two->line, Catch::Matchers::StartsWith("rank 1 waits for its core 50 %"));
  // The difference is what counts: at the threshold above the least, not below it.
  const std::optional<CoreWaitNotice> at = core_wait_notice(std::vector<double>{0.0, 0.25}, 0.25);
  REQUIRE(at);
  CHECK(at->line ==
        "rank 1 waits for its core 25 % of the time, rank 0 0 %: something else runs there "
        "(another process, or more threads than cores); samples are not moved away from it for "
        "that");
  CHECK_FALSE(core_wait_notice(std::vector<double>{0.1, 0.29}));
}

TEST_CASE("core wait: every rank waiting alike is oversubscription, and the split is not held",
          "[core_wait]") {
  // Three ranks on two cores: each waits about a third of the time.
  const std::optional<CoreWaitNotice> notice =
      core_wait_notice(std::vector<double>{0.32, 0.34, 0.33});
  REQUIRE(notice);
  CHECK_FALSE(notice->hold);
  CHECK(notice->line ==
        "every rank waits for a core about 33 % of the time: more ranks (or threads) than cores; "
        "the split follows the speeds net of that wait");
  // All high but one standing out above the least: that one is named and held.
  const std::optional<CoreWaitNotice> above = core_wait_notice(std::vector<double>{0.3, 0.3, 0.55});
  REQUIRE(above);
  CHECK(above->hold);
  CHECK(above->rank == 2);
  CHECK_THAT(above->line, Catch::Matchers::StartsWith("rank 2 waits for its core 55 %"));
  // One rank alone (or one known) waiting: it is every rank.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::optional<CoreWaitNotice> one = core_wait_notice(std::vector<double>{nan, 0.4});
  REQUIRE(one);
  CHECK_FALSE(one->hold);
}

TEST_CASE("core wait: the split is held for a rank that stands out two windows in a row",
          "[core_wait]") {
  // Windows of three ranks on two cores: the shares swing, one rank stands out now and then.
  CoreWaitHold hold;
  CHECK_FALSE(hold.persists(2));  // first window: by chance, perhaps
  CHECK(hold.persists(2));        // again: held
  CHECK(hold.persists(2));
  CHECK_FALSE(hold.persists(0));  // another rank: not the same absence
  CHECK_FALSE(hold.persists(std::nullopt));
  CHECK_FALSE(hold.persists(0));  // a window between them without one: starts over
  CHECK(hold.last() == std::optional<std::size_t>(0));
  // Restored from a checkpoint: the window before the save counts.
  CoreWaitHold resumed;
  resumed.restore(hold.last());
  CHECK(resumed.persists(0));
  CoreWaitHold fresh;
  fresh.restore(std::nullopt);
  CHECK_FALSE(fresh.persists(0));
}

TEST_CASE("core wait: ranks that wait little, or unknown, give no notice", "[core_wait]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_FALSE(core_wait_notice(std::vector<double>{0.01, 0.19, nan}));
  CHECK_FALSE(core_wait_notice(std::vector<double>{0.1, 0.1, 0.1}));
  CHECK_FALSE(core_wait_notice(std::vector<double>{nan, nan}));
  CHECK_FALSE(core_wait_notice(std::vector<double>{}));
}
