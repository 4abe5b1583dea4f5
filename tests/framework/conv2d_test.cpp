// Conv2d against a direct, naive convolution written from the definition: forward output,
// and (by the same loops read backwards) dx, dW and db.
#include <catch2/catch.hpp>

#include "layer_rig.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/layers/conv2d.hpp"
#include "ringtrain/framework/layers/winograd.hpp"

using namespace ringtrain;
using namespace ringtrain::testing;

namespace {

struct Geometry {
  std::size_t c, o, k, s, p, h, w;
  std::size_t ho() const { return (h + 2 * p - k) / s + 1; }
  std::size_t wo() const { return (w + 2 * p - k) / s + 1; }
};

// Visits every (i, o, oh, ow, c, ki, kj) whose input pixel lies inside the image and calls
// f(y index, x index, weight index), all in double-free plain index arithmetic.
template <typename F>
void for_each_tap(const Geometry& g, std::size_t n, F&& f) {
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t o = 0; o < g.o; ++o)
      for (std::size_t oh = 0; oh < g.ho(); ++oh)
        for (std::size_t ow = 0; ow < g.wo(); ++ow)
          for (std::size_t c = 0; c < g.c; ++c)
            for (std::size_t ki = 0; ki < g.k; ++ki)
              for (std::size_t kj = 0; kj < g.k; ++kj) {
                const long ih = long(oh * g.s + ki) - long(g.p);
                const long iw = long(ow * g.s + kj) - long(g.p);
                if (ih < 0 || iw < 0 || ih >= long(g.h) || iw >= long(g.w)) continue;
                const std::size_t yi = ((i * g.o + o) * g.ho() + oh) * g.wo() + ow;
                const std::size_t xi =
                    ((i * g.c + c) * g.h + std::size_t(ih)) * g.w + std::size_t(iw);
                const std::size_t wi = ((o * g.c + c) * g.k + ki) * g.k + kj;
                f(yi, xi, wi);
              }
}

void require_close(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  double worst = 0, scale = 0;
  for (std::size_t j = 0; j < got.size(); ++j) {
    worst = std::max(worst, std::abs(double(got[j]) - want[j]));
    scale = std::max(scale, std::abs(want[j]));
  }
  INFO("max abs error " << worst << " against max magnitude " << scale);
  CHECK(worst <= tol * std::max(scale, 1.0));
}

// Forward, dx, dW and db of `layer` against the naive convolution, on n samples, within
// 1e-5 of the largest value (im2col) or 3e-5 (Winograd: its dW sums products of transformed
// values, and the cnn's second layer lands at 1.02e-5).
void check_against_naive(Conv2d& layer, const Geometry& g, std::size_t n, std::mt19937& rng) {
  const double tol = layer.algorithm_name() == "im2col" ? 1e-5 : 3e-5;
  LayerRig rig(layer, {g.c, g.h, g.w}, n, rng);
  REQUIRE(rig.output_shape == Shape{g.o, g.ho(), g.wo()});
  CHECK(layer.forward_flops_per_sample() == Approx(2.0 * g.o * g.c * g.k * g.k * g.ho() * g.wo()));
  const std::vector<float>& weight = rig.params[0];
  const std::vector<float>& bias = rig.params[1];
  const std::vector<float> x = random_normal(rig.in_size(n), rng);
  const std::vector<float> dy = random_normal(rig.out_size(n), rng);

  // Reference forward: y = b + Σ W·x
  std::vector<double> y_ref(rig.out_size(n));
  for (std::size_t j = 0; j < y_ref.size(); ++j) y_ref[j] = bias[(j / (g.ho() * g.wo())) % g.o];
  for_each_tap(g, n, [&](std::size_t yi, std::size_t xi, std::size_t wi) {
    y_ref[yi] += double(weight[wi]) * x[xi];
  });
  // Reference backward: each tap y += W·x gives dW += dy·x and dx += dy·W.
  std::vector<double> dx_ref(x.size(), 0.0), dw_ref(weight.size(), 0.0), db_ref(g.o, 0.0);
  for_each_tap(g, n, [&](std::size_t yi, std::size_t xi, std::size_t wi) {
    dx_ref[xi] += double(dy[yi]) * weight[wi];
    dw_ref[wi] += double(dy[yi]) * x[xi];
  });
  for (std::size_t j = 0; j < dy.size(); ++j) db_ref[(j / (g.ho() * g.wo())) % g.o] += dy[j];

  std::vector<float> y(rig.out_size(n)), dx(rig.in_size(n), 123.0f);
  layer.forward(x, y, n, {});
  require_close(y, y_ref, tol);
  layer.backward(x, y, dy, dx, n, {});
  require_close(dx, dx_ref, tol);
  require_close(rig.grads[0], dw_ref, tol);
  require_close(rig.grads[1], db_ref, tol);

  // Without dx (first layer): the same parameter gradients, dx untouched.
  std::fill(rig.grads[0].begin(), rig.grads[0].end(), 7.0f);
  layer.backward(x, y, dy, {}, n, {});
  require_close(rig.grads[0], dw_ref, tol);
}

}  // namespace

