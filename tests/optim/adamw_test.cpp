// AdamW against steps worked out by hand (PyTorch 1.13 torch.optim.AdamW semantics),
// lr = 0.1, β1 = 0.9, β2 = 0.999, eps = 1e-8 on the inputs of optim_fixture.hpp.
//
// The moments are linear recurrences, so their values are tabulated by hand below;
// the parameter update is then the textbook form (not the grouping the implementation
// uses):  p ← p·(1 − lr·wd) − lr · m̂ / (√v̂ + eps),  m̂ = m / (1 − β1ᵗ),  v̂ = v / (1 − β2ᵗ).
#include <catch2/catch.hpp>
#include <cmath>

#include "optim_fixture.hpp"
#include "ringtrain/framework/optim/adamw.hpp"

namespace ringtrain {
namespace {

// m = 0.9·m + 0.1·g
//   e0: 0.01            0.009 + 0.04 = 0.049         0.0441 − 0.03 = 0.0141
//   e1: −0.02           −0.018 + 0 = −0.018          −0.0162 + 0.02 = 0.0038
//   e2: 0.03            0.027 − 0.01 = 0.017         0.0153 + 0.01 = 0.0253
constexpr double kM[3][3] = {{0.01, -0.02, 0.03}, {0.049, -0.018, 0.017}, {0.0141, 0.0038, 0.0253}};
// v = 0.999·v + 0.001·g²
//   e0: 1e-5            0.999e-5 + 16e-5 = 16.999e-5     16.982001e-5 + 9e-5 = 25.982001e-5
//   e1: 4e-5            3.996e-5 + 0 = 3.996e-5          3.992004e-5 + 4e-5 = 7.992004e-5
//   e2: 9e-5            8.991e-5 + 1e-5 = 9.991e-5       9.981009e-5 + 1e-5 = 10.981009e-5
constexpr double kV[3][3] = {
    {1e-5, 4e-5, 9e-5}, {16.999e-5, 3.996e-5, 9.991e-5}, {25.982001e-5, 7.992004e-5, 10.981009e-5}};
// 1 − β1ᵗ = 0.1, 0.19, 0.271;   1 − β2ᵗ = 0.001, 0.001999, 0.002997001
constexpr double kBc1[3] = {0.1, 0.19, 0.271};
constexpr double kBc2[3] = {0.001, 0.001999, 0.002997001};

constexpr double kLr = 0.1, kEps = 1e-8;

// p after each step, from the tables above.
std::array<std::array<double, 3>, 3> expected(double wd) {
  std::array<std::array<double, 3>, 3> p{};
  for (std::size_t i = 0; i < 3; ++i) {
    double pi = test::kP0[i];
    for (std::size_t t = 0; t < 3; ++t) {
      const double m_hat = kM[t][i] / kBc1[t];
      const double v_hat = kV[t][i] / kBc2[t];
      pi = pi * (1.0 - kLr * wd) - kLr * m_hat / (std::sqrt(v_hat) + kEps);
      p[t][i] = pi;
    }
  }
  return p;
}

OptimizerConfig adamw_config(float weight_decay) {
  OptimizerConfig c;
  c.name = "adamw";
  c.weight_decay = weight_decay;
  return c;
}

void require_near(const std::array<float, 3>& got, const std::array<double, 3>& want) {
  for (std::size_t i = 0; i < 3; ++i) {
    INFO("element " << i);
    REQUIRE(got[i] == Approx(want[i]).epsilon(2e-6).margin(1e-7));
  }
}

TEST_CASE("adamw without weight decay", "[optim][adamw]") {
  auto opt = make_optimizer(adamw_config(0.0f), 3);
  const auto p = test::run_three_steps(*opt, float(kLr));
  const auto want = expected(0.0);

  // Step 1 in closed form: m̂ = g and v̂ = g², so every element moves by lr·g/(|g| + eps),
  // i.e. by lr against the sign of its gradient.
  require_near(p[0], {1.0 - 0.1 * 0.1 / (0.1 + 1e-8), -2.0 + 0.1 * 0.2 / (0.2 + 1e-8),
                      0.5 - 0.1 * 0.3 / (0.3 + 1e-8)});
  require_near(p[0], want[0]);
  require_near(p[1], want[1]);
  require_near(p[2], want[2]);
  // e0 step 2, spelled out: m̂ = 0.049 / 0.19 = 0.25789, v̂ = 16.999e-5 / 0.001999 = 0.085038,
  // √v̂ = 0.29161, p = 0.9 − 0.1·0.25789/0.29161 = 0.81156
  CHECK(p[1][0] == Approx(0.81156).margin(1e-5));

  const auto state = opt->state();
  REQUIRE(state.size() == 2);
  CHECK(state[0].name == "exp_avg");
  CHECK(state[1].name == "exp_avg_sq");
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(state[0].values[i] == Approx(kM[2][i]).epsilon(1e-6));
    // β2 is the float 0.99900001, so 1 − β2 = 0.00099998713 and v sits 1.3e-5 (relative)
    // below the decimal table; 1 − β2ᵗ shifts the same way, so the update above does not.
    CHECK(state[1].values[i] == Approx(kV[2][i]).epsilon(2e-5));
  }
  CHECK(opt->step_count() == 3);
}

TEST_CASE("adamw with decoupled weight decay", "[optim][adamw]") {
  auto opt = make_optimizer(adamw_config(0.1f), 3);
  const auto p = test::run_three_steps(*opt, float(kLr));
  const auto want = expected(0.1);
  // Step 1: p·(1 − 0.01) then the same lr-sized move: e0 = 0.99 − 0.1 = 0.89 (to 1e-7).
  require_near(p[0], {0.99 * 1.0 - 0.1, 0.99 * -2.0 + 0.1, 0.99 * 0.5 - 0.1});
  require_near(p[0], want[0]);
  require_near(p[1], want[1]);
  require_near(p[2], want[2]);
  // Decoupled: the moments never see the decay, so they equal the decay-free ones.
  const auto state = opt->state();
  for (std::size_t i = 0; i < 3; ++i) CHECK(state[0].values[i] == Approx(kM[2][i]).epsilon(1e-6));
}

TEST_CASE("adamw describe() names every setting", "[optim][adamw]") {
  CHECK(make_optimizer(adamw_config(0.01f), 1)->describe() ==
        "adamw(beta1=0.9, beta2=0.999, eps=1e-08, weight_decay=0.01)");
}

}  // namespace
}  // namespace ringtrain
