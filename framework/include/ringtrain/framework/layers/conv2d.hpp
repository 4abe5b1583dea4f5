// Conv2d: 2-D convolution (cross-correlation, as in PyTorch) by im2col + one GEMM per sample.
//
//   x: (n, C, H, W)   W: (O, C, k, k)   b: (O)   y: (n, O, Ho, Wo)
//   Ho = (H + 2p - k) / s + 1,  Wo = (W + 2p - k) / s + 1   (floor)
//   y[i, o, oh, ow] = b[o] + Σ_{c, ki, kj} W[o, c, ki, kj] · x[i, c, oh·s - p + ki, ow·s - p + kj]
//   (x outside the image reads as 0: zero padding)
//
// im2col turns each sample into a matrix so the convolution is a matrix product:
//   col_i[(c, ki, kj), (oh, ow)] = x[i, c, oh·s - p + ki, ow·s - p + kj]   (C·k·k, Ho·Wo)
//   y_i = W · col_i + b·1ᵀ                                                 (O, Ho·Wo)
// Backward, with dy_i: (O, Ho·Wo):
//   dW   = Σ_i dy_i · col_iᵀ              (O, C·k·k)
//   db   = Σ_i Σ_{oh, ow} dy_i            (O)
//   dcol = Wᵀ · dy_i                      (C·k·k, Ho·Wo), then dx_i = col2im(dcol): the
//          transpose of im2col, which adds every column entry back to the pixel it came from.
//
// Parallelism: the batch is cut into P = min(kParts, n) contiguous parts of samples, whatever
// the thread count. The parts run on the rank's threads (blas::threads() at plan(), capped by
// blas::threads() at the call and by P; blas::parallel_parts), each thread its run of
// consecutive parts, calling the BLAS single-threaded; a part's partial dW, db go to its own
// buffers and are summed in part order 0, 1, ..., P-1. So every thread count computes the
// same sums: bitwise the same results at 1, 2 or 3 threads. Threads beyond kParts add nothing
// to a convolution.
//
// Exact micro-batches (ctx.exact_micro_batch = m > 0, --reduction exact, train/exact_step.hpp):
// forward and backward run each chunk of m rows from the call's first row (the last may be
// shorter) as a call of its own, and backward hands the bounds of the chunks' terms, then each
// chunk's dW, db to ctx.exact_gradient (layer.hpp), so one call on n rows gives the bits of
// one call per micro-batch. Winograd
// keeps no V in such a forward; backward transforms each chunk's inputs again.
//
// Algorithm. A 5x5 kernel at stride 1 between layers of >= 8 channels (the cnn's second
// layer) runs by Winograd's F(4x4, 5x5) instead (winograd.hpp: 64 products per 4x4 outputs
// instead of 400), forward and backward. Its backward is the exact transpose of the
// forward's stages (dW and dx both from the transformed dy) and reads the transformed
// inputs that the forward keeps, so it needs the forward on the same x first, as every
// layer's backward does (layer.hpp); without one it throws. db is summed from dy directly.
// Algorithm::kIm2col / kWinograd force a choice (tests, benchmarks, ringtrain train
// --conv-algorithm).
//
// Workspace, per part: one sample's column matrix, a zero-bordered copy of one image, and
// (parts >= 1) partial dW, db; Winograd: its buffers for 4 images at a time, the
// transformed inputs of all the part's samples (64·C·tiles floats a sample: 131 KB for the
// cnn's second layer) and a partial du. Planned in plan() and reused for every sample, the
// hot path allocates nothing. Parameters are initialised like PyTorch: U(±1/sqrt(C·k·k))
// for weight and bias.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "ringtrain/framework/layer.hpp"
#include "ringtrain/framework/layers/winograd.hpp"

namespace ringtrain {

class Conv2d final : public Layer {
 public:
  enum class Algorithm { kAuto, kIm2col, kWinograd };

  // Square kernel of side `kernel`; throws UsageError for zero sizes, and for kWinograd
  // unless kernel = 5, stride = 1 and padding <= 4.
  Conv2d(std::size_t in_channels, std::size_t out_channels, std::size_t kernel,
         std::size_t stride = 1, std::size_t padding = 0, Algorithm algorithm = Algorithm::kAuto);

