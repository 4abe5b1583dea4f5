// ringtrain's own single-threaded sgemm for AVX-512 (blas.cpp decides when it runs).
//
// Why it exists: on a core with two 512-bit FMA ports, OpenBLAS 0.3.21's SkylakeX sgemm
// stays well below the core's peak on the products of an mlp step at 64 samples per rank
// (bench/README-gemm.md, "Why own kernels"). Most of what it loses is memory traffic: it
// packs the weight matrix on every call (a 4 MB copy for a 1024x1024 layer, read once more by
// the kernel).
//
// Vocabulary: a micro-kernel computes a tile of MR rows x NR = 16·NV columns of the output
// in MR·NV zmm accumulators; per k it loads NV vectors of one row of B and broadcasts MR
// scalars of A:   acc[r][q] += A(r, k) · B(k, 16q .. 16q+15)
//
// Three drivers:
// * packed (C = Aᵀ·B: a layer's dW = dyᵀ·x; and a dx = dy·W too wide for the B-streaming
//   driver's tile): GotoBLAS blocking. B is copied in blocks of KC x NC into NR-wide panels
//   that stay in L1/L2, A in MR-wide panels; 8 x 48 tiles (24 accumulators), which split a
//   64-sample batch without waste. For dx each element's sum runs on from C across the k
//   blocks, one chain as in the B-streaming driver, so the two give the same bits.
// * B-streaming (C = A·B: dx = dy·W): the weights are read in place, block of rows after
//   block of rows as they lie in memory, the next block prefetched; all of C (m x n, small)
//   is held in a scratch tile of 8 x 48 tiles meanwhile.
// * unpacked-weights (C = A·Bᵀ: the forward y = x·Wᵀ): computed as Cᵀ = B·Aᵀ, so the weight
//   rows are the broadcast side, read straight from W (6 rows at a time, each element once,
//   the next 6 prefetched), and only the small activation matrix is packed (k x 64,
//   transposed). Tiles of 6 x 64 go to a scratch tile that is written back transposed; a last
//   block of fewer samples is packed and computed only as wide as the vectors it fills.
//
// Everything here has internal linkage and instantiates no library template, so no
// AVX-512 instruction can leak into code that runs on other CPUs (see blas.cpp).
#include "ringtrain/framework/gemm_avx512.hpp"

#include <immintrin.h>

#include <cstdint>

namespace ringtrain::blas::avx512 {
namespace {

#define RT_AVX512 __attribute__((target("avx512f")))

inline int min_int(int a, int b) {
  return a < b ? a : b;
}
inline long min_long(long a, long b) {
  return a < b ? a : b;
}

// Mask of the first `cols` lanes (cols may be <= 0 or >= 16).
RT_AVX512 inline __mmask16 lanes(int cols) {
  return cols >= 16 ? __mmask16(0xFFFF) : (cols <= 0 ? __mmask16(0) : __mmask16((1u << cols) - 1));
}

// Where a register tile's sums start: from zero, or from a tile of C (rows < rows, columns
// < cols of the tile at c, ldc floats a row; zero elsewhere).
struct TileStart {
  const float* c = nullptr;  // null: from zero
  long ldc = 0;
  int rows = 0, cols = 0;
};

// acc[r][q] = start + Σ_k a(r, k) · bp[k·16·NV + 16·q ..], one fused multiply-add per k in
// k's order: the register tile both micro-kernels share; a(r, k) reads the left operand where
// its kernel keeps it (packed or in place).
template <int MR, int NV, class LeftElement, class Prefetch>
RT_AVX512 inline void tile_product(int K, LeftElement a, const float* bp, __m512 (&acc)[MR][NV],
                                   const TileStart& start, Prefetch prefetch) {
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int q = 0; q < NV; ++q)
      acc[r][q] =
          start.c != nullptr && r < start.rows
              ? _mm512_maskz_loadu_ps(lanes(start.cols - 16 * q), start.c + r * start.ldc + 16 * q)
              : _mm512_setzero_ps();
  for (int k = 0; k < K; ++k) {
    prefetch(k);
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int q = 0; q < NV; ++q) bv[q] = _mm512_loadu_ps(bp + 16 * q);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(a(r, k));
#pragma GCC unroll 4
      for (int q = 0; q < NV; ++q) acc[r][q] = _mm512_fmadd_ps(av, bv[q], acc[r][q]);
    }
    bp += 16 * NV;
  }
}

