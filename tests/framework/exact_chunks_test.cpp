// Linear and Conv2d in exact mode (ctx.exact_micro_batch, --reduction exact): one call on n
// rows with micro-batch m gives the bits of one call per micro-batch (the exact step's loop
// for models without BatchNorm): y and dx of every row, and the exact sum of the
// micro-batches' dW and db, word for word. So the exact step of a model with BatchNorm, which
// calls the model once per local batch, keeps the mlp's and the cnn's bits. Conv2d in both
// algorithms: Winograd's backward transforms each micro-batch's inputs again.
#include <bit>
#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "layer_rig.hpp"
#include "ringtrain/collectives/exact_sum.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/layers/conv2d.hpp"
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

using MakeLayer = std::function<std::unique_ptr<Layer>()>;

// Two layers from `make` with the same parameters: one called per micro-batch (forward, then
// backward, as the exact step's loop), one called once on n rows in micro-batches of m.
void check_chunked(const MakeLayer& make, const Shape& input, std::size_t n, std::size_t m) {
  INFO("n " << n << ", m " << m);
  std::mt19937 rng(9);
  const std::unique_ptr<Layer> chunked = make(), single = make();
  LayerRig rig(*chunked, input, std::max<std::size_t>(n, 1), rng);
  std::mt19937 same(9);  // the same parameters
  LayerRig ref(*single, input, std::max<std::size_t>(n, 1), same);
  const std::size_t in = rig.in_size(1), out = rig.out_size(1);
  const std::vector<float> x = random_normal(n * in, rng), dy = random_normal(n * out, rng);
  const std::vector<std::size_t> blocks{rig.grads[0].size(), rig.grads[1].size()};

  // One call per micro-batch, its gradient added as one term per tensor.
  collectives::ExactSum expected(blocks);
  std::vector<float> y_ref(n * out), dx_ref(n * in), flat(blocks[0] + blocks[1]);
  for (std::size_t first = 0; first < n; first += m) {
    const std::size_t rows = std::min(m, n - first);
    StepContext ctx;
    const auto x_rows = std::span(x).subspan(first * in, rows * in);
    single->forward(x_rows, std::span(y_ref).subspan(first * out, rows * out), rows, ctx);
    single->backward(x_rows, {}, std::span(dy).subspan(first * out, rows * out),
                     std::span(dx_ref).subspan(first * in, rows * in), rows, ctx);
    std::copy(ref.grads[0].begin(), ref.grads[0].end(), flat.begin());
    std::copy(ref.grads[1].begin(), ref.grads[1].end(), flat.begin() + std::ptrdiff_t(blocks[0]));
    expected.add(flat);
  }

  // One call on all n rows in micro-batches of m.
  collectives::ExactSum got(blocks);
  const RigSink sink(rig, got);
  StepContext ctx;
  ctx.exact_micro_batch = m;
  ctx.exact_gradient = &sink;
  std::vector<float> y(n * out), dx(n * in);
  chunked->forward(x, y, n, ctx);
  chunked->backward(x, y, dy, dx, n, ctx);

  CHECK(same_bits(y, y_ref));
  CHECK(same_bits(dx, dx_ref));
  CHECK(got.terms() == expected.terms());
  CHECK(got.top(0) == expected.top(0));
  CHECK(got.top(1) == expected.top(1));
  CHECK(std::ranges::equal(got.words(), expected.words()));
  if (n > m) {  // more than one micro-batch: the views alone hold only the last one's
    std::vector<float> total(blocks[0] + blocks[1]);
    got.to_float(total);
    CHECK_FALSE(
        same_bits(std::span(total).first(blocks[1]), std::span(rig.grads[0]).first(blocks[1])));
  }
}

// (n, m): several whole micro-batches, a short last one, one short micro-batch, no rows.
const std::vector<std::pair<std::size_t, std::size_t>> kSplits{{20, 4}, {22, 6}, {5, 8}, {0, 4}};

}  // namespace

TEST_CASE("Linear exact: one call in micro-batches equals one call per micro-batch",
          "[linear][exact]") {
  for (const auto& [n, m] : kSplits)
    check_chunked([] { return std::make_unique<Linear>(37, 11); }, {37}, n, m);
}

TEST_CASE("Conv2d exact (im2col): one call in micro-batches equals one call per micro-batch",
          "[conv2d][exact]") {
  for (const auto& [n, m] : kSplits)
    check_chunked(
        [] { return std::make_unique<Conv2d>(3, 4, 3, 1, 1, Conv2d::Algorithm::kIm2col); },
        {3, 6, 6}, n, m);
}

// Groups of 4 images from each part's start: m = 6 gives groups of 1 and 2 images, so a
// micro-batch's V and products differ from the whole call's; the keep_inputs of backward
// must rebuild each micro-batch's V as its own forward kept it.
TEST_CASE("Conv2d exact (Winograd): one call in micro-batches equals one call per micro-batch",
          "[conv2d][exact]") {
  for (const auto& [n, m] : kSplits)
    check_chunked(
        [] { return std::make_unique<Conv2d>(8, 8, 5, 1, 2, Conv2d::Algorithm::kWinograd); },
        {8, 7, 7}, n, m);
}

TEST_CASE("Linear and Conv2d exact: micro-batches without a gradient sink are refused",
          "[linear][conv2d][exact]") {
  std::mt19937 rng(1);
  Linear linear(3, 2);
  Conv2d conv(1, 2, 3, 1, 1);
  for (auto& [layer, input] : {std::pair<Layer*, Shape>{&linear, {3}}, {&conv, {1, 4, 4}}}) {
    LayerRig rig(*layer, input, 4, rng);
    const std::vector<float> x = random_normal(rig.in_size(4), rng),
                             dy = random_normal(rig.out_size(4), rng);
    std::vector<float> y(rig.out_size(4)), dx(rig.in_size(4));
    StepContext ctx;
    ctx.exact_micro_batch = 2;
    layer->forward(x, y, 4, ctx);
    CHECK_THROWS_AS(layer->backward(x, y, dy, dx, 4, ctx), Error);
  }
}
