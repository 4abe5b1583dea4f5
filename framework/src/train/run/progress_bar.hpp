// ProgressBar on rank 0: a one-line bar redrawn in place on a terminal, or a plain line every
// `log_every` steps when the output is a file or a pipe (CI logs, Slurm output).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace ringtrain {

class ProgressBar {
 public:
  ProgressBar(std::FILE* out, std::uint64_t total_steps, std::uint64_t log_every, bool enabled);
  // Called after every step; prints when due. `status` is appended (loss, lr, ...).
  void update(std::uint64_t step, const std::string& status, bool force = false);
  // A message on its own line (clears the bar first).
  void message(const std::string& line);
  void finish();

 private:
  std::FILE* out_;
  std::uint64_t total_, log_every_;
  bool enabled_, terminal_;
  bool bar_drawn_ = false;
  double last_draw_s_ = -1.0;
};

}  // namespace ringtrain
