// Watchdog thread (see watchdog.hpp).
#include "train/safety/watchdog.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "train/now.hpp"

namespace ringtrain {
void default_watchdog_action(const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  std::abort();
}

Watchdog::Watchdog(int rank, double limit_s, Action action)
    : rank_(rank),
      limit_s_(limit_s),
      action_(action ? std::move(action) : default_watchdog_action) {
  if (limit_s > 0) thread_ = std::thread([this] { watch(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_signal_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::enter(const char* phase, std::uint64_t step) {
  step_.store(step);
  since_s_.store(now_s());
  phase_.store(phase);
}

void Watchdog::leave() {
  phase_.store(nullptr);
}

void Watchdog::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  // Wake a few times a second to compare the phase's age with the limit; the wait ends
  // early only when the watchdog is destroyed.
  while (
      !stop_signal_.wait_for(lock, std::chrono::milliseconds(200), [this] { return stopping_; })) {
    const char* phase = phase_.load();
    const double limit = limit_s_.load();
    if (phase == nullptr || limit <= 0) continue;
    const double age = now_s() - since_s_.load();
    if (age > limit) {
      action_(
          fmt::format("ringtrain: rank {}: watchdog: stuck in '{}' of step {} for {:.1f} s "
                      "(limit {:.1f} s; set it with --watchdog-s): another rank may have died "
                      "or hangs; ending the job",
                      rank_, phase, step_.load(), age, limit));
      return;
    }
  }
}

Watchdog::Action recorded_then(Watchdog::Action act, int rank, std::filesystem::path dir) {
  return [act = std::move(act), rank, dir = std::move(dir)](const std::string& message) {
    std::error_code ignored;
    if (!dir.empty() && std::filesystem::is_directory(dir, ignored)) {
      if (std::FILE* f =
              std::fopen((dir / fmt::format("watchdog-rank{}.txt", rank)).c_str(), "w")) {
        std::fprintf(f, "%s\n", message.c_str());
        std::fclose(f);
      }
    }
    act(message);
  };
}

}  // namespace ringtrain
