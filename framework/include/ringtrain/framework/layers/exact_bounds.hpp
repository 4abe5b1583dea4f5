// Bounds on the terms a layer hands to the exact sum (ExactGradientSink::bound; the reasoning
// is in train/exact_step.hpp, "Bounds").
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace ringtrain::exact_bounds {

// max |v_i| over n floats. NaNs are passed over: a NaN input makes a NaN term, which the sum
// catches itself (the step is skipped); the bound need not see it.
inline float max_abs(const float* v, std::size_t n) {
  float most = 0.0f;
  for (std::size_t i = 0; i < n; ++i) most = std::max(most, std::fabs(v[i]));
  return most;
}

// A bound on a float32 evaluation of a sum of k products a·b with |a| <= A and |b| <= B: the
// exact sum lies within k·A·B, and a GEMM's rounding adds at most γ_k = k·u/(1 − k·u) of
// that, below 1 for k < 2^23 (u = 2^-24). Winograd's transforms add a few γ more. Twice the
// exact bound covers them all, at the cost of one bit of the grid's precision.
inline double sum_of_products(double k, double A, double B) {
  return 2.0 * k * A * B;
}

}  // namespace ringtrain::exact_bounds
