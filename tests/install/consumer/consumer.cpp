// A course writes its own model: two Linear layers fitted to a tiny regression-free
// classification problem for a few steps with the installed framework.
#include <cstdio>
#include <memory>

#include "ringtrain/framework/layers/linear.hpp"
#include "ringtrain/framework/layers/relu.hpp"
#include "ringtrain/framework/loss.hpp"
#include "ringtrain/framework/optim/optimizer.hpp"
#include "ringtrain/framework/sequential.hpp"

int main() {
  using namespace ringtrain;
  Sequential model;
  model.add(std::make_unique<Linear>(4, 16));
  model.add(std::make_unique<ReLU>());
  model.add(std::make_unique<Linear>(16, 2));
  model.plan({4}, 8);
  model.initialize(1);
  OptimizerConfig config;
  config.name = "sgd";
  auto sgd = make_optimizer(config, model.parameters().num_elements());
  // class = 1 iff the first feature is positive
  const float x[8 * 4] = {1, 0, 0, 0, -1, 0, 0, 0, 2, 1, 0, 0, -2, 1, 0, 0,
                          1, -1, 1, 0, -1, 1, -1, 0, 3, 0, 0, 1, -3, 0, 0, 1};
  const std::int32_t y[8] = {1, 0, 1, 0, 1, 0, 1, 0};
  float dlogits[8 * 2];
  double first = 0.0, last = 0.0;
  for (int step = 0; step < 50; ++step) {
    StepContext ctx;
    auto logits = model.forward(x, 8, ctx);
    const LossResult r = softmax_cross_entropy(logits, y, 8, 2, 1.0f / 8, dlogits);
    model.backward(dlogits, 8, ctx);
    sgd->step(model.parameters().values(), model.parameters().grads(), 0.1f);
    if (step == 0) first = r.loss_sum / 8;
    last = r.loss_sum / 8;
  }
  std::printf("loss %.4f -> %.4f: %s\n", first, last, last < first ? "loss decreased" : "no progress");
  return last < first ? 0 : 1;
}
