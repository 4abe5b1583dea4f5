// Error feedback (error_feedback.hpp) on a fixed gradient stream, 100 steps, at N = 1..4: the
// running sum of the bf16 allreduce's results with feedback stays within the header's bound of
// the running sum an fp32 wire gives (one step's bf16 error plus fp32-level error per step),
// and without feedback it does not: the stream is a persistent gradient plus step-to-step
// changes below bf16's resolution, so the losses of a step repeat and add up. The measured
// ratio of the two distances is printed with the verdict. Also: add_to hands the residual on
// exactly once, and sizes are checked.
#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "mpi_test.hpp"
#include "random_floats.hpp"
#include "ringtrain/collectives/collectives.hpp"

using namespace ringtrain::collectives;
using ringtrain::testing::Facts;

namespace {

// Rank r's gradient at step k: persistent part plus a change 2^-12 of its size.
float gradient(int r, int k, std::size_t i) {
  const float persistent =
      ringtrain::testing::random_float(static_cast<std::uint64_t>(r) << 40 ^ i);
  const float change =
      std::ldexp(ringtrain::testing::random_float(static_cast<std::uint64_t>(r + 64) << 40 ^
                                                  static_cast<std::uint64_t>(k) << 24 ^ i),
                 -12);
  return persistent + change * std::fabs(persistent);
}

std::vector<float> gradients(int r, int k, std::size_t M) {
  std::vector<float> g(M);
  for (std::size_t i = 0; i < M; ++i) g[i] = gradient(r, k, i);
  return g;
}

// Σ over ranks of |x|, per element, in fp64. Collective.
std::vector<double> sum_of_magnitudes(const Communicator& comm, std::span<const float> x) {
  std::vector<double> sum(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) sum[i] = std::fabs(x[i]);
  MPI_Allreduce(MPI_IN_PLACE, sum.data(), static_cast<int>(sum.size()), MPI_DOUBLE, MPI_SUM,
                comm.handle());
  return sum;
}

}  // namespace

TEST_CASE("error feedback: 100 steps of a bf16 wire track the fp32 wire's running sum") {
  Communicator comm;
  const int N = comm.size(), r = comm.rank();
  const std::size_t M = 2048 + static_cast<std::size_t>(N);
  const int K = 100;
  const double u = std::ldexp(1.0, -8), v = std::ldexp(1.0, -24);
  const double beta = bf16_allreduce_error_bound(N);
  RingOptions fp32, bf16;
  fp32.segment_bytes = bf16.segment_bytes = 1024;  // several segments per chunk
  bf16.wire = Wire::kBf16;

  ErrorFeedback feedback(M);
  RingTransfer transfer;
  std::vector<double> sum_fp32(M), sum_plain(M), sum_feedback(M), per_step_slack(M);
  std::vector<double> last_magnitudes;
  for (int k = 0; k < K; ++k) {
    std::vector<float> exact_wire = gradients(r, k, M), plain = exact_wire, fed = exact_wire;
    const std::vector<double> g_magnitudes = sum_of_magnitudes(comm, exact_wire);
    allreduce_sum(comm, exact_wire, fp32);
    allreduce_sum(comm, plain, bf16);
    feedback.add_to(fed);
    last_magnitudes = sum_of_magnitudes(comm, fed);  // X_k of the header
    transfer.start(comm, fed, Collective::kAllreduce, bf16, feedback.residual());
    transfer.wait(bf16.wait);
    for (std::size_t i = 0; i < M; ++i) {
      sum_fp32[i] += exact_wire[i];
      sum_plain[i] += plain[i];
      sum_feedback[i] += fed[i];
      // fp32-level error of this step: the feedback run's (header) and the fp32 wire's own.
      per_step_slack[i] +=
          ((2 * N - 1) * last_magnitudes[i] + (N - 1) * g_magnitudes[i]) * v * (1 + beta);
    }
  }

  double worst_feedback = 0, worst_plain = 0;  // largest distance / bound over elements
  double distance_feedback = 0, distance_plain = 0;
  for (std::size_t i = 0; i < M; ++i) {
    const double bound = N * u * (1 + beta) * last_magnitudes[i] + per_step_slack[i];
    const double fed = std::fabs(sum_feedback[i] - sum_fp32[i]);
    const double plain = std::fabs(sum_plain[i] - sum_fp32[i]);
    worst_feedback = std::max(worst_feedback, fed / bound);
    worst_plain = std::max(worst_plain, plain / bound);
    distance_feedback = std::max(distance_feedback, fed);
    distance_plain = std::max(distance_plain, plain);
  }
  const std::string measured =
      "largest distance from the fp32 running sum: " + std::to_string(distance_plain) +
      " without feedback, " + std::to_string(distance_feedback) + " with (ratio " +
      std::to_string(distance_plain / std::max(distance_feedback, 1e-300)) +
      "); as a fraction of the bound: " + std::to_string(worst_plain) + " and " +
      std::to_string(worst_feedback);
  Facts facts;
  facts.check(worst_feedback <= 1.0, "feedback beyond the bound: " + measured);
  if (N > 1) facts.check(worst_plain > 1.0, "no feedback stays within the bound: " + measured);
  if (r == 0 && N > 1) WARN(measured);
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("error feedback: the residual is handed on once, part by part; sizes are checked") {
  ErrorFeedback feedback(3);
  std::vector<float> saved{0.5f, -0.25f, 0.125f};
  feedback.restore(saved);
  std::vector<float> tail{1.0f, 1.0f};
  feedback.add_to(tail, 1);  // elements 1 and 2 only
  CHECK(tail == std::vector<float>{0.75f, 1.125f});
  std::vector<float> g{1.0f, 1.0f, 1.0f};
  feedback.add_to(g);  // element 0 is all that is left
  CHECK(g == std::vector<float>{1.5f, 1.0f, 1.0f});
  feedback.add_to(g);  // nothing left to hand on
  CHECK(g == std::vector<float>{1.5f, 1.0f, 1.0f});
  feedback.restore(saved);
  feedback.clear();
  feedback.add_to(g);
  CHECK(g == std::vector<float>{1.5f, 1.0f, 1.0f});
  std::vector<float> wrong(2);
  CHECK_THROWS_AS(feedback.add_to(wrong, 2), CollectiveError);
  CHECK_THROWS_AS(feedback.add_to(g, 1), CollectiveError);
  CHECK_THROWS_AS(feedback.restore(wrong), CollectiveError);
}
