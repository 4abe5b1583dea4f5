// StopSignals: while alive, SIGTERM and SIGUSR1 only raise a flag (Slurm sends them before
// preemption or the time limit, and hydra forwards them to every rank). The training loop
// reads the flag at an agreed step boundary, saves a checkpoint and exits 0. The previous
// handlers are restored on destruction.
#pragma once

#include <csignal>

namespace ringtrain {

class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  bool requested() const;

 private:
  struct sigaction old_term_ {
  }, old_usr1_{};
};

// True once SIGTERM or SIGUSR1 arrived while a StopSignals was alive: a wait of this rank's
// own (a test's pause) ends on it, so the stop is taken at the next agreed boundary.
bool stop_signal_arrived();

}  // namespace ringtrain
