// Test helpers for single layers: a rig that plans a layer and owns its parameters, and a
// finite-difference gradient check against the layer's backward.
//
// The check uses a random projection loss  L(x, θ) = Σ_j y_j · r_j  with r fixed and random,
// so backward receives dy = r and must return dL/dx and dL/dθ. Each finite difference is
// double-sided,  (L(v + h) - L(v - h)) / (2h),  with L summed in double and h the step
// actually representable in float. The verdict compares the vectors of checked
// coordinates: ‖analytic - numeric‖ / ‖numeric‖ and max |analytic - numeric| / max |numeric|
// must both stay under the tolerance, and the gradient must not be zero (a zero gradient
// against a zero reference proves nothing).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "ringtrain/framework/layer.hpp"

namespace ringtrain::testing {

inline std::vector<float> random_normal(std::size_t count, std::mt19937& rng, float stddev = 1.0f) {
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(count);
  for (float& e : v) e = dist(rng);
  return v;
}

inline std::vector<float> random_uniform(std::size_t count, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(count);
  for (float& e : v) e = dist(rng);
  return v;
}

// A planned layer with its own parameter, gradient and buffer storage.
struct LayerRig {
  Layer& layer;
  Shape input_shape, output_shape;
  std::size_t max_batch;
  std::vector<ParamSpec> param_specs, buffer_specs;
  std::vector<std::vector<float>> params, grads, buffers;

  // Parameters get random values in [-1, 1] (kOnes: [0.5, 1.5]) so every term of the
  // gradient matters; buffers get their Init rule's value.
  LayerRig(Layer& l, Shape input, std::size_t batch, std::mt19937& rng)
      : layer(l), input_shape(std::move(input)), max_batch(batch) {
    output_shape = layer.plan(input_shape, max_batch);
    param_specs = layer.parameter_specs();
    buffer_specs = layer.buffer_specs();
    LayerBinding binding;
    for (const ParamSpec& spec : param_specs) {
      const std::size_t size = num_elements(spec.shape);
      params.push_back(spec.init == Init::kOnes ? random_uniform(size, rng, 0.5f, 1.5f)
                                                : random_uniform(size, rng, -1.0f, 1.0f));
      grads.emplace_back(size, std::nanf(""));  // backward must overwrite every gradient
    }
    for (const ParamSpec& spec : buffer_specs)
      buffers.emplace_back(num_elements(spec.shape), spec.init == Init::kOnes ? 1.0f : 0.0f);
    for (std::size_t p = 0; p < params.size(); ++p) {
      binding.params.push_back(params[p]);
      binding.grads.push_back(grads[p]);
    }
    for (auto& b : buffers) binding.buffers.push_back(b);
    layer.bind(binding);
  }

