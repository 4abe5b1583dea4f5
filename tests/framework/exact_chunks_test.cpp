// Linear and Conv2d in exact mode (ctx.exact_micro_batch, --reduction exact): one call on n
// rows with micro-batch m gives the bits of a call per micro-batch, each alone: y and dx of
// every row, and the exact sum of the micro-batches' dW and db, word for word. So a
// micro-batch's results do not depend on which micro-batches share its rank's call, which is
// what lets the exact step cut the global batch over ranks at any multiple of m. Linear with
// and without the row-stable products (ctx.exact_row_stable: y and dx on all n rows at once);
// Conv2d in both algorithms (Winograd's backward transforms each micro-batch's inputs again).
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "layer_rig.hpp"
#include "ringtrain/collectives/exact_sum.hpp"
#include "ringtrain/framework/blas.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/layers/conv2d.hpp"
#include "ringtrain/framework/layers/linear.hpp"

using namespace ringtrain;
using namespace ringtrain::testing;

namespace {

// Adds each term of a tensor to its block: block 0 the weight, 1 the bias. Terms given in
// pieces are assembled and added in term order by flush(). Keeps the largest bound of each
// tensor and the largest |element| of its terms.
class RigSink final : public ExactGradientSink {
 public:
  RigSink(const LayerRig& rig, collectives::ExactSum& sum) : rig_(rig), sum_(sum) {}
  void bound(std::span<const std::span<float>> gradients,
             std::span<const double> bounds) const override {
    REQUIRE(gradients.size() == bounds.size());
    for (std::size_t i = 0; i < gradients.size(); ++i) {
      const std::size_t p = tensor(gradients[i]);
      bounds_[p] = std::max(bounds_[p], bounds[i]);
    }
  }
  void add(std::span<const float> gradient) const override {
    const std::size_t p = tensor(gradient);
    note(p, gradient);
    sum_.add_block(p, gradient);
  }
  void add_pieces(std::span<float> gradient, std::size_t offset, std::size_t length,
                  std::span<const float> pieces, std::size_t first_term) const override {
    const std::size_t p = tensor(gradient);
    REQUIRE(length > 0);
    REQUIRE(pieces.size() % length == 0);
    REQUIRE(offset + length <= gradient.size());
    std::vector<std::vector<float>>& terms = pieces_[p];
    for (std::size_t k = 0; k < pieces.size() / length; ++k) {
      const std::size_t term = first_term + k;
      if (terms.size() <= term) terms.resize(term + 1, std::vector<float>(gradient.size(), NAN));
      const auto piece = pieces.subspan(k * length, length);
      std::copy(piece.begin(), piece.end(), terms[term].begin() + std::ptrdiff_t(offset));
    }
  }
  // The terms given in pieces, each whole, added in term order.
  void flush() const {
    for (std::size_t p = 0; p < 2; ++p) {
      for (const std::vector<float>& term : pieces_[p]) {
        note(p, term);
        sum_.add_block(p, term);
      }
      pieces_[p].clear();
    }
  }
  double bound(std::size_t p) const { return bounds_[p]; }
  double largest(std::size_t p) const { return largest_[p]; }

 private:
  std::size_t tensor(std::span<const float> gradient) const {
    for (std::size_t p = 0; p < rig_.grads.size(); ++p)
      if (gradient.data() == rig_.grads[p].data()) return p;
    throw Error("not a gradient view of the rig");
  }
  void note(std::size_t p, std::span<const float> term) const {
    for (float x : term) largest_[p] = std::max(largest_[p], double(std::fabs(x)));
  }
  const LayerRig& rig_;
  collectives::ExactSum& sum_;
  mutable std::vector<std::vector<float>> pieces_[2];
  mutable double bounds_[2] = {0.0, 0.0}, largest_[2] = {0.0, 0.0};
};

bool same_bits(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i])) return false;
  return true;
}

using MakeLayer = std::function<std::unique_ptr<Layer>()>;

