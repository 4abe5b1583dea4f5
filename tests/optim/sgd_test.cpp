// SGD against steps worked out by hand (PyTorch 1.13 torch.optim.SGD semantics, dampening 0),
// lr = 0.1 on the inputs of optim_fixture.hpp. The arithmetic is written out per element.
#include <catch2/catch.hpp>

#include "optim_fixture.hpp"
#include "ringtrain/framework/optim/sgd.hpp"

namespace ringtrain {
namespace {

using test::run_three_steps;

OptimizerConfig sgd_config(float momentum, bool nesterov, float weight_decay) {
  OptimizerConfig c;
  c.name = "sgd";
  c.momentum = momentum;
  c.nesterov = nesterov;
  c.weight_decay = weight_decay;
  return c;
}

void require_near(const std::array<float, 3>& got, const std::array<double, 3>& want) {
  for (std::size_t i = 0; i < 3; ++i) {
    INFO("element " << i);
    REQUIRE(got[i] == Approx(want[i]).epsilon(1e-6).margin(1e-7));
  }
}

TEST_CASE("plain sgd: p -= lr*g", "[optim][sgd]") {
  auto opt = make_optimizer(sgd_config(0.0f, false, 0.0f), 3);
  const auto p = run_three_steps(*opt, 0.1f);
  // e0: 1 − 0.01 = 0.99;   0.99 − 0.04 = 0.95;   0.95 + 0.03 = 0.98
  // e1: −2 + 0.02 = −1.98; −1.98 − 0 = −1.98;    −1.98 − 0.02 = −2.0
  // e2: 0.5 − 0.03 = 0.47; 0.47 + 0.01 = 0.48;   0.48 − 0.01 = 0.47
  require_near(p[0], {0.99, -1.98, 0.47});
  require_near(p[1], {0.95, -1.98, 0.48});
  require_near(p[2], {0.98, -2.0, 0.47});
  CHECK(opt->state().empty());  // no momentum, no state
  CHECK(opt->step_count() == 3);
}

TEST_CASE("sgd with momentum: buf = mu*buf + g and p -= lr*buf", "[optim][sgd]") {
  auto opt = make_optimizer(sgd_config(0.9f, false, 0.0f), 3);
  const auto p = run_three_steps(*opt, 0.1f);
  // e0: buf 0.1                     p 1 − 0.01 = 0.99
  //     buf 0.09 + 0.4 = 0.49       p 0.99 − 0.049 = 0.941
  //     buf 0.441 − 0.3 = 0.141     p 0.941 − 0.0141 = 0.9269
  // e1: buf −0.2                    p −2 + 0.02 = −1.98
  //     buf −0.18 + 0 = −0.18       p −1.98 + 0.018 = −1.962
  //     buf −0.162 + 0.2 = 0.038    p −1.962 − 0.0038 = −1.9658
  // e2: buf 0.3                     p 0.5 − 0.03 = 0.47
  //     buf 0.27 − 0.1 = 0.17       p 0.47 − 0.017 = 0.453
  //     buf 0.153 + 0.1 = 0.253     p 0.453 − 0.0253 = 0.4277
  require_near(p[0], {0.99, -1.98, 0.47});
  require_near(p[1], {0.941, -1.962, 0.453});
  require_near(p[2], {0.9269, -1.9658, 0.4277});

  const auto state = opt->state();
  REQUIRE(state.size() == 1);
  CHECK(state[0].name == "momentum");
  REQUIRE(state[0].values.size() == 3);
  require_near({state[0].values[0], state[0].values[1], state[0].values[2]}, {0.141, 0.038, 0.253});
}

TEST_CASE("sgd with nesterov: d = g + mu*buf", "[optim][sgd]") {
  auto opt = make_optimizer(sgd_config(0.9f, true, 0.0f), 3);
  const auto p = run_three_steps(*opt, 0.1f);
  // buf as in the momentum case; d = g + 0.9·buf
  // e0: d 0.1 + 0.09 = 0.19          p 1 − 0.019 = 0.981
  //     d 0.4 + 0.441 = 0.841        p 0.981 − 0.0841 = 0.8969
  //     d −0.3 + 0.1269 = −0.1731    p 0.8969 + 0.01731 = 0.91421
  // e1: d −0.2 − 0.18 = −0.38        p −2 + 0.038 = −1.962
  //     d 0 − 0.162 = −0.162         p −1.962 + 0.0162 = −1.9458
  //     d 0.2 + 0.0342 = 0.2342      p −1.9458 − 0.02342 = −1.96922
  // e2: d 0.3 + 0.27 = 0.57          p 0.5 − 0.057 = 0.443
  //     d −0.1 + 0.153 = 0.053       p 0.443 − 0.0053 = 0.4377
  //     d 0.1 + 0.2277 = 0.3277      p 0.4377 − 0.03277 = 0.40493
  require_near(p[0], {0.981, -1.962, 0.443});
  require_near(p[1], {0.8969, -1.9458, 0.4377});
  require_near(p[2], {0.91421, -1.96922, 0.40493});
}

TEST_CASE("sgd with coupled weight decay: g += wd*p enters the momentum", "[optim][sgd]") {
  auto opt = make_optimizer(sgd_config(0.9f, false, 0.1f), 3);
  const auto p = run_three_steps(*opt, 0.1f);
  // e0: g' 0.1 + 0.1 = 0.2              buf 0.2                        p 1 − 0.02 = 0.98
  //     g' 0.4 + 0.098 = 0.498          buf 0.18 + 0.498 = 0.678       p 0.98 − 0.0678 = 0.9122
  //     g' −0.3 + 0.09122 = −0.20878    buf 0.6102 − 0.20878 = 0.40142 p 0.9122 − 0.040142
  // e1: g' −0.2 − 0.2 = −0.4            buf −0.4                       p −2 + 0.04 = −1.96
  //     g' 0 − 0.196 = −0.196           buf −0.36 − 0.196 = −0.556     p −1.96 + 0.0556
  //     g' 0.2 − 0.19044 = 0.00956      buf −0.5004 + 0.00956          p −1.9044 + 0.049084
  // e2: g' 0.3 + 0.05 = 0.35            buf 0.35                       p 0.5 − 0.035 = 0.465
  //     g' −0.1 + 0.0465 = −0.0535      buf 0.315 − 0.0535 = 0.2615    p 0.465 − 0.02615
  //     g' 0.1 + 0.043885 = 0.143885    buf 0.23535 + 0.143885         p 0.43885 − 0.0379235
  require_near(p[0], {0.98, -1.96, 0.465});
  require_near(p[1], {0.9122, -1.9044, 0.43885});
  require_near(p[2], {0.872058, -1.855316, 0.4009265});
  const auto state = opt->state();
  require_near({state[0].values[0], state[0].values[1], state[0].values[2]},
               {0.40142, -0.49084, 0.379235});
}

TEST_CASE("plain sgd with weight decay and no momentum", "[optim][sgd]") {
  auto opt = make_optimizer(sgd_config(0.0f, false, 0.5f), 3);
  std::vector<float> p(test::kP0.begin(), test::kP0.end());
  opt->step(p, test::kGrads[0], 0.1f);
  // p − lr·(g + wd·p): 1 − 0.1·(0.1 + 0.5) = 0.94; −2 − 0.1·(−0.2 − 1) = −1.88;
  // 0.5 − 0.1·(0.3 + 0.25) = 0.445
  require_near({p[0], p[1], p[2]}, {0.94, -1.88, 0.445});
}

TEST_CASE("sgd describe() names every setting", "[optim][sgd]") {
  CHECK(make_optimizer(sgd_config(0.9f, false, 0.0f), 1)->describe() ==
        "sgd(momentum=0.9, nesterov=false, weight_decay=0)");
  CHECK(make_optimizer(sgd_config(0.5f, true, 1e-4f), 1)->describe() ==
        "sgd(momentum=0.5, nesterov=true, weight_decay=0.0001)");
}

}  // namespace
}  // namespace ringtrain
