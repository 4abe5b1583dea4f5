// Linear layer: two GEMMs forward-and-input-gradient, one GEMM for the weight gradient.
#include "ringtrain/framework/layers/linear.hpp"

#include <algorithm>

#include "ringtrain/framework/blas.hpp"
#include "ringtrain/framework/error.hpp"

namespace ringtrain {

Linear::Linear(std::size_t in_features, std::size_t out_features)
    : in_(in_features), out_(out_features) {
  if (in_ == 0 || out_ == 0) throw UsageError("Linear layer needs in > 0 and out > 0");
}

Shape Linear::plan(const Shape& input, std::size_t /*max_batch*/) {
  if (num_elements(input) != in_)
    throw UsageError("Linear(" + std::to_string(in_) + " -> " + std::to_string(out_) +
                     ") got per-sample input " + to_string(input));
  return {out_};
}

std::vector<ParamSpec> Linear::parameter_specs() const {
  return {{"weight", {out_, in_}, Init::kUniformFanIn, in_},
          {"bias", {out_}, Init::kUniformFanIn, in_}};
}

void Linear::bind(const LayerBinding& binding) {
  weight_ = binding.params[0];
  bias_ = binding.params[1];
  grad_weight_ = binding.grads[0];
  grad_bias_ = binding.grads[1];
}

namespace {

// C = op(A)·op(B), or C += it, on blas::gemm or on blas::gemm_row_stable.
void product(bool row_stable, blas::Trans trans_a, blas::Trans trans_b, std::size_t m,
             std::size_t n, std::size_t k, const float* a, const float* b, bool accumulate,
             float* c) {
  if (row_stable)
    return blas::gemm_row_stable(trans_a, trans_b, int(m), int(n), int(k), a, b, accumulate, c);
  blas::gemm(trans_a, trans_b, int(m), int(n), int(k), 1.0f, a, b, accumulate ? 1.0f : 0.0f, c);
}

}  // namespace

void Linear::forward(std::span<const float> x, std::span<float> y, std::size_t n,
                     const StepContext& ctx) {
  const std::size_t m = ctx.exact_micro_batch;
  if (m == 0 || ctx.exact_row_stable) return forward_rows(x.data(), y.data(), n, m > 0);
  for (std::size_t first = 0; first < n; first += m)  // exact, per micro-batch
    forward_rows(x.data() + first * in_, y.data() + first * out_, std::min(m, n - first), false);
}

void Linear::backward(std::span<const float> x, std::span<const float> /*y*/,
                      std::span<const float> dy, std::span<float> dx, std::size_t n,
                      const StepContext& ctx) {
  float* dx_rows = dx.empty() ? nullptr : dx.data();  // null: the input gradient is not needed
  if (ctx.exact_micro_batch > 0) return backward_exact(x.data(), dy.data(), dx_rows, n, ctx);
  weight_gradient(x.data(), dy.data(), n, false, grad_weight_.data(), grad_bias_.data());
  if (dx_rows == nullptr) return;
  poll_communication(ctx);  // between the two products: rings in flight move
  input_gradient(dy.data(), dx_rows, n, false);
}

// Each micro-batch's dW and db written where the sink keeps its terms, one term each; dx on
// all rows at once (row-stable) or per micro-batch.
void Linear::backward_exact(const float* x, const float* dy, float* dx, std::size_t n,
                            const StepContext& ctx) {
  if (ctx.exact_gradient == nullptr)
    throw Error("Linear: exact micro-batches (ctx.exact_micro_batch) need ctx.exact_gradient");
  const std::size_t m = ctx.exact_micro_batch;
  const bool row_stable = ctx.exact_row_stable;
  const ExactGradientSink& sink = *ctx.exact_gradient;
  for (std::size_t first = 0; first < n; first += m) {
    const std::size_t rows = std::min(m, n - first);
    weight_gradient(x + first * in_, dy + first * out_, rows, row_stable,
                    sink.term(grad_weight_).data(), sink.term(grad_bias_).data());
    sink.commit(grad_weight_);
    sink.commit(grad_bias_);
    if (dx != nullptr && !row_stable)
      input_gradient(dy + first * out_, dx + first * in_, rows, false);
  }
  if (dx != nullptr && row_stable) input_gradient(dy, dx, n, true);
}

// y = 1 · b (broadcast over rows), then y += x · Wᵀ   (n rows)
void Linear::forward_rows(const float* x, float* y, std::size_t n, bool row_stable) {
  for (std::size_t i = 0; i < n; ++i) std::copy(bias_.begin(), bias_.end(), y + i * out_);
  product(row_stable, blas::Trans::kNo, blas::Trans::kYes, n, out_, in_, x, weight_.data(), true,
          y);
}

// dW = dyᵀ · x (out, in) and db = Σ_i dy[i, :] in row order, into dw and db.
void Linear::weight_gradient(const float* x, const float* dy, std::size_t n, bool row_stable,
                             float* dw, float* db) {
  if (n == 0) {  // no samples: the gradient of an empty sum is zero
    std::fill_n(dw, out_ * in_, 0.0f);
    std::fill_n(db, out_, 0.0f);
    return;
  }
  product(row_stable, blas::Trans::kYes, blas::Trans::kNo, out_, in_, n, dy, x, false, dw);
  std::fill_n(db, out_, 0.0f);
  for (std::size_t i = 0; i < n; ++i) {
    const float* row = dy + i * out_;
    for (std::size_t o = 0; o < out_; ++o) db[o] += row[o];
  }
}

// dx = dy · W   (n, in)
void Linear::input_gradient(const float* dy, float* dx, std::size_t n, bool row_stable) {
  product(row_stable, blas::Trans::kNo, blas::Trans::kNo, n, in_, out_, dy, weight_.data(), false,
          dx);
}

}  // namespace ringtrain
