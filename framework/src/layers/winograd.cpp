// F(4x4, 5x5) convolution in three stages per group of images (see winograd.hpp):
//
//   1. input transform   V[ξν][c][t] = (Bᵀ d_c,t B)[ξ][ν]     per image, channel and tile
//   2. products          M[ξν] = U[ξν] · V[ξν]                64 sgemm, (O, C) · (C, tiles)
//   3. output transform  y_o,t = Aᵀ M_o,t A + b[o]            per image, channel and tile
//
// A 2-D transform X ↦ Pᵀ X P is two 1-D passes: Pᵀ applied down the columns of X, then
// along its rows. Both passes run over all tiles of a group of images at once: the patches
// are first copied out into 64 rows of `lanes` floats (entry (i, j) of every tile in one
// row), so every pass is a loop over contiguous floats that the compiler vectorises, and
// each 1-D transform is compiled from its table with only its nonzero terms (table_row).
//
// Worked patch copy, 14x14 output (4x4 tiles), padding 2: the padded plane is 20x20 (18x18
// and a zero border of 2 more for the cut last tiles) and tile (ty, tx) reads rows
// 4ty .. 4ty+7, columns 4tx .. 4tx+7, so neighbouring tiles share 4 rows or columns.
// Entry (i, j) of tile t = 4·ty + tx is padded[4ty + i][4tx + j].
#include "ringtrain/framework/layers/winograd.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "ringtrain/framework/blas.hpp"
#include "ringtrain/framework/error.hpp"

