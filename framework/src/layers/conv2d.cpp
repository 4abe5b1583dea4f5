// Conv2d: im2col + GEMM forward, GEMM + col2im backward, one sample at a time, the batch
// split over the rank's threads (see conv2d.hpp, "Parallelism"); or, for 5x5 stride-1
// layers, Winograd F(4x4, 5x5) in groups of kWinogradImages samples (winograd.cpp), the
// same split. Groups of 4 images: a group's transformed data is 64·(C + O)·tiles floats an
// image (393 KB for the cnn's second layer), so 4 images still fit a 2 MB L2; groups of 2, 4
// and 8 run alike (bench/README-conv.md, "Measurements behind the code comments").
//
//   forward   col_i = im2col(x_i)                      (C·k·k, Ho·Wo)
//             y_i   = W · col_i + b                    (O, Ho·Wo)     one sgemm per sample
//   backward  dW   += dy_i · col_iᵀ                    (O, C·k·k)     col_i recomputed
//             db   += Σ_{pixels} dy_i                  (O)
//             dx_i  = col2im(Wᵀ · dy_i)                (C, H, W)
//
// Why per sample and not one GEMM over the batch: a sample's column matrix (C·k·k)·(Ho·Wo)
// floats is small enough to stay in L2 between im2col and the GEMM that reads it
// (conv 32 -> 64, 5x5 on 14x14: 800 x 196 floats = 627 KB), while a batched column
// matrix of 128 samples (80 MB) streams through memory twice, and its GEMM runs slower.
// The columns are recomputed in backward rather than kept from forward for the same reason
// (im2col is a small part of the layer; storing 80 MB would not be). Groups of a few samples
// per GEMM bring nothing over one sample (bench/README-conv.md, "Measurements behind the
// code comments"). So the threads split the batch, not the GEMMs: each part's GEMMs stay at
// the per-sample rate and im2col, col2im and the bias run in parallel too.
// No GCC target_clones for im2col / col2im: their ifunc resolver crashes sanitizer builds at
// load time, for a gain too small to matter.
//
// im2col, worked for one row of the column matrix: c, ki, kj fixed, stride 1, padding 2,
// kernel 5, 14x14 image. The image sits in a zero-bordered 18x18 copy; output pixel
// (oh, ow) reads padded[oh + ki, ow + kj], so the row is 14 runs of 14 consecutive floats
// starting at padded[ki, kj]: no bounds test, no branch per element.
#include "ringtrain/framework/layers/conv2d.hpp"

#include <algorithm>
#include <cstring>

#include "ringtrain/framework/blas.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/layers/exact_bounds.hpp"

