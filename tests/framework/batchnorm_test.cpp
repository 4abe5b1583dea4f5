// BatchNorm: forward against the definition, running statistics with PyTorch's update, and
// SyncBatchNorm: a batch split over two "ranks" (two threads whose CrossRankSum meets at a
// barrier and adds the other rank's values) computes what one BatchNorm computes on the
// whole batch, while plain BatchNorm on the halves does not.
#include <barrier>
#include <catch2/catch.hpp>
#include <thread>

#include "layer_rig.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/layers/batchnorm.hpp"

using namespace ringtrain;
using namespace ringtrain::testing;

namespace {

// Two ranks in one process. sum(): publish my values, wait for the other rank, add its
// values (a + b on one rank, b + a on the other: the same float), wait again so that
// neither rank overwrites its slot before the other has read it.
struct PairExchange {
  std::barrier<> barrier{2};
  std::vector<double> slot[2];
};

class PairSum final : public CrossRankSum {
 public:
  PairSum(PairExchange& exchange, int rank) : exchange_(exchange), rank_(rank) {}
  void sum(std::span<double> values) const override {
    ++calls;
    exchange_.slot[rank_].assign(values.begin(), values.end());
    exchange_.barrier.arrive_and_wait();
    const std::vector<double>& other = exchange_.slot[1 - rank_];
    if (other.size() != values.size()) size_mismatch = true;
    for (std::size_t j = 0; j < values.size() && j < other.size(); ++j) values[j] += other[j];
    exchange_.barrier.arrive_and_wait();
  }
  mutable int calls = 0;
  mutable bool size_mismatch = false;

 private:
  PairExchange& exchange_;
  int rank_;
};

struct PassResult {
  std::vector<float> y, dx, grad_weight, grad_bias, running_mean, running_var;
};

// One training forward + backward of a freshly made BatchNorm with the given γ, β.
PassResult run_pass(const Shape& shape, std::size_t n, const std::vector<float>& x,
                    const std::vector<float>& dy, const std::vector<float>& gamma,
                    const std::vector<float>& beta, const CrossRankSum* cross_rank) {
  std::mt19937 unused(0);
  BatchNorm layer(shape[0]);
  LayerRig rig(layer, shape, std::max<std::size_t>(n, 1), unused);
  // The layer holds views of these vectors: overwrite in place, never reassign.
  std::copy(gamma.begin(), gamma.end(), rig.params[0].begin());
  std::copy(beta.begin(), beta.end(), rig.params[1].begin());
  StepContext ctx;
  ctx.cross_rank = cross_rank;
  PassResult r;
  r.y.assign(rig.out_size(n), 0.0f);
  r.dx.assign(rig.in_size(n), 0.0f);
  layer.forward(x, r.y, n, ctx);
  layer.backward(x, r.y, dy, r.dx, n, ctx);
  r.grad_weight = rig.grads[0];
  r.grad_bias = rig.grads[1];
  r.running_mean = rig.buffers[0];
  r.running_var = rig.buffers[1];
  return r;
}

std::vector<float> rows(const std::vector<float>& v, std::size_t row_size, std::size_t begin,
                        std::size_t end) {
  return {v.begin() + std::ptrdiff_t(begin * row_size), v.begin() + std::ptrdiff_t(end * row_size)};
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (std::size_t j = 0; j < a.size(); ++j) worst = std::max(worst, double(std::abs(a[j] - b[j])));
  return worst;
}

std::vector<float> plus(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> s(a.size());
  for (std::size_t j = 0; j < a.size(); ++j) s[j] = a[j] + b[j];
  return s;
}

}  // namespace

TEST_CASE("BatchNorm forward normalises per channel and updates running statistics like PyTorch",
          "[batchnorm]") {
  // (n, C, H, W) = (2, 2, 1, 2): channel 0 holds {1, 2, 3, 4}, channel 1 holds {0, 0, 0, 8}.
  const std::vector<float> x = {1, 2, 0, 0, 3, 4, 0, 8};
  std::mt19937 unused(0);
  BatchNorm layer(2, 1e-5f, 0.1f);
  LayerRig rig(layer, {2, 1, 2}, 2, unused);
  rig.params[0][0] = 1.0f;  // γ
  rig.params[0][1] = 2.0f;
  rig.params[1][0] = 0.0f;  // β
  rig.params[1][1] = -1.0f;
  std::vector<float> y(8);
  layer.forward(x, y, 2, {});
  // channel 0: μ = 2.5, σ² = 1.25 (biased), unbiased 5/3
  const float inv0 = 1.0f / std::sqrt(1.25f + 1e-5f);
  CHECK(y[0] == Approx((1 - 2.5) * inv0));
  CHECK(y[5] == Approx((4 - 2.5) * inv0));
  // channel 1: μ = 2, σ² = 12, unbiased 16
  const float inv1 = 1.0f / std::sqrt(12.0f + 1e-5f);
  CHECK(y[2] == Approx(2.0 * (0 - 2) * inv1 - 1.0));
  CHECK(y[7] == Approx(2.0 * (8 - 2) * inv1 - 1.0));
  CHECK(rig.buffers[0][0] == Approx(0.25));  // 0.9·0 + 0.1·2.5
  CHECK(rig.buffers[0][1] == Approx(0.2));
  CHECK(rig.buffers[1][0] == Approx(0.9 + 0.1 * 5.0 / 3.0));  // 0.9·1 + 0.1·unbiased
  CHECK(rig.buffers[1][1] == Approx(0.9 + 0.1 * 16.0));

  // Eval mode uses the running statistics.
  StepContext eval;
  eval.training = false;
  layer.forward(x, y, 2, eval);
  CHECK(y[0] == Approx((1 - 0.25) / std::sqrt(0.9 + 0.1 * 5.0 / 3.0 + 1e-5)));
  CHECK(y[7] == Approx(2.0 * (8 - 0.2) / std::sqrt(0.9 + 1.6 + 1e-5) - 1.0));

  // A single value per channel has no unbiased variance: an error, as in PyTorch.
  // A batch of one sample still has H·W = 2 values per channel: fine.
  CHECK_NOTHROW(layer.forward(std::vector<float>{1, 2, 3, 4}, y, 1, {}));
  BatchNorm flat(2);
  LayerRig flat_rig(flat, {2}, 1, unused);
  CHECK_THROWS_AS(flat.forward(std::vector<float>{1, 2}, y, 1, {}), UsageError);
}