// How the packed micro-kernel meets the tile of C it writes: kOverwrite C = the tile's sum,
// kAdd C += it, kContinue the sum goes on from the values in C (its running sum over the k
// blocks before, each element's multiply-adds one chain as in the B-streaming driver).
enum class PackedWrite { kOverwrite, kAdd, kContinue };

// Packed micro-kernel: ap[k·MR + r], bp[k·NR + j]; writes rows < rows, columns < cols of the
// tile at c (ldc) as `write` says.
template <int MR, int NV>
RT_AVX512 void micro_packed(int K, const float* ap, const float* bp, float* c, long ldc,
                            PackedWrite write, bool stream, int rows, int cols) {
  __m512 acc[MR][NV];
  const TileStart start =
      write == PackedWrite::kContinue ? TileStart{c, ldc, rows, cols} : TileStart{};
  tile_product<MR, NV>(
      K, [ap](int r, int k) { return ap[k * MR + r]; }, bp, acc, start, [](int) {});
  const bool accumulate = write == PackedWrite::kAdd;
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    if (r >= rows) break;
#pragma GCC unroll 4
    for (int q = 0; q < NV; ++q) {
      float* p = c + r * ldc + 16 * q;
      const __mmask16 m = lanes(cols - 16 * q);
      __m512 v = acc[r][q];
      if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, p));
      if (stream && m == 0xFFFF && (reinterpret_cast<std::uintptr_t>(p) & 63) == 0)
        _mm512_stream_ps(p, v);
      else
        _mm512_mask_storeu_ps(p, m, v);
    }
  }
}

constexpr int kMR = 8, kNV = 3, kNR = 16 * kNV;  // the 8 x 48 tile of both A·B drivers
// The packed driver's blocks: depth kKC (the best depth in bench_gemm), kMC rows of A, kNC
// columns of B (a multiple of kNR; one block covers a 1024-wide layer).
constexpr int kKC = 128, kMC = 64, kNC = 22 * kNR;

// A's rows [i0, i0 + mc) and columns [p0, p0 + kc) -> panels of kMR rows, zero padded:
// dst[ir·kc + kk·kMR + r]. With Aᵀ stored (a_by_k) that is kMR consecutive floats per k, else
// a transpose.
RT_AVX512 void pack_a_block(const float* a, long lda, bool a_by_k, int i0, int mc, int p0, int kc,
                            float* dst_block) {
  for (int ir = 0; ir < mc; ir += kMR) {
    float* dst = dst_block + static_cast<long>(ir) * kc;
    const int h = min_int(kMR, mc - ir);
    if (a_by_k) {
      const float* src = a + p0 * lda + (i0 + ir);
      for (int kk = 0; kk < kc; ++kk, src += lda)
        _mm512_mask_storeu_ps(dst + kk * kMR, lanes(kMR), _mm512_maskz_loadu_ps(lanes(h), src));
    } else {
      for (int r = 0; r < kMR; ++r)
        for (int kk = 0; kk < kc; ++kk)
          dst[kk * kMR + r] = r < h ? a[(i0 + ir + r) * lda + p0 + kk] : 0.0f;
    }
  }
}

