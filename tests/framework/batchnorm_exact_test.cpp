// BatchNorm's exact statistics (ctx.exact_micro_batch, --reduction exact): the global batch
// of B rows, cut into micro-batches of m, is split over the N ranks of MPI_COMM_WORLD in
// whole micro-batches (even, uneven, some ranks empty, all on one rank, random); every rank
// runs two training passes on its rows with the exact cross-rank sum. Facts:
//   - y and dx of every row, dγ, dβ (global totals) and the running statistics are byte for
//     byte those of one process on the whole batch (no cross-rank sum), at every split;
//   - that one-process result is BatchNorm: within float tolerance of the double path;
//   - the double SyncBN path at the same splits is not bitwise the one-process result for
//     some split (N > 1), in forward (y, running_var) and in backward (dx): the data make the
//     grouping of the sums visible (a large mean against a small spread; dy whose sums
//     cancel), so the bitwise comparison above can fail.
#include <mpi.h>

#include <bit>
#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "layer_rig.hpp"
#include "mpi_test.hpp"
#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/collectives/exact_sum.hpp"
#include "ringtrain/collectives/small.hpp"
#include "ringtrain/framework/layers/batchnorm.hpp"

using namespace ringtrain;
using namespace ringtrain::testing;

namespace {

// SyncBN's cross-rank sums over a communicator, as the training step's (data_parallel_step.cpp).
class WorldSum final : public CrossRankSum {
 public:
  explicit WorldSum(const collectives::Communicator& comm) : comm_(comm) {}
  void sum(std::span<double> values) const override { collectives::allreduce_sum(comm_, values); }
  void sum_exact(collectives::ExactSum& sum) const override {
    collectives::allreduce_exact(comm_, sum);
  }

 private:
  const collectives::Communicator& comm_;
};

struct Outputs {
  std::vector<float> y, dx, grad_weight, grad_bias, running_mean, running_var;
};

// Two training passes (forward, backward) of a fresh BatchNorm on rows [first, first + n) of
// x1/dy1, then of x2/dy2; returns the second pass's outputs and the running statistics.
Outputs two_passes(const Shape& shape, const std::vector<float>& x1, const std::vector<float>& x2,
                   const std::vector<float>& dy1, const std::vector<float>& dy2, std::size_t first,
                   std::size_t n, std::size_t m, const CrossRankSum* cross) {
  std::mt19937 params_rng(5);  // the same γ, β on every rank and in the reference
  BatchNorm layer(shape[0]);
  LayerRig rig(layer, shape, std::max<std::size_t>(n, 1), params_rng);
  const std::size_t row = num_elements(shape);
  StepContext ctx;
  ctx.cross_rank = cross;
  ctx.exact_micro_batch = m;
  Outputs out;
  for (const auto* pass : {&x1, &x2}) {
    const std::vector<float>& dy = pass == &x1 ? dy1 : dy2;
    const std::span<const float> x = std::span(*pass).subspan(first * row, n * row);
    out.y.assign(n * row, 0.0f);
    out.dx.assign(n * row, 0.0f);
    layer.forward(x, out.y, n, ctx);
    layer.backward(x, out.y, std::span(dy).subspan(first * row, n * row), out.dx, n, ctx);
  }
  out.grad_weight = rig.grads[0];
  out.grad_bias = rig.grads[1];
  out.running_mean = rig.buffers[0];
  out.running_var = rig.buffers[1];
  return out;
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i])) return false;
  return true;
}

// max |a − b| / max |b|: a difference relative to the array's scale.
double relative_diff(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size()) return 1e30;
  double worst = 0.0, scale = 1e-30;
  for (std::size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return worst / scale;
}

// Rank r's rows [first, first + n) when micro-batches (counted per rank) are `per_rank`.
struct Slice {
  std::size_t first, n;
};
Slice slice_of(const std::vector<std::size_t>& per_rank, int rank, std::size_t m, std::size_t B) {
  std::size_t before = 0;
  for (int r = 0; r < rank; ++r) before += per_rank[std::size_t(r)];
  const std::size_t first = std::min(before * m, B);
  return {first, std::min(per_rank[std::size_t(rank)] * m, B - first)};
}

