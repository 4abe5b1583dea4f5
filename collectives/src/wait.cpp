// Wait policy (see wait.hpp): detect oversubscription, then spin, yield or sleep.
//
//   ranks <= cores  spin: the textbook choice, no syscalls. Nobody else wants the core, so
//                   yielding gains nothing, and a sleep wakes late (timer slack).
//   ranks >  cores  yield, and when yields come straight back (8 in a row under 2 us) nap
//                   once. Spinning starves the rank holding the data of its time slice.
//                   A plain yield is not enough: the scheduler (EEVDF) does not switch to a
//                   task that has run more than its share, and that is exactly the rank with
//                   bytes to move, so the yield comes straight back; the nap lets it run
//                   anybody. Pure sleeping pays the timer slack on every call.
// The timings behind these choices: bench/README-allreduce.md, "Wait policy".
#include "ringtrain/collectives/wait.hpp"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace ringtrain::collectives {

namespace {
// kYield: a yield that comes back within kQuickYield handed the core to nobody; after
// kQuickYieldsBeforeNap of those in a row the rank naps (kNapNs asked, ~50 us with Linux's
// default timer slack) so that a rank the scheduler would not switch to gets the core.
constexpr auto kQuickYield = std::chrono::microseconds(2);
constexpr std::size_t kQuickYieldsBeforeNap = 8;
constexpr long kNapNs = 1'000;
// kSleep: exponential backoff between polls.
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
    case WaitPolicy::kAuto:
      return "auto";
    case WaitPolicy::kSpin:
      return "spin";
    case WaitPolicy::kYield:
      return "yield";
    case WaitPolicy::kSleep:
      return "sleep";
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
    case WaitPolicy::kYield: {
      const auto before = std::chrono::steady_clock::now();
      sched_yield();
      if (std::chrono::steady_clock::now() - before < kQuickYield) {
        if (++quick_yields_ >= kQuickYieldsBeforeNap) {
          sleep_for_ns(kNapNs);
          quick_yields_ = 0;
        }
      } else {
        quick_yields_ = 0;
      }
      return;
    }
    case WaitPolicy::kSleep:
      sleep_ns_ = sleep_ns_ == 0 ? kFirstSleepNs : std::min(2 * sleep_ns_, kLongestSleepNs);
      sleep_for_ns(sleep_ns_);
      return;
  }
}

void Waiter::reset() {
  fruitless_polls_ = 0;
  quick_yields_ = 0;
  sleep_ns_ = 0;
}

void wait_request(const Communicator& comm, MPI_Request& request, WaitPolicy policy) {
  Waiter waiter(resolve_wait_policy(policy, comm));
  for (;;) {
    int done = 0;
    check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) return;
    waiter.idle();
  }
}

}  // namespace ringtrain::collectives
