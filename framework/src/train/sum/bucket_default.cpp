// Default bucket cap from an α-β fit (see bucket_default.hpp).
#include "ringtrain/framework/train/bucket_default.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "ringtrain/files/error.hpp"
#include "ringtrain/files/input.hpp"
#include "ringtrain/framework/error.hpp"

namespace ringtrain {

namespace {

// Measured with `mpiexec -n N ringtrain bench allreduce` on the project's 2-core machine, the
// regime from 32 KiB (N=2) or 64 KiB (N=4) to 64 MiB; the runs are in bench/README-allreduce.md.
constexpr collectives::AlphaBeta kFitN2{4.84e-6, 7.24e9};
constexpr collectives::AlphaBeta kFitOversubscribed{20.7e-6, 3.43e9};
constexpr double kBucketScaleBytes = 1024.0 * 1024.0;  // pick the regime that holds this size

}  // namespace

namespace {

// Typed access to the untrusted JSON of a --cost-model file: every value is checked for its
// type and range, and a refusal names the file and the key ("fit.regimes[1].alpha_s").
class CostModelFile {
 public:
  explicit CostModelFile(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void refuse(const std::string& what) const {
    throw UsageError("--cost-model " + file_ + ": " + what);
  }
  // The number at `key` of `object`, finite and within [lo, hi]; `fallback` if absent (none:
  // required).
  double number(const nlohmann::json& object, const std::string& where, const char* key, double lo,
                double hi, std::optional<double> fallback = std::nullopt) const {
    const auto it = object.find(key);
    if (it == object.end()) {
      if (fallback) return *fallback;
      refuse(fmt::format("{}{} is missing", where, key));
    }
    if (!it->is_number())
      refuse(fmt::format("{}{}: expected a number, found {}", where, key, it->type_name()));
    const double value = it->get<double>();
    if (!(value >= lo && value <= hi))
      refuse(fmt::format("{}{} = {}: outside [{}, {}]", where, key, it->dump(), lo, hi));
    return value;
  }
  collectives::AlphaBeta fit(const nlohmann::json& object, const std::string& where) const {
    if (!object.is_object()) refuse(where + ": expected an object");
    return {number(object, where + ".", "alpha_s", 0.0, 1e3),
            number(object, where + ".", "bandwidth_Bps", 1.0, 1e18)};
  }

 private:
  std::string file_;
};

}  // namespace

RingFit ring_fit_for_buckets(const std::string& cost_model_file, int N, bool oversubscribed) {
  if (cost_model_file.empty()) {
    if (oversubscribed)
      return {kFitOversubscribed, "fit of the ring at N=4 on 2 cores (bench/README-allreduce.md)"};
    return {kFitN2, "fit of the ring at N=2 (bench/README-allreduce.md)"};
  }
  const CostModelFile in(cost_model_file);
  constexpr std::size_t kMaxCostModelBytes = std::size_t{16} << 20;
  std::string text;
  try {
    text = files::read_small_file(cost_model_file,
                                  {.max_bytes = kMaxCostModelBytes, .follow_symlinks = true});
  } catch (const files::FileError& e) {
    in.refuse(e.reason());
  }
  const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("fit"))
    in.refuse("not the JSON of `ringtrain bench allreduce --json` (no \"fit\")");
  const nlohmann::json& fit = doc["fit"];
  collectives::AlphaBeta model = in.fit(fit, "fit");
  std::string regime = "single fit";
  if (fit.contains("regimes")) {
    const nlohmann::json& regimes = fit["regimes"];
    if (!regimes.is_array()) in.refuse("fit.regimes: expected an array");
    // Every regime checked; the last one that holds 1 MiB is used, else the last one.
    std::optional<std::size_t> chosen;
    std::vector<std::pair<double, double>> spans;
    std::vector<collectives::AlphaBeta> fits;
    for (std::size_t i = 0; i < regimes.size(); ++i) {
      const std::string where = fmt::format("fit.regimes[{}]", i);
      fits.push_back(in.fit(regimes[i], where));
      spans.emplace_back(in.number(regimes[i], where + ".", "from_bytes", 0.0, 1e18, 0.0),
                         in.number(regimes[i], where + ".", "to_bytes", 0.0, 1e18, 0.0));
      if (spans.back().first <= kBucketScaleBytes && kBucketScaleBytes <= spans.back().second)
        chosen = i;
    }
    if (!fits.empty()) {
      const std::size_t i = chosen.value_or(fits.size() - 1);
      model = fits[i];
      regime = fmt::format("regime {:.0f} B .. {:.0f} B", spans[i].first, spans[i].second);
    }
  }
  const int measured_n =
      static_cast<int>(in.number(doc, "", "world_size", 0.0, double(1 << 20), 0.0));
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
