// Linear layer: two GEMMs forward-and-input-gradient, one GEMM for the weight gradient.
#include "ringtrain/framework/layers/linear.hpp"

#include <algorithm>

#include "ringtrain/framework/blas.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/layers/exact_bounds.hpp"

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

// The leading parts of `threads` whose block (block_of(p)) is not empty: the parts a loop
// needs (a product the own kernels do not take goes whole to part 0), at least one.
template <typename BlockOf>
int parts_with_work(int threads, BlockOf&& block_of) {
  int parts = 0;
  while (parts < threads && !block_of(parts).empty()) ++parts;
  return std::max(parts, 1);
}

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
  if (m == 0 && in_loop()) return forward_loop(x.data(), y.data(), n);
  if (m == 0 || ctx.exact_row_stable) return forward_rows(x.data(), y.data(), n, m > 0);
  for (std::size_t first = 0; first < n; first += m)  // exact, per micro-batch
    forward_rows(x.data() + first * in_, y.data() + first * out_, std::min(m, n - first), false);
}

void Linear::backward(std::span<const float> x, std::span<const float> /*y*/,
                      std::span<const float> dy, std::span<float> dx, std::size_t n,
                      const StepContext& ctx) {
  float* dx_rows = dx.empty() ? nullptr : dx.data();  // null: the input gradient is not needed
  if (ctx.exact_micro_batch > 0) return backward_exact(x.data(), dy.data(), dx_rows, n, ctx);
  if (n > 0 && in_loop()) return backward_loop(x.data(), dy.data(), dx_rows, n, ctx);
  weight_gradient(x.data(), dy.data(), n, grad_weight_.data(), grad_bias_.data());
  if (dx_rows == nullptr) return;
  poll_communication(ctx);  // between the two products: rings in flight move
  input_gradient(dy.data(), dx_rows, n, false);
}

// The bounds go to the sink first (collective), then each micro-batch's dW and db as its
// terms; dx on all rows at once (row-stable) or per micro-batch.
void Linear::backward_exact(const float* x, const float* dy, float* dx, std::size_t n,
                            const StepContext& ctx) {
  if (ctx.exact_gradient == nullptr)
    throw Error("Linear: exact micro-batches (ctx.exact_micro_batch) need ctx.exact_gradient");
  const std::size_t m = ctx.exact_micro_batch;
  const ExactGradientSink& sink = *ctx.exact_gradient;
  const std::array<double, 2> bounds = term_bounds(x, dy, n, m);
  sink.bound(std::array{grad_weight_, grad_bias_}, bounds);
  weight_terms(x, dy, n, m, ctx.exact_row_stable, sink);
  bias_terms(dy, n, m, sink);
  if (dx == nullptr) return;
  if (ctx.exact_row_stable) return input_gradient(dy, dx, n, true);
  for (std::size_t first = 0; first < n; first += m)
    input_gradient(dy + first * out_, dx + first * in_, std::min(m, n - first), false);
}

// A chunk of k rows gives dW elements Σ_k dy·x and db elements Σ_k dy·1: sums of k products
// (exact_bounds.hpp), bounded by the chunk's own largest |dy| and |x|. The largest bound over
// the chunks is a function of each chunk's rows, so the ranks' maximum is the same for any
// split of the same micro-batches.
std::array<double, 2> Linear::term_bounds(const float* x, const float* dy, std::size_t n,
                                          std::size_t m) const {
  std::array<double, 2> bounds{0.0, 0.0};
  for (std::size_t first = 0; first < n; first += m) {
    const std::size_t rows = std::min(m, n - first);
    const double dy_max = exact_bounds::max_abs(dy + first * out_, rows * out_);
    const double x_max = exact_bounds::max_abs(x + first * in_, rows * in_);
    bounds[0] = std::max(bounds[0], exact_bounds::sum_of_products(double(rows), dy_max, x_max));
    bounds[1] = std::max(bounds[1], exact_bounds::sum_of_products(double(rows), dy_max, 1.0));
  }
  return bounds;
}

