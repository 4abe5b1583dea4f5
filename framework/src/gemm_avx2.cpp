// ringtrain's own single-threaded sgemm for AVX2 with FMA (gemm_own.hpp; blas.cpp decides
// when it runs).
//
// Why it exists: the own kernels' promise, the same bits at any thread count (blas.hpp:
// Kernels), on CPUs without AVX-512. It is not there for speed: on such CPUs `--gemm auto`
// keeps OpenBLAS (bench/README-gemm.md, "The own kernels on AVX2").
//
// One GotoBLAS driver for all three products: C = L·R, L (m x k) and R (k x n) read through
// strides, so that packing absorbs the transposes (Aᵀ stored for dW, Bᵀ stored for the
// forward). R is copied in blocks of kKC x kNC into kNR-wide panels, L in blocks of kMC rows
// into kMR-wide panels; each kMR x kNR tile of C is summed in 12 ymm accumulators
// (acc[r][q] += L(r, k) · R(k, 8q .. 8q+7)). The block sizes were chosen with bench_gemm
// (bench/README-gemm.md, "The own kernels on AVX2").
//
// Order of the sums: each element of C is, for each block of kKC along k in order, the fma
// chain over that block from zero, then written (first block, no accumulate) or added to what
// C holds. Only kKC fixes it, not m, n or where a block of C starts: blas.cpp may cut C over
// threads without changing a bit.
//
// Everything here has internal linkage and instantiates no library template, so no AVX2
// instruction can leak into code that runs on other CPUs (see blas.cpp).
#include <immintrin.h>

#include "ringtrain/framework/gemm_own.hpp"

