// Signal flag for a clean stop (see stop_signals.hpp).
#include "train/safety/stop_signals.hpp"

#include <atomic>

namespace ringtrain {
namespace {

// The one mutable global of the project: a signal handler can reach nothing else.
volatile std::sig_atomic_t g_stop_requested = 0;

extern "C" void on_stop_signal(int /*signal*/) {
  g_stop_requested = 1;
}

}  // namespace

StopSignals::StopSignals() {
  g_stop_requested = 0;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, &old_term_);
  sigaction(SIGUSR1, &action, &old_usr1_);
}

StopSignals::~StopSignals() {
  sigaction(SIGTERM, &old_term_, nullptr);
  sigaction(SIGUSR1, &old_usr1_, nullptr);
}

bool StopSignals::requested() const { return stop_signal_arrived(); }

bool stop_signal_arrived() { return g_stop_requested != 0; }

}  // namespace ringtrain
