// Winograd's minimal filtering F(4x4, 5x5): a stride-1 5x5 convolution with 64 products per
// 4x4 outputs instead of 400 (Lavin & Gray, "Fast Algorithms for Convolutional Neural
// Networks", 2016). Conv2d uses it, forward and backward, when the kernel is 5x5 with
// stride 1 (see conv2d.hpp, "Algorithm").
//
// Vocabulary. The output plane is cut into 4x4 *tiles*; tile (ty, tx) needs the 8x8 input
// patch at padded rows 4ty .. 4ty+7, columns 4tx .. 4tx+7. In one dimension, with d the 8
// inputs and g the 5 filter taps, the four outputs y_i = Σ_k d[i+k]·g[k] are
//   y = Aᵀ [ (G g) ⊙ (Bᵀ d) ]            Aᵀ: (4, 8)   G: (8, 5)   Bᵀ: (8, 8)
// and in two dimensions, per tile, input channel c and output channel o,
//   Y = Aᵀ [ Σ_c (G g_oc Gᵀ) ⊙ (Bᵀ d_c B) ] A                       (4, 4)
// The sum over c of 64 element-wise products is 64 independent matrix products, one per
// *point* (ξ, ν) of the 8x8 transform:
//   M[ξν] = U[ξν] · V[ξν]      (O, tiles) = (O, C) · (C, tiles)
// with U[ξν][o][c] = (G g_oc Gᵀ)[ξ][ν] (the *filter transform*, once per step) and
// V[ξν][c][t] = (Bᵀ d_c,t B)[ξ][ν] (the *input transform*, per tile t and channel c).
//
// Where the matrices come from (Toom-Cook): the correlation is the transpose of a linear
// convolution, computed by evaluating polynomials at the points 0, 1, -1, 2, -2, 1/2, -1/2
// and ∞ and interpolating. Aᵀ holds the powers p^i of the points (i = 0..3), G the powers
// p^k (k = 0..4) and Bᵀ the transposed interpolation matrix; the rows of Bᵀ are scaled by
// 4, 18, 18, 360, 360, 45/16, 45/16, 4 to make them small integers, and the rows of G by
// the inverse. The test "Winograd tables compute a 5-tap correlation" checks the identity
// above on random numbers.
//
// Cost, the cnn's second layer (32 -> 64, 14x14, batch 128): 2.57 GFLOP of products
// direct; with F(4x4, 5x5), 4x4 tiles of 4x4 outputs cover 16x16 (the last row and column
// of tiles are cut to 2), and the products are 0.54 GFLOP (0.21 of them), for the forward
// and for each of dW and dx. The transforms are linear in the data (~0.18 GFLOP forward,
// counted from the tables' nonzero entries) but memory-bound, with the copies of the
// overlapping patches: bench_conv_algorithms measures the layer against im2col
// (bench/README-conv.md).
// Rounding: each output is still a float sum of 64·C products, but of transformed values:
// the rows of Bᵀ have absolute sums up to 50. The Conv2d tests bound the error against a
// direct convolution in double; the smaller F(2x2, 5x5) would not be more accurate
// (bench/README-conv.md, "Measurements behind the code comments").
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <vector>

#include "ringtrain/framework/layer.hpp"

namespace ringtrain::winograd {

inline constexpr std::size_t kKernel = 5;                  // r: filter taps per side
inline constexpr std::size_t kOut = 4;                     // m: outputs per tile side
inline constexpr std::size_t kAlpha = kOut + kKernel - 1;  // m + r - 1 = 8: inputs per side
inline constexpr std::size_t kPoints = kAlpha * kAlpha;

template <typename T, std::size_t Rows, std::size_t Cols>
using Table = std::array<std::array<T, Cols>, Rows>;

// Aᵀ (4, 8), G (8, 5), Bᵀ (8, 8) as above; winograd.cpp applies them row by row.
inline constexpr Table<float, kOut, kAlpha> kAt = {{{1, 1, 1, 1, 1, 1, 1, 0},
                                                    {0, 1, -1, 2, -2, 1.0f / 2, -1.0f / 2, 0},
                                                    {0, 1, 1, 4, 4, 1.0f / 4, 1.0f / 4, 0},
                                                    {0, 1, -1, 8, -8, 1.0f / 8, -1.0f / 8, 1}}};
inline constexpr Table<double, kAlpha, kKernel> kG = {
    {{1.0 / 4, 0, 0, 0, 0},
     {1.0 / 18, 1.0 / 18, 1.0 / 18, 1.0 / 18, 1.0 / 18},
     {1.0 / 18, -1.0 / 18, 1.0 / 18, -1.0 / 18, 1.0 / 18},
     {1.0 / 360, 1.0 / 180, 1.0 / 90, 1.0 / 45, 2.0 / 45},
     {1.0 / 360, -1.0 / 180, 1.0 / 90, -1.0 / 45, 2.0 / 45},
     {16.0 / 45, 8.0 / 45, 4.0 / 45, 2.0 / 45, 1.0 / 45},
     {16.0 / 45, -8.0 / 45, 4.0 / 45, -2.0 / 45, 1.0 / 45},
     {0, 0, 0, 0, 1.0 / 4}}};
inline constexpr Table<float, kAlpha, kAlpha> kBt = {{{4, 0, -21, 0, 21, 0, -4, 0},
                                                      {0, -4, -4, 17, 17, -4, -4, 0},
                                                      {0, 4, -4, -17, 17, 4, -4, 0},
                                                      {0, 2, 1, -10, -5, 8, 4, 0},
                                                      {0, -2, 1, 10, -5, -8, 4, 0},
                                                      {0, 4, 8, -5, -10, 1, 2, 0},
                                                      {0, -4, 8, 5, -10, -1, 2, 0},
                                                      {0, -4, 0, 21, 0, -21, 0, 4}}};

// One stride-1 5x5 convolution: input (in_c, h, w), zero padding pad on every side, output
// (out_c, ho, wo) with ho = h + 2·pad - 4, wo = w + 2·pad - 4, in tiles_h x tiles_w tiles
// (the last row / column of tiles is cut when 4 does not divide ho / wo).
struct Geometry {
  std::size_t in_c = 0, out_c = 0, h = 0, w = 0, pad = 0;
  std::size_t ho = 0, wo = 0, tiles_h = 0, tiles_w = 0;

