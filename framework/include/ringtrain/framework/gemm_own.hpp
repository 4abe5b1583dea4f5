// ringtrain's own products on this CPU: the AVX-512 kernels (gemm_avx512.hpp) where the CPU
// has AVX-512F, else the AVX2 kernels (gemm_avx2.cpp) where it has AVX2 and FMA. One entry for
// blas::gemm, the tests and bench_gemm. Both promise the same thing: each element of C is
// summed over k in an order fixed by k alone, so a block of C computed on its own has the bits
// it has in the whole product. The two give different bits from each other.
#pragma once

#include "ringtrain/framework/gemm_avx512.hpp"

namespace ringtrain::blas::own {

using avx512::Op;
using avx512::Strides;
using avx512::Workspace;
using avx512::WorkspaceSize;

enum class Isa { kNone, kAvx2, kAvx512 };
// The instruction set the own kernels use on this CPU (kNone: they cannot run here).
Isa isa();
// "AVX-512" or "AVX2".
const char* isa_name();

// The row lengths of whole matrices of op's shapes: A (m x k), or stored (k x m) for kAtB;
// B (k x n), or stored (n x k) for kABt; C (m x n).
Strides natural_strides(Op op, int m, int n, int k);

// As avx512::workspace_size and avx512::gemm, on the kernels of isa(); must not be called
// when isa() is kNone. The overload without strides takes whole matrices.
WorkspaceSize workspace_size(Op op, int m, int n, int k);
void gemm(Op op, int m, int n, int k, const float* a, const float* b, float* c, const Strides& ld,
          bool accumulate, const Workspace& ws);
void gemm(Op op, int m, int n, int k, const float* a, const float* b, float* c, bool accumulate,
          const Workspace& ws);

}  // namespace ringtrain::blas::own

namespace ringtrain::blas::avx2 {

// The AVX2 kernels (gemm_avx2.cpp), with the interface of the AVX-512 ones. Calling them on a
// CPU without AVX2 and FMA is an illegal instruction.
own::WorkspaceSize workspace_size(own::Op op, int m, int n, int k);
void gemm(own::Op op, int m, int n, int k, const float* a, const float* b, float* c,
          const own::Strides& ld, bool accumulate, const own::Workspace& ws);

}  // namespace ringtrain::blas::avx2