  std::size_t in_size(std::size_t n) const { return n * num_elements(input_shape); }
  std::size_t out_size(std::size_t n) const { return n * num_elements(output_shape); }
};

// Σ_j y_j · r_j in double, after one forward of x.
inline double projected_loss(LayerRig& rig, const std::vector<float>& x, std::size_t n,
                             const std::vector<float>& r, const StepContext& ctx) {
  std::vector<float> y(rig.out_size(n));
  rig.layer.forward(x, y, n, ctx);
  double loss = 0.0;
  for (std::size_t j = 0; j < y.size(); ++j) loss += double(y[j]) * double(r[j]);
  return loss;
}

struct GradientComparison {
  std::string what;  // "input", "weight", ...
  std::size_t checked = 0;
  double norm_error = 0;  // ‖a - f‖ / ‖f‖
  double max_error = 0;   // max |a - f| / max |f|
  double analytic_norm = 0;
  bool passes(double tolerance) const {
    return checked > 0 && analytic_norm > 0 && norm_error <= tolerance && max_error <= tolerance;
  }
};

inline GradientComparison compare_gradients(std::string what, const std::vector<double>& analytic,
                                            const std::vector<double>& numeric) {
  GradientComparison c;
  c.what = std::move(what);
  c.checked = analytic.size();
  double diff2 = 0, num2 = 0, an2 = 0, diff_max = 0, num_max = 0;
  for (std::size_t i = 0; i < analytic.size(); ++i) {
    const double d = analytic[i] - numeric[i];
    diff2 += d * d;
    num2 += numeric[i] * numeric[i];
    an2 += analytic[i] * analytic[i];
    diff_max = std::max(diff_max, std::abs(d));
    num_max = std::max(num_max, std::abs(numeric[i]));
  }
  c.analytic_norm = std::sqrt(an2);
  c.norm_error = num2 > 0 ? std::sqrt(diff2 / num2) : (diff2 > 0 ? INFINITY : 0.0);
  c.max_error = num_max > 0 ? diff_max / num_max : (diff_max > 0 ? INFINITY : 0.0);
  if (std::isnan(diff2)) c.norm_error = c.max_error = INFINITY;
  return c;
}

// Indices to check: all of them if there are few, else `limit` spread at random.
inline std::vector<std::size_t> pick_indices(std::size_t size, std::size_t limit,
                                             std::mt19937& rng) {
  std::vector<std::size_t> idx(size);
  for (std::size_t i = 0; i < size; ++i) idx[i] = i;
  if (size > limit) {
    std::shuffle(idx.begin(), idx.end(), rng);
    idx.resize(limit);
  }
  return idx;
}

// dL/dv[j] by central differences for the chosen j, v being x or a parameter that `loss`
// reads. The step is the one float can represent: h = (v + eps) - v.
template <typename LossFn>
std::vector<double> numeric_gradient(std::vector<float>& v, const std::vector<std::size_t>& idx,
                                     float eps, LossFn&& loss) {
  std::vector<double> g;
  for (std::size_t j : idx) {
    const float saved = v[j];
    const float plus = saved + eps, minus = saved - eps;
    v[j] = plus;
    const double l_plus = loss();
    v[j] = minus;
    const double l_minus = loss();
    v[j] = saved;
    g.push_back((l_plus - l_minus) / (double(plus) - double(minus)));
  }
  return g;
}

// Checks dL/dx (unless skip_input) and dL/dθ of every parameter of rig.layer on input x
// (n rows). Returns one comparison per checked tensor.
inline std::vector<GradientComparison> check_layer_gradients(LayerRig& rig, std::vector<float> x,
                                                             std::size_t n, const StepContext& ctx,
                                                             float eps, std::mt19937& rng,
                                                             std::size_t limit = 200,
                                                             bool skip_input = false) {
  const std::vector<float> r = random_normal(rig.out_size(n), rng);
  // Analytic: one forward, then backward with dy = r.
  std::vector<float> y(rig.out_size(n)), dx(rig.in_size(n), std::nanf(""));
  rig.layer.forward(x, y, n, ctx);
  rig.layer.backward(x, y, r, dx, n, ctx);
  const std::vector<std::vector<float>> grads = rig.grads;

  auto loss = [&] { return projected_loss(rig, x, n, r, ctx); };
  std::vector<GradientComparison> out;
  if (!skip_input) {
    const auto idx = pick_indices(x.size(), limit, rng);
    std::vector<double> analytic;
    for (std::size_t j : idx) analytic.push_back(dx[j]);
    out.push_back(compare_gradients("input", analytic, numeric_gradient(x, idx, eps, loss)));
  }
  for (std::size_t p = 0; p < rig.params.size(); ++p) {
    const auto idx = pick_indices(rig.params[p].size(), limit, rng);
    std::vector<double> analytic;
    for (std::size_t j : idx) analytic.push_back(grads[p][j]);
    out.push_back(compare_gradients(rig.param_specs[p].name, analytic,
                                    numeric_gradient(rig.params[p], idx, eps, loss)));
  }
  return out;
}

}  // namespace ringtrain::testing
