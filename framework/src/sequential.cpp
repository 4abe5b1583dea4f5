// Sequential model: planning, forward and backward over the layer list.
#include "ringtrain/framework/sequential.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "ringtrain/framework/error.hpp"

namespace ringtrain {

void Sequential::add(std::unique_ptr<Layer> layer) {
  if (planned_) throw Error("Sequential::add after plan()");
  layers_.push_back(std::move(layer));
}

void Sequential::plan(const Shape& input, std::size_t max_batch) {
  if (planned_) throw Error("Sequential::plan called twice");
  if (layers_.empty()) throw UsageError("a model needs at least one layer");
  input_shape_ = input;
  max_batch_ = max_batch;
  shapes_ = {input};
  std::size_t largest = num_elements(input);
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    Layer& layer = *layers_[i];
    shapes_.push_back(layer.plan(shapes_.back(), max_batch));
    largest = std::max(largest, num_elements(shapes_.back()));
    const std::string prefix = "layers." + std::to_string(i) + "." + layer.kind() + "/";
    for (const ParamSpec& spec : layer.parameter_specs()) params_.add(prefix + spec.name, spec, i);
    for (const ParamSpec& spec : layer.buffer_specs()) buffers_.add(prefix + spec.name, spec, i);
  }
  params_.finalize();
  buffers_.finalize();
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    LayerBinding binding;
    for (std::size_t p = 0; p < params_.count(); ++p)
      if (params_.entry(p).layer == i) {
        binding.params.push_back(params_.value(p));
        binding.grads.push_back(params_.grad(p));
      }
    for (std::size_t b = 0; b < buffers_.count(); ++b)
      if (buffers_.entry(b).layer == i) binding.buffers.push_back(buffers_.value(b));
    layers_[i]->bind(binding);
    Shape act = shapes_[i + 1];
    act.insert(act.begin(), max_batch);
    activations_.emplace_back(act);
  }
  grad_a_ = Tensor({max_batch * largest});
  grad_b_ = Tensor({max_batch * largest});
  planned_ = true;
}

void Sequential::initialize(std::uint64_t seed) {
  params_.initialize(seed);
  buffers_.initialize(seed);
}

std::span<const float> Sequential::forward(std::span<const float> x, std::size_t n, StepContext ctx,
                                           const std::function<void(std::size_t)>& on_layer_done) {
  if (!planned_) throw Error("Sequential::forward before plan()");
  if (n > max_batch_)
    throw Error(fmt::format("batch of {} rows but the model was planned for {}", n, max_batch_));
  if (x.size() < n * num_elements(input_shape_))
    throw Error(fmt::format("input holds {} floats, {} rows of {} need {}", x.size(), n,
                            to_string(input_shape_), n * num_elements(input_shape_)));
  last_input_ = x;
  std::span<const float> in = x;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    ctx.layer_index = i;
    std::span<float> out = activations_[i].span();
    layers_[i]->forward(in, out, n, ctx);
    if (on_layer_done) on_layer_done(i);
    in = out;
  }
  return std::span<const float>(activations_.back().span()).first(n * num_elements(output_shape()));
}

void Sequential::backward(std::span<const float> dlogits, std::size_t n, StepContext ctx,
                          const std::function<void(std::size_t)>& on_layer_done) {
  std::span<const float> dy = dlogits;
  for (std::size_t i = layers_.size(); i-- > 0;) {
    ctx.layer_index = i;
    std::span<const float> x =
        i == 0 ? last_input_ : std::span<const float>(activations_[i - 1].span());
    // The first layer's input gradient is never needed: skip computing it.
    std::span<float> dx;
    if (i > 0) dx = ((layers_.size() - 1 - i) % 2 == 0 ? grad_a_ : grad_b_).span();
    layers_[i]->backward(x, activations_[i].span(), dy, dx, n, ctx);
    if (on_layer_done) on_layer_done(i);
    dy = dx;
  }
}

std::pair<std::size_t, std::size_t> Sequential::gradient_range(std::size_t layer) const {
  std::size_t begin = params_.num_elements(), end = 0;
  for (const ParameterEntry& e : params_.entries())
    if (e.layer == layer) {
      begin = std::min(begin, e.offset);
      end = std::max(end, e.offset + e.size);
    }
  return begin < end ? std::pair{begin, end} : std::pair{std::size_t{0}, std::size_t{0}};
}

double Sequential::forward_flops_per_sample() const {
  double flops = 0.0;
  for (const auto& layer : layers_) flops += layer->forward_flops_per_sample();
  return flops;
}

bool Sequential::has_batch_norm() const {
  return std::any_of(layers_.begin(), layers_.end(),
                     [](const auto& layer) { return layer->kind() == "batchnorm"; });
}

std::size_t Sequential::layer_parameters(std::size_t i) const {
  std::size_t count = 0;
  for (const ParameterEntry& e : params_.entries())
    if (e.layer == i) count += e.size;
  return count;
}

std::string Sequential::summary() const {
  std::string s = fmt::format("{:<20} {:<18} {:>12}\n", "layer", "output shape", "parameters");
  s += fmt::format("{:<20} {}\n", "input", to_string(input_shape_));
  for (std::size_t i = 0; i < layers_.size(); ++i)
    s += fmt::format("{:<20} {:<18} {:>12}\n", fmt::format("layers.{}.{}", i, layers_[i]->kind()),
                     to_string(shapes_[i + 1]), layer_parameters(i));
  s += fmt::format("{:<20} {:<18} {:>12}\n", "total", "", params_.num_elements());
  return s;
}

}  // namespace ringtrain