namespace ringtrain {
namespace {

// Σ values[0, count) with 8 independent partial sums: a single running float sum is one
// long chain of dependent additions (the compiler may not reorder float adds), several times
// slower.
float sum_of(const float* values, std::size_t count) {
  float partial[8] = {};
  std::size_t q = 0;
  for (; q + 8 <= count; q += 8)
    for (std::size_t j = 0; j < 8; ++j) partial[j] += values[q + j];
  float sum = 0.0f;
  for (; q < count; ++q) sum += values[q];
  for (float p : partial) sum += p;
  return sum;
}

}  // namespace

Conv2d::Conv2d(std::size_t in_channels, std::size_t out_channels, std::size_t kernel,
               std::size_t stride, std::size_t padding, Algorithm algorithm)
    : in_c_(in_channels),
      out_c_(out_channels),
      k_(kernel),
      stride_(stride),
      pad_(padding),
      algorithm_(algorithm) {
  if (in_c_ == 0 || out_c_ == 0 || k_ == 0 || stride_ == 0)
    throw UsageError("Conv2d needs in_channels, out_channels, kernel and stride > 0 (got " +
                     std::to_string(in_c_) + ", " + std::to_string(out_c_) + ", " +
                     std::to_string(k_) + ", " + std::to_string(stride_) + ")");
  const bool fits_winograd = k_ == winograd::kKernel && stride_ == 1 && pad_ < k_;
  if (algorithm_ == Algorithm::kWinograd && !fits_winograd)
    throw UsageError(
        "Conv2d: Winograd F(4x4, 5x5) needs kernel 5, stride 1 and padding <= 4 (got "
        "kernel " +
        std::to_string(k_) + ", stride " + std::to_string(stride_) + ", padding " +
        std::to_string(pad_) + ")");
  winograd_ =
      algorithm_ == Algorithm::kWinograd || (algorithm_ == Algorithm::kAuto && fits_winograd &&
                                             std::min(in_c_, out_c_) >= kWinogradMinChannels);
}

std::string Conv2d::algorithm_name() const {
  const std::string m = std::to_string(winograd::kOut);
  return winograd_ ? "winograd F(" + m + "x" + m + ",5x5)" : "im2col";
}

Shape Conv2d::plan(const Shape& input, std::size_t max_batch) {
  const std::string self = "Conv2d(" + std::to_string(in_c_) + " -> " + std::to_string(out_c_) +
                           ", kernel " + std::to_string(k_) + ", padding " + std::to_string(pad_) +
                           ")";
  if (input.size() != 3 || input[0] != in_c_)
    throw UsageError(self + " needs per-sample input (" + std::to_string(in_c_) + ", H, W), got " +
                     to_string(input));
  h_ = input[1];
  w_ = input[2];
  if (h_ + 2 * pad_ < k_ || w_ + 2 * pad_ < k_)
    throw UsageError(self + ": input " + to_string(input) + " is smaller than the kernel");
  ho_ = (h_ + 2 * pad_ - k_) / stride_ + 1;
  wo_ = (w_ + 2 * pad_ - k_) / stride_ + 1;
  patch_ = in_c_ * k_ * k_;
  pixels_ = ho_ * wo_;
  identity_col_ = k_ == 1 && stride_ == 1 && pad_ == 0;
  const std::size_t padded_size = in_c_ * (h_ + 2 * pad_) * (w_ + 2 * pad_);
  const std::size_t threads = std::size_t(std::max(1, blas::threads()));
  if (winograd_) {
    winograd_geometry_ = winograd::Geometry::make(in_c_, out_c_, h_, w_, pad_);
    u_.assign(winograd::kPoints * out_c_ * in_c_, 0.0f);
  }
  parts_.clear();
  parts_.resize(std::max<std::size_t>(1, std::min(kParts, max_batch)));
  // A part holds at most ceil(max_batch / parts) samples (see for_each_part).
  const std::size_t part_samples = (max_batch + parts_.size() - 1) / parts_.size();
  for (std::size_t p = 0; p < parts_.size(); ++p) {
    PartWorkspace& ws = parts_[p];
    // im2col's buffers only for im2col (Winograd has its own in ws.winograd).
    const bool columns = !winograd_ && !identity_col_;
    ws.col.assign(columns ? patch_ * pixels_ + kChunk : 0, 0.0f);
    ws.padded.assign(columns ? padded_size + kChunk : 0, 0.0f);
    ws.padded_grad.assign(columns && pad_ > 0 ? padded_size : 0, 0.0f);
    ws.grad_weight.assign(p == 0 || winograd_ ? 0 : out_c_ * patch_, 0.0f);
    ws.grad_bias.assign(p == 0 ? 0 : out_c_, 0.0f);
    if (winograd_) {
      ws.winograd = winograd::Workspace(winograd_geometry_, kWinogradImages, part_samples);
      ws.winograd_du.assign(winograd::kPoints * out_c_ * in_c_, 0.0f);
    }
  }
  threads_ = std::min(threads, parts_.size());
  return {out_c_, ho_, wo_};
}

std::vector<ParamSpec> Conv2d::parameter_specs() const {
  return {{"weight", {out_c_, in_c_, k_, k_}, Init::kUniformFanIn, patch_},
          {"bias", {out_c_}, Init::kUniformFanIn, patch_}};
}

void Conv2d::bind(const LayerBinding& binding) {
  weight_ = binding.params[0];
  bias_ = binding.params[1];
  grad_weight_ = binding.grads[0];
  grad_bias_ = binding.grads[1];
}

double Conv2d::forward_flops_per_sample() const {
  return 2.0 * double(out_c_) * double(patch_) * double(pixels_);
}

// Parts for a batch of n: the planned parts, and no part without a sample. Not the thread
// count: the parts' partial sums are what the thread count must not change.
std::size_t Conv2d::parts_for(std::size_t n) const {
  return std::min(parts_.size(), n);
}

// Part p of P takes samples [p·n/P, (p+1)·n/P): with n = 5, P = 2, part 0 gets 0..1 and
// part 1 gets 2..4. Thread t of T runs parts [t·P/T, (t+1)·P/T) one after the other (part 0,
// and with it the step's communication poll, on the caller), T = the threads planned, no
// more than the BLAS budget now (a caller may have lowered it since plan()). The BLAS runs
// single-threaded inside the parallel region.
template <typename Body>
void Conv2d::for_each_part(std::size_t n, std::size_t parts, Body&& body) {
  auto run_parts = [&](std::size_t t, std::size_t threads) {
    for (std::size_t p = t * parts / threads; p < (t + 1) * parts / threads; ++p)
      body(p, p * n / parts, (p + 1) * n / parts);
  };
  const std::size_t threads = std::min({threads_, blas::parallel_threads(), parts});
  if (threads <= 1) {
    run_parts(0, 1);
    return;
  }
  auto run_thread = [&](std::size_t t) { run_parts(t, threads); };
  blas::ScopedThreads single(1);
  blas::parallel_parts(threads, run_thread);
}

// image: (C, H, W) -> col: (C·k·k, Ho·Wo), through padded: (C, H + 2p, W + 2p) + kChunk.
//
// The image is first copied into the interior of padded, whose border stays zero from
// plan(); then every entry of col is a plain read of padded,
//   col[(c, ki, kj), (oh, ow)] = padded[c, oh·s + ki, ow·s + kj],
// with no bounds test. For s = 1 each (row, oh) is a run of Wo consecutive floats, copied
// in fixed chunks of kChunk floats: the last chunk of a run overshoots into the start of
// the next run, which is written afterwards anyway (runs are filled in increasing address
// order), and both buffers carry kChunk floats of slack at the end. Fixed-size chunks beat
// a copy loop of run-time length Wo (bench/README-conv.md, "Measurements behind the code
// comments").
void Conv2d::im2col(const float* image, float* col, float* padded) const {
  const std::size_t hp = h_ + 2 * pad_, wp = w_ + 2 * pad_, s = stride_;
  for (std::size_t c = 0; c < in_c_; ++c)
    for (std::size_t ih = 0; ih < h_; ++ih)
      std::copy_n(image + (c * h_ + ih) * w_, w_, padded + (c * hp + ih + pad_) * wp + pad_);
  for (std::size_t c = 0; c < in_c_; ++c)
    for (std::size_t ki = 0; ki < k_; ++ki)
      for (std::size_t kj = 0; kj < k_; ++kj) {
        float* dst = col + ((c * k_ + ki) * k_ + kj) * pixels_;
        const float* src = padded + (c * hp + ki) * wp + kj;  // padded[c, ki, kj]
        for (std::size_t oh = 0; oh < ho_; ++oh, dst += wo_, src += s * wp) {
          if (s == 1) {
            for (std::size_t ow = 0; ow < wo_; ow += kChunk)
              std::memcpy(dst + ow, src + ow, sizeof(float) * kChunk);  // may overshoot: see above
          } else {
            for (std::size_t ow = 0; ow < wo_; ++ow) dst[ow] = src[ow * s];
          }
        }
      }
}

// col: (C·k·k, Ho·Wo) -> image: (C, H, W), the transpose of im2col: every column entry is
// added back to the pixel it was read from. Accumulates into padded (zeroed first; the
// image itself when p = 0), then copies the interior out; the border collects the gradient
// of the zero padding, which is dropped.
void Conv2d::col2im(const float* col, float* image, float* padded) const {
  const std::size_t hp = h_ + 2 * pad_, wp = w_ + 2 * pad_, s = stride_;
  if (pad_ == 0) padded = image;
  std::fill_n(padded, in_c_ * hp * wp, 0.0f);
  for (std::size_t c = 0; c < in_c_; ++c)
    for (std::size_t ki = 0; ki < k_; ++ki)
      for (std::size_t kj = 0; kj < k_; ++kj) {
        const float* src = col + ((c * k_ + ki) * k_ + kj) * pixels_;
        float* dst = padded + (c * hp + ki) * wp + kj;
        for (std::size_t oh = 0; oh < ho_; ++oh, src += wo_, dst += s * wp) {
          if (s == 1) {
            for (std::size_t ow = 0; ow < wo_; ++ow) dst[ow] += src[ow];
          } else {
            for (std::size_t ow = 0; ow < wo_; ++ow) dst[ow * s] += src[ow];
          }
        }
      }
  if (pad_ > 0) {
    for (std::size_t c = 0; c < in_c_; ++c)
      for (std::size_t ih = 0; ih < h_; ++ih)
        std::copy_n(padded + (c * hp + ih + pad_) * wp + pad_, w_, image + (c * h_ + ih) * w_);
  }
}

// y[begin, end) from x[begin, end): one sgemm per sample.
void Conv2d::forward_samples(const float* x, float* y, std::size_t begin, std::size_t end,
                             PartWorkspace& ws) {
  const std::size_t in_size = in_c_ * h_ * w_, out_size = out_c_ * pixels_;
  for (std::size_t i = begin; i < end; ++i) {
    const float* xi = x + i * in_size;
    float* yi = y + i * out_size;
    const float* col = xi;
    if (!identity_col_) {
      im2col(xi, ws.col.data(), ws.padded.data());
      col = ws.col.data();
    }
    // y_i = W · col_i   (O, Ho·Wo) = (O, C·k·k) · (C·k·k, Ho·Wo)
    blas::gemm(blas::Trans::kNo, blas::Trans::kNo, int(out_c_), int(pixels_), int(patch_), 1.0f,
               weight_.data(), col, 0.0f, yi);
    // y_i += b · 1ᵀ
    for (std::size_t o = 0; o < out_c_; ++o) {
      float* row = yi + o * pixels_;
      const float b = bias_[o];
      for (std::size_t q = 0; q < pixels_; ++q) row[q] += b;
    }
  }
}

// Over samples [begin, end), end > begin: grad_weight = Σ dy_i · col_iᵀ and
// grad_bias = Σ_i Σ_pixels dy_i (both overwritten), and dx_i unless dx is null.
void Conv2d::backward_samples(const float* x, const float* dy, float* dx, std::size_t begin,
                              std::size_t end, float* grad_weight, float* grad_bias,
                              PartWorkspace& ws, const StepContext* poll) {
  const std::size_t in_size = in_c_ * h_ * w_, out_size = out_c_ * pixels_;
  std::fill_n(grad_bias, out_c_, 0.0f);
  for (std::size_t i = begin; i < end; ++i) {
    const float* xi = x + i * in_size;
    const float* dyi = dy + i * out_size;
    const float* col = xi;
    if (!identity_col_) {
      im2col(xi, ws.col.data(), ws.padded.data());
      col = ws.col.data();
    }
    // dW (+)= dy_i · col_iᵀ   (O, C·k·k) = (O, Ho·Wo) · (Ho·Wo, C·k·k); the first sample overwrites
    blas::gemm(blas::Trans::kNo, blas::Trans::kYes, int(out_c_), int(patch_), int(pixels_), 1.0f,
               dyi, col, i == begin ? 0.0f : 1.0f, grad_weight);
    // db += Σ_pixels dy_i
    for (std::size_t o = 0; o < out_c_; ++o) grad_bias[o] += sum_of(dyi + o * pixels_, pixels_);
    if (poll) poll_communication(*poll);  // between samples: gradient rings in flight move
    if (dx == nullptr) continue;
    float* dxi = dx + i * in_size;
    // dcol = Wᵀ · dy_i   (C·k·k, Ho·Wo) = (C·k·k, O) · (O, Ho·Wo); then dx_i = col2im(dcol)
    if (identity_col_) {
      blas::gemm(blas::Trans::kYes, blas::Trans::kNo, int(patch_), int(pixels_), int(out_c_), 1.0f,
                 weight_.data(), dyi, 0.0f, dxi);
    } else {
      blas::gemm(blas::Trans::kYes, blas::Trans::kNo, int(patch_), int(pixels_), int(out_c_), 1.0f,
                 weight_.data(), dyi, 0.0f, ws.col.data());
      col2im(ws.col.data(), dxi, ws.padded_grad.data());
    }
  }
}

// Exact micro-batches (ctx.exact_micro_batch = m > 0): each chunk of m rows (the last may be
// shorter) runs as a call of its own would, so its bits are those of one call per
// micro-batch; Winograd then keeps no V in forward (a later chunk would overwrite it), and
// backward transforms each chunk's inputs again (winograd::keep_inputs: the same bits).
void Conv2d::forward(std::span<const float> x, std::span<float> y, std::size_t n,
                     const StepContext& ctx) {
  if (n == 0) return;
  if (winograd_) winograd::transform_filters(weight_, out_c_, in_c_, u_);
  const std::size_t in_size = in_c_ * h_ * w_, out_size = out_c_ * pixels_;
  const bool exact = ctx.exact_micro_batch > 0;
  const std::size_t m = exact ? ctx.exact_micro_batch : n;
  for (std::size_t first = 0; first < n; first += m)
    forward_rows(x.data() + first * in_size, y.data() + first * out_size, std::min(m, n - first),
                 ctx.training && !exact);  // evaluation keeps nothing for a backward
}

// x: (n, C, H, W) -> y: (n, O, Ho, Wo), n > 0, in the parts of n; keep: Winograd keeps V.
void Conv2d::forward_rows(const float* x, float* y, std::size_t n, bool keep) {
  if (winograd_) {
    const std::size_t in_size = in_c_ * h_ * w_, out_size = out_c_ * pixels_;
    for_each_part(n, parts_for(n), [&](std::size_t p, std::size_t begin, std::size_t end) {
      winograd::convolve(winograd_geometry_, u_.data(), bias_.data(), x + begin * in_size,
                         end - begin, y + begin * out_size, parts_[p].winograd, keep);
    });
    return;
  }
  for_each_part(n, parts_for(n), [&](std::size_t p, std::size_t begin, std::size_t end) {
    forward_samples(x, y, begin, end, parts_[p]);
  });
}

void Conv2d::backward(std::span<const float> x, std::span<const float> /*y*/,
                      std::span<const float> dy, std::span<float> dx, std::size_t n,
                      const StepContext& ctx) {
  float* dx_rows = dx.empty() ? nullptr : dx.data();  // null: the input gradient is not needed
  if (ctx.exact_micro_batch == 0) return backward_rows(x.data(), dy.data(), dx_rows, n, ctx);
  if (ctx.exact_gradient == nullptr)
    throw Error("Conv2d: exact micro-batches (ctx.exact_micro_batch) need ctx.exact_gradient");
  const std::size_t m = ctx.exact_micro_batch;
  const std::size_t in_size = in_c_ * h_ * w_, out_size = out_c_ * pixels_;
  ctx.exact_gradient->bound(std::array{grad_weight_, grad_bias_},
                            term_bounds(x.data(), dy.data(), n, m));
  for (std::size_t first = 0; first < n; first += m) {
    const std::size_t rows = std::min(m, n - first);
    const float* x_rows = x.data() + first * in_size;
    if (winograd_)  // V of this chunk's parts, as its own forward call would have kept it
      for_each_part(rows, parts_for(rows), [&](std::size_t p, std::size_t begin, std::size_t end) {
        winograd::keep_inputs(winograd_geometry_, x_rows + begin * in_size, end - begin,
                              parts_[p].winograd);
      });
    backward_rows(x_rows, dy.data() + first * out_size,
                  dx_rows ? dx_rows + first * in_size : nullptr, rows, ctx);
    ctx.exact_gradient->add(grad_weight_);
    ctx.exact_gradient->add(grad_bias_);
  }
}

// A chunk of k rows gives dW elements that sum k·Ho·Wo products dy·x (padding's zeros
// included) and db elements that sum k·Ho·Wo values of dy (exact_bounds.hpp), bounded by the
// chunk's own largest |dy| and |x|: a function of each chunk's rows, as Linear's are.
std::array<double, 2> Conv2d::term_bounds(const float* x, const float* dy, std::size_t n,
                                          std::size_t m) const {
  const std::size_t in_size = in_c_ * h_ * w_, out_size = out_c_ * pixels_;
  std::array<double, 2> bounds{0.0, 0.0};
  for (std::size_t first = 0; first < n; first += m) {
    const std::size_t rows = std::min(m, n - first);
    const double products = double(rows) * double(pixels_);
    const double dy_max = exact_bounds::max_abs(dy + first * out_size, rows * out_size);
    const double x_max = exact_bounds::max_abs(x + first * in_size, rows * in_size);
    bounds[0] = std::max(bounds[0], exact_bounds::sum_of_products(products, dy_max, x_max));
    bounds[1] = std::max(bounds[1], exact_bounds::sum_of_products(products, dy_max, 1.0));
  }
  return bounds;
}

// dW, db of n rows into the gradient views (overwritten), and dx unless null; Winograd needs
// the V of these n rows kept on its parts' workspaces.
void Conv2d::backward_rows(const float* x, const float* dy, float* dx, std::size_t n,
                           const StepContext& ctx) {
  if (n == 0) {
    std::fill(grad_weight_.begin(), grad_weight_.end(), 0.0f);
    std::fill(grad_bias_.begin(), grad_bias_.end(), 0.0f);
    return;
  }
  const std::size_t parts = parts_for(n);
  if (winograd_) {
    winograd_backward(dy, dx, n, parts, ctx);
    return;
  }
  for_each_part(n, parts, [&](std::size_t p, std::size_t begin, std::size_t end) {
    PartWorkspace& ws = parts_[p];
    backward_samples(x, dy, dx, begin, end, p == 0 ? grad_weight_.data() : ws.grad_weight.data(),
                     p == 0 ? grad_bias_.data() : ws.grad_bias.data(), ws, p == 0 ? &ctx : nullptr);
  });
  // dW = dW_0 + dW_1 + ... in part order: the same sum, bit for bit, on every run.
  for (std::size_t p = 1; p < parts; ++p) {
    const std::vector<float>& gw = parts_[p].grad_weight;
    for (std::size_t j = 0; j < gw.size(); ++j) grad_weight_[j] += gw[j];
    for (std::size_t o = 0; o < out_c_; ++o) grad_bias_[o] += parts_[p].grad_bias[o];
  }
}

// Winograd backward: each part transposes its forward (winograd::backward) into its du and
// dx, and sums its db; then du = du_0 + du_1 + ... in part order and dW = Gᵀ du G.
void Conv2d::winograd_backward(const float* dy, float* dx, std::size_t n, std::size_t parts,
                               const StepContext& ctx) {
  const std::size_t in_size = in_c_ * h_ * w_, out_size = out_c_ * pixels_;
  for_each_part(n, parts, [&](std::size_t p, std::size_t begin, std::size_t end) {
    PartWorkspace& ws = parts_[p];
    winograd::backward(winograd_geometry_, u_.data(), dy + begin * out_size, end - begin,
                       dx ? dx + begin * in_size : nullptr, ws.winograd_du.data(), ws.winograd,
                       p == 0 ? &ctx : nullptr);
    float* grad_bias = p == 0 ? grad_bias_.data() : ws.grad_bias.data();
    std::fill_n(grad_bias, out_c_, 0.0f);
    for (std::size_t i = begin; i < end; ++i)  // db = Σ_i Σ_pixels dy_i
      for (std::size_t o = 0; o < out_c_; ++o)
        grad_bias[o] += sum_of(dy + i * out_size + o * pixels_, pixels_);
  });
  std::vector<float>& du = parts_[0].winograd_du;
  for (std::size_t p = 1; p < parts; ++p) {
    for (std::size_t j = 0; j < du.size(); ++j) du[j] += parts_[p].winograd_du[j];
    for (std::size_t o = 0; o < out_c_; ++o) grad_bias_[o] += parts_[p].grad_bias[o];
  }
  winograd::filter_gradient(du, out_c_, in_c_, grad_weight_);
}

}  // namespace ringtrain
