// How long a thread waited for a core: the measurement behind the shared-core diagnostic. A
// rank whose core is shared with another busy process is not slow but absent for slices of
// milliseconds; moving samples away from it does not help, so the batch split must not chase
// it (its compute speed is taken net of this wait: speed_smoother.hpp), and rank 0 says once
// which rank waits and how much. Where every rank waits alike (more ranks than cores), no rank
// is absent more than another, and the speeds net of the wait still compare.
//
// Vocabulary:
//   core wait   time the thread was runnable but not running: in the run queue of a core that
//               ran something else. Sleeping, blocking on I/O and busy-polling are not waits.
//   share       core wait / wall time of an interval, in [0, 1]
//
// Sources, per calling thread:
//   schedstat   /proc/thread-self/schedstat, second field: the run-queue wait in ns, exact.
//               (/proc/self/schedstat is the main thread's alone; a thread reads its own.)
//   rusage      where schedstat is absent: getrusage(RUSAGE_THREAD). It counts involuntary
//               switches but no wait time, so over an interval with involuntary switches and
//               no voluntary ones (the thread never slept or blocked: a compute phase) the wait
//               is wall − CPU time; with no involuntary switch it is 0; with voluntary ones it
//               cannot be told apart from sleeping, and the share is unknown.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace ringtrain {

enum class CoreWaitSource { kSchedstat, kRusage };

// One reading of the calling thread's counters (cumulative since the thread started).
struct CoreWaitReading {
  CoreWaitSource source = CoreWaitSource::kRusage;
  double wall_s = 0.0;  // steady clock
  double wait_s = 0.0;  // schedstat: run-queue wait
  double cpu_s = 0.0;   // rusage: user + system time
  std::int64_t involuntary_switches = 0;
  std::int64_t voluntary_switches = 0;
};

// The source this machine offers: schedstat if the calling thread can read it, else rusage.
CoreWaitSource available_core_wait_source();

// Reads the calling thread's counters from `source`. Throws Error if that source cannot be
// read (schedstat absent or malformed, getrusage failing).
CoreWaitReading read_core_wait(CoreWaitSource source);
CoreWaitReading read_core_wait();  // from available_core_wait_source()

// The share of the wall time between two readings of the same thread and source spent waiting
// for a core, in [0, 1]; nullopt when the rusage source cannot tell (see above) or no time
// passed. Throws Error if the readings come from different sources.
std::optional<double> core_wait_share(const CoreWaitReading& begin, const CoreWaitReading& end);

// The share above which rank 0 says that ranks wait for their cores: a rank's share this much
// above the least share among the ranks, or the least share itself at least this.
inline constexpr double kCoreWaitNotice = 0.2;

// What the ranks' core-wait shares call for: the line rank 0 prints once, and whether the split
// is kept while it lasts.
struct CoreWaitNotice {
  std::string line;
  bool hold = false;
  std::size_t rank = 0;  // with hold: the rank that stands out
};

// The diagnostic for the ranks' shares (one per rank, NaN where unknown; the unknown ones are
// left out). Two cases, told apart by comparing the ranks with each other:
//   - a rank stands out: the share of the rank that waits most exceeds the least share by
//     `threshold` or more. That rank is absent more than the others (something else runs on its
//     core), which moving samples does not help: the line names it, e.g. "rank 1 waits for its
//     core 48 % of the time, rank 0 1 %: ...", and the split is held (once the same rank
//     stands out in two windows in a row: CoreWaitHold).
//   - every rank waits: the least share is at least `threshold` and none stands out (more ranks
//     or threads than cores, every rank absent alike). The speeds, net of the wait, still
//     compare, so the split is not held; the line says so.
// nullopt when neither holds.
std::optional<CoreWaitNotice> core_wait_notice(std::span<const double> shares,
                                               double threshold = kCoreWaitNotice);

// When ranks outnumber cores the shares swing from window to window, and any rank may stand
// out in one of them by chance. The split is held only for a rank that stands out in two
// windows in a row; this remembers the window before.
class CoreWaitHold {
 public:
  // This window's rank that stands out (nullopt: none). True if the same rank stood out in
  // the window before.
  bool persists(std::optional<std::size_t> standing_out) {
    const bool again = standing_out && standing_out == last_;
    last_ = standing_out;
    return again;
  }
  // The window before's rank, as the checkpoint's split plan holds it.
  std::optional<std::size_t> last() const { return last_; }
  void restore(std::optional<std::size_t> last) { last_ = last; }

 private:
  std::optional<std::size_t> last_;
};

}  // namespace ringtrain
