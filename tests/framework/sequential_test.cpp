// A whole model, Conv2d -> ReLU -> MaxPool2d -> Flatten -> Linear, built with Sequential,
// gradient-checked through its flat gradient buffer with the real loss (softmax
// cross-entropy): every parameter gradient the ring would reduce is the derivative of the
// loss the optimizer sees.
#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <numeric>

#include "layer_rig.hpp"
#include "ringtrain/framework/layers/conv2d.hpp"
#include "ringtrain/framework/layers/flatten.hpp"
#include "ringtrain/framework/layers/linear.hpp"
#include "ringtrain/framework/layers/maxpool2d.hpp"
#include "ringtrain/framework/layers/relu.hpp"
#include "ringtrain/framework/loss.hpp"
#include "ringtrain/framework/sequential.hpp"

using namespace ringtrain;
using namespace ringtrain::testing;

TEST_CASE("a Sequential conv model passes a whole-model gradient check",
          "[sequential][gradcheck]") {
  const std::size_t n = 3, classes = 4;
  Sequential model;
  model.add(std::make_unique<Conv2d>(2, 3, 3, 1, 1));  // (2, 6, 6) -> (3, 6, 6)
  model.add(std::make_unique<ReLU>());
  model.add(std::make_unique<MaxPool2d>(2));  // -> (3, 3, 3)
  model.add(std::make_unique<Flatten>());     // -> (27)
  model.add(std::make_unique<Linear>(27, classes));
  model.plan({2, 6, 6}, n);
  model.initialize(2024);
  REQUIRE(model.output_shape() == Shape{classes});

  std::mt19937 rng(61);
  const std::vector<float> x = random_normal(n * 72, rng);
  const std::vector<std::int32_t> labels = {1, 3, 0};
  const float scale = 1.0f / float(n);
  std::vector<float> dlogits(n * classes);

  // Analytic: forward, loss, backward; gradients land in the flat buffer.
  auto logits = model.forward(x, n, {});
  softmax_cross_entropy(logits, labels, n, classes, scale, dlogits);
  std::vector<float> grads(model.parameters().num_elements(), std::nanf(""));
  model.backward(dlogits, n, {});
  std::span<const float> flat_grads = model.parameters().grads();
  grads.assign(flat_grads.begin(), flat_grads.end());

  // Numeric: perturb the flat parameter buffer itself.
  std::span<float> values = model.parameters().values();
  std::vector<float> scratch(n * classes);
  auto loss = [&] {
    auto z = model.forward(x, n, {});
    return softmax_cross_entropy(z, labels, n, classes, scale, scratch).loss_sum * scale;
  };
  std::vector<float> v(values.begin(), values.end());
  auto loss_of_v = [&] {
    std::copy(v.begin(), v.end(), values.begin());
    return loss();
  };
  // Every parameter of every layer (conv 57, linear 112: all 169).
  std::vector<std::size_t> all(v.size());
  std::iota(all.begin(), all.end(), std::size_t{0});
  const auto numeric = numeric_gradient(v, all, 1e-3f, loss_of_v);
  for (const ParameterEntry& e : model.parameters().entries()) {
    std::vector<double> a(grads.begin() + std::ptrdiff_t(e.offset),
                          grads.begin() + std::ptrdiff_t(e.offset + e.size));
    std::vector<double> f(numeric.begin() + std::ptrdiff_t(e.offset),
                          numeric.begin() + std::ptrdiff_t(e.offset + e.size));
    const auto c = compare_gradients(e.name, a, f);
    INFO(e.name << ": norm error " << c.norm_error << ", max error " << c.max_error);
    CHECK(c.passes(5e-3));  // observed errors ~1e-4 (ReLU and max-pool kinks)
  }
}
