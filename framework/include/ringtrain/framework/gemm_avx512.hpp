// ringtrain's own AVX-512 sgemm (gemm_avx512.cpp explains why and how). Layers reach it only
// through blas::gemm (blas.hpp: Kernels), which calls it through own::gemm (gemm_own.hpp) on a
// CPU with AVX-512F, for alpha = 1 and beta in {0, 1}, on each of the rank's threads for its
// block of C. Its types (Op, Strides, Workspace) are shared with the AVX2 kernels. Calling it on
// a CPU without AVX-512F is an illegal instruction: own::isa() tells.
#pragma once

#include <cstddef>

namespace ringtrain::blas::avx512 {

// Row-major throughout; C is (m x n) with leading dimension n.
enum class Op {
  kAB,   // C = A · B    A (m x k), B (k x n)
  kAtB,  // C = Aᵀ · B   A stored (k x m), B (k x n)
  kABt,  // C = A · Bᵀ   A (m x k), B stored (n x k)
};

// The most elements of C (m · n) the B-streaming driver of A·B keeps in its scratch tile (in
// L2): a wider C goes to the packed driver, with the same bits (gemm_avx512.cpp), and the
// routing rule gives OpenBLAS a wider dx on AVX2 (blas.cpp: own_kernels_take).
inline constexpr long kMaxStreamedC = 128 * 1024;

// Scratch the caller provides (floats), at least workspace_size() of each.
struct Workspace {
  float* a_pack;
  float* b_pack;
  float* tile;
};
struct WorkspaceSize {
  std::size_t a_pack, b_pack, tile;
};
WorkspaceSize workspace_size(Op op, int m, int n, int k);

// Floats between consecutive rows of A, B and C as stored (A stored (k x m) for kAtB, B
// stored (n x k) for kABt): a block of larger matrices, or the matrices' own row lengths
// (own::natural_strides).
struct Strides {
  long a, b, c;
};
// C = op(A, B), plus C if accumulate. m, n, k > 0. Deterministic: each element of C is summed
// over k in the same order whatever the other sizes (k in blocks of 64 or 128, in order), so
// a block of C computed on its own has the bits it has in the whole product: blas::gemm
// splits C over threads that way.
void gemm(Op op, int m, int n, int k, const float* a, const float* b, float* c, const Strides& ld,
          bool accumulate, const Workspace& ws);

}  // namespace ringtrain::blas::avx512
