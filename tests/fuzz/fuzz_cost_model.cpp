// libFuzzer target: a --cost-model file (the JSON of `ringtrain bench allreduce --json`) from
// untrusted bytes, through ring_fit_for_buckets (framework/src/train/sum/bucket_default.cpp).
// Every outcome but a ringtrain::UsageError or a normal return is a finding; a fit returned
// must be usable (alpha >= 0, B > 0, both finite).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "fuzz_input.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/train/bucket_default.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = ringtrain::fuzz::write_input("cost.json", data, size);
  try {
    const ringtrain::RingFit fit = ringtrain::ring_fit_for_buckets(file, 2, false);
    if (!(fit.model.alpha_s >= 0) || !(fit.model.bandwidth_Bps > 0) ||
        !std::isfinite(fit.model.alpha_s) || !std::isfinite(fit.model.bandwidth_Bps))
      std::abort();
  } catch (const ringtrain::UsageError&) {
  }
  return 0;
}