namespace ringtrain::blas::avx2 {
namespace {

#define RT_AVX2 __attribute__((target("avx2,fma")))

constexpr int kMR = 6, kNR = 16;  // the tile: 6 x 16, 12 accumulators
// Blocks: depth kKC, kMC rows of L (a multiple of kMR), kNC columns of R (a multiple of kNR).
constexpr int kKC = 256, kMC = 96, kNC = 256;

inline int min_int(int a, int b) {
  return a < b ? a : b;
}

// A matrix read through strides: element (r, c) at p[r·rs + c·cs].
struct View {
  const float* p;
  long rs, cs;
};

// L block (mc x kc) -> panels of kMR rows, zero padded: dst[ir·kc + kk·kMR + r].
void pack_left(View l, int mc, int kc, float* dst) {
  for (int ir = 0; ir < mc; ir += kMR) {
    float* panel = dst + static_cast<long>(ir) * kc;
    const int h = min_int(kMR, mc - ir);
    if (l.rs == 1) {  // columns of L lie in memory (Aᵀ stored): copy kMR floats per k
      for (int kk = 0; kk < kc; ++kk) {
        const float* src = l.p + kk * l.cs + ir;
        for (int r = 0; r < kMR; ++r) panel[kk * kMR + r] = r < h ? src[r] : 0.0f;
      }
      continue;
    }
    for (int r = 0; r < kMR; ++r) {  // rows of L lie in memory: one row after another
      if (r >= h) {
        for (int kk = 0; kk < kc; ++kk) panel[kk * kMR + r] = 0.0f;
        continue;
      }
      const float* src = l.p + (ir + r) * l.rs;
      for (int kk = 0; kk < kc; ++kk) panel[kk * kMR + r] = src[kk * l.cs];
    }
  }
}

// dst[t·ld + j] = src[j·stride + t] for t, j < 8: an 8 x 8 block transposed.
RT_AVX2 void transpose8(const float* src, long stride, float* dst, long ld) {
  __m256 r[8], t[8];
  for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(src + j * stride);
  for (int j = 0; j < 8; j += 2) {
    t[j] = _mm256_unpacklo_ps(r[j], r[j + 1]);
    t[j + 1] = _mm256_unpackhi_ps(r[j], r[j + 1]);
  }
  for (int j = 0; j < 8; j += 4) {
    r[j] = _mm256_shuffle_ps(t[j], t[j + 2], 0x44);
    r[j + 1] = _mm256_shuffle_ps(t[j], t[j + 2], 0xEE);
    r[j + 2] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0x44);
    r[j + 3] = _mm256_shuffle_ps(t[j + 1], t[j + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    _mm256_storeu_ps(dst + j * ld, _mm256_permute2f128_ps(r[j], r[j + 4], 0x20));
    _mm256_storeu_ps(dst + (j + 4) * ld, _mm256_permute2f128_ps(r[j], r[j + 4], 0x31));
  }
}

// R block (kc x nc) -> panels of kNR columns, zero padded: dst[jr·kc + kk·kNR + j].
RT_AVX2 void pack_right(View rt, int kc, int nc, float* dst) {
  for (int jr = 0; jr < nc; jr += kNR) {
    float* panel = dst + static_cast<long>(jr) * kc;
    const int w = min_int(kNR, nc - jr);
    if (rt.cs == 1 && w == kNR) {  // rows of R lie in memory: copy kNR floats per k
      for (int kk = 0; kk < kc; ++kk) {
        const float* src = rt.p + kk * rt.rs + jr;
        for (int j = 0; j < kNR; ++j) panel[kk * kNR + j] = src[j];
      }
      continue;
    }
    if (rt.rs == 1 && w == kNR) {  // columns of R lie in memory (Bᵀ stored): transposed
      const float* src = rt.p + jr * rt.cs;
      int kk = 0;
      for (; kk + 8 <= kc; kk += 8)
        for (int h = 0; h < kNR; h += 8)
          transpose8(src + h * rt.cs + kk, rt.cs, panel + kk * kNR + h, kNR);
      for (; kk < kc; ++kk)
        for (int j = 0; j < kNR; ++j) panel[kk * kNR + j] = src[j * rt.cs + kk];
      continue;
    }
    for (int kk = 0; kk < kc; ++kk)  // the last, narrower panel
      for (int j = 0; j < kNR; ++j)
        panel[kk * kNR + j] = j < w ? rt.p[kk * rt.rs + (jr + j) * rt.cs] : 0.0f;
  }
}

// One tile: rows < rows and columns < cols of C at c (rows ldc apart) get
// Σ_k ap[k·kMR + r] · bp[k·kNR + j], added to what is there if add.
RT_AVX2 void micro(int kc, const float* ap, const float* bp, float* c, long ldc, bool add, int rows,
                   int cols) {
  __m256 acc[kMR][2];
#pragma GCC unroll 6
  for (int r = 0; r < kMR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int k = 0; k < kc; ++k, ap += kMR, bp += kNR) {
    const __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
#pragma GCC unroll 6
    for (int r = 0; r < kMR; ++r) {
      const __m256 a = _mm256_broadcast_ss(ap + r);
      acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
    }
  }
  if (rows == kMR && cols == kNR) {  // a whole tile
#pragma GCC unroll 6
    for (int r = 0; r < kMR; ++r)
      for (int q = 0; q < 2; ++q) {
        float* p = c + r * ldc + 8 * q;
        __m256 v = acc[r][q];
        if (add) v = _mm256_add_ps(_mm256_loadu_ps(p), v);
        _mm256_storeu_ps(p, v);
      }
    return;
  }
  alignas(32) float tile[kMR][kNR];
  for (int r = 0; r < kMR; ++r) {
    _mm256_store_ps(&tile[r][0], acc[r][0]);
    _mm256_store_ps(&tile[r][8], acc[r][1]);
  }
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < cols; ++j) {
      float& e = c[r * ldc + j];
      e = add ? e + tile[r][j] : tile[r][j];
    }
}

// C (m x n, rows ldc apart) = L·R, plus C if accumulate.
RT_AVX2 void product(int m, int n, int k, View l, View r, float* c, long ldc, bool accumulate,
                     const own::Workspace& ws) {
  for (int p0 = 0; p0 < k; p0 += kKC) {
    const int kc = min_int(kKC, k - p0);
    const bool add = accumulate || p0 > 0;
    for (int j0 = 0; j0 < n; j0 += kNC) {
      const int nc = min_int(kNC, n - j0);
      pack_right({r.p + p0 * r.rs + j0 * r.cs, r.rs, r.cs}, kc, nc, ws.b_pack);
      for (int i0 = 0; i0 < m; i0 += kMC) {
        const int mc = min_int(kMC, m - i0);
        pack_left({l.p + i0 * l.rs + p0 * l.cs, l.rs, l.cs}, mc, kc, ws.a_pack);
        for (int jr = 0; jr < nc; jr += kNR)
          for (int ir = 0; ir < mc; ir += kMR)
            micro(kc, ws.a_pack + static_cast<long>(ir) * kc,
                  ws.b_pack + static_cast<long>(jr) * kc, c + (i0 + ir) * ldc + j0 + jr, ldc, add,
                  min_int(kMR, mc - ir), min_int(kNR, nc - jr));
      }
    }
  }
}

}  // namespace

own::WorkspaceSize workspace_size(own::Op /*op*/, int m, int n, int k) {
  const auto depth = static_cast<std::size_t>(min_int(kKC, k));
  const auto rows = static_cast<std::size_t>((min_int(kMC, m) + kMR - 1) / kMR * kMR);
  const auto cols = static_cast<std::size_t>((min_int(kNC, n) + kNR - 1) / kNR * kNR);
  return {rows * depth, cols * depth, 0};
}

void gemm(own::Op op, int m, int n, int k, const float* a, const float* b, float* c,
          const own::Strides& ld, bool accumulate, const own::Workspace& ws) {
  switch (op) {
    case own::Op::kAB:  // L = A (m x k), R = B (k x n)
      product(m, n, k, {a, ld.a, 1}, {b, ld.b, 1}, c, ld.c, accumulate, ws);
      break;
    case own::Op::kAtB:  // L = Aᵀ: A stored (k x m); R = B (k x n)
      product(m, n, k, {a, 1, ld.a}, {b, ld.b, 1}, c, ld.c, accumulate, ws);
      break;
    case own::Op::kABt:  // L = A (m x k); R = Bᵀ: B stored (n x k)
      product(m, n, k, {a, ld.a, 1}, {b, 1, ld.b}, c, ld.c, accumulate, ws);
      break;
  }
}

}  // namespace ringtrain::blas::avx2
