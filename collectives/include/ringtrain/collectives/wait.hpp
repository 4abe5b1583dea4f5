// How a rank waits for its neighbours: the difference between a ring that flies and one that
// crawls when there are more ranks than cores.
//
// A rank whose message has not arrived yet calls Waiter::idle() between two polls
// (MPI_Test). What idle() should do depends on the node:
//   ranks <= cores  every rank owns a core; returning at once (spinning) gives the lowest
//                   latency, and nobody else wants the core.
//   ranks >  cores  the rank we wait for may be waiting for *our core*. Spinning (what
//                   MPICH's own collectives do) burns the time slice that rank needs, so even a
//                   4-byte MPI_Allreduce takes milliseconds. Yielding hands the
//                   core over at once, when the scheduler agrees; when yields come straight
//                   back (it would not switch) we nap briefly, which lets it run anybody.
// WaitPolicy::kAuto picks between the two once, from ranks_per_node and the cores this
// process may run on (sched_getaffinity).
#pragma once

#include <cstddef>
#include <string>

#include "ringtrain/collectives/communicator.hpp"

namespace ringtrain::collectives {

enum class WaitPolicy {
  kAuto,   // kSpin if ranks_per_node <= available cores, kYield otherwise
  kSpin,   // poll again immediately
  kYield,  // sched_yield() between polls; a short nap when yields hand the core to nobody
  kSleep,  // nanosleep with exponential backoff between polls (for measurement)
};

// Cores this process may run on (sched_getaffinity; hardware_concurrency as a fallback).
int available_cores();
// True if more ranks of `comm` share this node than this process has cores.
bool oversubscribed(const Communicator& comm);
// kAuto resolved for `comm`; other policies are returned unchanged. Not collective.
WaitPolicy resolve_wait_policy(WaitPolicy policy, const Communicator& comm);

// "auto", "spin", "yield", "sleep"; parse throws CollectiveError on anything else.
std::string to_string(WaitPolicy policy);
WaitPolicy parse_wait_policy(const std::string& name);

// The idle step of one wait loop:
//   Waiter waiter(policy);
//   while (!done()) { if (made_progress) waiter.reset(); else waiter.idle(); }
// Must be given a resolved policy (not kAuto).
class Waiter {
 public:
  explicit Waiter(WaitPolicy resolved_policy);
  void idle();   // called after a poll that found nothing new
  void reset();  // called after a poll that found something: back to the shortest wait

 private:
  WaitPolicy policy_;
  std::size_t fruitless_polls_ = 0;
  std::size_t quick_yields_ = 0;
  long sleep_ns_ = 0;
};

// Waits for one MPI request as `policy` says (resolved for `comm`); throws CollectiveError
// if MPI_Test fails.
void wait_request(const Communicator& comm, MPI_Request& request, WaitPolicy policy);

}  // namespace ringtrain::collectives
