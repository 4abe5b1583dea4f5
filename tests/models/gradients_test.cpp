// A model built from a spec with every layer type that has a gradient (conv2d, batchnorm in
// training mode, relu, maxpool2d, dropout with a fixed mask, flatten, linear) passes a
// whole-model gradient check: each parameter's gradient in the flat buffer that the ring
// reduces against central finite differences of the real loss (softmax cross-entropy × 1/B).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <numeric>

#include "../framework/layer_rig.hpp"
#include "ringtrain/framework/loss.hpp"
#include "ringtrain/models/spec.hpp"
#include "spec_texts.hpp"

using namespace ringtrain;
using namespace ringtrain::testing;

TEST_CASE("a model built from a spec passes a whole-model gradient check", "[models][gradcheck]") {
  const std::size_t n = 4, classes = 3;
  const Shape input = {2, 6, 6};
  auto model = models::build_model(models::parse_model_spec(kAllTypes, "spec"), input, classes);
  model->plan(input, n);
  model->initialize(2025);
  REQUIRE(model->output_shape() == Shape{classes});  // (6, 6, 6) -> pool (6, 2, 2) -> 24 -> 3

  // Training mode; the dropout mask is a function of (seed, layer, sample id): fixed.
  const std::vector<std::uint64_t> ids = {3, 8, 1, 12};
  StepContext ctx;
  ctx.seed = 42;
  ctx.sample_ids = ids;
  std::mt19937 rng(71);
  const std::vector<float> x = random_normal(n * num_elements(input), rng);
  const std::vector<std::int32_t> labels = {2, 0, 1, 2};
  const float scale = 1.0f / float(n);
  std::vector<float> dlogits(n * classes), scratch(n * classes);

  auto logits = model->forward(x, n, ctx);
  softmax_cross_entropy(logits, labels, n, classes, scale, dlogits);
  model->backward(dlogits, n, ctx);
  const std::span<const float> flat = model->parameters().grads();
  const std::vector<float> grads(flat.begin(), flat.end());

  std::span<float> values = model->parameters().values();
  std::vector<float> v(values.begin(), values.end());
  auto loss_of_v = [&] {
    std::copy(v.begin(), v.end(), values.begin());
    auto z = model->forward(x, n, ctx);
    return softmax_cross_entropy(z, labels, n, classes, scale, scratch).loss_sum * scale;
  };
  std::vector<std::size_t> all(v.size());
  std::iota(all.begin(), all.end(), std::size_t{0});
  const auto numeric = numeric_gradient(v, all, 1e-3f, loss_of_v);
  REQUIRE(model->parameters().count() == 6);  // conv, batchnorm, linear: weight and bias
  for (const ParameterEntry& e : model->parameters().entries()) {
    std::vector<double> a(grads.begin() + std::ptrdiff_t(e.offset),
                          grads.begin() + std::ptrdiff_t(e.offset + e.size));
    std::vector<double> f(numeric.begin() + std::ptrdiff_t(e.offset),
                          numeric.begin() + std::ptrdiff_t(e.offset + e.size));
    INFO(e.name);
    if (e.name == "layers.0.conv2d/bias") {
      // BatchNorm subtracts each channel's batch mean, so a per-channel shift before it
      // changes nothing: dL/db is exactly 0, and the finite differences are rounding noise.
      for (std::size_t j = 0; j < a.size(); ++j) {
        CHECK(std::abs(a[j]) < 1e-6);
        CHECK(std::abs(f[j]) < 1e-3);
      }
      continue;
    }
    const auto c = compare_gradients(e.name, a, f);
    INFO("norm error " << c.norm_error << ", max error " << c.max_error);
    CHECK(c.passes(5e-3));  // the whole-model check of tests/framework uses the same bound
  }
}
