// Model specs: a model as a list of layers in TOML, the form of `--model FILE.toml` and of
// the built-in models (models/specs/*.toml, compiled into the library).
//
//   [[layers]]
//   type = "conv2d"      # out, kernel, stride = 1, padding = 0
//   out = 32
//   kernel = 5
//   padding = 2
//   [[layers]]
//   type = "relu"        # relu, flatten, batchnorm: no keys
//   [[layers]]
//   type = "maxpool2d"   # kernel, stride = kernel
//   kernel = 2
//   [[layers]]
//   type = "dropout"     # p in [0, 1)
//   p = 0.25
//   [[layers]]
//   type = "linear"      # out: a width, or "classes" (the data's number of classes, or of
//   out = "classes"      #      regression targets per sample)
//
// Three steps, each one function (and one file in models/src):
//   parse_model_spec   TOML text -> ModelSpec (types, keys, value types and ranges)
//   infer_shapes       ModelSpec + the data's sample shape and classes -> each layer's
//                      output shape and parameter count (shapes, size caps, the last width)
//   build_model        the same checks, then the framework's layers, in the spec's order
// A layer's input sizes are never written in a spec: they follow from the layer before
// (conv2d and batchnorm take C from their input, linear takes all its input's elements).
//
// A spec file is untrusted input. Every refusal is a UsageError of one line that names the
// source, and where it applies the layer (index from 0, type, line in the file) and the key.
// The caps below keep a spec from asking for gigabytes: the trainer plans activations for
// at least 256 rows (evaluation chunks), so a sample's activations are capped at 16 MiB.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ringtrain/framework/layers/conv2d.hpp"
#include "ringtrain/framework/sequential.hpp"

namespace ringtrain::models {

enum class LayerType { kLinear, kReLU, kConv2d, kMaxPool2d, kFlatten, kDropout, kBatchNorm };

// The TOML word of a type: "linear", "relu", "conv2d", ...
std::string_view type_name(LayerType type);

// linear's `out = "classes"`: as many outputs as the data has classes.
inline constexpr std::size_t kOutClasses = 0;

// Caps on what a spec may ask for (each refused with its value and the cap).
inline constexpr std::size_t kMaxSpecFileBytes = std::size_t{1} << 20;  // 1 MiB of TOML
inline constexpr std::size_t kMaxLayers = 256;
inline constexpr std::size_t kMaxWidth = std::size_t{1} << 16;        // out
inline constexpr std::size_t kMaxWindow = std::size_t{1} << 10;       // kernel, stride, padding
inline constexpr std::size_t kMaxActivations = std::size_t{1} << 22;  // per sample, all layers
inline constexpr std::size_t kMaxColumns = std::size_t{1} << 24;      // conv: C·k·k · Ho·Wo
inline constexpr std::size_t kMaxParameters = std::size_t{1} << 26;   // 256 MiB of weights

// One [[layers]] table. Keys a type does not take stay at their defaults here.
struct LayerSpec {
  LayerType type = LayerType::kReLU;
  std::size_t out = 0;      // linear, conv2d: outputs / output channels (linear: kOutClasses)
  std::size_t kernel = 0;   // conv2d, maxpool2d: side of the square window
  std::size_t stride = 0;   // conv2d (default 1), maxpool2d (default: kernel)
  std::size_t padding = 0;  // conv2d: zeros around each image
  float p = 0.0f;           // dropout: probability of dropping an element
  std::size_t line = 0;     // line of its [[layers]] header in the source (0: none)
  bool operator==(const LayerSpec&) const = default;
};

struct ModelSpec {
  std::string source;  // what messages name: a file's path, or "model cnn"
  std::vector<LayerSpec> layers;
};

// Parses a spec. Throws UsageError for a TOML syntax error, a key other than `layers` at the
// top, an empty or missing layer list, more than kMaxLayers layers, an unknown type or key,
// a missing key, a value of the wrong type, or a value out of range (out, kernel, stride in
// [1, cap], padding in [0, kMaxWindow], p in [0, 1)).
ModelSpec parse_model_spec(std::string_view toml_text, const std::string& source);

// Reads and parses the file at `path` (at most kMaxSpecFileBytes). Throws UsageError naming
// the file if it cannot be read or is too large, and as parse_model_spec.
ModelSpec read_model_spec(const std::string& path);

// The spec as TOML in one canonical form: every key written, defaults resolved, no comments.
// parse_model_spec of it gives the same layers (lines aside); the run manifest records it.
std::string to_toml(const ModelSpec& spec);

// Where messages point at layer i: "<source>: layer <i> (<type>, line <L>)".
std::string layer_location(const ModelSpec& spec, std::size_t i);

// What a layer makes of its input.
struct LayerShape {
  Shape output;                // per sample
  std::size_t parameters = 0;  // trained values (weights and biases)
};

// Each layer's output for per-sample input `input` and `classes` classes. Throws UsageError
// (naming source, layer, line) when conv2d or maxpool2d gets a sample that is not (C, H, W),
// batchnorm one that is neither (C) nor (C, H, W), a window is larger than its (padded)
// input, a cap is exceeded, or the last layer's output does not hold `classes` values (the
// message calls them `outputs_name`: "classes", or "regression targets" for float y).
std::vector<LayerShape> infer_shapes(const ModelSpec& spec, const Shape& input, std::size_t classes,
                                     std::string_view outputs_name = "classes");

// The model of `spec` for samples of `input` and `classes` classes, unplanned, its spec
// (to_toml) attached for the run's records. Checks as infer_shapes first. Convolutions run
// by `algorithm` (a forced kWinograd that a convolution cannot take is a UsageError).
// Parameter names follow the spec's order: "layers.<i>.<type>/weight".
std::unique_ptr<Sequential> build_model(const ModelSpec& spec, const Shape& input,
                                        std::size_t classes,
                                        Conv2d::Algorithm algorithm = Conv2d::Algorithm::kAuto,
                                        std::string_view outputs_name = "classes");

// Spec edits that the flags of the built-in models make (registry.hpp):
// An MLP spec ((linear, relu)* then linear) with hidden widths `widths` instead of its own:
// one (linear, relu) pair per width, then its last linear. Throws UsageError for another
// layer pattern.
ModelSpec with_hidden_widths(ModelSpec spec, const std::vector<std::size_t>& widths);
// A dropout layer of probability p after every relu that directly follows a linear layer
// (the hidden layers of mlp and cnn). p = 0 returns the spec unchanged.
ModelSpec with_dropout(ModelSpec spec, float p);

}  // namespace ringtrain::models
