// How long a thread waited for a core (core_wait.hpp): the two sources and the share.
#include "train/run/core_wait.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>

#include "ringtrain/framework/error.hpp"

namespace ringtrain {
namespace {

constexpr const char* kSchedstat = "/proc/thread-self/schedstat";

double wall_now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// schedstat: "<run ns> <run-queue wait ns> <timeslices>\n". Read into a buffer on the stack:
// a step reads it twice, and allocates nothing.
std::optional<double> schedstat_wait_s() {
  const int fd = ::open(kSchedstat, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::array<char, 96> text{};
  const ssize_t got = ::read(fd, text.data(), text.size() - 1);
  ::close(fd);
  if (got <= 0) return std::nullopt;
  const char* end = text.data() + got;
  std::uint64_t run_ns = 0, wait_ns = 0;
  const auto run = std::from_chars(text.data(), end, run_ns);
  if (run.ec != std::errc() || run.ptr == end || *run.ptr != ' ') return std::nullopt;
  const auto wait = std::from_chars(run.ptr + 1, end, wait_ns);
  if (wait.ec != std::errc()) return std::nullopt;
  return double(wait_ns) * 1e-9;
}

double seconds(const timeval& t) {
  return double(t.tv_sec) + double(t.tv_usec) * 1e-6;
}

}  // namespace

CoreWaitSource available_core_wait_source() {
  return schedstat_wait_s() ? CoreWaitSource::kSchedstat : CoreWaitSource::kRusage;
}

CoreWaitReading read_core_wait(CoreWaitSource source) {
  CoreWaitReading reading;
  reading.source = source;
  reading.wall_s = wall_now_s();
  if (source == CoreWaitSource::kSchedstat) {
    const std::optional<double> wait_s = schedstat_wait_s();
    if (!wait_s)
      throw Error(
          fmt::format("core wait: cannot read {} (a Linux kernel without scheduler "
                      "statistics?); use the rusage source",
                      kSchedstat));
    reading.wait_s = *wait_s;
    return reading;
  }
  rusage usage{};
  if (getrusage(RUSAGE_THREAD, &usage) != 0)
    throw Error(
        fmt::format("core wait: getrusage(RUSAGE_THREAD) failed: {}", std::strerror(errno)));
  reading.cpu_s = seconds(usage.ru_utime) + seconds(usage.ru_stime);
  reading.involuntary_switches = usage.ru_nivcsw;
  reading.voluntary_switches = usage.ru_nvcsw;
  return reading;
}

CoreWaitReading read_core_wait() {
  return read_core_wait(available_core_wait_source());
}

std::optional<double> core_wait_share(const CoreWaitReading& begin, const CoreWaitReading& end) {
  if (begin.source != end.source)
    throw Error("core wait: the two readings of an interval come from different sources");
  const double wall_s = end.wall_s - begin.wall_s;
  if (!(wall_s > 0.0)) return std::nullopt;
  double wait_s = 0.0;
  if (begin.source == CoreWaitSource::kSchedstat) {
    wait_s = end.wait_s - begin.wait_s;
  } else if (end.voluntary_switches != begin.voluntary_switches) {
    return std::nullopt;  // it slept or blocked: off-core time that is not a wait
  } else if (end.involuntary_switches != begin.involuntary_switches) {
    wait_s = wall_s - (end.cpu_s - begin.cpu_s);
  }
  return std::clamp(wait_s / wall_s, 0.0, 1.0);
}

std::optional<CoreWaitNotice> core_wait_notice(std::span<const double> shares, double threshold) {
  const std::size_t none = shares.size();
  std::size_t most = none, least = none;
  double sum = 0.0;
  std::size_t known = 0;
  for (std::size_t r = 0; r < shares.size(); ++r) {
    if (!std::isfinite(shares[r])) continue;
    if (most == none || shares[r] > shares[most]) most = r;
    if (least == none || shares[r] < shares[least]) least = r;
    sum += shares[r];
    ++known;
  }
  if (most == none) return std::nullopt;
  if (shares[most] - shares[least] >= threshold)
    return CoreWaitNotice{
        fmt::format("rank {} waits for its core {:.0f} % of the time, rank {} {:.0f} %: something "
                    "else runs there (another process, or more threads than cores); samples are "
                    "not moved away from it for that",
                    most, 100.0 * shares[most], least, 100.0 * shares[least]),
        true, most};
  if (shares[least] >= threshold)
    return CoreWaitNotice{
        fmt::format("every rank waits for a core about {:.0f} % of the time: more ranks (or "
                    "threads) than cores; the split follows the speeds net of that wait",
                    100.0 * sum / double(known)),
        false};
  return std::nullopt;
}

}  // namespace ringtrain
