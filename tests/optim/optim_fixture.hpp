// Shared inputs of the optimizer tests: three parameters and three steps of gradients,
// small round numbers so that the expected values can be worked out by hand.
//   element      0      1      2
//   p0          1.0   -2.0    0.5
//   g (step 1)  0.1   -0.2    0.3
//   g (step 2)  0.4    0.0   -0.1
//   g (step 3) -0.3    0.2    0.1
#pragma once

#include <array>
#include <span>
#include <vector>

#include "ringtrain/framework/optim/optimizer.hpp"

namespace ringtrain::test {

inline constexpr std::array<float, 3> kP0 = {1.0f, -2.0f, 0.5f};
inline constexpr std::array<std::array<float, 3>, 3> kGrads = {{
    {0.1f, -0.2f, 0.3f},
    {0.4f, 0.0f, -0.1f},
    {-0.3f, 0.2f, 0.1f},
}};

// Runs the three steps with learning rate lr; returns p after each step: [step][element].
inline std::array<std::array<float, 3>, 3> run_three_steps(Optimizer& opt, float lr) {
  std::vector<float> p(kP0.begin(), kP0.end());
  std::array<std::array<float, 3>, 3> after{};
  for (std::size_t s = 0; s < 3; ++s) {
    opt.step(p, kGrads[s], lr);
    for (std::size_t i = 0; i < 3; ++i) after[s][i] = p[i];
  }
  return after;
}

}  // namespace ringtrain::test
