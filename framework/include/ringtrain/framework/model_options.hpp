// ModelOptions: what a model of models/ is built with besides its layer list: the edits its
// flags make to a built-in spec (the mlp's hidden widths, dropout), the convolutions'
// algorithm, and the data's shapes (models/registry.hpp builds from them). The training
// configuration becomes ModelOptions in the run plan (train/run_plan.hpp: model_options), so
// that a model never needs to know the trainer's options.
#pragma once

#include <cstddef>
#include <vector>

#include "ringtrain/framework/layers/conv2d.hpp"
#include "ringtrain/framework/tensor.hpp"

namespace ringtrain {

struct ModelOptions {
  std::vector<std::size_t> mlp_hidden = {1024, 1024};  // hidden widths of `mlp`
  float dropout = 0.0f;                                // 0: no Dropout layers
  // The convolutions: kAuto lets Conv2d choose (Winograd for 5x5 from 8 channels).
  Conv2d::Algorithm conv_algorithm = Conv2d::Algorithm::kAuto;
  Shape input = {1, 28, 28};  // per-sample input shape
  std::size_t classes = 10;   // outputs: logits, or regression targets
};

}  // namespace ringtrain
