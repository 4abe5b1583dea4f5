// Wait policy (see wait.hpp): detect oversubscription, then spin, yield or sleep.
//
// Measured on the 2-core test machine (bench/README-allreduce.md has the figures): at N=2
// spinning is fastest (a yield or sleep adds a scheduler round trip to every round); at N=4
// yielding is fastest, pure sleeping loses to it on small messages because nanosleep wakes
// ~55 us late (timer slack), and spinning is as slow as MPICH.
#include "ringtrain/collectives/wait.hpp"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <thread>

namespace ringtrain::collectives {

namespace {
// kYield: after this many fruitless yields in a row, start sleeping with backoff.
constexpr std::size_t kYieldsBeforeSleep = 256;
constexpr long kFirstSleepNs = 1'000;
constexpr long kLongestSleepNs = 64'000;
}  // namespace

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

bool oversubscribed(const Communicator& comm) {
  return comm.ranks_per_node() > available_cores();
}

WaitPolicy resolve_wait_policy(WaitPolicy policy, const Communicator& comm) {
  if (policy != WaitPolicy::kAuto) return policy;
  return oversubscribed(comm) ? WaitPolicy::kYield : WaitPolicy::kSpin;
}

std::string to_string(WaitPolicy policy) {
  switch (policy) {
    case WaitPolicy::kAuto: return "auto";
    case WaitPolicy::kSpin: return "spin";
    case WaitPolicy::kYield: return "yield";
    case WaitPolicy::kSleep: return "sleep";
  }
  return "?";
}

WaitPolicy parse_wait_policy(const std::string& name) {
  for (auto p : {WaitPolicy::kAuto, WaitPolicy::kSpin, WaitPolicy::kYield, WaitPolicy::kSleep})
    if (to_string(p) == name) return p;
  throw CollectiveError("unknown wait policy '" + name + "' (expected auto, spin, yield or sleep)");
}

Waiter::Waiter(WaitPolicy resolved_policy) : policy_(resolved_policy) {
  if (policy_ == WaitPolicy::kAuto)
    throw CollectiveError("Waiter needs a resolved wait policy (call resolve_wait_policy)");
}

static void sleep_for_ns(long ns) {
  timespec ts{0, ns};
  nanosleep(&ts, nullptr);
}

void Waiter::idle() {
  ++fruitless_polls_;
  switch (policy_) {
    case WaitPolicy::kAuto:
    case WaitPolicy::kSpin:
      return;
    case WaitPolicy::kYield:
      if (fruitless_polls_ < kYieldsBeforeSleep) {
        sched_yield();
        return;
      }
      [[fallthrough]];
    case WaitPolicy::kSleep:
      sleep_ns_ = sleep_ns_ == 0 ? kFirstSleepNs : std::min(2 * sleep_ns_, kLongestSleepNs);
      sleep_for_ns(sleep_ns_);
      return;
  }
}

void Waiter::reset() {
  fruitless_polls_ = 0;
  sleep_ns_ = 0;
}

}  // namespace ringtrain::collectives