TEST_CASE("Conv2d matches a naive convolution, forward and backward", "[conv2d]") {
  const Geometry cases[] = {
      {3, 4, 3, 1, 1, 7, 7},     // "same" 3x3
      {2, 3, 5, 1, 2, 6, 9},     // 5x5 padding 2, non-square
      {3, 2, 3, 2, 1, 8, 8},     // stride 2
      {2, 2, 2, 3, 0, 8, 7},     // stride > kernel: skipped pixels get no gradient
      {2, 3, 3, 2, 2, 5, 5},     // padding wider than half the kernel
      {4, 5, 1, 1, 0, 4, 6},     // 1x1 (no im2col)
      {1, 32, 5, 1, 2, 28, 28},  // the cnn's first layer
      {32, 64, 5, 1, 2, 14, 14}  // the cnn's second layer
  };
  std::mt19937 rng(21);
  for (const Geometry& g : cases) {
    INFO("Conv2d(" << g.c << " -> " << g.o << ", k " << g.k << ", s " << g.s << ", p " << g.p
                   << ") on " << g.h << "x" << g.w);
    Conv2d layer(g.c, g.o, g.k, g.s, g.p);
    check_against_naive(layer, g, 3, rng);
  }
}

// Every 5x5 stride-1 shape both ways: padding 0..4 (dx then runs with padding 4..0), odd
// outputs (a cut last row / column of tiles), a 1x1 output, and batches that leave a
// short last group of images (groups of 4).
TEST_CASE("Conv2d by Winograd and by im2col both match a naive convolution", "[conv2d][winograd]") {
  const Geometry cases[] = {
      {2, 3, 5, 1, 2, 6, 9},     // even x odd output
      {3, 2, 5, 1, 0, 9, 8},     // no padding: 5x4 output
      {2, 2, 5, 1, 1, 5, 7},     // padding 1
      {1, 4, 5, 1, 3, 4, 4},     // padding 3: output larger than the input
      {2, 1, 5, 1, 4, 2, 3},     // padding 4: dx runs with padding 0
      {3, 3, 5, 1, 0, 5, 5},     // 1x1 output, one tile cut to one pixel
      {8, 16, 5, 1, 2, 14, 14},  // the auto choice (>= 8 channels)
  };
  std::mt19937 rng(22);
  for (const Geometry& g : cases)
    for (const auto algorithm : {Conv2d::Algorithm::kWinograd, Conv2d::Algorithm::kIm2col})
      for (const std::size_t n : {std::size_t(1), std::size_t(6)}) {
        Conv2d layer(g.c, g.o, g.k, g.s, g.p, algorithm);
        INFO("Conv2d(" << g.c << " -> " << g.o << ", padding " << g.p << ") on " << g.h << "x"
                       << g.w << ", " << n << " samples, " << layer.algorithm_name());
        check_against_naive(layer, g, n, rng);
      }
}