TEST_CASE("SyncBatchNorm on a split batch equals BatchNorm on the whole batch",
          "[batchnorm][syncbn]") {
  struct Split {
    Shape shape;
    std::size_t n0, n1;
  };
  const Split splits[] = {
      {{3}, 4, 4},        // (n, C), equal halves
      {{4, 3, 2}, 3, 5},  // (n, C, H, W), unequal: sample-count weighted
      {{2, 2, 3}, 1, 6},  // one rank with a single sample
      {{3, 2, 2}, 0, 5},  // one rank with no sample: it still takes part in both sums
  };
  std::mt19937 rng(31);
  for (const Split& split : splits) {
    const std::size_t n = split.n0 + split.n1, c = split.shape[0];
    const std::size_t row = num_elements(split.shape);
    INFO("shape " << to_string(split.shape) << ", split " << split.n0 << " + " << split.n1);
    // Channel means and scales that differ per channel, so statistics matter.
    std::vector<float> x = random_normal(n * row, rng, 3.0f);
    for (std::size_t j = 0; j < x.size(); ++j) x[j] += float((j / (row / c)) % c) - 1.0f;
    const std::vector<float> dy = random_normal(n * row, rng);
    const std::vector<float> gamma = random_uniform(c, rng, 0.5f, 1.5f);
    const std::vector<float> beta = random_normal(c, rng);

    const PassResult whole = run_pass(split.shape, n, x, dy, gamma, beta, nullptr);

    PairExchange exchange;
    PairSum sum0(exchange, 0), sum1(exchange, 1);
    PassResult part0, part1;
    std::thread rank1([&] {
      part1 = run_pass(split.shape, split.n1, rows(x, row, split.n0, n), rows(dy, row, split.n0, n),
                       gamma, beta, &sum1);
    });
    part0 = run_pass(split.shape, split.n0, rows(x, row, 0, split.n0), rows(dy, row, 0, split.n0),
                     gamma, beta, &sum0);
    rank1.join();

    // One sum in forward, one in backward, on both ranks, of equal sizes.
    CHECK(sum0.calls == 2);
    CHECK(sum1.calls == 2);
    CHECK_FALSE(sum0.size_mismatch);
    CHECK_FALSE(sum1.size_mismatch);

    constexpr double tol = 2e-5;
    CHECK(max_abs_diff(part0.y, rows(whole.y, row, 0, split.n0)) < tol);
    CHECK(max_abs_diff(part1.y, rows(whole.y, row, split.n0, n)) < tol);
    CHECK(max_abs_diff(part0.dx, rows(whole.dx, row, 0, split.n0)) < tol);
    CHECK(max_abs_diff(part1.dx, rows(whole.dx, row, split.n0, n)) < tol);
    // Parameter gradients are per-rank sums; the gradient ring adds them.
    CHECK(max_abs_diff(plus(part0.grad_weight, part1.grad_weight), whole.grad_weight) < 1e-4);
    CHECK(max_abs_diff(plus(part0.grad_bias, part1.grad_bias), whole.grad_bias) < 1e-4);
    // Both ranks keep the same running statistics as the whole-batch layer.
    CHECK(max_abs_diff(part0.running_mean, whole.running_mean) < 1e-6);
    CHECK(max_abs_diff(part1.running_mean, whole.running_mean) < 1e-6);
    CHECK(max_abs_diff(part0.running_var, whole.running_var) < 1e-5);
    CHECK(max_abs_diff(part1.running_var, whole.running_var) < 1e-5);

    // Plain BatchNorm on the larger half is a different computation.
    if (split.n0 == 0) continue;  // the larger half is the whole batch
    const std::size_t big_begin = split.n1 >= split.n0 ? split.n0 : 0;
    const std::size_t big_end = split.n1 >= split.n0 ? n : split.n0;
    const PassResult local =
        run_pass(split.shape, big_end - big_begin, rows(x, row, big_begin, big_end),
                 rows(dy, row, big_begin, big_end), gamma, beta, nullptr);
    CHECK(max_abs_diff(local.y, rows(whole.y, row, big_begin, big_end)) > 1e-2);
    CHECK(max_abs_diff(local.running_mean, whole.running_mean) > 1e-3);
  }
}