// C (m x n) = Aᵀ·B with A stored (k x m), B (k x n); rows of A, B and C lie lda, ldb, ldc
// floats apart (a block of larger matrices). Each k block's sum is added to C.
// a_by_k false: C = A·B with A stored (m x k), never accumulating; the k blocks continue
// each element's running sum in C (PackedWrite::kContinue), so C has the bits of the
// B-streaming driver's one chain of multiply-adds. Its A (a batch of at most a few hundred
// rows; the workspace holds all of it, workspace_size) is transposed once per k block, not
// once per block of B's columns.
RT_AVX512 void gemm_packed(int m, int n, int k, const float* a, long lda, bool a_by_k,
                           const float* b, long ldb, float* c, long ldc, bool accumulate,
                           const Workspace& ws) {
  // C written once (one k block, nothing to add): non-temporal stores, which skip reading the
  // lines of C before overwriting them (a layer's dW is megabytes, long out of cache).
  const bool stream = !accumulate && k <= kKC;
  for (int p0 = 0; p0 < k; p0 += kKC) {
    const int kc = min_int(kKC, k - p0);
    const PackedWrite write = !(accumulate || p0 > 0) ? PackedWrite::kOverwrite
                              : a_by_k                ? PackedWrite::kAdd
                                                      : PackedWrite::kContinue;
    if (!a_by_k)  // all of A's rows for this k block: panel of row i at a_pack + i·kc
      pack_a_block(a, lda, false, 0, m, p0, kc, ws.a_pack);
    for (int j0 = 0; j0 < n; j0 += kNC) {
      const int nc = min_int(kNC, n - j0);
      // B block (kc x nc) -> panels of kNR columns, zero padded: bpack[jr·kc + kk·kNR + j]
      for (int jr = 0; jr < nc; jr += kNR) {
        float* dst = ws.b_pack + static_cast<long>(jr) * kc;
        const int w = min_int(kNR, nc - jr);
        const float* src = b + p0 * ldb + (j0 + jr);
        for (int kk = 0; kk < kc; ++kk, src += ldb)
#pragma GCC unroll 4
          for (int q = 0; q < kNV; ++q)
            _mm512_storeu_ps(dst + kk * kNR + 16 * q,
                             _mm512_maskz_loadu_ps(lanes(w - 16 * q), src + 16 * q));
      }
      for (int i0 = 0; i0 < m; i0 += kMC) {
        const int mc = min_int(kMC, m - i0);
        // A's block: packed above (A·B), or now, kMC rows of Aᵀ at a time (Aᵀ·B)
        const float* a_block = ws.a_pack + static_cast<long>(i0) * kc;
        if (a_by_k) {
          pack_a_block(a, lda, true, i0, mc, p0, kc, ws.a_pack);
          a_block = ws.a_pack;
        }
        for (int jr = 0; jr < nc; jr += kNR)
          for (int ir = 0; ir < mc; ir += kMR)
            micro_packed<kMR, kNV>(kc, a_block + static_cast<long>(ir) * kc,
                                   ws.b_pack + static_cast<long>(jr) * kc,
                                   c + (i0 + ir) * ldc + j0 + jr, ldc, write, stream,
                                   min_int(kMR, mc - ir), min_int(kNR, nc - jr));
      }
    }
  }
  if (stream) _mm_sfence();  // order the streamed stores before whatever reads C next
}

// B-streaming driver (C = A·B with A a small batch: a layer's dx = dy·W). B, the weight
// matrix, is read in place, in the order it lies in memory: k runs outermost, in blocks of
// kStreamKB rows, and each block (kStreamKB x n, contiguous: 256 KB for a 1024-wide layer)
// is fetched from memory once, prefetched a block ahead, while the block before it is
// computed. All of C stays in a scratch tile meanwhile (m x n: 256 KB at 64 samples), its
// 8 x 48 tiles loaded, advanced by the block's kStreamKB rows and stored back. A is packed
// once, transposed into panels of kMR rows.
//
// The packed driver above packs B block by block in column panels: for a dx that fits the
// tile that is a 4 MB copy of W read across rows 4 KiB apart, which loses once W is out of
// cache (a wider dx, whose C no tile holds, goes to it: level with OpenBLAS there). Reading W in
// place but column panel by column panel (C's tile in L1) wins warm and not in training:
// there W comes from memory, and only an order the prefetchers and the block-ahead prefetch
// can follow keeps the FMAs fed (bench/README-gemm.md, "dx = dy·W on a driver that streams W").
constexpr int kStreamKB = 64;

// The cache lines of the next block of B to prefetch: `rows` rows of `cols` floats, ld apart.
// One run of lines when the rows are contiguous (ld = cols); else each row's lines, one line
// more than its length so that a row starting inside a line is covered.
class NextBlock {
 public:
  NextBlock(const float* first, int rows, int cols, long ld)
      : base_(reinterpret_cast<const char*>(first)),
        rows_(rows),
        contiguous_(ld == cols),
        row_lines_(contiguous_ ? 0 : (static_cast<long>(cols) * 4 + 63) / 64 + 1),
        row_bytes_(ld * 4),
        cols_(cols) {}
  long lines() const {
    return contiguous_ ? (static_cast<long>(rows_) * cols_ * 4 + 63) / 64 : rows_ * row_lines_;
  }
  const char* line(long index) const {
    if (contiguous_) return base_ + index * 64;
    const char* row = base_ + (index / row_lines_) * row_bytes_;
    const auto start = reinterpret_cast<std::uintptr_t>(row) & ~std::uintptr_t(63);
    return reinterpret_cast<const char*>(start) + (index % row_lines_) * 64;
  }

