// Every layer's backward against central finite differences of L = Σ y·r, for the input
// and for every parameter; the loss's dlogits against finite differences of loss_sum·scale;
// and a check that the checker itself rejects a wrong gradient.
#include <catch2/catch.hpp>
#include <cstdint>
#include <memory>
#include <numeric>

#include "layer_rig.hpp"
#include "ringtrain/framework/layers/batchnorm.hpp"
#include "ringtrain/framework/layers/conv2d.hpp"
#include "ringtrain/framework/layers/dropout.hpp"
#include "ringtrain/framework/layers/flatten.hpp"
#include "ringtrain/framework/layers/linear.hpp"
#include "ringtrain/framework/layers/maxpool2d.hpp"
#include "ringtrain/framework/layers/relu.hpp"
#include "ringtrain/framework/loss.hpp"

using namespace ringtrain;
using namespace ringtrain::testing;

namespace {

constexpr double kTolerance = 1e-3;  // observed errors are ~1e-5

void require_all_pass(const std::vector<GradientComparison>& results) {
  for (const GradientComparison& c : results) {
    INFO(c.what << ": " << c.checked << " coordinates, norm error " << c.norm_error
                << ", max error " << c.max_error << ", |analytic| " << c.analytic_norm);
    CHECK(c.passes(kTolerance));
  }
}

// Values in ±[0.1, 1.1]: at least 0.1 from ReLU's kink, far more than the FD step.
std::vector<float> away_from_zero(std::size_t count, std::mt19937& rng) {
  std::vector<float> v = random_uniform(count, rng, 0.1f, 1.1f);
  std::bernoulli_distribution sign(0.5);
  for (float& e : v)
    if (sign(rng)) e = -e;
  return v;
}

// Distinct values 0.05 apart in random order: no max-pool window has a near tie.
std::vector<float> distinct_shuffled(std::size_t count, std::mt19937& rng) {
  std::vector<float> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = -1.0f + 0.05f * float(i);
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

// A deliberately wrong ReLU: passes dy through everywhere, ignoring the mask.
class WrongReLU final : public Layer {
 public:
  std::string kind() const override { return "wrong_relu"; }
  Shape plan(const Shape& input, std::size_t) override {
    features_ = num_elements(input);
    return input;
  }
  void forward(std::span<const float> x, std::span<float> y, std::size_t n,
               const StepContext&) override {
    for (std::size_t i = 0; i < n * features_; ++i) y[i] = x[i] > 0 ? x[i] : 0;
  }
  void backward(std::span<const float>, std::span<const float>, std::span<const float> dy,
                std::span<float> dx, std::size_t n, const StepContext&) override {
    for (std::size_t i = 0; i < n * features_; ++i) dx[i] = dy[i];
  }

 private:
  std::size_t features_ = 0;
};

}  // namespace

TEST_CASE("the gradient checker rejects wrong gradients", "[gradcheck]") {
  std::mt19937 rng(1);
  WrongReLU wrong;
  LayerRig rig(wrong, {40}, 3, rng);
  const auto results =
      check_layer_gradients(rig, away_from_zero(rig.in_size(3), rng), 3, {}, 1e-2f, rng);
  REQUIRE(results.size() == 1);
  CHECK_FALSE(results[0].passes(kTolerance));

  // A Linear layer whose weight gradient is 2% off in one element of 200 also fails.
  Linear linear(10, 20);
  LayerRig lrig(linear, {10}, 4, rng);
  std::vector<float> x = random_normal(lrig.in_size(4), rng);
  const std::vector<float> r = random_normal(lrig.out_size(4), rng);
  std::vector<float> y(lrig.out_size(4)), dx(lrig.in_size(4));
  linear.forward(x, y, 4, {});
  linear.backward(x, y, r, dx, 4, {});
  std::vector<double> analytic(lrig.grads[0].begin(), lrig.grads[0].end());
  std::vector<std::size_t> all(analytic.size());
  std::iota(all.begin(), all.end(), std::size_t{0});
  const auto numeric = numeric_gradient(lrig.params[0], all, 1e-2f,
                                        [&] { return projected_loss(lrig, x, 4, r, {}); });
  CHECK(compare_gradients("weight", analytic, numeric).passes(kTolerance));
  const auto largest = std::max_element(analytic.begin(), analytic.end(), [](double a, double b) {
    return std::abs(a) < std::abs(b);
  });
  *largest *= 1.02;
  CHECK_FALSE(compare_gradients("weight", analytic, numeric).passes(kTolerance));
}

TEST_CASE("Linear gradients match finite differences", "[gradcheck]") {
  std::mt19937 rng(2);
  Linear layer(7, 5);
  LayerRig rig(layer, {7}, 4, rng);
  require_all_pass(
      check_layer_gradients(rig, random_normal(rig.in_size(4), rng), 4, {}, 1e-2f, rng));
}

TEST_CASE("ReLU gradients match finite differences", "[gradcheck]") {
  std::mt19937 rng(3);
  ReLU layer;
  LayerRig rig(layer, {3, 4, 5}, 3, rng);
  require_all_pass(
      check_layer_gradients(rig, away_from_zero(rig.in_size(3), rng), 3, {}, 1e-2f, rng));
}

TEST_CASE("Conv2d gradients match finite differences", "[gradcheck][conv2d]") {
  struct Case {
    std::size_t c, o, k, s, p, h, w;
  };
  const Case cases[] = {
      {3, 4, 3, 1, 1, 6, 6},  // padding 1, stride 1
      {2, 3, 5, 1, 2, 7, 7},  // the cnn's 5x5 / padding 2 shape, small
      {3, 2, 3, 2, 1, 7, 7},  // stride 2 with padding
      {2, 3, 3, 2, 0, 8, 6},  // stride 2, no padding, non-square input
      {4, 3, 1, 1, 0, 5, 5},  // 1x1: the column matrix is the input itself
  };
  std::mt19937 rng(4);
  for (const Case& t : cases) {
    INFO("Conv2d(" << t.c << " -> " << t.o << ", k " << t.k << ", s " << t.s << ", p " << t.p
                   << ") on " << t.h << "x" << t.w);
    Conv2d layer(t.c, t.o, t.k, t.s, t.p);
    LayerRig rig(layer, {t.c, t.h, t.w}, 2, rng);
    require_all_pass(
        check_layer_gradients(rig, random_normal(rig.in_size(2), rng), 2, {}, 1e-2f, rng));
  }
}

// Winograd serves forward and dx; the finite differences see the rounding of the
// transformed values too.
TEST_CASE("Conv2d by Winograd: gradients match finite differences",
          "[gradcheck][conv2d][winograd]") {
  struct Case {
    std::size_t c, o, p, h, w;
  };
  const Case cases[] = {
      {2, 3, 2, 7, 7},  // the cnn's shape, small: odd output, a cut last tile
      {3, 2, 0, 6, 8},  // no padding
      {2, 2, 4, 3, 2},  // padding 4: dx by a convolution without padding
  };
  std::mt19937 rng(44);
  for (const Case& t : cases) {
    INFO("Conv2d(" << t.c << " -> " << t.o << ", padding " << t.p << ") on " << t.h << "x" << t.w);
    Conv2d layer(t.c, t.o, 5, 1, t.p, Conv2d::Algorithm::kWinograd);
    LayerRig rig(layer, {t.c, t.h, t.w}, 2, rng);
    require_all_pass(
        check_layer_gradients(rig, random_normal(rig.in_size(2), rng), 2, {}, 1e-2f, rng));
  }
}

TEST_CASE("MaxPool2d gradients match finite differences", "[gradcheck]") {
  std::mt19937 rng(5);
  // Planes: odd height; the 2x2 path's widths of 4 windows, 6 (a last group that overlaps
  // the one before, odd width) and 2 (the scalar loop).
  for (const Shape& input : {Shape{3, 7, 8}, Shape{2, 4, 13}, Shape{2, 5, 5}})
    for (auto [k, s] : {std::pair<std::size_t, std::size_t>{2, 0}, {3, 2}, {2, 3}}) {
      INFO("MaxPool2d(kernel " << k << ", stride " << s << ") on " << to_string(input));
      MaxPool2d layer(k, s);
      LayerRig rig(layer, input, 2, rng);
      require_all_pass(
          check_layer_gradients(rig, distinct_shuffled(rig.in_size(2), rng), 2, {}, 1e-2f, rng));
    }
}

TEST_CASE("Flatten gradients match finite differences", "[gradcheck]") {
  std::mt19937 rng(6);
  Flatten layer;
  LayerRig rig(layer, {2, 3, 4}, 3, rng);
  REQUIRE(rig.output_shape == Shape{24});
  require_all_pass(
      check_layer_gradients(rig, random_normal(rig.in_size(3), rng), 3, {}, 1e-2f, rng));
}

TEST_CASE("Dropout gradients match finite differences with a fixed mask", "[gradcheck]") {
  std::mt19937 rng(7);
  Dropout layer(0.4f);
  LayerRig rig(layer, {50}, 4, rng);
  const std::vector<std::uint64_t> ids = {11, 3, 42, 7};
  StepContext ctx;
  ctx.seed = 99;
  ctx.layer_index = 2;
  ctx.sample_ids = ids;
  require_all_pass(
      check_layer_gradients(rig, random_normal(rig.in_size(4), rng), 4, ctx, 1e-2f, rng));
}

TEST_CASE("BatchNorm gradients match finite differences in training mode",
          "[gradcheck][batchnorm]") {
  std::mt19937 rng(8);
  SECTION("(n, C)") {
    BatchNorm layer(5);
    LayerRig rig(layer, {5}, 6, rng);
    require_all_pass(
        check_layer_gradients(rig, random_normal(rig.in_size(6), rng, 2.0f), 6, {}, 1e-2f, rng));
  }
  SECTION("(n, C, H, W)") {
    BatchNorm layer(3);
    LayerRig rig(layer, {3, 4, 5}, 3, rng);
    require_all_pass(
        check_layer_gradients(rig, random_normal(rig.in_size(3), rng, 2.0f), 3, {}, 1e-2f, rng));
  }
  SECTION("eval mode (running statistics are constants)") {
    BatchNorm layer(3);
    LayerRig rig(layer, {3, 2, 2}, 3, rng);
    // The layer holds views of these vectors: overwrite in place, never reassign.
    const auto mean = random_normal(3, rng), var = random_uniform(3, rng, 0.5f, 2.0f);
    std::copy(mean.begin(), mean.end(), rig.buffers[0].begin());  // running_mean
    std::copy(var.begin(), var.end(), rig.buffers[1].begin());    // running_var
    StepContext eval;
    eval.training = false;
    require_all_pass(
        check_layer_gradients(rig, random_normal(rig.in_size(3), rng), 3, eval, 1e-2f, rng));
  }
}

// A loss's analytic gradient `analytic` with respect to `values` against central finite
// differences of `scaled_loss()` (loss_sum * scale), every coordinate.
template <typename Loss>
void check_loss_gradient(const char* what, std::vector<float>& values,
                         const std::vector<float>& analytic, Loss&& scaled_loss) {
  std::vector<std::size_t> all(values.size());
  std::iota(all.begin(), all.end(), std::size_t{0});
  const auto numeric = numeric_gradient(values, all, 1e-2f, scaled_loss);
  const auto c =
      compare_gradients(what, std::vector<double>(analytic.begin(), analytic.end()), numeric);
  INFO(what << ": norm error " << c.norm_error << ", max error " << c.max_error);
  CHECK(c.passes(kTolerance));
}

TEST_CASE("softmax_cross_entropy dlogits match finite differences of loss_sum * scale",
          "[gradcheck]") {
  std::mt19937 rng(9);
  const std::size_t n = 5, classes = 7;
  const float scale = 1.0f / 8.0f;  // e.g. 5 of a global batch of 8
  std::vector<float> logits = random_normal(n * classes, rng, 2.0f);
  const std::vector<std::int32_t> labels = {0, 6, 3, 3, 1};
  std::vector<float> dlogits(n * classes);
  softmax_cross_entropy(logits, labels, n, classes, scale, dlogits);

  std::vector<float> scratch(n * classes);
  check_loss_gradient("logits", logits, dlogits, [&] {
    return softmax_cross_entropy(logits, labels, n, classes, scale, scratch).loss_sum * scale;
  });
}

TEST_CASE("squared_error doutputs match finite differences of loss_sum * scale", "[gradcheck]") {
  std::mt19937 rng(10);
  const std::size_t n = 5, width = 3;
  const float scale = 1.0f / 8.0f;  // e.g. 5 of a global batch of 8
  std::vector<float> outputs = random_normal(n * width, rng, 2.0f);
  const std::vector<float> targets = random_normal(n * width, rng, 2.0f);
  std::vector<float> doutputs(n * width);
  const LossResult r = squared_error(outputs, targets, n, width, scale, doutputs);

  // Each sample's loss is the mean of its (ŷ - y)² over the width, computed here in double.
  double sum = 0.0;
  for (std::size_t j = 0; j < n * width; ++j)
    sum += (double(outputs[j]) - targets[j]) * (double(outputs[j]) - targets[j]) / double(width);
  CHECK(r.loss_sum == Approx(sum).epsilon(1e-6));
  CHECK(squared_error_eval(outputs, targets, n, width).loss_sum == r.loss_sum);
  CHECK(r.correct == 0);

  std::vector<float> scratch(n * width);
  check_loss_gradient("outputs", outputs, doutputs, [&] {
    return squared_error(outputs, targets, n, width, scale, scratch).loss_sum * scale;
  });
}

TEST_CASE("squared_error with scale 1/n is torch.nn.MSELoss(): its loss and its gradient",
          "[loss]") {
  // MSELoss (reduction "mean") over a batch of n samples of k outputs:
  //   L = (1/(n·k)) Σ_i Σ_k (ŷ_ik - y_ik)²,   ∂L/∂ŷ_ik = (2/(n·k)) (ŷ_ik - y_ik)
  // computed here in double from its definition, for widths 1 (y of shape (n)) and more.
  std::mt19937 rng(12);
  for (std::size_t width : {1, 3, 10}) {
    const std::size_t n = 7;
    const std::vector<float> outputs = random_normal(n * width, rng, 2.0f);
    const std::vector<float> targets = random_normal(n * width, rng, 2.0f);
    std::vector<float> doutputs(n * width);
    const LossResult r = squared_error(outputs, targets, n, width, 1.0f / float(n), doutputs);
    double mse = 0.0;
    for (std::size_t j = 0; j < n * width; ++j)
      mse += (double(outputs[j]) - targets[j]) * (double(outputs[j]) - targets[j]);
    mse /= double(n * width);
    INFO("width " << width);
    CHECK(r.loss_sum / double(n) == Approx(mse).epsilon(1e-6));  // residuals in float
    for (std::size_t j = 0; j < n * width; ++j) {
      const double torch = 2.0 / double(n * width) * (double(outputs[j]) - targets[j]);
      CHECK(doutputs[j] == Approx(torch).epsilon(1e-6));
    }
  }
}

TEST_CASE("squared_error over a split batch sums to the whole batch's gradient", "[loss]") {
  // One defined update: two ranks with 2 and 3 of 5 samples, each scaled by 1/5, give the
  // gradient of one process on all 5 (the rows are independent, so bitwise the same).
  std::mt19937 rng(11);
  const std::size_t width = 2;
  const std::vector<float> outputs = random_normal(5 * width, rng, 1.0f);
  const std::vector<float> targets = random_normal(5 * width, rng, 1.0f);
  std::vector<float> whole(5 * width), split(5 * width);
  const double whole_sum = squared_error(outputs, targets, 5, width, 0.2f, whole).loss_sum;
  const auto part = [&](std::size_t begin, std::size_t n) {
    return squared_error(std::span(outputs).subspan(begin * width, n * width),
                         std::span(targets).subspan(begin * width, n * width), n, width, 0.2f,
                         std::span(split).subspan(begin * width, n * width))
        .loss_sum;
  };
  const double split_sum = part(0, 2) + part(2, 3);
  CHECK(split == whole);
  CHECK(split_sum == Approx(whole_sum).epsilon(1e-12));
}
