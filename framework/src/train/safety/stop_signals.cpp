// Signal flag for a clean stop (see stop_signals.hpp).
#include "train/safety/stop_signals.hpp"

namespace ringtrain {
namespace {

// The one mutable global of the project: a signal handler can reach nothing else. It holds
// the first stop signal's number (0: none yet).
volatile std::sig_atomic_t g_stop_signal = 0;

// A second SIGINT (Ctrl-C again) ends the process at once, dying of SIGINT with the default
// action as the shell's convention asks (exit status 130); a checkpoint being written is
// only ever a .partial, never taken for a whole one.
extern "C" void on_stop_signal(int signal) {
  if (signal == SIGINT && g_stop_signal != 0) {
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
    return;
  }
  if (g_stop_signal == 0) g_stop_signal = signal;
}

}  // namespace

StopSignals::StopSignals() {
  g_stop_signal = 0;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, &old_term_);
  sigaction(SIGUSR1, &action, &old_usr1_);
  sigaction(SIGINT, &action, &old_int_);
}

StopSignals::~StopSignals() {
  sigaction(SIGTERM, &old_term_, nullptr);
  sigaction(SIGUSR1, &old_usr1_, nullptr);
  sigaction(SIGINT, &old_int_, nullptr);
}

bool StopSignals::requested() const {
  return stop_signal_arrived();
}

int StopSignals::first() const {
  return g_stop_signal;
}

bool stop_signal_arrived() {
  return g_stop_signal != 0;
}

const char* stop_signal_name(int signal) {
  switch (signal) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR1:
      return "SIGUSR1";
    default:
      return "a stop signal";
  }
}

}  // namespace ringtrain