 private:
  const char* base_;
  int rows_;
  bool contiguous_;
  long row_lines_, row_bytes_;
  int cols_;
};

// C (m x n) = A·B, A (m x k) row-major, B (k x n); rows lie lda, ldb, ldc floats apart.
RT_AVX512 void gemm_streamed(int m, int n, int k, const float* a, long lda, const float* b,
                             long ldb, float* c, long ldc, bool accumulate, const Workspace& ws) {
  const int panels = (m + kMR - 1) / kMR, jpanels = (n + kNR - 1) / kNR;
  // apack[p·k·MR + kk·MR + r] = A[p·MR + r][kk], zero padded; in blocks of 16 k (one line of
  // a row of A), as gemm_abt's transpose
  for (int p = 0; p < panels; ++p) {
    float* dst = ws.a_pack + static_cast<long>(p) * k * kMR;
    const int h = min_int(kMR, m - p * kMR);
    for (int k0 = 0; k0 < k; k0 += 16)
      for (int r = 0; r < kMR; ++r)
        for (int kk = k0; kk < min_int(k, k0 + 16); ++kk)
          dst[kk * kMR + r] = r < h ? a[(p * kMR + r) * lda + kk] : 0.0f;
  }
  // tile[(jp·panels + p)·MR·NR + r·NR + j] = C[p·MR + r][jp·NR + j], summed from zero
  float* const tile = ws.tile;
  for (long e = 0; e < static_cast<long>(jpanels) * panels * kMR * kNR; e += 16)
    _mm512_storeu_ps(tile + e, _mm512_setzero_ps());
  const long calls = static_cast<long>(jpanels) * panels;
  for (int k0 = 0; k0 < k; k0 += kStreamKB) {
    const int kb = min_int(kStreamKB, k - k0);
    // The next block's lines, a few per tile call, so the whole block is asked for by the
    // time this one is done.
    const NextBlock next(b + (k0 + kb) * ldb, min_int(kStreamKB, k - k0 - kb), n, ldb);
    const long next_lines = next.lines();
    const long per_call = (next_lines + calls - 1) / calls;
    long call = 0;
    for (int jp = 0; jp < jpanels; ++jp) {
      const int j0 = jp * kNR;
      const __mmask16 m0 = lanes(n - j0), m1 = lanes(n - j0 - 16), m2 = lanes(n - j0 - 32);
      for (int p = 0; p < panels; ++p, ++call) {
        float* t = tile + (static_cast<long>(jp) * panels + p) * kMR * kNR;
        const float* ap = ws.a_pack + (static_cast<long>(p) * k + k0) * kMR;
        const long pf_begin = min_long(call * per_call, next_lines);
        const long pf_end = min_long(pf_begin + per_call, next_lines);
        __m512 acc[kMR][kNV];
#pragma GCC unroll 8
        for (int r = 0; r < kMR; ++r)
#pragma GCC unroll 3
          for (int q = 0; q < kNV; ++q) acc[r][q] = _mm512_loadu_ps(t + r * kNR + 16 * q);
        for (int kk = 0; kk < kb; ++kk) {
          if (pf_begin + kk < pf_end) _mm_prefetch(next.line(pf_begin + kk), _MM_HINT_T1);
          const float* row = b + (k0 + kk) * ldb + j0;
          const __m512 b0 = _mm512_maskz_loadu_ps(m0, row);
          const __m512 b1 = _mm512_maskz_loadu_ps(m1, row + 16);
          const __m512 b2 = _mm512_maskz_loadu_ps(m2, row + 32);
#pragma GCC unroll 8
          for (int r = 0; r < kMR; ++r) {
            const __m512 av = _mm512_set1_ps(ap[kk * kMR + r]);
            acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
            acc[r][2] = _mm512_fmadd_ps(av, b2, acc[r][2]);
          }
        }
#pragma GCC unroll 8
        for (int r = 0; r < kMR; ++r)
#pragma GCC unroll 3
          for (int q = 0; q < kNV; ++q) _mm512_storeu_ps(t + r * kNR + 16 * q, acc[r][q]);
      }
    }
  }
  // C (+)= tile
  for (int jp = 0; jp < jpanels; ++jp)
    for (int i = 0; i < m; ++i) {
      const float* t =
          tile + (static_cast<long>(jp) * panels + i / kMR) * kMR * kNR + (i % kMR) * kNR;
      float* row = c + i * ldc + jp * kNR;
#pragma GCC unroll 3
      for (int q = 0; q < kNV; ++q) {
        const __mmask16 mask = lanes(n - jp * kNR - 16 * q);
        __m512 v = _mm512_loadu_ps(t + 16 * q);
        if (accumulate) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, row + 16 * q));
        _mm512_mask_storeu_ps(row + 16 * q, mask, v);
      }
    }
}

