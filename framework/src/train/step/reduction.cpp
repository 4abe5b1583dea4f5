// The reduction convention's scale factors (see reduction.hpp for the derivation).
#include "ringtrain/framework/train/reduction.hpp"

#include "ringtrain/framework/error.hpp"

namespace ringtrain {

Reduction parse_reduction(const std::string& name) {
  if (name == "sum-scaled") return Reduction::kSumScaled;
  if (name == "mean-of-means") return Reduction::kMeanOfMeans;
  if (name == "exact") return Reduction::kExact;
  throw UsageError("--reduction " + name + ": choose sum-scaled, mean-of-means or exact");
}

std::string to_string(Reduction reduction) {
  switch (reduction) {
    case Reduction::kSumScaled:
      return "sum-scaled";
    case Reduction::kMeanOfMeans:
      return "mean-of-means";
    case Reduction::kExact:
      return "exact";
  }
  return "sum-scaled";
}

float loss_scale(Reduction reduction, std::size_t local_samples, std::size_t global_samples,
                 int world_size) {
  switch (reduction) {
    case Reduction::kSumScaled:
    case Reduction::kExact:  // the same convention, summed exactly
      // Σ_r (1/B) Σ_{i∈r} ∇ℓ_i  =  mean over all B samples
      return global_samples == 0 ? 0.0f : 1.0f / static_cast<float>(global_samples);
    case Reduction::kMeanOfMeans:
      // (1/N) Σ_r (1/b_r) Σ_{i∈r} ∇ℓ_i: a rank with no samples contributes a zero "mean"
      return local_samples == 0
                 ? 0.0f
                 : 1.0f / (static_cast<float>(local_samples) * static_cast<float>(world_size));
  }
  return 0.0f;
}

std::string describe(Reduction reduction) {
  if (reduction == Reduction::kSumScaled)
    return "sum-scaled: each rank scales its loss sum by 1/B (B = samples in the global batch "
           "this step) and the ring sums, so the update is the mean gradient over all B samples";
  if (reduction == Reduction::kExact)
    return "exact: sum-scaled (1/B), with every micro-batch's gradient summed exactly "
           "(integer words, exact_sum.hpp) and rounded once, so the update is bitwise the "
           "same for any number of ranks and any split into multiples of the micro-batch";
  return "mean-of-means (WRONG on purpose): each rank averages over its own samples and the "
         "result is averaged over ranks; with unequal local batches this is not the gradient "
         "of the global batch (1 sample with mean 2 and 3 with mean 6 give 4, not 5)";
}

}  // namespace ringtrain
