// Watchdog: notices a rank stuck in one phase of a step (a collective whose partner died or
// hangs) and ends the job with a message naming rank, step and phase, instead of a silent
// hang until the cluster's wall-clock limit.
//
// The training loop marks phases (enter("allreduce", step) ... leave()); a thread checks a
// few times a second whether the current phase has lasted longer than the limit, and if so
// calls the action once. The action ends the process (main passes one that prints and calls
// MPI_Abort): a thread cannot unwind another thread that is blocked inside MPI.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace ringtrain {

class Watchdog {
 public:
  using Action = std::function<void(const std::string& message)>;

  // limit_s <= 0: disabled (no thread).
  Watchdog(int rank, double limit_s, Action action);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // `phase` must be a string literal (kept by pointer).
  void enter(const char* phase, std::uint64_t step);
  void leave();
  void set_limit(double limit_s) { limit_s_.store(limit_s); }
  double limit() const { return limit_s_.load(); }

 private:
  void watch();

  int rank_;
  std::atomic<double> limit_s_;
  Action action_;
  std::atomic<const char*> phase_{nullptr};
  std::atomic<std::uint64_t> step_{0};
  std::atomic<double> since_s_{0.0};
  std::mutex mutex_;
  std::condition_variable stop_signal_;
  bool stopping_ = false;
  std::thread thread_;
};

// `act`, after it writes the message to watchdog-rank<rank>.txt in `dir` (if it is a folder):
// when a rank aborts, hydra may end the job before it has forwarded that rank's last stderr
// line, and the reason a job ended must not be lost.
Watchdog::Action recorded_then(Watchdog::Action act, int rank, std::filesystem::path dir);

// The process-wide default action: print the message to stderr and abort the process
// (mpiexec then ends the other ranks). main replaces it with one that calls MPI_Abort.
void default_watchdog_action(const std::string& message);

}  // namespace ringtrain