// Unpacked-weights micro-kernel: D[r][0 .. 16·NV) += Σ_k w[r·ldw + k] · xp[k·NR + ..], for
// MR rows of the weight matrix read in place.
template <int MR, int NV>
RT_AVX512 void micro_rows(int K, const float* w, long ldw, const float* xp, float* d) {
  constexpr int NR = 16 * NV;
  __m512 acc[MR][NV];
  // The next MR weight rows, a cache line of each per 16 k: each row is a stream of its own,
  // and the hardware prefetchers start every stream late. (Past the last row this points
  // beyond W: a prefetch never faults.)
  const float* next = w + MR * ldw;
  tile_product<MR, NV>(
      K, [w, ldw](int r, int k) { return w[r * ldw + k]; }, xp, acc, TileStart{},
      [next, ldw](int k) {
        if ((k & 15) == 0)
#pragma GCC unroll 16
          for (int r = 0; r < MR; ++r)
            _mm_prefetch(reinterpret_cast<const char*>(next + r * ldw + k), _MM_HINT_T0);
      });
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int q = 0; q < NV; ++q) {
      float* p = d + r * NR + 16 * q;
      _mm512_storeu_ps(p, _mm512_add_ps(acc[r][q], _mm512_loadu_ps(p)));
    }
}

// kRowsKC: a weight row is read whole (up to 4096 deep), as one sequential stream. Blocks of
// 128 would keep the packed activations in L1 but read W as 8 lines per page, which the
// hardware prefetchers do not follow: slower with W out of cache, as in training
// (bench/README-gemm.md, "Out of cache").
constexpr int kRowsMR = 6, kRowsNV = 4, kRowsNR = 16 * kRowsNV, kRowsKC = 4096;

using RowsKernel = void (*)(int, const float*, long, const float*, float*);

// The kernel for `rows` (1 .. kRowsMR) weight rows and NV vectors of samples.
template <int NV>
RT_AVX512 RowsKernel rows_kernel_of(int rows) {
  switch (rows) {
    case 1:
      return micro_rows<1, NV>;
    case 2:
      return micro_rows<2, NV>;
    case 3:
      return micro_rows<3, NV>;
    case 4:
      return micro_rows<4, NV>;
    case 5:
      return micro_rows<5, NV>;
    default:
      return micro_rows<kRowsMR, NV>;
  }
}

// The kernel for `rows` (1 .. kRowsMR) weight rows and `nv` (1 .. kRowsNV) vectors of samples:
// a block of fewer than 64 samples (a batch's last) takes as many vectors as it fills, not 4.
// An element of C is the same sum over k in the same order whatever NV is, so the bits of a
// row of y do not depend on the size of its block.
RT_AVX512 RowsKernel rows_kernel(int rows, int nv) {
  static_assert(kRowsNV == 4);
  switch (nv) {
    case 1:
      return rows_kernel_of<1>(rows);
    case 2:
      return rows_kernel_of<2>(rows);
    case 3:
      return rows_kernel_of<3>(rows);
    default:
      return rows_kernel_of<4>(rows);
  }
}