// dW of chunk j = dy_jᵀ · x_j, in tiles of `tile` rows of W: tile rows [o, o + t) of chunk j
// are the product of dy_j's columns [o, o + t), copied into rows of t, with x_j. Every
// chunk's tile is computed, then all go to the sink at once (256 KiB per chunk, so that at
// the usual few chunks per rank they stay in L2 or L3 while the sum rounds them).
// The tile's shape depends on the layer and m alone, not on the rank's number of chunks: the
// product's bits may depend on its shape where it is not row-stable.
void Linear::weight_terms(const float* x, const float* dy, std::size_t n, std::size_t m,
                          bool row_stable, const ExactGradientSink& sink) {
  if (n == 0) return;
  constexpr std::size_t kTileFloats = 1 << 16;
  constexpr std::size_t kRows = 24;  // whole row tiles of both kernels (6 rows AVX2, 8 AVX-512)
  const std::size_t chunks = (n + m - 1) / m;
  std::size_t tile = std::max(kRows, kTileFloats / in_ / kRows * kRows);
  tile = std::min(tile, out_);
  dy_tile_.resize(m * tile);
  dw_tile_.resize(chunks * tile * in_);
  for (std::size_t o = 0; o < out_; o += tile) {
    const std::size_t t = std::min(tile, out_ - o);
    for (std::size_t first = 0, j = 0; first < n; first += m, ++j) {
      const std::size_t rows = std::min(m, n - first);
      for (std::size_t r = 0; r < rows; ++r)
        std::copy_n(dy + (first + r) * out_ + o, t, dy_tile_.data() + r * t);
      product(row_stable, blas::Trans::kYes, blas::Trans::kNo, t, in_, rows, dy_tile_.data(),
              x + first * in_, false, dw_tile_.data() + j * t * in_);
    }
    sink.add_pieces(grad_weight_, o * in_, t * in_, std::span(dw_tile_).first(chunks * t * in_), 0);
  }
}

// db of chunk j = Σ_i dy_j[i, :] in row order: every chunk's, then all to the sink at once.
void Linear::bias_terms(const float* dy, std::size_t n, std::size_t m,
                        const ExactGradientSink& sink) {
  if (n == 0) return;
  const std::size_t chunks = (n + m - 1) / m;
  dw_tile_.resize(std::max(dw_tile_.size(), chunks * out_));
  const std::span<float> db = std::span(dw_tile_).first(chunks * out_);
  std::fill(db.begin(), db.end(), 0.0f);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t o = 0; o < out_; ++o) db[(i / m) * out_ + o] += dy[i * out_ + o];
  sink.add_pieces(grad_bias_, 0, out_, db, 0);
}

// y = 1 · b (broadcast over rows), then y += x · Wᵀ   (n rows)
void Linear::forward_rows(const float* x, float* y, std::size_t n, bool row_stable) {
  for (std::size_t i = 0; i < n; ++i) std::copy(bias_.begin(), bias_.end(), y + i * out_);
  product(row_stable, blas::Trans::kNo, blas::Trans::kYes, n, out_, in_, x, weight_.data(), true,
          y);
}

// dW = dyᵀ · x (out, in) and db = Σ_i dy[i, :] in row order, into dw and db.
void Linear::weight_gradient(const float* x, const float* dy, std::size_t n, float* dw, float* db) {
  if (n == 0) {  // no samples: the gradient of an empty sum is zero
    std::fill_n(dw, out_ * in_, 0.0f);
    std::fill_n(db, out_, 0.0f);
    return;
  }
  product(false, blas::Trans::kYes, blas::Trans::kNo, out_, in_, n, dy, x, false, dw);
  std::fill_n(db, out_, 0.0f);
  for (std::size_t i = 0; i < n; ++i) {
    const float* row = dy + i * out_;
    for (std::size_t o = 0; o < out_; ++o) db[o] += row[o];
  }
}

// One loop on the rank's threads per pass (blas::products_in_loops) instead of one per
// product, with the elementwise work in the same loop. Each part computes the block of each
// product that blas::gemm would give its thread (blas::gemm_block), so the bits are those of
// forward_rows, weight_gradient and input_gradient at any thread count.
bool Linear::in_loop() const {
  return blas::products_in_loops() && blas::parallel_threads() > 1;
}

