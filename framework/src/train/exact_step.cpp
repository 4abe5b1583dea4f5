// The exact gradient of `--reduction exact` (exact_step.hpp) and the layers it supports.
#include "ringtrain/framework/train/exact_step.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ringtrain/framework/error.hpp"

namespace ringtrain {
namespace {

// Block sizes of the accumulator: one per tensor, in buffer order (entries are contiguous).
std::vector<std::size_t> tensor_blocks(const ParameterStore& params) {
  std::vector<std::size_t> sizes;
  std::size_t next = 0;
  for (const ParameterEntry& e : params.entries()) {
    if (e.offset != next)
      throw Error(
          fmt::format("exact sum: parameter {} starts at {}, expected {}", e.name, e.offset, next));
    sizes.push_back(e.size);
    next += e.size;
  }
  if (next != params.num_elements())
    throw Error(
        fmt::format("exact sum: tensors cover {} of {} parameters", next, params.num_elements()));
  return sizes;
}

}  // namespace

// The layers whose micro-batch gradient depends on its samples and its row count alone
// (exact_step.hpp, "Layers"); BatchNorm's statistics are not yet.
void check_exact_layers(const Sequential& model) {
  static const std::vector<std::string> kSupported = {"linear",    "conv2d",  "maxpool2d",
                                                      "relu",      "flatten", "dropout"};
  for (std::size_t i = 0; i < model.num_layers(); ++i) {
    const std::string kind = model.layer(i).kind();
    if (std::find(kSupported.begin(), kSupported.end(), kind) == kSupported.end())
      throw UsageError(fmt::format(
          "--reduction exact: layer layers.{}.{} is not supported by the exact step yet "
          "(supported: {}); use --reduction sum-scaled",
          i, kind, fmt::join(kSupported, ", ")));
  }
}

ExactGradient::ExactGradient(const ParameterStore& params) : sum_(tensor_blocks(params)) {}

void ExactGradient::poison() {
  if (sum_.size() == 0) return;
  sum_.flags()[0] |= collectives::ExactSum::kSawNan;
  sum_.set_non_finite(true);
}

bool ExactGradient::sum_into(const collectives::Communicator& comm, std::span<float> gradient) {
  collectives::allreduce_exact(comm, sum_);
  sum_.to_float(gradient);
  collectives::allreduce_exact(comm, loss_);
  float loss = 0.0f;
  loss_.to_float(std::span(&loss, 1));
  loss_total_ = loss;
  return std::all_of(gradient.begin(), gradient.end(), [](float g) { return std::isfinite(g); });
}

}  // namespace ringtrain