// C (m x n) = A (m x k) · Bᵀ, B stored (n x k); rows lie lda, ldb, ldc floats apart. Blocks of
// up to kRowsNR samples; a block of `cols` samples is packed and summed nr = 16·nv wide.
RT_AVX512 void gemm_abt(int m, int n, int k, const float* a, long lda, const float* b, long ldb,
                        float* c, long ldc, bool accumulate, const Workspace& ws) {
  for (int i0 = 0; i0 < m; i0 += kRowsNR) {
    const int cols = min_int(kRowsNR, m - i0);
    const int nv = (cols + 15) / 16, nr = 16 * nv;
    // xp[kk·nr + ii] = A[i0 + ii][kk], zero padded. Both transposes here go in blocks of 16
    // (one cache line of the row-major side). Element by element, each step of the inner loop
    // would read another row of A (or write another row of C); with k = 1024 those rows lie
    // 4 KiB apart, in one L1 set, and evict each other before their next element
    // (bench/README-gemm.md, "The A·Bᵀ driver's transposes in blocks of 16").
    for (int k0 = 0; k0 < k; k0 += 16) {
      const int k1 = min_int(k, k0 + 16);
      for (int ii = 0; ii < nr; ++ii)
        for (int kk = k0; kk < k1; ++kk)
          ws.a_pack[static_cast<long>(kk) * nr + ii] = ii < cols ? a[(i0 + ii) * lda + kk] : 0.0f;
    }
    for (long e = 0; e < static_cast<long>(n) * nr; e += 16)
      _mm512_storeu_ps(ws.tile + e, _mm512_setzero_ps());
    for (int p0 = 0; p0 < k; p0 += kRowsKC) {
      const int kc = min_int(kRowsKC, k - p0);
      for (int j0 = 0; j0 < n; j0 += kRowsMR)
        rows_kernel(n - j0, nv)(kc, b + j0 * ldb + p0, ldb, ws.a_pack + static_cast<long>(p0) * nr,
                                ws.tile + static_cast<long>(j0) * nr);
    }
    // C[i0 + ii][j] (+)= D[j][ii]
    for (int j0 = 0; j0 < n; j0 += 16) {
      const int j1 = min_int(n, j0 + 16);
      for (int ii = 0; ii < cols; ++ii) {
        float* row = c + (i0 + ii) * ldc;
        const float* col = ws.tile + ii;
        if (accumulate)
          for (int j = j0; j < j1; ++j) row[j] += col[static_cast<long>(j) * nr];
        else
          for (int j = j0; j < j1; ++j) row[j] = col[static_cast<long>(j) * nr];
      }
    }
  }
}

}  // namespace

WorkspaceSize workspace_size(Op op, int m, int n, int k) {
  const auto panels = static_cast<std::size_t>((m + kMR - 1) / kMR);
  const auto jpanels = static_cast<std::size_t>((n + kNR - 1) / kNR);
  switch (op) {
    case Op::kABt:
      return {static_cast<std::size_t>(k) * kRowsNR, 0, static_cast<std::size_t>(n) * kRowsNR};
    case Op::kAB: {  // the B-streaming driver's, and for a wide C the packed driver's too
      const WorkspaceSize streamed{panels * kMR * static_cast<std::size_t>(k), 0,
                                   panels * kMR * jpanels * kNR};
      if (static_cast<long>(m) * n <= kMaxStreamedC) return streamed;
      const std::size_t packed_a = std::size_t(kKC) * kMC;
      return {streamed.a_pack > packed_a ? streamed.a_pack : packed_a, std::size_t(kKC) * kNC,
              streamed.tile};
    }
    case Op::kAtB:
      break;
  }
  return {static_cast<std::size_t>(kKC) * kMC, static_cast<std::size_t>(kKC) * kNC, 0};
}

void gemm(Op op, int m, int n, int k, const float* a, const float* b, float* c, const Strides& ld,
          bool accumulate, const Workspace& ws) {
  switch (op) {
    case Op::kAB:  // A (m x k) row-major
      if (!accumulate && static_cast<long>(m) * n > kMaxStreamedC)
        gemm_packed(m, n, k, a, ld.a, false, b, ld.b, c, ld.c, false, ws);
      else
        gemm_streamed(m, n, k, a, ld.a, b, ld.b, c, ld.c, accumulate, ws);
      break;
    case Op::kAtB:  // A stored (k x m)
      gemm_packed(m, n, k, a, ld.a, true, b, ld.b, c, ld.c, accumulate, ws);
      break;
    case Op::kABt:
      gemm_abt(m, n, k, a, ld.a, b, ld.b, c, ld.c, accumulate, ws);
      break;
  }
}

}  // namespace ringtrain::blas::avx512
