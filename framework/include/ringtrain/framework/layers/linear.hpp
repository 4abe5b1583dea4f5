// Linear: y = x · Wᵀ + b   (PyTorch's layout: W is (out, in))
//
//   x: (n, in)   W: (out, in)   b: (out)   y: (n, out)
// Backward:
//   dW = dyᵀ · x     (out, in)
//   db = Σ_rows dy   (out)
//   dx = dy · W      (n, in)
// Exact (ctx.exact_micro_batch = m > 0; --reduction exact, train/exact_step.hpp): dW and db
// run per chunk of m rows from the call's first row (the last may be shorter), one term of
// ctx.exact_gradient (required) each: its bits depend on its rows alone. First the call's
// bounds go to the sink (collective); then each chunk's dW is computed in tiles of rows of W,
// each tile handed over while it is in cache (the sink's add_pieces): an element of a tile has
// the bits it has in the whole product, whose shape depends on m alone.
// y and dx are per row: with ctx.exact_row_stable on all n rows at once through
// blas::gemm_row_stable, else per chunk of m rows as well (the same shapes, so the same
// bits, as a call per micro-batch).
#pragma once

#include <array>
#include <vector>

#include "ringtrain/framework/layer.hpp"

namespace ringtrain {

class Linear final : public Layer {
 public:
  Linear(std::size_t in_features, std::size_t out_features);

  std::string kind() const override { return "linear"; }
  Shape plan(const Shape& input, std::size_t max_batch) override;
  std::vector<ParamSpec> parameter_specs() const override;
  void bind(const LayerBinding& binding) override;
  void forward(std::span<const float> x, std::span<float> y, std::size_t n,
               const StepContext& ctx) override;
  void backward(std::span<const float> x, std::span<const float> y, std::span<const float> dy,
                std::span<float> dx, std::size_t n, const StepContext& ctx) override;
  double forward_flops_per_sample() const override { return 2.0 * in_ * out_; }

 private:
  // Whether forward and backward run as one loop each on the rank's threads (linear.cpp).
  bool in_loop() const;
  void forward_loop(const float* x, float* y, std::size_t n);
  void backward_loop(const float* x, const float* dy, float* dx, std::size_t n,
                     const StepContext& ctx);
  // y of n rows; row_stable: on blas::gemm_row_stable, else blas::gemm.
  void forward_rows(const float* x, float* y, std::size_t n, bool row_stable);
  // dW (out x in), db (out) of n rows into dw, db.
  void weight_gradient(const float* x, const float* dy, std::size_t n, float* dw, float* db);
  // dx of n rows.
  void input_gradient(const float* dy, float* dx, std::size_t n, bool row_stable);
  // backward in exact mode: the sums per micro-batch into ctx.exact_gradient.
  void backward_exact(const float* x, const float* dy, float* dx, std::size_t n,
                      const StepContext& ctx);
  // Bounds on the elements of every chunk's dW and db (ExactGradientSink::bound).
  std::array<double, 2> term_bounds(const float* x, const float* dy, std::size_t n,
                                    std::size_t m) const;
  // Every chunk's dW, tile by tile, and db, as pieces of the sink's terms.
  void weight_terms(const float* x, const float* dy, std::size_t n, std::size_t m, bool row_stable,
                    const ExactGradientSink& sink);
  void bias_terms(const float* dy, std::size_t n, std::size_t m, const ExactGradientSink& sink);

  std::size_t in_, out_;
  std::span<float> weight_, bias_, grad_weight_, grad_bias_;
  std::vector<float> dy_tile_, dw_tile_;  // exact: a chunk's dy columns, and its dW tile
};

}  // namespace ringtrain
