// Linear in exact mode (ctx.exact_micro_batch, --reduction exact): one call on n rows with
// micro-batch m gives the bits of one call per micro-batch (the exact step's loop today): y
// and dx of every row, and the exact sum of the micro-batches' dW and db, word for word. So
// the exact step may call the model once per local batch without changing an mlp's bits.
#include <bit>
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "layer_rig.hpp"
#include "ringtrain/collectives/exact_sum.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/layers/linear.hpp"

using namespace ringtrain;
using namespace ringtrain::testing;

namespace {

// Adds a gradient view as one term of its tensor's block: block 0 the weight, 1 the bias.
class RigSink final : public ExactGradientSink {
 public:
  RigSink(const LayerRig& rig, collectives::ExactSum& sum) : rig_(rig), sum_(sum) {}
  void add(std::span<const float> gradient) const override {
    for (std::size_t p = 0; p < rig_.grads.size(); ++p)
      if (gradient.data() == rig_.grads[p].data()) return sum_.add_block(p, gradient);
    throw Error("not a gradient view of the rig");
  }

 private:
  const LayerRig& rig_;
  collectives::ExactSum& sum_;
};

bool same_bits(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i])) return false;
  return true;
}

}  // namespace

TEST_CASE("Linear exact: one call in micro-batches equals one call per micro-batch",
          "[linear][exact]") {
  const std::size_t in = 37, out = 11;
  for (const auto& [n, m] : {std::pair<std::size_t, std::size_t>{20, 4}, {22, 6}, {5, 8}, {0, 4}}) {
    INFO("n " << n << ", m " << m);
    std::mt19937 rng(9);
    Linear chunked(in, out), single(in, out);
    LayerRig rig(chunked, {in}, std::max<std::size_t>(n, 1), rng);
    std::mt19937 same(9);  // the same parameters
    LayerRig ref(single, {in}, std::max<std::size_t>(n, 1), same);
    const std::vector<float> x = random_normal(n * in, rng), dy = random_normal(n * out, rng);
    const std::vector<std::size_t> blocks{in * out, out};

    // One call per micro-batch, its gradient added as one term per tensor (the step today).
    collectives::ExactSum expected(blocks);
    std::vector<float> y_ref(n * out), dx_ref(n * in), flat(in * out + out);
    for (std::size_t first = 0; first < n; first += m) {
      const std::size_t rows = std::min(m, n - first);
      StepContext ctx;
      single.forward(std::span(x).subspan(first * in, rows * in),
                     std::span(y_ref).subspan(first * out, rows * out), rows, ctx);
      single.backward(std::span(x).subspan(first * in, rows * in), {},
                      std::span(dy).subspan(first * out, rows * out),
                      std::span(dx_ref).subspan(first * in, rows * in), rows, ctx);
      std::copy(ref.grads[0].begin(), ref.grads[0].end(), flat.begin());
      std::copy(ref.grads[1].begin(), ref.grads[1].end(), flat.begin() + in * out);
      expected.add(flat);
    }

    // One call on all n rows in micro-batches of m.
    collectives::ExactSum got(blocks);
    const RigSink sink(rig, got);
    StepContext ctx;
    ctx.exact_micro_batch = m;
    ctx.exact_gradient = &sink;
    std::vector<float> y(n * out), dx(n * in);
    chunked.forward(x, y, n, ctx);
    chunked.backward(x, y, dy, dx, n, ctx);

    CHECK(same_bits(y, y_ref));
    CHECK(same_bits(dx, dx_ref));
    CHECK(got.terms() == expected.terms());
    CHECK(got.top(0) == expected.top(0));
    CHECK(got.top(1) == expected.top(1));
    CHECK(std::ranges::equal(got.words(), expected.words()));
    if (n > m) {  // more than one micro-batch: the views alone hold only the last one's
      std::vector<float> total(in * out + out);
      got.to_float(total);
      CHECK_FALSE(same_bits(std::span(total).first(out), std::span(rig.grads[0]).first(out)));
    }
  }
}

TEST_CASE("Linear exact: micro-batches without a gradient sink are refused", "[linear][exact]") {
  std::mt19937 rng(1);
  Linear layer(3, 2);
  LayerRig rig(layer, {3}, 4, rng);
  const std::vector<float> x = random_normal(12, rng), dy = random_normal(8, rng);
  std::vector<float> y(8), dx(12);
  StepContext ctx;
  ctx.exact_micro_batch = 2;
  layer.forward(x, y, 4, ctx);
  CHECK_THROWS_AS(layer.backward(x, y, dy, dx, 4, ctx), Error);
}
