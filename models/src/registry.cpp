// The model zoo: each model is a few lines of layers.
#include "ringtrain/models/registry.hpp"

#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/layers/batchnorm.hpp"
#include "ringtrain/framework/layers/conv2d.hpp"
#include "ringtrain/framework/layers/dropout.hpp"
#include "ringtrain/framework/layers/flatten.hpp"
#include "ringtrain/framework/layers/linear.hpp"
#include "ringtrain/framework/layers/maxpool2d.hpp"
#include "ringtrain/framework/layers/relu.hpp"

namespace ringtrain::models {
namespace {

std::unique_ptr<Sequential> mlp(const ModelOptions& options) {
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

// (1, 28, 28) → conv → (32, 28, 28) → pool → (32, 14, 14) → conv → (64, 14, 14)
//             → pool → (64, 7, 7) → flatten 3136 → 1024 → 10
// (C, H, W) in general: the padded 5x5 convolutions keep H, W; each pool floors them by 2.
std::unique_ptr<Sequential> cnn(const ModelOptions& options, bool batch_norm) {
  const Shape& in = options.input;
  if (in.size() != 3 || in[1] < 4 || in[2] < 4)
    throw UsageError("model cnn takes samples of shape (C, H, W) with H, W >= 4, not " +
                     to_string(in) + "; store x as (n, C, H, W) or choose --model mlp");
  auto model = std::make_unique<Sequential>();
  const Conv2d::Algorithm algorithm = options.conv_algorithm;
  // kAuto: conv1 (one input channel) stays on im2col, conv2 runs by Winograd
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

}  // namespace

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names = {"mlp", "cnn", "cnn-bn"};
  return names;
}

std::unique_ptr<Sequential> make_model(const std::string& name, const ModelOptions& options) {
  if (name == "mlp") return mlp(options);
  if (name == "cnn") return cnn(options, false);
  if (name == "cnn-bn") return cnn(options, true);
  throw UsageError("unknown model '" + name + "': choose mlp, cnn or cnn-bn");
}

std::unique_ptr<Sequential> make_model(const TrainConfig& config) {
  const ModelOptions fashion_mnist;
  return make_model(config, fashion_mnist.input, fashion_mnist.classes);
}

std::unique_ptr<Sequential> make_model(const TrainConfig& config, const Shape& input,
                                       std::size_t classes) {
  ModelOptions options;
  options.mlp_hidden = parse_size_list(config.mlp_hidden, "--mlp-hidden");
  options.dropout = config.dropout;
  options.conv_algorithm = config.conv_algorithm;
  options.input = input;
  options.classes = classes;
  return make_model(config.model, options);
}

Shape input_shape() {
  return ModelOptions{}.input;
}

bool has_batch_norm(const std::string& name) {
  return name == "cnn-bn";
}

}  // namespace ringtrain::models