// Splits of K micro-batches over N ranks: near-equal, the first ranks empty and the rest on
// the last, all on rank 0, and two random ones (the same on every rank: a fixed seed).
std::vector<std::vector<std::size_t>> splits_of(std::size_t K, int N) {
  const std::size_t n = std::size_t(N);
  std::vector<std::vector<std::size_t>> splits;
  std::vector<std::size_t> even(n), uneven(n, 0), first(n, 0);
  for (std::size_t r = 0; r < n; ++r) even[r] = K * (r + 1) / n - K * r / n;
  uneven[n - 1] = K - K / 3;
  uneven[n / 2] += K / 3;  // at N = 1 both land on rank 0
  first[0] = K;
  splits = {even, uneven, first};
  std::mt19937 rng(77);
  for (int t = 0; t < 2; ++t) {
    std::vector<std::size_t> random(n, 0);
    std::uniform_int_distribution<std::size_t> pick(0, n - 1);
    for (std::size_t k = 0; k < K; ++k) ++random[pick(rng)];
    splits.push_back(random);
  }
  return splits;
}

std::string text(const std::vector<std::size_t>& split) {
  std::string s;
  for (std::size_t k : split) {
    if (!s.empty()) s += ',';
    s += std::to_string(k);
  }
  return s;
}

// Inputs whose channels have a large mean against a small spread (μ²/σ² 2^30 to 2^35), so the
// one-pass double sums lose bits that depend on their grouping, and dy of mixed scales.
std::vector<float> channel_inputs(const Shape& shape, std::size_t B, std::mt19937& rng) {
  const std::size_t row = num_elements(shape), c = shape[0], s = row / c;
  std::vector<float> x = random_normal(B * row, rng, 1.0f);
  for (std::size_t j = 0; j < x.size(); ++j) {
    const std::size_t channel = (j / s) % c;
    x[j] = float(1000.0 * double(channel + 1)) + x[j] * 0.03125f;
  }
  return x;
}

// Inputs and dy where Σdy and Σdy·x̂ cancel: row i + B/2 repeats row i's x, and each
// channel's values alternate between a large dy (±2^16 scale) that row i + B/2 negates and a
// small one (2^-24 scale) of its own. The totals are the small parts, far below the large
// terms, so the double sums' grouping shows in dx (the double path's backward is checked).
void cancelling_inputs(const Shape& shape, std::size_t B, std::mt19937& rng, std::vector<float>& x,
                       std::vector<float>& dy) {
  const std::size_t row = num_elements(shape), half = B / 2;
  x = channel_inputs(shape, B, rng);
  dy = random_normal(B * row, rng);
  for (std::size_t i = 0; i < half; ++i)
    for (std::size_t j = 0; j < row; ++j) {
      float& big = dy[i * row + j];
      x[(i + half) * row + j] = x[i * row + j];
      if (j % 2 == 0) {
        big *= 65536.0f;
        dy[(i + half) * row + j] = -big;
      } else {
        big = std::ldexp(big, -24);
        dy[(i + half) * row + j] = std::ldexp(dy[(i + half) * row + j], -24);
      }
    }
}

}  // namespace

