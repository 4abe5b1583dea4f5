// α-β fit (see cost_model.hpp).
//
// With x1 = 2(N-1), x2 = 2(N-1)/N · M and β = 1/B the model is linear: t = α·x1 + β·x2.
// Dividing each row by its measured t turns "relative error" into ordinary least squares:
//   minimise Σ (α·a_i + β·b_i - 1)²,   a_i = x1/t_i,  b_i = x2_i/t_i
// whose normal equations are the 2x2 system
//   [Σaa Σab] [α]   [Σa]
//   [Σab Σbb] [β] = [Σb]
#include "ringtrain/collectives/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>

namespace ringtrain::collectives {

double predict_seconds(const AlphaBeta& model, int N, double bytes) {
  const double rounds = 2.0 * (N - 1);
  return rounds * model.alpha_s + rounds / N * bytes / model.bandwidth_Bps;
}

AlphaBeta fit_alpha_beta(std::span<const Sample> samples, int N) {
  double saa = 0, sab = 0, sbb = 0, sa = 0, sb = 0;
  for (const Sample& s : samples) {
    const double a = 2.0 * (N - 1) / s.seconds;
    const double b = 2.0 * (N - 1) / N * s.bytes / s.seconds;
    saa += a * a, sab += a * b, sbb += b * b, sa += a, sb += b;
  }
  double alpha = 0, beta = 0;
  const double det = saa * sbb - sab * sab;
  if (std::abs(det) > 1e-12 * saa * sbb) {
    alpha = (sa * sbb - sb * sab) / det;
    beta = (saa * sb - sab * sa) / det;
  } else {
    alpha = beta = -1;  // degenerate (e.g. one size): fall through to one-parameter fits
  }
  if (alpha < 0 || beta <= 0) {
    // Pin the offending parameter at its bound; the other is then a 1-D least squares.
    const double beta_only = sbb > 0 ? sb / sbb : 0;  // α = 0
    const double alpha_only = saa > 0 ? sa / saa : 0;  // β = 0 (B infinite)
    auto sse = [&](double al, double be) {
      double e = 0;
      for (const Sample& s : samples) {
        const double r = (predict_seconds({al, be > 0 ? 1 / be : INFINITY}, N, s.bytes) -
                          s.seconds) / s.seconds;
        e += r * r;
      }
      return e;
    };
    if (beta_only > 0 && sse(0, beta_only) <= sse(alpha_only, 0)) {
      alpha = 0, beta = beta_only;
    } else {
      alpha = alpha_only, beta = 0;
    }
  }
  return AlphaBeta{alpha, beta > 0 ? 1.0 / beta : INFINITY};
}

namespace {

double squared_error(std::span<const Sample> samples, const AlphaBeta& model, int N) {
  double e = 0;
  for (const Sample& s : samples) {
    const double r = (predict_seconds(model, N, s.bytes) - s.seconds) / s.seconds;
    e += r * r;
  }
  return e;
}

std::string describe(const AlphaBeta& m) {
  char text[96];
  std::snprintf(text, sizeof text, "alpha %.3g us, B %.3g GB/s", m.alpha_s * 1e6,
                m.bandwidth_Bps / 1e9);
  return text;
}

std::string bytes_text(double bytes) {
  char text[32];
  if (bytes >= 1 << 20)
    std::snprintf(text, sizeof text, "%g MiB", bytes / (1 << 20));
  else if (bytes >= 1 << 10)
    std::snprintf(text, sizeof text, "%g KiB", bytes / (1 << 10));
  else
    std::snprintf(text, sizeof text, "%g B", bytes);
  return text;
}

}  // namespace

CostFit fit_cost_model(std::span<const Sample> samples, int N, double split_threshold,
                       std::size_t max_regimes) {
  CostFit fit;
  if (N < 2 || samples.empty()) {
    fit.note = N < 2 ? "N = 1: nothing crosses the wire, no model to fit" : "no samples";
    return fit;
  }
  // Work on the samples sorted by size; report in input order.
  std::vector<std::size_t> order(samples.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](auto a, auto b) { return samples[a].bytes < samples[b].bytes; });
  std::vector<Sample> sorted;
  for (auto i : order) sorted.push_back(samples[i]);
  const std::span<const Sample> all(sorted);

