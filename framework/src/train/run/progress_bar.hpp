// ProgressBar on rank 0: a one-line bar redrawn in place, with the time left at this launch's
// pace, when the output reaches a terminal (also through mpiexec on this host), or a plain
// line every `log_every` steps when it is a file or a pipe (CI logs, Slurm output). That is
// --progress auto; bar and lines force one, off prints neither (messages still print).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "ringtrain/framework/train/modes.hpp"

namespace ringtrain {

class ProgressBar {
 public:
  // enabled: false prints nothing at all (other ranks, --quiet).
  ProgressBar(std::FILE* out, std::uint64_t total_steps, std::uint64_t log_every, bool enabled,
              ProgressOutput mode);
  // Called after every step; prints when due. `status` is appended (loss, lr, ...).
  void update(std::uint64_t step, const std::string& status, bool force = false);
  // A message on its own line (clears the bar first).
  void message(const std::string& line);
  void finish();

 private:
  std::FILE* out_;
  std::uint64_t total_, log_every_;
  bool enabled_, steps_, terminal_;  // steps_: per-step output at all (not --progress off)
  bool bar_drawn_ = false;
  double last_draw_s_ = -1.0;
  double first_s_ = -1.0;  // the first update's time and step: the pace for the ETA
  std::uint64_t first_step_ = 0;
};

}  // namespace ringtrain