TEST_CASE("BatchNorm exact statistics: any split over N ranks gives one process's bits",
          "[batchnorm][exact]") {
  const collectives::Communicator world(MPI_COMM_WORLD);
  const WorldSum world_sum(world);
  const int N = world.size(), rank = world.rank();
  struct Case {
    Shape shape;
    std::size_t B, m;
    bool cancelling;  // the second pass's dy and x from cancelling_inputs
  };
  // (n, C, H, W) with m = 3 and a short last micro-batch (B = 22: 7 of 3, then 1), (n, C)
  // with m = 4, and (n, C, S) = (24, 2, 2) with m = 4 and cancelling sums in backward.
  const Case cases[] = {{{3, 2, 2}, 22, 3, false}, {{5}, 32, 4, false}, {{2, 2}, 24, 4, true}};
  Facts facts;
  bool forward_differs = false, backward_differs = false;  // the double path, some split
  std::mt19937 rng(2026);                                  // the same data on every rank
  for (const Case& cs : cases) {
    const std::size_t row = num_elements(cs.shape), K = (cs.B + cs.m - 1) / cs.m;
    const std::vector<float> x1 = channel_inputs(cs.shape, cs.B, rng);
    const std::vector<float> dy1 = random_normal(cs.B * row, rng);
    std::vector<float> x2 = channel_inputs(cs.shape, cs.B, rng);
    std::vector<float> dy2 = random_normal(cs.B * row, rng);
    for (std::size_t j = 0; j < dy2.size(); j += 7) dy2[j] *= 4096.0f;  // mixed scales
    if (cs.cancelling) cancelling_inputs(cs.shape, cs.B, rng, x2, dy2);

    const Outputs one = two_passes(cs.shape, x1, x2, dy1, dy2, 0, cs.B, cs.m, nullptr);
    const Outputs plain = two_passes(cs.shape, x1, x2, dy1, dy2, 0, cs.B, 0, nullptr);
    const std::string shape = to_string(cs.shape);
    // The cancelling sums are known to the double path only to about 2^-14 of themselves.
    const double backward_tolerance = cs.cancelling ? 1e-3 : 1e-5;
    const auto near = [&](const std::vector<float>& a, const std::vector<float>& b,
                          const std::string& what, double tolerance) {
      facts.check(relative_diff(a, b) < tolerance,
                  shape + ": exact " + what +
                      " not within tolerance of the double path, relative " +
                      std::to_string(relative_diff(a, b)));
    };
    near(one.y, plain.y, "y", 1e-5);
    near(one.running_mean, plain.running_mean, "running_mean", 1e-5);
    near(one.running_var, plain.running_var, "running_var", 1e-5);
    near(one.dx, plain.dx, "dx", backward_tolerance);
    near(one.grad_weight, plain.grad_weight, "dγ", backward_tolerance);
    near(one.grad_bias, plain.grad_bias, "dβ", backward_tolerance);

    for (const auto& split : splits_of(K, N)) {
      const Slice mine = slice_of(split, rank, cs.m, cs.B);
      const std::string where = shape + " split " + text(split);
      const Outputs part =
          two_passes(cs.shape, x1, x2, dy1, dy2, mine.first, mine.n, cs.m, &world_sum);
      const auto rows = [&](const std::vector<float>& v) {
        return std::span(v).subspan(mine.first * row, mine.n * row);
      };
      facts.check(same_bits(part.y, rows(one.y)), where + ": y differs from one process");
      facts.check(same_bits(part.dx, rows(one.dx)), where + ": dx differs from one process");
      facts.check(
          same_bits(part.grad_weight, one.grad_weight) && same_bits(part.grad_bias, one.grad_bias),
          where + ": dγ or dβ differs from one process");
      facts.check(same_bits(part.running_mean, one.running_mean) &&
                      same_bits(part.running_var, one.running_var),
                  where + ": running statistics differ from one process");

      // The double SyncBN path, same split, against the one-process double path.
      const Outputs sync =
          two_passes(cs.shape, x1, x2, dy1, dy2, mine.first, mine.n, 0, &world_sum);
      if (!same_bits(sync.y, rows(plain.y)) || !same_bits(sync.running_var, plain.running_var))
        forward_differs = true;
      if (!same_bits(sync.dx, rows(plain.dx))) backward_differs = true;
    }
  }
  forward_differs = !all_ranks(!forward_differs);  // some rank saw a difference
  backward_differs = !all_ranks(!backward_differs);
  if (N > 1)
    facts.check(forward_differs && backward_differs,
                "the double path's forward or backward equals one process at every split");
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("BatchNorm exact statistics: a rank without rows still takes part",
          "[batchnorm][exact]") {
  // Every rank but the last holds nothing: the last one's statistics are the whole batch's.
  const collectives::Communicator world(MPI_COMM_WORLD);
  const WorldSum world_sum(world);
  const Shape shape = {2, 3};
  const std::size_t B = 12, m = 4, row = num_elements(shape);
  std::mt19937 rng(3);
  const std::vector<float> x1 = channel_inputs(shape, B, rng), x2 = channel_inputs(shape, B, rng);
  const std::vector<float> dy1 = random_normal(B * row, rng), dy2 = random_normal(B * row, rng);
  const bool last = world.rank() == world.size() - 1;
  const Outputs one = two_passes(shape, x1, x2, dy1, dy2, 0, B, m, nullptr);
  const Outputs part = two_passes(shape, x1, x2, dy1, dy2, 0, last ? B : 0, m, &world_sum);
  Facts facts;
  facts.check(part.y.size() == (last ? one.y.size() : 0), "wrong output size");
  if (last) facts.check(same_bits(part.y, one.y) && same_bits(part.dx, one.dx), "y or dx differ");
  facts.check(
      same_bits(part.running_var, one.running_var) && same_bits(part.grad_weight, one.grad_weight),
      "running_var or dγ on this rank differ from the whole batch's");
  REQUIRE_ALL_RANKS(facts);
}