  fit.single = fit_alpha_beta(all, N);
  for (const Sample& s : all)
    fit.single_max_residual = std::max(
        fit.single_max_residual,
        std::abs(predict_seconds(fit.single, N, s.bytes) - s.seconds) / s.seconds);
  fit.regimes = {Regime{all.front().bytes, all.back().bytes, fit.single}};

  if (fit.single_max_residual > split_threshold) {
    // Optimal cut of the sorted samples into k contiguous runs of >= kMinRun samples,
    // by dynamic programming over cut points:
    //   best[k][j] = min over i of best[k-1][i] + error of one fit to samples [i, j)
    // k + 1 regimes replace k only if they at least halve the squared error.
    const std::size_t n = all.size();
    constexpr std::size_t kMinRun = 3;
    constexpr double kNone = std::numeric_limits<double>::infinity();
    auto run_error = [&](std::size_t i, std::size_t j) {
      if (j - i < kMinRun) return kNone;
      if (i > 0 && all[i - 1].bytes == all[i].bytes) return kNone;  // never split one size
      const auto run = all.subspan(i, j - i);
      return squared_error(run, fit_alpha_beta(run, N), N);
    };
    std::vector<std::vector<double>> best(max_regimes + 1, std::vector<double>(n + 1, kNone));
    std::vector<std::vector<std::size_t>> cut(max_regimes + 1, std::vector<std::size_t>(n + 1, 0));
    best[0][0] = 0;
    for (std::size_t k = 1; k <= max_regimes; ++k)
      for (std::size_t j = 1; j <= n; ++j)
        for (std::size_t i = 0; i < j; ++i) {
          if (best[k - 1][i] == kNone) continue;
          const double e = best[k - 1][i] + run_error(i, j);
          if (e < best[k][j]) best[k][j] = e, cut[k][j] = i;
        }
    std::size_t chosen = 1;
    for (std::size_t k = 2; k <= max_regimes; ++k) {
      if (best[k][n] == kNone || best[k][n] > best[chosen][n] / 2) break;
      chosen = k;
    }
    if (chosen > 1) {
      std::vector<Regime> regimes;
      for (std::size_t k = chosen, j = n; k > 0; --k) {
        const std::size_t i = cut[k][j];
        const auto run = all.subspan(i, j - i);
        regimes.insert(regimes.begin(),
                       Regime{run.front().bytes, run.back().bytes, fit_alpha_beta(run, N)});
        j = i;
      }
      fit.regimes = std::move(regimes);
      fit.split = true;
    }
  }

  fit.predicted_s.resize(samples.size());
  fit.residuals.resize(samples.size());
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const Regime* regime = &fit.regimes.front();
    for (const Regime& r : fit.regimes)
      if (samples[i].bytes >= r.from_bytes) regime = &r;
    fit.predicted_s[i] = predict_seconds(regime->model, N, samples[i].bytes);
    fit.residuals[i] = (fit.predicted_s[i] - samples[i].seconds) / samples[i].seconds;
  }

  char worst[32];
  std::snprintf(worst, sizeof worst, "%.0f%%", 100 * fit.single_max_residual);
  if (!fit.split) {
    fit.note = "one alpha-B pair explains all sizes (" + describe(fit.single) +
               "; largest residual " + worst + ")";
  } else {
    fit.note = "one alpha-B pair cannot explain all sizes (largest residual " +
               std::string(worst) + "), so each of " + std::to_string(fit.regimes.size()) +
               " regimes is fitted:";
    for (const Regime& r : fit.regimes)
      fit.note += " " + bytes_text(r.from_bytes) + " .. " + bytes_text(r.to_bytes) + ": " +
                  describe(r.model) + ";";
    fit.note.pop_back();
  }
  return fit;
}

}  // namespace ringtrain::collectives