namespace ringtrain::winograd {
namespace {

// out_k = Σ_j T[k][j] · in_j for every row k of the table T, elementwise over `lanes`
// floats; rows j of in and k of out lie in_stride / out_stride floats apart.
// T is a compile-time constant, so each output row compiles to a loop of exactly its
// nonzero terms (a 0 costs nothing, a ±1 no multiplication): the transform is its table.
// One loop per output row: stores to two rows in one loop would need alias checks between
// them, and GCC then leaves the loop scalar.
template <const auto& T, std::size_t k, std::size_t... j>
void table_row(const float* __restrict in, std::size_t in_stride, float* __restrict out,
               std::size_t lanes, std::index_sequence<j...>) {
  for (std::size_t t = 0; t < lanes; ++t) {
    float sum = -0.0f;  // -0 + x = x for every x: the start folds away
    ((sum = T[k][j] == 0.0f ? sum : sum + T[k][j] * in[j * in_stride + t]), ...);
    out[t] = sum;
  }
}

template <const auto& T, std::size_t... k>
void table_rows(const float* in, std::size_t in_stride, float* out, std::size_t out_stride,
                std::size_t lanes, std::index_sequence<k...>) {
  constexpr std::size_t cols = T[0].size();
  (table_row<T, k>(in, in_stride, out + k * out_stride, lanes, std::make_index_sequence<cols>{}),
   ...);
}

template <const auto& T>
void apply(const float* in, std::size_t in_stride, float* out, std::size_t out_stride,
           std::size_t lanes) {
  table_rows<T>(in, in_stride, out, out_stride, lanes, std::make_index_sequence<T.size()>{});
}

template <typename T, std::size_t Rows, std::size_t Cols>
constexpr Table<T, Cols, Rows> transposed(const Table<T, Rows, Cols>& m) {
  Table<T, Cols, Rows> t{};
  for (std::size_t i = 0; i < Rows; ++i)
    for (std::size_t j = 0; j < Cols; ++j) t[j][i] = m[i][j];
  return t;
}
// The adjoints' tables, for backward: B = (Bᵀ)ᵀ and A = (Aᵀ)ᵀ.
constexpr Table<float, kAlpha, kAlpha> kB = transposed(kBt);
constexpr Table<float, kAlpha, kOut> kA = transposed(kAt);

// Weights (filters, 5, 5) and their transforms (64, filters) must match.
void check_filter_sizes(const char* caller, std::size_t weights, std::size_t transformed,
                        std::size_t filters) {
  if (weights != filters * kKernel * kKernel || transformed != kPoints * filters)
    throw Error(std::string("winograd::") + caller + ": " + std::to_string(weights) +
                " weights and " + std::to_string(transformed) + " transformed values do not fit " +
                std::to_string(filters) + " filters of 5x5");
}

}  // namespace

Geometry Geometry::make(std::size_t in_c, std::size_t out_c, std::size_t h, std::size_t w,
                        std::size_t pad) {
  if (h + 2 * pad < kKernel || w + 2 * pad < kKernel)
    throw UsageError("Winograd F(4x4, 5x5): input " + std::to_string(h) + "x" + std::to_string(w) +
                     " with padding " + std::to_string(pad) + " is smaller than the 5x5 kernel");
  const std::size_t ho = h + 2 * pad - (kKernel - 1), wo = w + 2 * pad - (kKernel - 1);
  return {.in_c = in_c,
          .out_c = out_c,
          .h = h,
          .w = w,
          .pad = pad,
          .ho = ho,
          .wo = wo,
          .tiles_h = (ho + kOut - 1) / kOut,
          .tiles_w = (wo + kOut - 1) / kOut};
}

// U = G g Gᵀ   (6, 6) = (6, 5) · (5, 5) · (5, 6), per filter.
void transform_filters(std::span<const float> weight, std::size_t out_c, std::size_t in_c,
                       std::span<float> u) {
  constexpr std::size_t r = kKernel, a = kAlpha;
  const std::size_t filters = out_c * in_c;
  check_filter_sizes("transform_filters", weight.size(), u.size(), filters);
  for (std::size_t o = 0; o < out_c; ++o)
    for (std::size_t c = 0; c < in_c; ++c) {
      const float* g = weight.data() + (o * in_c + c) * r * r;
      double gg[a][r] = {};  // G · g
      for (std::size_t x = 0; x < a; ++x)
        for (std::size_t kj = 0; kj < r; ++kj)
          for (std::size_t ki = 0; ki < r; ++ki) gg[x][kj] += double(kG[x][ki]) * g[ki * r + kj];
      const std::size_t index = o * in_c + c;
      for (std::size_t x = 0; x < a; ++x)
        for (std::size_t y = 0; y < a; ++y) {
          double sum = 0;
          for (std::size_t kj = 0; kj < r; ++kj) sum += gg[x][kj] * double(kG[y][kj]);
          u[(x * a + y) * filters + index] = float(sum);
        }
    }
}

Workspace::Workspace(const Geometry& g, std::size_t group_images, std::size_t keep_images)
    : images(std::max<std::size_t>(1, group_images)),
      backward_images(keep_images),
      padded(g.padded_h() * g.padded_w(), 0.0f),
      grad_plane(keep_images > 0 ? g.padded_h() * g.padded_w() : 0),
      patches(kPoints * images * g.tiles()),
      half(kPoints * images * g.tiles()),
      v(kPoints * g.in_c * images * g.tiles()),
      m(kPoints * g.out_c * images * g.tiles()),
      kept_v(kPoints * g.in_c * keep_images * g.tiles()) {}

namespace {

// 1. of convolve(): V[ξν][c][(image, t)] = (Bᵀ d B)[ξ][ν] for images [first, first + group) of
// x, all at once, into v_group (64, C, group·tiles).
void transform_inputs(const Geometry& g, const float* x, std::size_t first, std::size_t group,
                      float* v_group, Workspace& ws) {
  const std::size_t tiles = g.tiles(), tw = g.tiles_w, pw = g.padded_w();
  const std::size_t in_plane = g.h * g.w, C = g.in_c, a = kAlpha;
  const std::size_t lanes = group * tiles;  // columns of V[ξν]
  float* padded = ws.padded.data();
  float* patches = ws.patches.data();
  float* half = ws.half.data();
  for (std::size_t c = 0; c < C; ++c) {
    for (std::size_t q = 0; q < group; ++q) {
      const float* plane = x + ((first + q) * C + c) * in_plane;
      for (std::size_t ih = 0; ih < g.h; ++ih)  // interior; the border stays zero
        std::copy_n(plane + ih * g.w, g.w, padded + (ih + g.pad) * pw + g.pad);
      // patches[i·8 + j][(q, t)] = padded[4ty + i][4tx + j]
      for (std::size_t i = 0; i < a; ++i)
        for (std::size_t j = 0; j < a; ++j) {
          float* row = patches + (i * a + j) * lanes + q * tiles;
          for (std::size_t ty = 0; ty < g.tiles_h; ++ty) {
            const float* src = padded + (kOut * ty + i) * pw + j;
            for (std::size_t tx = 0; tx < tw; ++tx) row[ty * tw + tx] = src[kOut * tx];
          }
        }
    }
    // down the columns: half[i·8 + ν] = Σ_j Bᵀ[ν][j] · patches[i·8 + j]
    for (std::size_t i = 0; i < a; ++i)
      apply<kBt>(patches + i * a * lanes, lanes, half + i * a * lanes, lanes, lanes);
    // along the rows: V[ξ·8 + ν][c] = Σ_i Bᵀ[ξ][i] · half[i·8 + ν]
    float* v = v_group + c * lanes;
    for (std::size_t nu = 0; nu < a; ++nu)
      apply<kBt>(half + nu * lanes, a * lanes, v + nu * C * lanes, a * C * lanes, lanes);
  }
}

// Where group `first` of n images keeps its V for backward(): kept_v, group after group.
// Throws Error when the workspace keeps fewer than n images.
float* kept_group(const Geometry& g, std::size_t n, std::size_t first, Workspace& ws,
                  const char* caller) {
  if (n > ws.backward_images)
    throw Error(std::string(caller) + ": " + std::to_string(n) +
                " images, but the workspace keeps " + std::to_string(ws.backward_images) +
                " for backward");
  return ws.kept_v.data() + first * kPoints * g.in_c * g.tiles();
}

}  // namespace

void keep_inputs(const Geometry& g, const float* x, std::size_t n, Workspace& ws) {
  for (std::size_t first = 0; first < n; first += ws.images)
    transform_inputs(g, x, first, std::min(ws.images, n - first),
                     kept_group(g, n, first, ws, "winograd::keep_inputs"), ws);
  ws.kept_images = n;
}

void convolve(const Geometry& g, const float* u, const float* bias, const float* x, std::size_t n,
              float* y, Workspace& ws, bool keep_for_backward, const StepContext* poll) {
  const std::size_t tiles = g.tiles(), tw = g.tiles_w;
  const std::size_t out_plane = g.ho * g.wo;
  const std::size_t C = g.in_c, O = g.out_c, a = kAlpha;
  float* patches = ws.patches.data();
  float* half = ws.half.data();
  const bool keep = keep_for_backward;
  if (keep) kept_group(g, n, 0, ws, "winograd::convolve");  // throws if n images do not fit
  ws.kept_images = keep ? n : 0;
  for (std::size_t first = 0; first < n; first += ws.images) {
    const std::size_t group = std::min(ws.images, n - first);
    const std::size_t lanes = group * tiles;  // columns of V[ξν] and M[ξν]
    // V of this group: kept for backward (group after group), or in the scratch buffer
    float* const v_group = keep ? kept_group(g, n, first, ws, "winograd::convolve") : ws.v.data();
    transform_inputs(g, x, first, group, v_group, ws);  // 1. V = Bᵀ d B

    // 2. M[ξν] = U[ξν] · V[ξν]   (O, lanes) = (O, C) · (C, lanes)
    for (std::size_t p = 0; p < kPoints; ++p)
      blas::gemm(blas::Trans::kNo, blas::Trans::kNo, int(O), int(lanes), int(C), 1.0f,
                 u + p * O * C, v_group + p * C * lanes, 0.0f, ws.m.data() + p * O * lanes);

    // 3. y = Aᵀ M A + b, cut to (ho, wo)
    for (std::size_t o = 0; o < O; ++o) {
      const float* m = ws.m.data() + o * lanes;
      // down the columns: half[i·8 + ν] = Σ_ξ Aᵀ[i][ξ] · M[ξ·8 + ν]   (i = 0..3)
      for (std::size_t nu = 0; nu < a; ++nu)
        apply<kAt>(m + nu * O * lanes, a * O * lanes, half + nu * lanes, a * lanes, lanes);
      // along the rows: patches[i·4 + j] = Σ_ν Aᵀ[j][ν] · half[i·8 + ν]   (the 4x4 outputs)
      for (std::size_t i = 0; i < kOut; ++i)
        apply<kAt>(half + i * a * lanes, lanes, patches + i * kOut * lanes, lanes, lanes);
      const float b = bias ? bias[o] : 0.0f;
      for (std::size_t q = 0; q < group; ++q) {
        float* out = y + ((first + q) * O + o) * out_plane;
        for (std::size_t ty = 0; ty < g.tiles_h; ++ty)
          for (std::size_t i = 0; i < kOut && kOut * ty + i < g.ho; ++i) {
            float* row = out + (kOut * ty + i) * g.wo;
            for (std::size_t j = 0; j < kOut; ++j) {
              // row[kOut·tx + j] = Y[i][j][tile (ty, tx)] + b, for the columns inside wo
              const float* src = patches + (i * kOut + j) * lanes + q * tiles + ty * tw;
              const std::size_t columns = g.wo > j ? (g.wo - j + kOut - 1) / kOut : 0;
              for (std::size_t tx = 0; tx < columns; ++tx) row[kOut * tx + j] = src[tx] + b;
            }
          }
      }
    }
    if (poll) poll_communication(*poll);
  }
}

// Backward, per group of images (the same groups as convolve):
//   1. dM[ξν][o][(q, t)] = (A dY Aᵀ)[ξ][ν]     dY the 4x4 tile of dy (0 where a tile is cut)
//   2. du[ξν] += dM[ξν] · V[ξν]ᵀ               (O, C) = (O, lanes) · (lanes, C)
//   3. dV[ξν] = U[ξν]ᵀ · dM[ξν]                (C, lanes) = (C, O) · (O, lanes)
//   4. dx = Σ_tiles B dV Bᵀ                    each 8x8 result added into its patch
void backward(const Geometry& g, const float* u, const float* dy, std::size_t n, float* dx,
              float* du, Workspace& ws, const StepContext* poll) {
  if (n == 0 || ws.kept_images != n)
    throw Error("winograd::backward of " + std::to_string(n) +
                " images without a forward convolve() of them on this workspace");
  const std::size_t tiles = g.tiles(), tw = g.tiles_w, pw = g.padded_w();
  const std::size_t in_plane = g.h * g.w, out_plane = g.ho * g.wo;
  const std::size_t C = g.in_c, O = g.out_c, a = kAlpha;
  float* patches = ws.patches.data();
  float* half = ws.half.data();
  float* m = ws.m.data();
  float* dv = ws.v.data();
  for (std::size_t first = 0; first < n; first += ws.images) {
    const std::size_t group = std::min(ws.images, n - first);
    const std::size_t lanes = group * tiles;
    const float* v_group = ws.kept_v.data() + first * kPoints * C * tiles;

    // 1. dM = A dY Aᵀ, per output channel over the whole group
    for (std::size_t o = 0; o < O; ++o) {
      // patches[i·4 + j][(q, t)] = dy[4ty + i][4tx + j], or 0 outside (ho, wo)
      for (std::size_t q = 0; q < group; ++q) {
        const float* plane = dy + ((first + q) * O + o) * out_plane;
        for (std::size_t i = 0; i < kOut; ++i)
          for (std::size_t j = 0; j < kOut; ++j) {
            float* row = patches + (i * kOut + j) * lanes + q * tiles;
            for (std::size_t ty = 0; ty < g.tiles_h; ++ty)
              for (std::size_t tx = 0; tx < tw; ++tx) {
                const std::size_t oh = kOut * ty + i, ow = kOut * tx + j;
                row[ty * tw + tx] = oh < g.ho && ow < g.wo ? plane[oh * g.wo + ow] : 0.0f;
              }
          }
      }
      // down the columns: half[ξ·4 + j] = Σ_i Aᵀ[i][ξ] · patches[i·4 + j]
      for (std::size_t j = 0; j < kOut; ++j)
        apply<kA>(patches + j * lanes, kOut * lanes, half + j * lanes, kOut * lanes, lanes);
      // along the rows: dM[ξ·8 + ν][o] = Σ_j Aᵀ[j][ν] · half[ξ·4 + j]
      for (std::size_t xi = 0; xi < a; ++xi)
        apply<kA>(half + xi * kOut * lanes, lanes, m + (xi * a * O + o) * lanes, O * lanes, lanes);
    }

    // 2. du[ξν] (+)= dM[ξν] · V[ξν]ᵀ; the first group overwrites
    for (std::size_t p = 0; p < kPoints; ++p)
      blas::gemm(blas::Trans::kNo, blas::Trans::kYes, int(O), int(C), int(lanes), 1.0f,
                 m + p * O * lanes, v_group + p * C * lanes, first == 0 ? 0.0f : 1.0f,
                 du + p * O * C);
    if (dx != nullptr) {
      // 3. dV[ξν] = U[ξν]ᵀ · dM[ξν]
      for (std::size_t p = 0; p < kPoints; ++p)
        blas::gemm(blas::Trans::kYes, blas::Trans::kNo, int(C), int(lanes), int(O), 1.0f,
                   u + p * O * C, m + p * O * lanes, 0.0f, dv + p * C * lanes);
      // 4. dx = Σ B dV Bᵀ, per input channel
      for (std::size_t c = 0; c < C; ++c) {
        // down the columns: half[i·8 + ν] = Σ_ξ Bᵀ[ξ][i] · dV[ξ·8 + ν][c]
        for (std::size_t nu = 0; nu < a; ++nu)
          apply<kB>(dv + (nu * C + c) * lanes, a * C * lanes, half + nu * lanes, a * lanes, lanes);
        // along the rows: patches[i·8 + j] = Σ_ν Bᵀ[ν][j] · half[i·8 + ν]
        for (std::size_t i = 0; i < a; ++i)
          apply<kB>(half + i * a * lanes, lanes, patches + i * a * lanes, lanes, lanes);
        for (std::size_t q = 0; q < group; ++q) {
          float* plane = ws.grad_plane.data();
          std::fill(ws.grad_plane.begin(), ws.grad_plane.end(), 0.0f);
          // grad_plane[4ty + i][4tx + j] += patches[i·8 + j][(q, t)]: the transpose of the
          // patch copy in convolve()
          for (std::size_t i = 0; i < a; ++i)
            for (std::size_t j = 0; j < a; ++j) {
              const float* row = patches + (i * a + j) * lanes + q * tiles;
              for (std::size_t ty = 0; ty < g.tiles_h; ++ty) {
                float* dst = plane + (kOut * ty + i) * pw + j;
                for (std::size_t tx = 0; tx < tw; ++tx) dst[kOut * tx] += row[ty * tw + tx];
              }
            }
          float* out = dx + ((first + q) * C + c) * in_plane;
          for (std::size_t ih = 0; ih < g.h; ++ih)  // the interior; the border is padding
            std::copy_n(plane + (ih + g.pad) * pw + g.pad, g.w, out + ih * g.w);
        }
      }
    }
    if (poll) poll_communication(*poll);
  }
}

// dg[ki][kj] = Σ_ξν G[ξ][ki] · du[ξν] · G[ν][kj], the transpose of U = G g Gᵀ.
void filter_gradient(std::span<const float> du, std::size_t out_c, std::size_t in_c,
                     std::span<float> grad_weight) {
  constexpr std::size_t r = kKernel, a = kAlpha;
  const std::size_t filters = out_c * in_c;
  check_filter_sizes("filter_gradient", grad_weight.size(), du.size(), filters);
  for (std::size_t f = 0; f < filters; ++f) {
    double left[r][a] = {};  // Gᵀ · du
    for (std::size_t ki = 0; ki < r; ++ki)
      for (std::size_t x = 0; x < a; ++x)
        for (std::size_t y = 0; y < a; ++y)
          left[ki][y] += double(kG[x][ki]) * du[(x * a + y) * filters + f];
    float* dg = grad_weight.data() + f * r * r;
    for (std::size_t ki = 0; ki < r; ++ki)
      for (std::size_t kj = 0; kj < r; ++kj) {
        double sum = 0;
        for (std::size_t y = 0; y < a; ++y) sum += left[ki][y] * double(kG[y][kj]);
        dg[ki * r + kj] = float(sum);
      }
  }
}

}  // namespace ringtrain::winograd
