// Models by name. The CLI's --model flag and a course's own programs build networks here.
//
//   mlp      784 → 1024 → 1024 → 10, ReLU              (widths configurable)
//   cnn      conv5x5 1→32 pad 2, ReLU, maxpool 2, conv5x5 32→64 pad 2, ReLU, maxpool 2,
//            flatten, fc 3136→1024, ReLU, fc 1024→10
//   cnn-bn   cnn with BatchNorm after each convolution
//
// By default every model takes Fashion-MNIST images, (1, 28, 28) per sample, and returns 10
// logits; ModelOptions::input and ::classes fit it to another dataset (--data): mlp takes any
// sample shape (its first layer takes all the sample's elements), cnn and cnn-bn take (C, H, W)
// with H, W >= 4 (their first linear layer takes 64 x floor(H/4) x floor(W/4)).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ringtrain/framework/layers/conv2d.hpp"
#include "ringtrain/framework/sequential.hpp"
#include "ringtrain/framework/train/config.hpp"

namespace ringtrain::models {

struct ModelOptions {
  std::vector<std::size_t> mlp_hidden = {1024, 1024};  // hidden widths of `mlp`
  float dropout = 0.0f;                                // 0: no Dropout layers
  // The cnn's 5x5 convolutions: kAuto lets Conv2d choose (Winograd from 8 channels).
  Conv2d::Algorithm conv_algorithm = Conv2d::Algorithm::kAuto;
  Shape input = {1, 28, 28};  // per-sample input shape
  std::size_t classes = 10;   // logits
};

// Names accepted by make_model, in a stable order (for help texts and errors).
const std::vector<std::string>& model_names();

// A new, unplanned model. Throws UsageError naming the known models for an unknown name, and
// when the model cannot take options.input (cnn on samples that are not (C, H, W) of H, W >= 4).
std::unique_ptr<Sequential> make_model(const std::string& name, const ModelOptions& options = {});

// The model a training configuration names (--model, --mlp-hidden, --dropout), for
// Fashion-MNIST, or for samples of `input` shape and `classes` classes.
std::unique_ptr<Sequential> make_model(const TrainConfig& config);
std::unique_ptr<Sequential> make_model(const TrainConfig& config, const Shape& input,
                                       std::size_t classes);

// Per-sample input shape of every model here: (1, 28, 28).
Shape input_shape();

// True if the model contains a batch-dependent layer (BatchNorm).
bool has_batch_norm(const std::string& name);

}  // namespace ringtrain::models