TEST_CASE("Conv2d picks Winograd for the cnn's second layer only, and refuses it elsewhere",
          "[conv2d][winograd]") {
  CHECK(Conv2d(32, 64, 5, 1, 2).algorithm_name().rfind("winograd", 0) == 0);
  CHECK(Conv2d(1, 32, 5, 1, 2).algorithm_name() == "im2col");   // one input channel
  CHECK(Conv2d(32, 64, 3, 1, 1).algorithm_name() == "im2col");  // 3x3
  CHECK(Conv2d(32, 64, 5, 2, 2).algorithm_name() == "im2col");  // stride 2
  CHECK_THROWS_AS(Conv2d(4, 4, 3, 1, 1, Conv2d::Algorithm::kWinograd), UsageError);
  CHECK_THROWS_AS(Conv2d(4, 4, 5, 2, 2, Conv2d::Algorithm::kWinograd), UsageError);
  CHECK_THROWS_AS(Conv2d(4, 4, 5, 1, 5, Conv2d::Algorithm::kWinograd), UsageError);
}

// The three tables against the identity they implement, in one dimension:
//   Aᵀ [ (G g) ⊙ (Bᵀ d) ] = (Σ_k d[i + k]·g[k])_{i < m},
// in double on random numbers. One wrong entry breaks it.
TEST_CASE("Winograd tables compute a 5-tap correlation", "[winograd]") {
  namespace w = winograd;
  std::mt19937 rng(23);
  std::uniform_real_distribution<double> uniform(-1, 1);
  for (int trial = 0; trial < 20; ++trial) {
    double d[w::kAlpha], g[w::kKernel];
    for (double& v : d) v = uniform(rng);
    for (double& v : g) v = uniform(rng);
    double product[w::kAlpha];
    for (std::size_t p = 0; p < w::kAlpha; ++p) {
      double gg = 0, bd = 0;
      for (std::size_t k = 0; k < w::kKernel; ++k) gg += double(w::kG[p][k]) * g[k];
      for (std::size_t j = 0; j < w::kAlpha; ++j) bd += double(w::kBt[p][j]) * d[j];
      product[p] = gg * bd;
    }
    for (std::size_t i = 0; i < w::kOut; ++i) {
      double want = 0, got = 0;
      for (std::size_t k = 0; k < w::kKernel; ++k) want += d[i + k] * g[k];
      for (std::size_t p = 0; p < w::kAlpha; ++p) got += double(w::kAt[i][p]) * product[p];
      CHECK(got == Approx(want).margin(1e-6));
    }
  }
}

TEST_CASE("Conv2d rejects inputs that do not fit", "[conv2d]") {
  Conv2d layer(3, 4, 5, 1, 0);
  CHECK_THROWS(layer.plan({2, 8, 8}, 1));  // wrong channel count
  CHECK_THROWS(layer.plan({3, 4, 8}, 1));  // smaller than the kernel
  CHECK_THROWS(layer.plan({3, 64}, 1));    // not (C, H, W)
  CHECK_THROWS(Conv2d(0, 4, 3));
  CHECK_NOTHROW(layer.plan({3, 5, 5}, 1));
}

// Winograd's backward reads the transformed inputs its training forward kept; an
// evaluation forward keeps none, and a backward after it must fail loudly, not use stale data.
TEST_CASE("Conv2d by Winograd: backward needs a training forward first", "[conv2d][winograd]") {
  std::mt19937 rng(24);
  const Geometry g{3, 4, 5, 1, 2, 6, 6};
  Conv2d layer(g.c, g.o, g.k, g.s, g.p, Conv2d::Algorithm::kWinograd);
  LayerRig rig(layer, {g.c, g.h, g.w}, 2, rng);
  const std::vector<float> x = random_normal(rig.in_size(2), rng);
  const std::vector<float> dy = random_normal(rig.out_size(2), rng);
  std::vector<float> y_eval(rig.out_size(2)), y(rig.out_size(2)), dx(rig.in_size(2));
  StepContext eval;
  eval.training = false;
  layer.forward(x, y_eval, 2, eval);
  CHECK_THROWS_AS(layer.backward(x, y_eval, dy, dx, 2, {}), Error);
  layer.forward(x, y, 2, {});
  CHECK(y == y_eval);  // keeping V does not change the output
  CHECK_NOTHROW(layer.backward(x, y, dy, dx, 2, {}));
}