// Two layers from `make` with the same parameters: one called per micro-batch, each call
// alone (forward, then backward), one called once on n rows; both in exact mode with
// micro-batch m and the same row_stable.
void check_chunked(const MakeLayer& make, const Shape& input, std::size_t n, std::size_t m,
                   bool row_stable = false) {
  INFO("n " << n << ", m " << m << ", row-stable " << row_stable);
  std::mt19937 rng(9);
  const std::unique_ptr<Layer> chunked = make(), single = make();
  LayerRig rig(*chunked, input, std::max<std::size_t>(n, 1), rng);
  std::mt19937 same(9);  // the same parameters
  LayerRig ref(*single, input, std::max<std::size_t>(n, 1), same);
  const std::size_t in = rig.in_size(1), out = rig.out_size(1);
  const std::vector<float> x = random_normal(n * in, rng), dy = random_normal(n * out, rng);
  const std::vector<std::size_t> blocks{rig.grads[0].size(), rig.grads[1].size()};
  StepContext ctx;
  ctx.exact_micro_batch = m;
  ctx.exact_row_stable = row_stable;

  // One call per micro-batch, each adding its gradient as one term per tensor.
  collectives::ExactSum expected(blocks);
  const RigSink expected_sink(ref, expected);
  ctx.exact_gradient = &expected_sink;
  std::vector<float> y_ref(n * out), dx_ref(n * in);
  for (std::size_t first = 0; first < n; first += m) {
    const std::size_t rows = std::min(m, n - first);
    const auto x_rows = std::span(x).subspan(first * in, rows * in);
    const auto y_rows = std::span(y_ref).subspan(first * out, rows * out);
    single->forward(x_rows, y_rows, rows, ctx);
    single->backward(x_rows, y_rows, std::span(dy).subspan(first * out, rows * out),
                     std::span(dx_ref).subspan(first * in, rows * in), rows, ctx);
    expected_sink.flush();
  }

  // One call on all n rows.
  collectives::ExactSum got(blocks);
  const RigSink sink(rig, got);
  ctx.exact_gradient = &sink;
  std::vector<float> y(n * out), dx(n * in);
  chunked->forward(x, y, n, ctx);
  chunked->backward(x, y, dy, dx, n, ctx);
  sink.flush();

  CHECK(same_bits(y, y_ref));
  CHECK(same_bits(dx, dx_ref));
  CHECK(got.terms() == expected.terms());
  CHECK(got.terms() == std::int64_t((n + m - 1) / m));
  CHECK(got.top(0) == expected.top(0));
  CHECK(got.top(1) == expected.top(1));
  CHECK(std::ranges::equal(got.words(), expected.words()));
  // The bounds: the one call's is the largest of the micro-batches' (so a function of the
  // micro-batches, whatever the split), and every term lies within it.
  for (std::size_t p = 0; p < 2; ++p) {
    CHECK(sink.bound(p) == expected_sink.bound(p));
    CHECK(sink.largest(p) <= sink.bound(p));
    if (n > 0) CHECK(sink.bound(p) > 0.0);
  }
  if (n > m) {  // more than one micro-batch: the views alone hold only the last one's
    std::vector<float> total(blocks[0] + blocks[1]);
    got.to_float(total);
    CHECK_FALSE(
        same_bits(std::span(total).first(blocks[1]), std::span(rig.grads[0]).first(blocks[1])));
  }
}

// Constant inputs make the bound tight: every product is max|dy|·max|x|, so a term's largest
// element (the dW of a kernel's centre tap, which meets no padding) is k·max|dy|·max|x|:
// half the bound the layer gave the sink, the other half its margin for rounding.
void check_tight_bound(const MakeLayer& make, const Shape& input, std::size_t n, std::size_t m) {
  std::mt19937 rng(3);
  const std::unique_ptr<Layer> layer = make();
  LayerRig rig(*layer, input, n, rng);
  const std::vector<float> x(n * rig.in_size(1), 1.5f), dy(n * rig.out_size(1), -0.75f);
  std::vector<float> y(dy.size()), dx(x.size());
  collectives::ExactSum sum(std::vector<std::size_t>{rig.grads[0].size(), rig.grads[1].size()});
  const RigSink sink(rig, sum);
  StepContext ctx;
  ctx.exact_micro_batch = m;
  ctx.exact_gradient = &sink;
  layer->forward(x, y, n, ctx);
  layer->backward(x, y, dy, dx, n, ctx);
  sink.flush();
  for (std::size_t p = 0; p < 2; ++p) {
    INFO("tensor " << p << ": largest " << sink.largest(p) << ", bound " << sink.bound(p));
    CHECK(sink.largest(p) <= sink.bound(p));
    CHECK(sink.largest(p) >= 0.499 * sink.bound(p));
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

// y and dx on all n rows at once: 130 rows cross the own kernels' row tiles and blocks, so a
// micro-batch's rows sit at other places of the tiles than in their own call.
TEST_CASE("Linear exact, row-stable: y and dx on all rows equal one call per micro-batch",
          "[linear][exact]") {
  if (!blas::own_kernels_supported()) {
    WARN("this CPU runs no own kernels: the row-stable products are not available");
    return;
  }
  for (const auto& [n, m] : kSplits)
    check_chunked([] { return std::make_unique<Linear>(37, 11); }, {37}, n, m, true);
  check_chunked([] { return std::make_unique<Linear>(300, 70); }, {300}, 130, 16, true);
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

TEST_CASE("Linear and Conv2d exact: the bound of a micro-batch's terms is tight, with its margin",
          "[linear][conv2d][exact]") {
  check_tight_bound([] { return std::make_unique<Linear>(37, 11); }, {37}, 22, 6);
  check_tight_bound(
      [] { return std::make_unique<Conv2d>(3, 4, 3, 1, 1, Conv2d::Algorithm::kIm2col); }, {3, 6, 6},
      22, 6);
  check_tight_bound(
      [] { return std::make_unique<Conv2d>(8, 8, 5, 1, 2, Conv2d::Algorithm::kWinograd); },
      {8, 7, 7}, 22, 6);
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
