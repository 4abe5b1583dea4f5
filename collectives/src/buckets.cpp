// Bucket plan and the default cap (see buckets.hpp).
#include "ringtrain/collectives/buckets.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace ringtrain::collectives {

namespace {

std::string human_bytes(double bytes) {
  char text[32];
  if (bytes >= 1024.0 * 1024.0)
    std::snprintf(text, sizeof text, "%.3g MiB", bytes / (1024.0 * 1024.0));
  else if (bytes >= 1024.0)
    std::snprintf(text, sizeof text, "%.3g KiB", bytes / 1024.0);
  else
    std::snprintf(text, sizeof text, "%.0f B", bytes);
  return text;
}

}  // namespace

std::vector<Bucket> plan_buckets(std::span<const std::size_t> parameter_elements,
                                 std::size_t cap_bytes) {
  if (cap_bytes < sizeof(float))
    throw std::invalid_argument("bucket cap of " + std::to_string(cap_bytes) +
                                " bytes holds no float; use at least 4");
  const std::size_t cap = cap_bytes / sizeof(float);  // floats
  std::size_t end = 0;                                // the buffer's end: Σ of all sizes
  for (std::size_t n : parameter_elements) end += n;

  std::vector<Bucket> buckets;
  Bucket open;  // grows towards the start of the buffer; empty while parameters == 0
  for (std::size_t i = parameter_elements.size(); i-- > 0;) {
    const std::size_t n = parameter_elements[i];
    if (open.parameters > 0 && open.elements + n > cap) {
      buckets.push_back(open);
      open = Bucket{};
    }
    end -= n;  // parameter i occupies [end, end + n)
    open.offset = end;
    open.elements += n;
    open.first_parameter = i;
    ++open.parameters;
  }
  if (open.parameters > 0) buckets.push_back(open);
  return buckets;
}

BucketChoice default_bucket_cap(const AlphaBeta& model, int N, std::size_t total_bytes,
                                double max_fixed_share) {
  BucketChoice choice;
  if (N <= 1) {
    choice.cap_bytes = std::max<std::size_t>(total_bytes, sizeof(float));
    choice.reason = "one rank: nothing is reduced, one bucket";
    return choice;
  }
  const double s = max_fixed_share;
  const double least = (1.0 - s) / s * model.alpha_s * N * model.bandwidth_Bps;  // bytes
  std::size_t cap = 4096;  // below a page a bucket is latency and nothing else
  while (double(cap) < least && cap < (std::size_t{1} << 40)) cap *= 2;
  choice.cap_bytes = cap;
  char text[256];
  std::snprintf(text, sizeof text,
                "smallest power of two (>= 4 KiB) whose fixed cost 2(N-1)alpha is <= %.0f %% of "
                "its ring time: M >= %.0f alpha N B = %s at N = %d, alpha = %.3g us, B = %.3g GB/s",
                100.0 * s, (1.0 - s) / s, human_bytes(least).c_str(), N, model.alpha_s * 1e6,
                model.bandwidth_Bps / 1e9);
  choice.reason = text;
  return choice;
}

}  // namespace ringtrain::collectives
