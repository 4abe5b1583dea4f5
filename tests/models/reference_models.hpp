// The built-in models as their hand-written builders made them before they became spec
// files: the reference that the spec-built models must equal bit for bit.
#pragma once

#include <memory>

#include "ringtrain/framework/layers/batchnorm.hpp"
#include "ringtrain/framework/layers/dropout.hpp"
#include "ringtrain/framework/layers/flatten.hpp"
#include "ringtrain/framework/layers/linear.hpp"
#include "ringtrain/framework/layers/maxpool2d.hpp"
#include "ringtrain/framework/layers/relu.hpp"
#include "ringtrain/models/registry.hpp"

namespace ringtrain::testing {

// The mlp builder as it was written by hand.
inline std::unique_ptr<Sequential> reference_mlp(const models::ModelOptions& options) {
  auto model = std::make_unique<Sequential>();
  std::size_t in = num_elements(options.input);
  for (std::size_t width : options.mlp_hidden) {
    model->add(std::make_unique<Linear>(in, width));
    model->add(std::make_unique<ReLU>());
    if (options.dropout > 0.0f) model->add(std::make_unique<Dropout>(options.dropout));
    in = width;
  }
  model->add(std::make_unique<Linear>(in, options.classes));
  return model;
}

// The cnn and cnn-bn builder as it was written by hand.
inline std::unique_ptr<Sequential> reference_cnn(const models::ModelOptions& options,
                                                 bool batch_norm) {
  const Shape& in = options.input;
  auto model = std::make_unique<Sequential>();
  const Conv2d::Algorithm algorithm = options.conv_algorithm;
  model->add(std::make_unique<Conv2d>(in[0], 32, 5, 1, 2, algorithm));
  if (batch_norm) model->add(std::make_unique<BatchNorm>(32));
  model->add(std::make_unique<ReLU>());
  model->add(std::make_unique<MaxPool2d>(2));
  model->add(std::make_unique<Conv2d>(32, 64, 5, 1, 2, algorithm));
  if (batch_norm) model->add(std::make_unique<BatchNorm>(64));
  model->add(std::make_unique<ReLU>());
  model->add(std::make_unique<MaxPool2d>(2));
  model->add(std::make_unique<Flatten>());
  model->add(std::make_unique<Linear>(64 * (in[1] / 4) * (in[2] / 4), 1024));
  model->add(std::make_unique<ReLU>());
  if (options.dropout > 0.0f) model->add(std::make_unique<Dropout>(options.dropout));
  model->add(std::make_unique<Linear>(1024, options.classes));
  return model;
}

}  // namespace ringtrain::testing
