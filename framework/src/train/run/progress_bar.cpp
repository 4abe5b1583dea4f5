// ProgressBar bar / periodic lines.
#include "train/run/progress_bar.hpp"

#include <unistd.h>

#include <chrono>

#include "train/now.hpp"

namespace ringtrain {
ProgressBar::ProgressBar(std::FILE* out, std::uint64_t total_steps, std::uint64_t log_every,
                         bool enabled)
    : out_(out),
      total_(total_steps),
      log_every_(log_every == 0 ? 1 : log_every),
      enabled_(enabled),
      terminal_(enabled && isatty(fileno(out)) != 0) {}

void ProgressBar::update(std::uint64_t step, const std::string& status, bool force) {
  if (!enabled_) return;
  if (terminal_) {
    const double t = now_s();
    if (!force && step != total_ && t - last_draw_s_ < 0.1) return;  // ≤ 10 redraws a second
    last_draw_s_ = t;
    constexpr int kWidth = 30;
    const int filled = total_ == 0 ? 0 : static_cast<int>(kWidth * step / total_);
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::fprintf(out_, "\r[%s] %llu/%llu %s\033[K", bar.c_str(), (unsigned long long)step,
                 (unsigned long long)total_, status.c_str());
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