// Part p: y's block = 1 · b (its columns of b on its rows), then += x · Wᵀ on it.
void Linear::forward_loop(const float* x, float* y, std::size_t n) {
  using blas::Trans;
  const int threads = static_cast<int>(blas::parallel_threads()), rows = int(n), out = int(out_);
  auto block_of = [&](int p) {
    return blas::gemm_block(p, threads, Trans::kNo, Trans::kYes, rows, out, int(in_));
  };
  auto part = [&](std::size_t p) {
    const blas::Block blk = block_of(int(p));
    for (int r = blk.row0; r < blk.row0 + blk.rows; ++r)
      std::copy_n(bias_.begin() + blk.col0, blk.cols,
                  y + std::size_t(r) * out_ + std::size_t(blk.col0));
    blas::gemm_block_product(blk, Trans::kNo, Trans::kYes, rows, out, int(in_), x, weight_.data(),
                             true, y);
  };
  blas::parallel_parts(parts_with_work(threads, block_of), part);
}

// Part p: its rows of dW = dyᵀ·x, the same rows of db (each element summed over the samples in
// order, as weight_gradient does), then (with dx) its block of dx = dy·W. Part 0, on the
// caller, polls the communication between the two products. A layer whose products have work
// for one thread each (the mlp's 10-class layer) runs them side by side instead: dW and db on
// the caller, dx whole on a second thread; each product is computed as on one thread.
void Linear::backward_loop(const float* x, const float* dy, float* dx, std::size_t n,
                           const StepContext& ctx) {
  using blas::Trans;
  const int threads = static_cast<int>(blas::parallel_threads());
  const int rows = int(n), in = int(in_), out = int(out_);
  auto dw_block = [&](int p) {
    return blas::gemm_block(p, threads, Trans::kYes, Trans::kNo, out, in, rows);
  };
  auto dx_block = [&](int p) {
    return dx ? blas::gemm_block(p, threads, Trans::kNo, Trans::kNo, rows, in, out) : blas::Block{};
  };
  const int parts =
      std::max(parts_with_work(threads, dw_block), parts_with_work(threads, dx_block));
  const bool side_by_side = parts == 1 && threads > 1 && dx != nullptr;
  // db's elements: dW's rows where dW is cut by rows over these parts, else near-equal ranges
  const bool db_with_dw = parts_with_work(threads, dw_block) == parts && dw_block(0).rows < out;
  auto weight_and_bias = [&](std::size_t p) {
    const blas::Block dw = dw_block(int(p));
    blas::gemm_block_product(dw, Trans::kYes, Trans::kNo, out, in, rows, dy, x, false,
                             grad_weight_.data());
    const auto share = [&](std::size_t q) { return q * out_ / std::size_t(parts); };
    const std::size_t o0 = db_with_dw ? std::size_t(dw.row0) : share(p);
    const std::size_t o1 = db_with_dw ? o0 + std::size_t(dw.rows) : share(p + 1);
    float* db = grad_bias_.data();
    std::fill(db + o0, db + o1, 0.0f);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t o = o0; o < o1; ++o) db[o] += dy[i * out_ + o];
  };
  auto input = [&](std::size_t p) {
    blas::gemm_block_product(dx_block(int(p)), Trans::kNo, Trans::kNo, rows, in, out, dy,
                             weight_.data(), false, dx);
  };
  auto part = [&](std::size_t p) {
    if (side_by_side && p == 1) {  // dx whole, beside part 0's dW
      input(0);
      return;
    }
    weight_and_bias(p);
    if (p == 0) poll_communication(ctx);
    if (!side_by_side) input(p);
  };
  blas::parallel_parts(side_by_side ? 2 : std::size_t(parts), part);
}

// dx = dy · W   (n, in)
void Linear::input_gradient(const float* dy, float* dx, std::size_t n, bool row_stable) {
  product(row_stable, blas::Trans::kNo, blas::Trans::kNo, n, in_, out_, dy, weight_.data(), false,
          dx);
}

}  // namespace ringtrain
