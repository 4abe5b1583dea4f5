// StopSignals: while alive, SIGTERM, SIGUSR1 and SIGINT only raise a flag (Slurm sends the
// first two before preemption or the time limit, Ctrl-C the third, and hydra forwards each to
// every rank). The training loop reads the flag at an agreed step boundary, saves a checkpoint
// and exits: 0 after SIGTERM or SIGUSR1, 130 after SIGINT (the shell's 128 + 2). A second
// SIGINT ends the process at once. The previous handlers are restored on destruction.
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
  int first() const;  // the number of the first stop signal that arrived; 0 if none

 private:
  struct sigaction old_term_ {
  }, old_usr1_{}, old_int_{};
};

// True once SIGTERM, SIGUSR1 or SIGINT arrived while a StopSignals was alive: a wait of this rank's
// own (a test's pause) ends on it, so the stop is taken at the next agreed boundary.
bool stop_signal_arrived();

// "SIGINT", "SIGTERM" or "SIGUSR1" for the messages and the manifest.
const char* stop_signal_name(int signal);

}  // namespace ringtrain
