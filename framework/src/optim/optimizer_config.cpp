// validate(OptimizerConfig): the optimizer's configuration values, checked once before any
// state is allocated (and by the options table, before a run writes anything).
#include <fmt/format.h>

#include <cmath>

#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/optim/optimizer.hpp"

namespace ringtrain {
namespace {

// value in [0, 1); written so that NaN fails too.
void require_unit_interval(std::string_view field, float value, std::string_view hint) {
  if (!(value >= 0.0f && value < 1.0f))
    throw UsageError(fmt::format("optimizer {} = {} is outside [0, 1); {}", field, value, hint));
}

}  // namespace

void validate(const OptimizerConfig& config) {
  if (config.name != "sgd" && config.name != "adamw")
    throw UsageError(fmt::format("unknown optimizer '{}'; choose one of: sgd, adamw", config.name));
  if (!(config.weight_decay >= 0.0f) || std::isinf(config.weight_decay))
    throw UsageError(
        fmt::format("optimizer weight_decay = {} must be finite and >= 0", config.weight_decay));
  if (config.name == "sgd") {
    require_unit_interval("momentum", config.momentum, "use 0 for plain SGD, 0.9 is usual");
    if (config.nesterov && config.momentum == 0.0f)
      throw UsageError("optimizer nesterov = true needs momentum > 0 (momentum = 0)");
  } else {
    require_unit_interval("beta1", config.beta1, "0.9 is usual");
    require_unit_interval("beta2", config.beta2, "0.999 is usual");
    if (!(config.eps > 0.0f) || std::isinf(config.eps))
      throw UsageError(
          fmt::format("optimizer eps = {} must be finite and > 0; 1e-8 is usual", config.eps));
  }
}

}  // namespace ringtrain
