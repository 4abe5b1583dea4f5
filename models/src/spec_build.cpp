// From a ModelSpec to a model (spec.hpp): the shapes checked by infer_shapes
// (spec_shapes.cpp), then the framework's layers in the spec's order; and the spec edits of
// the built-in models' flags.
#include <fmt/format.h>

#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/layers/batchnorm.hpp"
#include "ringtrain/framework/layers/dropout.hpp"
#include "ringtrain/framework/layers/flatten.hpp"
#include "ringtrain/framework/layers/linear.hpp"
#include "ringtrain/framework/layers/maxpool2d.hpp"
#include "ringtrain/framework/layers/relu.hpp"
#include "ringtrain/models/spec.hpp"

namespace ringtrain::models {
namespace {

std::unique_ptr<Layer> make_layer(const LayerSpec& l, const Shape& in, const Shape& out,
                                  Conv2d::Algorithm algorithm) {
  switch (l.type) {
    case LayerType::kLinear:
      return std::make_unique<Linear>(num_elements(in), out[0]);
    case LayerType::kConv2d:
      return std::make_unique<Conv2d>(in[0], l.out, l.kernel, l.stride, l.padding, algorithm);
    case LayerType::kMaxPool2d:
      return std::make_unique<MaxPool2d>(l.kernel, l.stride);
    case LayerType::kBatchNorm:
      return std::make_unique<BatchNorm>(in[0]);
    case LayerType::kDropout:
      return std::make_unique<Dropout>(l.p);
    case LayerType::kFlatten:
      return std::make_unique<Flatten>();
    case LayerType::kReLU:
      break;
  }
  return std::make_unique<ReLU>();
}

}  // namespace

std::unique_ptr<Sequential> build_model(const ModelSpec& spec, const Shape& input,
                                        std::size_t classes, Conv2d::Algorithm algorithm,
                                        std::string_view outputs_name) {
  const std::vector<LayerShape> shapes = infer_shapes(spec, input, classes, outputs_name);
  auto model = std::make_unique<Sequential>();
  for (std::size_t i = 0; i < spec.layers.size(); ++i) {
    const Shape& in = i == 0 ? input : shapes[i - 1].output;
    try {
      model->add(make_layer(spec.layers[i], in, shapes[i].output, algorithm));
    } catch (const UsageError& e) {  // a forced --conv-algorithm the layer cannot take
      throw UsageError(fmt::format("{}: {}", layer_location(spec, i), e.what()));
    }
  }
  model->set_spec(to_toml(spec));
  return model;
}

ModelSpec with_hidden_widths(ModelSpec spec, const std::vector<std::size_t>& widths) {
  const auto& layers = spec.layers;
  bool mlp = !layers.empty() && layers.size() % 2 == 1;
  for (std::size_t i = 0; mlp && i < layers.size(); ++i)
    mlp = layers[i].type == (i % 2 == 0 ? LayerType::kLinear : LayerType::kReLU);
  if (!mlp)
    throw UsageError(spec.source + ": hidden widths apply only to (linear, relu)* linear models");
  const LayerSpec last = layers.back();
  std::vector<LayerSpec> edited;
  for (std::size_t width : widths) {
    if (width == 0 || width > kMaxWidth)
      throw UsageError(fmt::format("--mlp-hidden {}: widths must be in [1, {}]",
                                   fmt::join(widths, ","), kMaxWidth));
    edited.push_back({.type = LayerType::kLinear, .out = width});
    edited.push_back({.type = LayerType::kReLU});
  }
  edited.push_back(last);
  spec.layers = std::move(edited);
  return spec;
}

ModelSpec with_dropout(ModelSpec spec, float p) {
  if (p == 0.0f) return spec;
  std::vector<LayerSpec> edited;
  for (std::size_t i = 0; i < spec.layers.size(); ++i) {
    edited.push_back(spec.layers[i]);
    if (i > 0 && spec.layers[i].type == LayerType::kReLU &&
        spec.layers[i - 1].type == LayerType::kLinear)
      edited.push_back({.type = LayerType::kDropout, .p = p});
  }
  spec.layers = std::move(edited);
  return spec;
}

}  // namespace ringtrain::models
