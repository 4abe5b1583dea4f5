// Winograd's minimal filtering F(2x2, 5x5): a stride-1 5x5 convolution with 36 products per
// 2x2 outputs instead of 100 (Lavin & Gray, "Fast Algorithms for Convolutional Neural
// Networks", 2016). Conv2d uses it, forward and backward, when the kernel is 5x5 with
// stride 1 (see conv2d.hpp, "Algorithm").
//
// Vocabulary. The output plane is cut into 2x2 *tiles*; tile (ty, tx) needs the 6x6 input
// patch at padded rows 2ty .. 2ty+5, columns 2tx .. 2tx+5. In one dimension, with d the 6
// inputs and g the 5 filter taps, the two outputs y_i = Σ_k d[i+k]·g[k] are
//   y = Aᵀ [ (G g) ⊙ (Bᵀ d) ]            Aᵀ: (2, 6)   G: (6, 5)   Bᵀ: (6, 6)
// and in two dimensions, per tile, input channel c and output channel o,
//   Y = Aᵀ [ Σ_c (G g_oc Gᵀ) ⊙ (Bᵀ d_c B) ] A                       (2, 2)
// The sum over c of 36 element-wise products is 36 independent matrix products, one per
// *point* (ξ, ν) of the 6x6 transform:
//   M[ξν] = U[ξν] · V[ξν]      (O, tiles) = (O, C) · (C, tiles)
// with U[ξν][o][c] = (G g_oc Gᵀ)[ξ][ν] (the *filter transform*, once per step) and
// V[ξν][c][t] = (Bᵀ d_c,t B)[ξ][ν] (the *input transform*, per tile t and channel c).
//
// Where the matrices come from (Toom-Cook): the correlation is the transpose of a linear
// convolution, computed by evaluating polynomials at the points 0, 1, -1, 2, -2 and ∞ and
// interpolating. Aᵀ holds the powers p^i of the points (i = 0, 1), G the powers p^k
// (k = 0..4) and Bᵀ the transposed interpolation matrix; the rows of Bᵀ are scaled by
// 4, 6, 6, 24, 24, 1 to make them integers, and the rows of G by the inverse. The test
// "Winograd F(2x2, 5x5) tables ..." checks the identity above on random numbers.
//
// Cost, the cnn's second layer (32 -> 64, 14x14, batch 128): 2.57 GFLOP of products
// direct, 0.92 GFLOP with F(2x2, 5x5) (36/(4·25) = 0.36 of them), for the forward and for
// each of dW and dx, plus transforms that are linear in the data (~0.09 GFLOP forward,
// counted from the terms in winograd.cpp). The transforms and their patch copies are
// memory-bound and take about as long as the products: bench_conv_algorithms measures
// the whole layer against im2col (bench/README-conv.md).
// Rounding: each output is still a float sum of 36·C products, but of transformed values:
// the rows of Bᵀ have absolute sums up to 10, so V can reach 100x the input. The Conv2d
// tests bound the error against a direct convolution in double.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "ringtrain/framework/layer.hpp"

namespace ringtrain::winograd {

inline constexpr std::size_t kKernel = 5;  // r: filter taps per side
inline constexpr std::size_t kOut = 2;     // m: outputs per tile side
inline constexpr std::size_t kAlpha = 6;   // m + r - 1: inputs per tile side
inline constexpr std::size_t kPoints = kAlpha * kAlpha;

// Aᵀ (2, 6), G (6, 5), Bᵀ (6, 6) as above; the transforms in winograd.cpp are these rows
// written out term by term.
inline constexpr float kAt[kOut][kAlpha] = {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 1}};
inline constexpr float kG[kAlpha][kKernel] = {
    {1.0f / 4, 0, 0, 0, 0},
    {1.0f / 6, 1.0f / 6, 1.0f / 6, 1.0f / 6, 1.0f / 6},
    {1.0f / 6, -1.0f / 6, 1.0f / 6, -1.0f / 6, 1.0f / 6},
    {1.0f / 24, 2.0f / 24, 4.0f / 24, 8.0f / 24, 16.0f / 24},
    {1.0f / 24, -2.0f / 24, 4.0f / 24, -8.0f / 24, 16.0f / 24},
    {0, 0, 0, 0, 1}};
