// ProgressBar bar / periodic lines. Under hydra's mpiexec a rank's stdout is a pipe to the
// launcher, which prints it: the bar is drawn when the launcher's own stdout is a terminal.
#include "train/run/progress_bar.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "train/now.hpp"

namespace ringtrain {
namespace {

std::string proc_file(pid_t pid, const char* name) {
  return "/proc/" + std::to_string(pid) + "/" + name;
}

// A process's command name and its parent's id (from /proc; "" and 0 when unreadable).
std::string command_of(pid_t pid) {
  std::string name;
  std::ifstream(proc_file(pid, "comm")) >> name;
  return name;
}
pid_t parent_of(pid_t pid) {
  std::ifstream stat(proc_file(pid, "stat"));
  std::string line;
  std::getline(stat, line);
  const auto end = line.rfind(')');  // the command name in parentheses may hold spaces
  if (end == std::string::npos) return 0;
  char state = 0;
  long parent = 0;
  std::istringstream(line.substr(end + 1)) >> state >> parent;
  return pid_t(parent);
}

// Whether `out` reaches a terminal: it is one, or this is a rank of hydra's mpiexec on this
// host (parent hydra_pmi_proxy, its parent mpiexec*) whose launcher writes to a terminal.
bool reaches_terminal(std::FILE* out) {
  if (isatty(fileno(out)) != 0) return true;
  if (std::getenv("PMI_RANK") == nullptr || command_of(getppid()) != "hydra_pmi_proxy")
    return false;
  const pid_t launcher = parent_of(getppid());
  if (launcher <= 1 || command_of(launcher).rfind("mpiexec", 0) != 0) return false;
  std::error_code error;
  const std::string target =
      std::filesystem::read_symlink(proc_file(launcher, fileno(out) == 2 ? "fd/2" : "fd/1"), error)
          .string();
  return !error && (target.rfind("/dev/pts/", 0) == 0 || target.rfind("/dev/tty", 0) == 0);
}

}  // namespace

ProgressBar::ProgressBar(std::FILE* out, std::uint64_t total_steps, std::uint64_t log_every,
                         bool enabled, ProgressOutput mode)
    : out_(out),
      total_(total_steps),
      log_every_(log_every == 0 ? 1 : log_every),
      enabled_(enabled),
      steps_(enabled && mode != ProgressOutput::kOff),
      terminal_(steps_ && (mode == ProgressOutput::kBar ||
                           (mode == ProgressOutput::kAuto && reaches_terminal(out)))) {}

void ProgressBar::update(std::uint64_t step, const std::string& status, bool force) {
  if (!steps_) return;
  if (terminal_) {
    const double t = now_s();
    if (!force && step != total_ && t - last_draw_s_ < 0.1) return;  // ≤ 10 redraws a second
    last_draw_s_ = t;
    constexpr int kWidth = 30;
    const int filled = total_ == 0 ? 0 : static_cast<int>(kWidth * step / total_);
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.resize(kWidth, '.');
    if (first_s_ < 0) first_s_ = t, first_step_ = step;
    std::string eta;  // from this launch's pace so far
    if (step > first_step_ && step < total_) {
      const auto left_s = static_cast<long long>((t - first_s_) / double(step - first_step_) *
                                                 double(total_ - step));
      eta = "  ETA " + std::to_string(left_s / 60) + ":" + (left_s % 60 < 10 ? "0" : "") +
            std::to_string(left_s % 60);
    }
    std::fprintf(out_, "\r[%s] %llu/%llu %s%s\033[K", bar.c_str(), (unsigned long long)step,
                 (unsigned long long)total_, status.c_str(), eta.c_str());
    std::fflush(out_);
    bar_drawn_ = true;
  } else if (force || step % log_every_ == 0 || step == total_) {
    std::fprintf(out_, "step %llu/%llu %s\n", (unsigned long long)step, (unsigned long long)total_,
                 status.c_str());
    std::fflush(out_);
  }
}

void ProgressBar::message(const std::string& line) {
  if (!enabled_) return;
  if (bar_drawn_) std::fprintf(out_, "\r\033[K");
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
  bar_drawn_ = false;
  last_draw_s_ = -1.0;
}

void ProgressBar::finish() {
  if (enabled_ && bar_drawn_) std::fprintf(out_, "\n");
  bar_drawn_ = false;
}

}  // namespace ringtrain
