// now_s(): the steady clock in seconds, the one clock every span of a step is measured with.
#pragma once

#include <chrono>

namespace ringtrain {

inline double now_s() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

}  // namespace ringtrain