  // Throws UsageError unless h + 2·pad >= 5 and w + 2·pad >= 5.
  static Geometry make(std::size_t in_c, std::size_t out_c, std::size_t h, std::size_t w,
                       std::size_t pad);
  std::size_t tiles() const { return tiles_h * tiles_w; }
  // The zero-bordered input plane the patches are read from: (4·tiles_h + 4, 4·tiles_w + 4).
  std::size_t padded_h() const { return kOut * tiles_h + kKernel - 1; }
  std::size_t padded_w() const { return kOut * tiles_w + kKernel - 1; }
};

// U[ξν][o][c] = (G g Gᵀ)[ξ][ν], (64, out_c, in_c), for the filters g = weight[o][c] of
// weight (out_c, in_c, 5, 5); computed in double.
void transform_filters(std::span<const float> weight, std::size_t out_c, std::size_t in_c,
                       std::span<float> u);

// Buffers for groups of `images` images, planned once (the hot path allocates nothing).
// With backward_images > 0, convolve() also keeps the transformed inputs V of up to that
// many images for backward() (64·in_c·tiles floats per image).
struct Workspace {
  Workspace() = default;
  Workspace(const Geometry& g, std::size_t group_images, std::size_t keep_images = 0);

  // Owned by convolve() and backward(); a caller only constructs it.
  std::size_t images = 0, backward_images = 0;
  std::size_t kept_images = 0;    // images of the last convolve() whose V is kept
  std::vector<float> padded;      // (padded_h, padded_w): one input plane, zero border
  std::vector<float> grad_plane;  // (padded_h, padded_w): dx of one plane, with border
  std::vector<float> patches;     // (64, images·tiles): the 8x8 patch of every tile
  std::vector<float> half;        // (64, images·tiles): a transform after its first pass
  std::vector<float> v;           // (64, in_c, images·tiles): transformed inputs (or dV)
  std::vector<float> m;           // (64, out_c, images·tiles): products (or dM)
  std::vector<float> kept_v;      // V of each group of images, for backward()
};

// y_i = conv(x_i) + bias for images i in [0, n): x (n, in_c, h, w), y (n, out_c, ho, wo),
// u from transform_filters (64, out_c, in_c), bias (out_c) or null. Calls the BLAS 64 times
// per group of ws.images images, and poll_communication(*poll) after each group unless
// poll is null. keep_for_backward: keeps V for backward() (throws Error if n is more than
// the workspace's backward_images); else backward() on ws throws until the next keeping call.
void convolve(const Geometry& g, const float* u, const float* bias, const float* x, std::size_t n,
              float* y, Workspace& ws, bool keep_for_backward, const StepContext* poll = nullptr);

// Keeps V of the images [0, n) of x on ws for backward(), as convolve(..., keep_for_backward =
// true) does, without the products and y: the same groups of ws.images, the same bits. For a
// caller whose later convolve() calls overwrote the kept V (Conv2d's exact micro-batches).
// Throws Error if n is more than ws.backward_images.
void keep_inputs(const Geometry& g, const float* x, std::size_t n, Workspace& ws);

// The exact adjoint of the last convolve(g, u, ., x, n, ...) on ws, given dy (n, out_c, ho, wo):
//   dM = A dY Aᵀ per tile                              (the adjoint of the output transform)
//   du[ξν] = Σ_groups dM[ξν] · V[ξν]ᵀ                  (64, out_c, in_c), overwritten
//   dV[ξν] = U[ξν]ᵀ · dM[ξν],  dx = Σ_tiles B dV Bᵀ    (overlapping patches add up)
// dx (n, in_c, h, w) is overwritten, or skipped when null. Throws Error when ws holds no V
// of n images (no convolve() before, or n > backward_images).
void backward(const Geometry& g, const float* u, const float* dy, std::size_t n, float* dx,
              float* du, Workspace& ws, const StepContext* poll = nullptr);

// grad_weight (out_c, in_c, 5, 5) = Gᵀ du G per filter, from du (64, out_c, in_c): the
// adjoint of transform_filters (not flipped); computed in double, overwrites grad_weight.
void filter_gradient(std::span<const float> du, std::size_t out_c, std::size_t in_c,
                     std::span<float> grad_weight);

}  // namespace ringtrain::winograd
