// Default bucket cap from an α-β fit (see bucket_default.hpp).
#include "ringtrain/framework/train/bucket_default.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ringtrain/framework/error.hpp"

namespace ringtrain {

namespace {

// Measured with `mpiexec -n N ringtrain bench allreduce` on the project's 2-core machine, the
// regime from 32 KiB (N=2) or 64 KiB (N=4) to 64 MiB; the runs are in bench/README-allreduce.md.
constexpr collectives::AlphaBeta kFitN2{4.84e-6, 7.24e9};
constexpr collectives::AlphaBeta kFitOversubscribed{20.7e-6, 3.43e9};
constexpr double kBucketScaleBytes = 1024.0 * 1024.0;  // pick the regime that holds this size

}  // namespace

RingFit ring_fit_for_buckets(const std::string& cost_model_file, int N, bool oversubscribed) {
  if (cost_model_file.empty()) {
    if (oversubscribed)
      return {kFitOversubscribed,
              "fit of the ring at N=4 on 2 cores (bench/README-allreduce.md)"};
    return {kFitN2, "fit of the ring at N=2 (bench/README-allreduce.md)"};
  }
  std::ifstream in(cost_model_file);
  const nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
  if (!in.good() && !in.eof())
    throw UsageError("--cost-model " + cost_model_file + ": cannot read the file");
  if (doc.is_discarded() || !doc.contains("fit") || !doc["fit"].is_object())
    throw UsageError("--cost-model " + cost_model_file +
                     ": not the JSON of `ringtrain bench allreduce --json` (no \"fit\")");
  const nlohmann::json& fit = doc["fit"];
  auto read = [&](const nlohmann::json& j) {
    if (!j.contains("alpha_s") || !j.contains("bandwidth_Bps") || !j["alpha_s"].is_number() ||
        !j["bandwidth_Bps"].is_number())
      throw UsageError("--cost-model " + cost_model_file +
                       ": a fit without alpha_s and bandwidth_Bps");
    return collectives::AlphaBeta{j["alpha_s"].get<double>(), j["bandwidth_Bps"].get<double>()};
  };
  collectives::AlphaBeta model = read(fit);
  std::string regime = "single fit";
  if (fit.contains("regimes") && fit["regimes"].is_array() && !fit["regimes"].empty()) {
    const nlohmann::json* chosen = &fit["regimes"].back();
    for (const auto& r : fit["regimes"])
      if (r.value("from_bytes", 0.0) <= kBucketScaleBytes &&
          kBucketScaleBytes <= r.value("to_bytes", 0.0))
        chosen = &r;
    model = read(*chosen);
    regime = fmt::format("regime {:.0f} B .. {:.0f} B", chosen->value("from_bytes", 0.0),
                         chosen->value("to_bytes", 0.0));
  }
  if (!(model.alpha_s >= 0) || !(model.bandwidth_Bps > 0))
    throw UsageError("--cost-model " + cost_model_file + ": alpha must be >= 0 and B > 0");
  const int measured_n = doc.value("world_size", 0);
  return {model, fmt::format("fit in {} ({}, measured at N={}{})", cost_model_file, regime,
                             measured_n, measured_n == N ? "" : fmt::format(", used at N={}", N))};
}

collectives::BucketChoice default_bucket_choice(const RingFit& fit, int N, std::size_t total_bytes,
                                                bool overlap) {
  if (N > 1 && !overlap)
    return {std::max<std::size_t>(total_bytes, sizeof(float)),
            "overlap off: nothing to hide a ring behind, so one bucket (the fewest ring startups "
            "and one optimizer pass)"};
  collectives::BucketChoice choice = collectives::default_bucket_cap(fit.model, N, total_bytes);
  if (N > 1) choice.reason += "; " + fit.source;
  return choice;
}

}  // namespace ringtrain
