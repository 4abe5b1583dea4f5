// `ringtrain bench allreduce`, the fit: the α-β model t = 2(N-1)α + 2(N-1)/N · M/B
// (collectives/cost_model.hpp fits it) is fitted to the ring's median times; here are the
// points it is fitted to, the printed table of measured against predicted times with the
// relative residual, and the fit's part of the JSON file (regimes and residuals).
#include <fmt/core.h>

#include <cmath>

#include "bench_allreduce.hpp"

namespace ringtrain::cli::allreduce_bench {

// The ring's medians, the points the α-β model is fitted to.
std::vector<coll::Sample> ring_samples(const std::vector<Row>& rows) {
  std::vector<coll::Sample> samples;
  for (const Row& r : rows)
    if (r.impl == "ring") samples.push_back({static_cast<double>(r.bytes), r.median_s});
  return samples;
}

void print_fit(const coll::CostFit& fit, const std::vector<coll::Sample>& samples) {
  fmt::print(
      "\nalpha-beta model t = 2(N-1)a + 2(N-1)/N M/B, fitted to the ring "
      "(least squares on relative error):\n  {}\n",
      fit.note);
  if (fit.residuals.empty()) return;
  fmt::print("{:>10} {:>12} {:>12} {:>9}\n", "size", "measured ms", "model ms", "residual");
  for (std::size_t i = 0; i < samples.size(); ++i)
    fmt::print("{:>10} {:>12.4f} {:>12.4f} {:>8.1f}%\n", human(samples[i].bytes),
               samples[i].seconds * 1e3, fit.predicted_s[i] * 1e3, 100 * fit.residuals[i]);
}

nlohmann::json fit_json(const coll::CostFit& fit, const std::vector<coll::Sample>& samples) {
  auto bandwidth_json = [](double b) {
    return std::isfinite(b) ? nlohmann::json(b) : nlohmann::json(nullptr);
  };
  nlohmann::json json = {{"model", "t = 2(N-1)*alpha + 2(N-1)/N * bytes / bandwidth"},
                         {"alpha_s", fit.single.alpha_s},
                         {"bandwidth_Bps", bandwidth_json(fit.single.bandwidth_Bps)},
                         {"split", fit.split},
                         {"note", fit.note},
                         {"regimes", nlohmann::json::array()},
                         {"residuals", nlohmann::json::array()}};
  for (const coll::Regime& g : fit.regimes)
    json["regimes"].push_back({{"from_bytes", g.from_bytes},
                               {"to_bytes", g.to_bytes},
                               {"alpha_s", g.model.alpha_s},
                               {"bandwidth_Bps", bandwidth_json(g.model.bandwidth_Bps)}});
  for (std::size_t i = 0; i < samples.size() && i < fit.residuals.size(); ++i)
    json["residuals"].push_back({{"bytes", samples[i].bytes},
                                 {"measured_s", samples[i].seconds},
                                 {"predicted_s", fit.predicted_s[i]},
                                 {"residual", fit.residuals[i]}});
  return json;
}

}  // namespace ringtrain::cli::allreduce_bench