  std::string kind() const override { return "conv2d"; }
  // Input (C, H, W) with C = in_channels and H, W + 2·padding >= kernel; returns (O, Ho, Wo).
  Shape plan(const Shape& input, std::size_t max_batch) override;
  std::vector<ParamSpec> parameter_specs() const override;
  void bind(const LayerBinding& binding) override;
  void forward(std::span<const float> x, std::span<float> y, std::size_t n,
               const StepContext& ctx) override;
  void backward(std::span<const float> x, std::span<const float> y, std::span<const float> dy,
                std::span<float> dx, std::size_t n, const StepContext& ctx) override;
  // 2·O·C·k·k·Ho·Wo (of the direct convolution, whatever the algorithm)
  double forward_flops_per_sample() const override;
  // "im2col" or "winograd F(4x4,5x5)": the algorithm of forward and dx (after plan()).
  std::string algorithm_name() const;

 private:
  // One part's buffers (see "Workspace" above).
  struct PartWorkspace {
    // im2col only (empty for Winograd):
    std::vector<float> col;          // (C·k·k, Ho·Wo) + slack: one sample's columns, reused
    std::vector<float> padded;       // (C, H + 2p, W + 2p) + slack: one image, zero border
    std::vector<float> padded_grad;  // (C, H + 2p, W + 2p): col2im's accumulator (p > 0)
    std::vector<float> grad_weight;  // (O, C·k·k): this part's dW (parts >= 1 only)
    // both:
    std::vector<float> grad_bias;    // (O): this part's db (parts >= 1 only)
    winograd::Workspace winograd;    // Winograd only: its buffers, V kept for backward
    std::vector<float> winograd_du;  // Winograd only: (64, O, C), this part's du
  };

  std::size_t parts_for(std::size_t n) const;
  // Runs body(part, first_sample, end_sample) for each part of n samples, in parallel.
  template <typename Body>
  void for_each_part(std::size_t n, std::size_t parts, Body&& body);
  void forward_rows(const float* x, float* y, std::size_t n, bool keep);
  void backward_rows(const float* x, const float* dy, float* dx, std::size_t n,
                     const StepContext& ctx);
  // Exact: bounds on the elements of every chunk's dW and db (ExactGradientSink::bound).
  std::array<double, 2> term_bounds(const float* x, const float* dy, std::size_t n,
                                    std::size_t m) const;
  void forward_samples(const float* x, float* y, std::size_t begin, std::size_t end,
                       PartWorkspace& ws);
  // poll: the step's communication poll, called after each sample (part 0 only), or null.
  void backward_samples(const float* x, const float* dy, float* dx, std::size_t begin,
                        std::size_t end, float* grad_weight, float* grad_bias, PartWorkspace& ws,
                        const StepContext* poll);
  void winograd_backward(const float* dy, float* dx, std::size_t n, std::size_t parts,
                         const StepContext& ctx);
  void im2col(const float* image, float* col, float* padded) const;
  void col2im(const float* col, float* image, float* padded) const;

  static constexpr std::size_t kChunk = 8;  // floats per copy in im2col (see conv2d.cpp)
  static constexpr std::size_t kParts = 4;  // parts of a batch (see "Parallelism")
  static constexpr std::size_t kWinogradMinChannels = 8;  // kAuto: fewer -> im2col
  static constexpr std::size_t kWinogradImages = 4;       // images per group (see conv2d.cpp)

  std::size_t in_c_, out_c_, k_, stride_, pad_;
  std::size_t h_ = 0, w_ = 0, ho_ = 0, wo_ = 0;
  std::size_t patch_ = 0;      // C·k·k: rows of a column matrix
  std::size_t pixels_ = 0;     // Ho·Wo: columns of a column matrix
  bool identity_col_ = false;  // 1x1 kernel, stride 1, no padding: col_i is x_i itself
  Algorithm algorithm_;        // as asked
  bool winograd_ = false;      // Winograd F(4x4, 5x5) (decided in the constructor)
  winograd::Geometry winograd_geometry_;
  std::vector<float> u_;              // (64, O, C): the transformed filters of the last forward
  std::vector<PartWorkspace> parts_;  // one per part
  std::size_t threads_ = 1;           // threads planned for the parts
  std::span<float> weight_, bias_, grad_weight_, grad_bias_;
};

}  // namespace ringtrain
