// The α-β fit on synthetic measurements whose answer is known.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "ringtrain/collectives/cost_model.hpp"

using namespace ringtrain::collectives;

namespace {
std::vector<Sample> synthetic(const AlphaBeta& m, int N, double from, double to) {
  std::vector<Sample> samples;
  for (double bytes = from; bytes <= to; bytes *= 4) samples.push_back({bytes, predict_seconds(m, N, bytes)});
  return samples;
}
}  // namespace

TEST_CASE("predict: t = 2(N-1) alpha + 2(N-1)/N M / B") {
  const AlphaBeta m{10e-6, 1e9};
  CHECK(predict_seconds(m, 4, 0) == Approx(60e-6));
  CHECK(predict_seconds(m, 4, 4e9) == Approx(60e-6 + 6.0 / 4 * 4));
  CHECK(predict_seconds(m, 2, 1e9) == Approx(20e-6 + 1.0));
}

TEST_CASE("exact data: the fit recovers alpha and B") {
  for (int N : {2, 3, 4, 8}) {
    const AlphaBeta truth{7e-6, 3.5e9};
    const auto samples = synthetic(truth, N, 4, 64.0 * 1024 * 1024);
    const AlphaBeta fit = fit_alpha_beta(samples, N);
    CHECK(fit.alpha_s == Approx(truth.alpha_s).epsilon(1e-6));
    CHECK(fit.bandwidth_Bps == Approx(truth.bandwidth_Bps).epsilon(1e-6));
    const CostFit full = fit_cost_model(samples, N);
    CHECK_FALSE(full.split);
    CHECK(full.single_max_residual < 1e-6);
    for (double r : full.residuals) CHECK(std::abs(r) < 1e-6);
  }
}

TEST_CASE("relative error: a 10% error weighs the same at 4 B and at 64 MiB") {
  const AlphaBeta truth{5e-6, 2e9};
  auto samples = synthetic(truth, 2, 4, 64.0 * 1024 * 1024);
  for (std::size_t i = 0; i < samples.size(); ++i) samples[i].seconds *= (i % 2 ? 1.1 : 0.9);
  const CostFit fit = fit_cost_model(samples, 2);
  CHECK_FALSE(fit.split);
  for (double r : fit.residuals) CHECK(std::abs(r) < 0.15);
  CHECK(fit.single.alpha_s == Approx(truth.alpha_s).epsilon(0.1));
  CHECK(fit.single.bandwidth_Bps == Approx(truth.bandwidth_Bps).epsilon(0.1));
}

TEST_CASE("two regimes (a protocol switch at 32 KiB) are found and fitted separately") {
  const AlphaBeta eager{2e-6, 8e9}, rendezvous{40e-6, 3e9};
  auto samples = synthetic(eager, 2, 4, 16384);
  for (const Sample& s : synthetic(rendezvous, 2, 65536, 64.0 * 1024 * 1024)) samples.push_back(s);
  // Input order must not matter.
  std::swap(samples.front(), samples.back());
  const CostFit fit = fit_cost_model(samples, 2);
  REQUIRE(fit.split);
  REQUIRE(fit.regimes.size() == 2);
  CHECK(fit.regimes[0].to_bytes == 16384);
  CHECK(fit.regimes[1].from_bytes == 65536);
  CHECK(fit.regimes[0].model.alpha_s == Approx(eager.alpha_s).epsilon(1e-6));
  CHECK(fit.regimes[1].model.bandwidth_Bps == Approx(rendezvous.bandwidth_Bps).epsilon(1e-6));
  CHECK(fit.single_max_residual > 0.25);
  for (double r : fit.residuals) CHECK(std::abs(r) < 1e-6);
  CHECK(fit.note.find("cannot explain") != std::string::npos);
}

TEST_CASE("three regimes (protocol switch, then data leaving the cache) are found") {
  const AlphaBeta eager{1e-6, 5e9}, cached{10e-6, 14e9}, dram{0, 4e9};
  auto samples = synthetic(eager, 2, 4, 16384);                     // 7 sizes
  for (const Sample& s : synthetic(cached, 2, 65536, 4 << 20)) samples.push_back(s);  // 6
  for (const Sample& s : synthetic(dram, 2, 16 << 20, 256 << 20)) samples.push_back(s);  // 3
  const CostFit fit = fit_cost_model(samples, 2);
  REQUIRE(fit.regimes.size() == 3);
  CHECK(fit.regimes[1].from_bytes == 65536);
  CHECK(fit.regimes[2].from_bytes == 16 << 20);
  CHECK(fit.regimes[2].model.bandwidth_Bps == Approx(dram.bandwidth_Bps).epsilon(1e-6));
  for (double r : fit.residuals) CHECK(std::abs(r) < 1e-6);
  // Capped at two regimes, the best two-way cut is kept.
  CHECK(fit_cost_model(samples, 2, 0.25, 2).regimes.size() == 2);
}

TEST_CASE("bounds: a fit that wants a negative alpha is pinned at alpha = 0") {
  // Pure bandwidth with a fake negative latency would make the free fit negative.
  std::vector<Sample> samples;
  for (double bytes : {1e6, 2e6, 4e6, 8e6}) samples.push_back({bytes, bytes / 1e9 - 1e-5});
  const AlphaBeta fit = fit_alpha_beta(samples, 2);
  CHECK(fit.alpha_s >= 0);
  CHECK(fit.bandwidth_Bps > 0);
  CHECK(std::isfinite(fit.bandwidth_Bps));
}

TEST_CASE("a single size cannot separate alpha from B: one parameter explains it") {
  const std::vector<Sample> samples{{1024, 1e-5}, {1024, 1e-5}};
  const AlphaBeta fit = fit_alpha_beta(samples, 2);
  CHECK(predict_seconds(fit, 2, 1024) == Approx(1e-5));
}

TEST_CASE("N = 1 has nothing to model") {
  const std::vector<Sample> samples{{4, 1e-7}, {1024, 1e-7}};
  const CostFit fit = fit_cost_model(samples, 1);
  CHECK(fit.regimes.empty());
  CHECK_FALSE(fit.note.empty());
}