inline constexpr float kBt[kAlpha][kAlpha] = {{4, 0, -5, 0, 1, 0},  {0, 4, 4, -1, -1, 0},
                                              {0, -4, 4, 1, -1, 0}, {0, -2, -1, 2, 1, 0},
                                              {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};

// One stride-1 5x5 convolution: input (in_c, h, w), zero padding pad on every side, output
// (out_c, ho, wo) with ho = h + 2·pad - 4, wo = w + 2·pad - 4, in tiles_h x tiles_w tiles
// (the last row / column of tiles is cut when ho / wo is odd).
struct Geometry {
  std::size_t in_c = 0, out_c = 0, h = 0, w = 0, pad = 0;
  std::size_t ho = 0, wo = 0, tiles_h = 0, tiles_w = 0;

  // Throws UsageError unless h + 2·pad >= 5 and w + 2·pad >= 5.
  static Geometry make(std::size_t in_c, std::size_t out_c, std::size_t h, std::size_t w,
                       std::size_t pad);
  std::size_t tiles() const { return tiles_h * tiles_w; }
  // The zero-bordered input plane the patches are read from: (2·tiles_h + 4, 2·tiles_w + 4).
  std::size_t padded_h() const { return kOut * tiles_h + kKernel - 1; }
  std::size_t padded_w() const { return kOut * tiles_w + kKernel - 1; }
};

// U[ξν][o][c] = (G g Gᵀ)[ξ][ν], (36, out_c, in_c), for the filters g = weight[o][c] of
// weight (out_c, in_c, 5, 5); computed in double.
void transform_filters(std::span<const float> weight, std::size_t out_c, std::size_t in_c,
                       std::span<float> u);

// Buffers for groups of `images` images, planned once (the hot path allocates nothing).
// With backward_images > 0, convolve() also keeps the transformed inputs V of up to that
// many images for backward() (36·in_c·tiles floats per image).
struct Workspace {
  Workspace() = default;
  Workspace(const Geometry& g, std::size_t group_images, std::size_t keep_images = 0);

  // Owned by convolve() and backward(); a caller only constructs it.
  std::size_t images = 0, backward_images = 0;
  std::size_t kept_images = 0;    // images of the last convolve() whose V is kept
  std::vector<float> padded;      // (padded_h, padded_w): one input plane, zero border
  std::vector<float> grad_plane;  // (padded_h, padded_w): dx of one plane, with border
  std::vector<float> patches;     // (36, images·tiles): the 6x6 patch of every tile
  std::vector<float> half;        // (36, images·tiles): a transform after its first pass
  std::vector<float> v;           // (36, in_c, images·tiles): transformed inputs (or dV)
  std::vector<float> m;           // (36, out_c, images·tiles): products (or dM)
  std::vector<float> kept_v;      // V of each group of images, for backward()
};

// y_i = conv(x_i) + bias for images i in [0, n): x (n, in_c, h, w), y (n, out_c, ho, wo),
// u from transform_filters (36, out_c, in_c), bias (out_c) or null. Calls the BLAS 36 times
// per group of ws.images images, and poll_communication(*poll) after each group unless
// poll is null. keep_for_backward: keeps V for backward() (throws Error if n is more than
// the workspace's backward_images); else backward() on ws throws until the next keeping call.
void convolve(const Geometry& g, const float* u, const float* bias, const float* x, std::size_t n,
              float* y, Workspace& ws, bool keep_for_backward, const StepContext* poll = nullptr);

// The exact adjoint of the last convolve(g, u, ., x, n, ...) on ws, given dy (n, out_c, ho, wo):
//   dM = A dY Aᵀ per tile                              (the adjoint of the output transform)
//   du[ξν] = Σ_groups dM[ξν] · V[ξν]ᵀ                  (36, out_c, in_c), overwritten
//   dV[ξν] = U[ξν]ᵀ · dM[ξν],  dx = Σ_tiles B dV Bᵀ    (overlapping patches add up)
// dx (n, in_c, h, w) is overwritten, or skipped when null. Throws Error when ws holds no V
// of n images (no convolve() before, or n > backward_images).
void backward(const Geometry& g, const float* u, const float* dy, std::size_t n, float* dx,
              float* du, Workspace& ws, const StepContext* poll = nullptr);

// grad_weight (out_c, in_c, 5, 5) = Gᵀ du G per filter, from du (36, out_c, in_c): the
// adjoint of transform_filters (not flipped); computed in double, overwrites grad_weight.
void filter_gradient(std::span<const float> du, std::size_t out_c, std::size_t in_c,
                     std::span<float> grad_weight);

}  // namespace ringtrain::winograd
