// Sequential: a model as a list of layers applied in order, with all parameters in one
// flat buffer (parameters.hpp) and all activations planned once.
//
//   x ─ layer 0 ─ a0 ─ layer 1 ─ a1 ─ ... ─ layer L-1 ─ logits
//   backward runs L-1 ... 0, ping-ponging dy/dx between two buffers; after layer i's
//   backward its parameter gradients are final and on_layer_done(i) is called, so a
//   bucket of gradients can start its reduction while earlier layers still compute.
//   forward calls its on_layer_done(i) after layer i too (the trainer times layers).
//
// Parameter names: "layers.<i>.<kind>/<name>", e.g. "layers.0.linear/weight".
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ringtrain/framework/layer.hpp"
#include "ringtrain/framework/parameters.hpp"

namespace ringtrain {

class Sequential {
 public:
  Sequential() = default;
  Sequential(const Sequential&) = delete;
  Sequential& operator=(const Sequential&) = delete;

  void add(std::unique_ptr<Layer> layer);

  // Plans every layer for per-sample input shape `input` and batches up to max_batch rows;
  // allocates parameters, gradients, buffers and activations. Call once, before use.
  void plan(const Shape& input, std::size_t max_batch);

  std::size_t num_layers() const { return layers_.size(); }
  Layer& layer(std::size_t i) { return *layers_.at(i); }
  const Layer& layer(std::size_t i) const { return *layers_.at(i); }
  const Shape& input_shape() const { return input_shape_; }
  const Shape& output_shape() const { return shapes_.back(); }
  // Per-sample output shape of layer i (after plan()).
  const Shape& layer_output_shape(std::size_t i) const { return shapes_.at(i + 1); }
  std::size_t max_batch() const { return max_batch_; }

  ParameterStore& parameters() { return params_; }
  const ParameterStore& parameters() const { return params_; }
  ParameterStore& buffers() { return buffers_; }
  const ParameterStore& buffers() const { return buffers_; }

  // Sets initial parameters from the seed and resets buffers to their Init rule.
  void initialize(std::uint64_t seed);

  // x: (n, input...) -> logits (n, outputs); the view stays valid until the next forward.
  std::span<const float> forward(std::span<const float> x, std::size_t n, StepContext ctx,
                                 const std::function<void(std::size_t layer)>& on_layer_done = {});

  // dlogits: (n, outputs). Needs the forward of the same step just before.
  void backward(std::span<const float> dlogits, std::size_t n, StepContext ctx,
                const std::function<void(std::size_t layer)>& on_layer_done = {});

  // Range [begin, end) of the flat gradient buffer owned by layer i (begin == end: none).
  std::pair<std::size_t, std::size_t> gradient_range(std::size_t layer) const;

  double forward_flops_per_sample() const;
  // True if a layer's output depends on the other samples of the batch (BatchNorm).
  bool has_batch_norm() const;
  // Trained values of layer i (after plan()).
  std::size_t layer_parameters(std::size_t i) const;
  // The model as a table, one line per layer after a header and the input, then the total:
  //   layer               output shape        parameters
  //   input               (1, 28, 28)
  //   layers.0.conv2d     (32, 28, 28)               832
  // (after plan()). Lines end in '\n'.
  std::string summary() const;

  // What the model was built from, for the run's records (models/: the canonical TOML of
  // its layer list); empty if its builder gave none.
  void set_spec(std::string text) { spec_ = std::move(text); }
  const std::string& spec() const { return spec_; }

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Shape> shapes_;        // shapes_[0] = input, shapes_[i+1] = output of layer i
  std::vector<Tensor> activations_;  // activations_[i] = output of layer i, max_batch rows
  Tensor grad_a_, grad_b_;           // ping-pong dy/dx, sized for the largest activation
  ParameterStore params_{true};
  ParameterStore buffers_{false};
  Shape input_shape_;
  std::size_t max_batch_ = 0;
  std::span<const float> last_input_;
  std::string spec_;
  bool planned_ = false;
};

}  // namespace ringtrain
