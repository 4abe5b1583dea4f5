// Dropout: the mask is a function of (seed, layer, sample id, element), not of the row or
// rank; eval mode is the identity; the dropped fraction is p; kept values are scaled.
#include <catch2/catch.hpp>
#include <cstdint>

#include "layer_rig.hpp"
#include "ringtrain/framework/layers/dropout.hpp"
#include "ringtrain/framework/random.hpp"

using namespace ringtrain;
using namespace ringtrain::testing;

namespace {

// The mask a batch of ones receives: y = m.
std::vector<float> mask_of(Dropout& layer, std::size_t features, std::span<const std::uint64_t> ids,
                           std::size_t n, std::uint64_t seed, std::size_t layer_index) {
  StepContext ctx;
  ctx.seed = seed;
  ctx.layer_index = layer_index;
  ctx.sample_ids = ids;
  std::vector<float> ones(n * features, 1.0f), y(n * features);
  layer.forward(ones, y, n, ctx);
  return y;
}

std::vector<float> row(const std::vector<float>& v, std::size_t features, std::size_t i) {
  return {v.begin() + std::ptrdiff_t(i * features), v.begin() + std::ptrdiff_t((i + 1) * features)};
}

}  // namespace

TEST_CASE("Dropout masks follow the sample id, not the row", "[dropout]") {
  const std::size_t features = 64;
  Dropout layer(0.5f);
  layer.plan({features}, 8);
  const std::vector<std::uint64_t> a = {10, 20, 30};
  const std::vector<std::uint64_t> b = {30, 10, 99, 20};
  const auto ma = mask_of(layer, features, a, a.size(), 7, 3);
  const auto mb = mask_of(layer, features, b, b.size(), 7, 3);
  CHECK(row(ma, features, 0) == row(mb, features, 1));  // sample 10
  CHECK(row(ma, features, 1) == row(mb, features, 3));  // sample 20
  CHECK(row(ma, features, 2) == row(mb, features, 0));  // sample 30
  CHECK(row(ma, features, 0) != row(ma, features, 1));  // different samples, different masks

  // The mask is exactly the documented key: keep iff uniform01(hash(...)) >= p.
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t j = 0; j < features; ++j) {
      const float u = random::uniform01(random::hash({7, random::kStreamDropout, 3, a[i], j}));
      REQUIRE(ma[i * features + j] == (u >= 0.5f ? 2.0f : 0.0f));
    }

  // Another layer index or seed gives another mask.
  CHECK(mask_of(layer, features, a, a.size(), 7, 4) != ma);
  CHECK(mask_of(layer, features, a, a.size(), 8, 3) != ma);
  // Without sample ids the row index is the id.
  const std::vector<std::uint64_t> rows = {0, 1, 2};
  CHECK(mask_of(layer, features, {}, 3, 7, 3) == mask_of(layer, features, rows, 3, 7, 3));
  // Ids must cover the batch.
  CHECK_THROWS(mask_of(layer, features, a, 2, 7, 3));
}

TEST_CASE("Dropout drops a fraction p and scales the rest by 1/(1-p)", "[dropout]") {
  const std::size_t features = 1000, n = 64;
  for (float p : {0.1f, 0.3f, 0.5f, 0.9f}) {
    INFO("p = " << p);
    Dropout layer(p);
    layer.plan({features}, n);
    const auto m = mask_of(layer, features, {}, n, 12345, 0);
    std::size_t dropped = 0;
    for (float v : m) {
      if (v == 0.0f)
        ++dropped;
      else
        REQUIRE(v == Approx(1.0f / (1.0f - p)));
    }
    // 64000 Bernoulli(p) draws: standard deviation <= 0.002, so 0.01 is 5 sigma.
    CHECK(double(dropped) / double(m.size()) == Approx(p).margin(0.01));
  }
}

TEST_CASE("Dropout in eval mode and with p = 0 is the identity", "[dropout]") {
  std::mt19937 rng(41);
  const std::vector<float> x = random_normal(30, rng), dy = random_normal(30, rng);
  std::vector<float> y(30), dx(30);
  Dropout layer(0.5f);
  layer.plan({10}, 3);
  StepContext eval;
  eval.training = false;
  layer.forward(x, y, 3, eval);
  CHECK(y == x);
  layer.backward(x, y, dy, dx, 3, eval);
  CHECK(dx == dy);

  Dropout none(0.0f);
  none.plan({10}, 3);
  none.forward(x, y, 3, {});
  CHECK(y == x);

  Dropout all(1.0f);
  all.plan({10}, 3);
  all.forward(x, y, 3, {});
  CHECK(y == std::vector<float>(30, 0.0f));

  CHECK_THROWS(Dropout(-0.1f));
  CHECK_THROWS(Dropout(1.5f));
}
