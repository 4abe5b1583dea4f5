// Shape inference for model specs (spec.hpp): each layer's output from the one before, and
// the caps, checked before anything is allocated. Saturating arithmetic: a product that does
// not fit in 64 bits becomes SIZE_MAX, which every cap refuses.
//
//   conv2d     (C, H, W) -> (out, Ho, Wo),  Ho = (H + 2·padding - kernel) / stride + 1
//              parameters out·C·k·k + out
//   maxpool2d  (C, H, W) -> (C, Ho, Wo),    Ho = (H - kernel) / stride + 1
//   batchnorm  (C) or (C, H, W), unchanged; parameters 2·C
//   linear     any shape of D elements -> (out); parameters out·D + out
//   flatten    any shape of D elements -> (D);  relu, dropout: unchanged
#include <fmt/format.h>

#include <algorithm>

#include "ringtrain/framework/error.hpp"
#include "ringtrain/models/spec.hpp"

namespace ringtrain::models {
namespace {

// a·b, or SIZE_MAX when it does not fit: every cap below it then refuses.
std::size_t times(std::size_t a, std::size_t b) {
  std::size_t product = 0;
  return __builtin_mul_overflow(a, b, &product) ? SIZE_MAX : product;
}

std::size_t elements(const Shape& shape) {
  std::size_t count = 1;
  for (std::size_t d : shape) count = times(count, d);
  return count;
}

void require_image(const ModelSpec& spec, std::size_t i, const Shape& in) {
  if (in.size() != 3)
    throw UsageError(
        fmt::format("{}: takes samples of shape (C, H, W), not {}; store x as "
                    "(n, C, H, W) or use a model without {}",
                    layer_location(spec, i), to_string(in), type_name(spec.layers[i].type)));
}

// The layer's window must fit its (C, H, W) input padded by `padding` on each side.
void require_window_fits(const ModelSpec& spec, std::size_t i, const Shape& in,
                         std::size_t padding) {
  const LayerSpec& l = spec.layers[i];
  const std::size_t h = in[1] + 2 * padding, w = in[2] + 2 * padding;
  if (l.kernel > h || l.kernel > w)
    throw UsageError(fmt::format("{}: kernel {} is larger than its input {}{}",
                                 layer_location(spec, i), l.kernel, to_string(in),
                                 padding > 0 ? fmt::format(" padded by {}", padding) : ""));
}

// One layer's output and parameters for input `in` (checks that the input fits).
LayerShape infer_layer(const ModelSpec& spec, std::size_t i, const Shape& in, std::size_t classes) {
  const LayerSpec& l = spec.layers[i];
  switch (l.type) {
    case LayerType::kConv2d: {
      require_image(spec, i, in);
      require_window_fits(spec, i, in, l.padding);
      const std::size_t ho = (in[1] + 2 * l.padding - l.kernel) / l.stride + 1;
      const std::size_t wo = (in[2] + 2 * l.padding - l.kernel) / l.stride + 1;
      const std::size_t patch = times(in[0], times(l.kernel, l.kernel));
      if (times(patch, times(ho, wo)) > kMaxColumns)
        throw UsageError(
            fmt::format("{}: its column matrix (C·k·k = {} by Ho·Wo = {}) exceeds {} "
                        "values",
                        layer_location(spec, i), patch, times(ho, wo), kMaxColumns));
      return {{l.out, ho, wo}, times(l.out, patch) + l.out};
    }
    case LayerType::kMaxPool2d: {
      require_image(spec, i, in);
      require_window_fits(spec, i, in, 0);
      return {{in[0], (in[1] - l.kernel) / l.stride + 1, (in[2] - l.kernel) / l.stride + 1}, 0};
    }
    case LayerType::kBatchNorm:
      if (in.size() != 1 && in.size() != 3)
        throw UsageError(fmt::format("{}: takes samples of shape (C) or (C, H, W), not {}",
                                     layer_location(spec, i), to_string(in)));
      return {in, 2 * in[0]};
    case LayerType::kLinear: {
      const std::size_t out = l.out == kOutClasses ? classes : l.out;
      return {{out}, times(out, elements(in)) + out};
    }
    case LayerType::kFlatten:
      return {{elements(in)}, 0};
    case LayerType::kReLU:
    case LayerType::kDropout:
      break;
  }
  return {in, 0};
}

// The spec's last layer must give one value per class (or per regression target).
void check_last(const ModelSpec& spec, const Shape& output, std::size_t classes,
                std::string_view outputs_name) {
  if (elements(output) == classes) return;
  std::size_t last_linear = spec.layers.size();
  for (std::size_t i = 0; i < spec.layers.size(); ++i)
    if (spec.layers[i].type == LayerType::kLinear) last_linear = i;
  throw UsageError(fmt::format(
      "{}: the model's output {} holds {} values per sample, but the data has {} {}; {}",
      layer_location(spec, spec.layers.size() - 1), to_string(output), elements(output), classes,
      outputs_name,
      last_linear < spec.layers.size()
          ? fmt::format("set out = {} (or \"classes\") in layer {}", classes, last_linear)
          : "end the model with a linear layer of out = \"classes\""));
}

}  // namespace

std::string layer_location(const ModelSpec& spec, std::size_t i) {
  const LayerSpec& l = spec.layers[i];
  return l.line > 0
             ? fmt::format("{}: layer {} ({}, line {})", spec.source, i, type_name(l.type), l.line)
             : fmt::format("{}: layer {} ({})", spec.source, i, type_name(l.type));
}

std::vector<LayerShape> infer_shapes(const ModelSpec& spec, const Shape& input, std::size_t classes,
                                     std::string_view outputs_name) {
  if (spec.layers.empty()) throw UsageError(spec.source + ": the layer list is empty");
  if (input.empty() || elements(input) == 0 || elements(input) > kMaxActivations)
    throw UsageError(fmt::format("{}: samples of shape {} (at most {} values each)", spec.source,
                                 to_string(input), kMaxActivations));
  std::vector<LayerShape> shapes;
  Shape in = input;
  std::size_t activations = 0, parameters = 0;
  for (std::size_t i = 0; i < spec.layers.size(); ++i) {
    LayerShape s = infer_layer(spec, i, in, classes);
    activations = std::min(SIZE_MAX - 1, activations + elements(s.output));
    parameters = std::min(SIZE_MAX - 1, parameters + s.parameters);
    if (activations > kMaxActivations)
      throw UsageError(
          fmt::format("{}: output {}: the layers so far hold {} values per sample, more than {}",
                      layer_location(spec, i), to_string(s.output), activations, kMaxActivations));
    if (parameters > kMaxParameters)
      throw UsageError(fmt::format("{}: the layers so far hold {} parameters, more than {}",
                                   layer_location(spec, i), parameters, kMaxParameters));
    in = s.output;
    shapes.push_back(std::move(s));
  }
  check_last(spec, in, classes, outputs_name);
  return shapes;
}

}  // namespace ringtrain::models
